"""The LangGraph store's pure half: namespaces as ids, items as stored, filters, match
conditions and the scripts' arguments and replies (``lua/memory_*.lua``). No I/O, no
LangGraph import.

A namespace ``("users", "u1")`` is the entity ``users.u1`` (LangGraph forbids "." and
NUL in labels, so the join is reversible): its items are one hash and its expiries one
sorted set in its hash slot (``KeySpace.memory``). The registry
(``KeySpace.memory_names``) lists every namespace for searches and listings that span
namespaces.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Final

from ...core.codec import Codec
from ...core.errors import InvalidId
from ...core.keys import MAX_ID_BYTES, KeySpace, escape_id

__all__ = [
    "Owners",
    "MAX_KEY_BYTES",
    "MAX_TTL_MINUTES",
    "Stored",
    "SweepReport",
    "context",
    "matches",
    "matches_condition",
    "namespace_id",
    "namespace_of",
    "recoded_items",
    "ttl_ms",
]

MAX_KEY_BYTES: Final = 1024  # an item key, UTF-8
MAX_TTL_MINUTES: Final = 100 * 365 * 24 * 60  # what the scripts accept (rs_ttl)
DELETE: Final = "del"  # memory_put's ttl for a delete
_OPERATORS: Final = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


class InvalidNamespace(ValueError):
    """A namespace LangGraph would refuse, or one too long to be an entity id (the
    store raises LangGraph's InvalidNamespaceError with the same message)."""


def check_labels(namespace: object) -> tuple[str, ...]:
    """``namespace`` as a tuple of labels as LangGraph validates them: strings, not
    empty, without "." or NUL. Raises InvalidNamespace naming the label."""
    if not isinstance(namespace, tuple | list):
        raise InvalidNamespace(
            f"a namespace is a tuple of str, got {type(namespace).__name__}: {namespace!r:.80}"
        )
    for label in namespace:
        if not isinstance(label, str):
            raise InvalidNamespace(
                f"namespace label {label!r:.80} in {namespace!r:.200} is a"
                f" {type(label).__name__}, not a str"
            )
        if not label or "." in label or "\x00" in label:
            raise InvalidNamespace(
                f'namespace label {label!r:.80} in {namespace!r:.200} is empty or holds "." or NUL'
            )
    return tuple(namespace)


def namespace_id(namespace: object) -> str:
    """The entity id of a namespace items are stored in: its labels joined by ".".

    Raises:
        InvalidNamespace: empty, a bad label (LangGraph's rules), or over 512 bytes
            joined. A first label "langgraph" is refused by ``BaseStore.put`` only, as
            LangGraph's stores do (a batch may hold one).
    """
    labels = check_labels(namespace)
    if not labels:
        raise InvalidNamespace("a namespace needs at least one label, got ()")
    joined = ".".join(labels)
    try:
        escape_id(joined)
    except InvalidId as exc:
        raise InvalidNamespace(
            f"namespace {labels!r:.200} is {len(joined.encode('utf-8', 'replace'))} bytes"
            f" joined by '.'; the limit is {MAX_ID_BYTES}"
        ) from exc
    return joined


def namespace_of(entity_id: str) -> tuple[str, ...]:
    """The namespace stored as ``entity_id``."""
    return tuple(entity_id.split("."))


def check_key(key: object) -> str:
    """An item key: a str of at most 1,024 UTF-8 bytes (empty allowed, as LangGraph)."""
    if not isinstance(key, str):
        raise TypeError(f"an item key is a str, got {type(key).__name__}: {key!r:.80}")
    size = len(key.encode("utf-8", "surrogatepass"))
    if size > MAX_KEY_BYTES:
        raise ValueError(f"item key {key!r:.80} is {size} bytes; the limit is {MAX_KEY_BYTES}")
    return key


def context(nsid: str, key: str) -> bytes:
    """What the codec binds an item's value to (its place: an encrypted value moved to
    another item does not decode)."""
    return f"memory\0{nsid}\0{key}".encode("utf-8", "surrogatepass")


def ttl_ms(minutes: object) -> int:
    """A PutOp's ``ttl`` (minutes; None: no expiry) in ms, rounded up ("0": none).

    Raises:
        ValueError: not a positive number of at most 100 years.
    """
    if minutes is None:
        return 0
    if isinstance(minutes, bool) or not isinstance(minutes, int | float):
        raise TypeError(f"ttl is minutes (a number) or None, got {minutes!r:.80}")
    if not math.isfinite(minutes) or minutes <= 0 or minutes > MAX_TTL_MINUTES:
        raise ValueError(
            f"ttl must be over 0 and at most {MAX_TTL_MINUTES} minutes, got {minutes!r}"
        )
    return max(1, math.ceil(minutes * 60_000))


def stamp(ms: int) -> datetime:
    """A server time in ms as LangGraph's timestamps (aware, UTC)."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


@dataclass(frozen=True, slots=True)
class Stored:
    """An item as memory_put stored it: ``"<created>:<updated>:<ttl>:<value>"``."""

    created_ms: int
    updated_ms: int
    ttl_ms: int
    data: bytes

    @classmethod
    def parse(cls, raw: bytes) -> Stored:
        created, updated, ttl, data = bytes(raw).split(b":", 3)
        return cls(int(created), int(updated), int(ttl), data)


def put_args(
    memory_ms: int,
    wid: str,
    gen: int,
    writes: Sequence[tuple[str, int | None, bytes]],
    guard: str = "",
) -> list[Any]:
    """ARGV of memory_put: each write (key, ttl ms or None to delete, encoded value);
    ``guard`` the lease value the script checks ("": unguarded)."""
    argv: list[Any] = [memory_ms, wid, gen, guard]
    for key, ttl, data in writes:
        argv += (key, DELETE, b"") if ttl is None else (key, ttl, data)
    return argv


# A filter as LangGraph documents it: {"field": value} (equal; a dict without
# operators matches fields of a nested dict, a list element by element) or
# {"field": {"$gt": 3, ...}}.
def matches(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a search filter.

    Raises:
        ValueError: an operator LangGraph does not document (``$in``...).
    """
    if not wanted:
        return True
    return all(_compare(value.get(field), want) for field, want in wanted.items())


def _compare(have: Any, want: Any) -> bool:
    if isinstance(want, dict):
        if any(isinstance(k, str) and k.startswith("$") for k in want):
            return all(_operator(have, op, operand) for op, operand in want.items())
        return isinstance(have, dict) and all(_compare(have.get(k), v) for k, v in want.items())
    if isinstance(want, list | tuple):
        return (
            isinstance(have, list | tuple)
            and len(have) == len(want)
            and all(_compare(h, w) for h, w in zip(have, want, strict=True))
        )
    return bool(have == want)


def _operator(have: Any, op: str, operand: Any) -> bool:
    if op not in _OPERATORS:
        raise ValueError(f"unknown filter operator {op!r}; the store knows {sorted(_OPERATORS)}")
    if op == "$eq":
        return _compare(have, operand)
    if op == "$ne":
        return not _compare(have, operand)
    try:  # values that do not order (None against 3, a str against a number) do not pass
        if op == "$gt":
            return bool(have > operand)
        if op == "$gte":
            return bool(have >= operand)
        if op == "$lt":
            return bool(have < operand)
        return bool(have <= operand)
    except TypeError:
        return False


def matches_condition(kind: str, path: Sequence[str], namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` matches a ListNamespacesOp condition: ``kind`` "prefix" or
    "suffix", ``path`` labels where "*" matches any one label."""
    if len(path) > len(namespace):
        return False
    if kind == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif kind == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"match_type must be 'prefix' or 'suffix', got {kind!r}")
    return all(want in ("*", have) for have, want in pairs)


def literal_prefix(path: Sequence[str]) -> tuple[str, ...]:
    """The labels of a prefix condition before its first "*": what the registry's
    lexicographic range can narrow the listing to."""
    out: list[str] = []
    for label in path:
        if label == "*":
            break
        out.append(label)
    return tuple(out)


def name_range(prefix: tuple[str, ...]) -> tuple[str, str]:
    """The registry's ZRANGEBYLEX bounds holding every namespace under ``prefix`` (and
    some that are not, such as "users-x" under "users": filter them out)."""
    if not prefix:
        return "-", "+"
    joined = ".".join(prefix)
    return "[" + joined, "(" + joined + "/"  # "/" follows "."


def under(namespace: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    """Whether ``namespace`` starts with every label of ``prefix`` (exactly)."""
    return namespace[: len(prefix)] == prefix


class Owners:
    """Which user each namespace belongs to, for ``users.erase``: ``user`` is the index
    of the label holding the user id (``1`` for ``("users", uid)``) or a function of
    the namespace returning the user id or None. Remembers (user, namespace) pairs
    registered by this process, so a namespace costs one SADD per process."""

    __slots__ = ("_registered", "_user")

    _REMEMBERED: Final = 10_000

    def __init__(self, user: int | Callable[[tuple[str, ...]], str | None]) -> None:
        if isinstance(user, bool) or not ((isinstance(user, int) and user >= 0) or callable(user)):
            raise TypeError(
                "user must be a label index (an int >= 0) or a function of the namespace"
                f" returning the user id, got {user!r:.80}"
            )
        self._user = user
        self._registered: set[tuple[str, str]] = set()

    def user_of(self, nsid: str) -> str | None:
        """The user namespace ``nsid`` belongs to, or None (not a user's)."""
        labels = namespace_of(nsid)
        if isinstance(self._user, int):
            return labels[self._user] if self._user < len(labels) else None
        found = self._user(labels)
        if found is not None and not isinstance(found, str):
            raise TypeError(f"user({labels!r:.80}) returned {found!r:.80}, not a str or None")
        return found

    def unregistered(
        self, keys: KeySpace, writes: Mapping[str, Mapping[str, tuple[int | None, bytes]]]
    ) -> dict[str, str]:
        """namespace -> user, for each namespace of a batch's puts that has a user and
        is not registered by this process yet (deletes register nothing).

        Raises:
            InvalidId: a user id that is not a valid id (nothing is written).
        """
        out: dict[str, str] = {}
        for nsid, items in writes.items():
            if all(ttl is None for ttl, _ in items.values()):
                continue
            user = self.user_of(nsid)
            if user is None or (user, nsid) in self._registered:
                continue
            try:
                keys.user_index(user)
            except InvalidId as exc:
                raise InvalidId(f"the user of namespace {nsid!r:.80}: {exc}") from None
            out[nsid] = user
        return out

    def remember(self, user: str, nsid: str) -> None:
        if len(self._registered) >= self._REMEMBERED:
            self._registered.clear()  # forgetting costs one more SADD, never an entry
        self._registered.add((user, nsid))


def recoded_items(
    nsid: str, items: Sequence[tuple[bytes, bytes]], codec: Codec, current: Callable[[bytes], bool]
) -> tuple[list[bytes], int]:
    """(key, old, new) triples for ``core/lua/recode_fields.lua``, one per item of namespace
    ``nsid`` whose value is not under the primary key (times and ttl kept), and how
    many were current.

    Raises:
        IntegrityError: a value that does not decrypt with any known key.
    """
    triples: list[bytes] = []
    for key, raw in items:
        stored = Stored.parse(raw)
        if current(stored.data):
            continue
        where = context(nsid, bytes(key).decode("utf-8", "surrogatepass"))
        data = codec.encode(codec.decode(stored.data, where), where)
        head = b"%d:%d:%d:" % (stored.created_ms, stored.updated_ms, stored.ttl_ms)
        triples += [bytes(key), bytes(raw), head + data]
    return triples, len(items) - len(triples) // 3


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What a sweep did: expired items deleted, and namespaces with no item left taken
    out of the registry."""

    expired: int = 0
    forgotten: int = 0
