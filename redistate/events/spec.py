"""Audit events, the pure half: the hash chain, arguments, parsing, verification, folding.

An entity's events live in one Redis stream (``KeySpace.events``), each entry holding
its position ``n``, ``t`` type, ``s`` schema, ``at`` (the appender's clock, ms),
``p`` payload (the store's codec: encrypted when the codec encrypts), ``prev`` and ``d``:
SHA-256 over the previous digest and the canonical event. Removing, reordering or
editing an event breaks the chain at that point, and :meth:`EventSpec.verify` says where.
The digest covers the encoded payload, so a chain verifies without the codec's keys.

That catches accidental damage only: whoever can write to Redis can edit an event and
recompute every digest after it. With signing keys (redistate.core.signing) ``d`` is a seal
``<key id>:<HMAC-SHA-256 hex>`` over the stream's key and the canonical event instead,
so a chain cannot be recomputed without the key; each read checks each event's seal.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from ..checkpoints.spec import Verification
from ..core.codec import Codec
from ..core.errors import IntegrityError, SchemaError, StateTooLarge
from ..core.migrations import Migrations
from ..core.signing import SigningKeys, digest_problem
from ..records.mergepatch import merge_patch

__all__ = [
    "Anchor",
    "Event",
    "EventAppendArgs",
    "EventAppendReply",
    "EventStageArgs",
    "EventStageReply",
    "EventSwapArgs",
    "EventSwapReply",
    "EventSpec",
    "EventTrimArgs",
    "EventTrimReply",
    "Recode",
    "Reducer",
    "canonical",
    "default_reducer",
    "state_digest",
]

_TYPE_RE: Final = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_DIGEST: Final = re.compile(rb"(?:[A-Za-z0-9_-]{1,32}:)?[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Event:
    """One audit event. ``id`` is its stream id (server time, ``<ms>-<n>``), ``seq`` its
    position in the chain, ``at`` the appender's clock, ``prev``/``digest`` the chain."""

    id: str
    type: str
    payload: Any
    at: dt.datetime
    prev: str
    digest: str
    seq: int = 0
    schema: int = 1


Reducer = Callable[[Any, Event], Any]
# A rewrite's view of one stored payload: (schema, bytes) -> its replacement, or None.
Recode = Callable[[int, bytes], "tuple[int, bytes] | None"]


# -- script arguments and replies (see each script's header in redistate/lua) ---------


@dataclass(frozen=True, slots=True)
class EventAppendArgs:
    """ARGV of event_append: an event after the chain end ``prev`` (its digest)."""

    prev: str  # the digest the caller believes ends the chain ("" = empty)
    seq: int  # this event's position: the end's + 1
    type: str
    schema: int
    at_ms: int  # the appender's clock
    payload: bytes  # encoded by the store's codec
    digest: str  # this event's digest or seal
    lease: str  # "" = unguarded
    write_id: str
    memory_ms: int

    def argv(self) -> tuple[Any, ...]:
        return (
            self.prev, self.seq, self.type, self.schema, self.at_ms, self.payload, self.digest,
            self.lease, self.write_id, self.memory_ms,
        )  # fmt: skip

    def fields(self) -> dict[bytes, bytes]:
        """The stream entry's fields the script stores (an Event without a read)."""
        return {
            b"n": str(self.seq).encode(),
            b"t": self.type.encode(),
            b"s": str(self.schema).encode(),
            b"at": str(self.at_ms).encode(),
            b"p": self.payload,
            b"prev": self.prev.encode(),
            b"d": self.digest.encode(),
        }


class AppendStatus(Enum):
    """What event_append did."""

    APPENDED = 1
    MOVED = 0  # the chain ends elsewhere: nothing written, try again from there
    RESENT = 2  # a resend of an append already made


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True, slots=True)
class EventAppendReply:
    """An event_append reply: the event's stream ``id`` (APPENDED; RESENT: "" if no
    longer among the newest 64 events), or where the chain ends (MOVED: the ``end``
    digest and its ``seq``, "" and 0 for an empty chain)."""

    status: AppendStatus
    id: str = ""
    end: str = ""
    seq: int = 0

    @classmethod
    def parse(cls, reply: Any) -> EventAppendReply:
        status = AppendStatus(int(reply[0]))
        if status is AppendStatus.MOVED:
            return cls(status, end=_text(reply[1]), seq=int(reply[2]))
        return cls(status, _text(reply[1]))

    @property
    def wrote(self) -> bool:
        return self.status is not AppendStatus.MOVED

    @property
    def guarded(self) -> bool:
        """Whether the script reached its fence check (which renews an inline lease):
        a resend it recognised returned before it."""
        return self.status is not AppendStatus.RESENT


@dataclass(frozen=True, slots=True)
class EventTrimArgs:
    """ARGV of event_trim: the last event to remove and the anchor left after it."""

    last_id: str  # its stream id
    digest: str  # its digest or seal
    seq: bytes | int  # its position in the chain (as stored)
    state: bytes  # the state folded up to and including it, encoded
    state_seal: str  # over ``digest`` and ``state``

    def argv(self) -> tuple[Any, ...]:
        return (self.last_id, self.digest, self.seq, self.state, self.state_seal)


@dataclass(frozen=True, slots=True)
class EventTrimReply:
    """An event_trim reply: how many events it removed (0: that event is no longer
    there with that digest)."""

    removed: int

    @classmethod
    def parse(cls, reply: Any) -> EventTrimReply:
        return cls(int(reply))

    @property
    def wrote(self) -> bool:
        return self.removed > 0


@dataclass(frozen=True, slots=True)
class EventStageArgs:
    """ARGV of event_rewrite "add": a page of the new chain for the staging stream."""

    first: bool  # the first page: the staging stream starts empty
    entries: tuple[Any, ...]  # groups of 8: stream id, n, t, s, at, p, prev, d

    def argv(self) -> tuple[Any, ...]:
        return ("add", int(self.first), *self.entries)


@dataclass(frozen=True, slots=True)
class EventStageReply:
    """An event_rewrite "add" reply: the staging stream's length."""

    length: int

    @classmethod
    def parse(cls, reply: Any) -> EventStageReply:
        return cls(int(reply))

    @property
    def wrote(self) -> bool:
        return True  # a resent page adds nothing, which the length does not tell


@dataclass(frozen=True, slots=True)
class EventSwapArgs:
    """ARGV of event_rewrite "swap": the staging stream in place of the stream, if it
    still ends where it was read (no events read: ``count`` 0, the rest ignored)."""

    last_id: str = ""  # the stream id of the last event read
    digest: bytes | str = ""  # its digest
    count: int = 0  # how many events were read
    new_digest: bytes | str = ""  # the new chain's last digest
    state: bytes | str = ""  # the anchor's new state ("" = keep it)
    state_seal: str = ""  # its state digest

    def argv(self) -> tuple[Any, ...]:
        return (
            "swap", self.last_id, self.digest, self.count, self.new_digest, self.state,
            self.state_seal,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class EventSwapReply:
    """An event_rewrite "swap" reply: ``swapped`` (also a resent swap finding it done),
    else the stream changed meanwhile (nothing replaced, the staging stream deleted)."""

    swapped: bool

    @classmethod
    def parse(cls, reply: Any) -> EventSwapReply:
        return cls(int(reply) == 1)

    @property
    def wrote(self) -> bool:
        return True  # a refused swap still deletes the staging stream


def canonical(prev: str, seq: int, type: str, schema: int, at_ms: int, payload: bytes) -> bytes:
    """The bytes a digest covers: each field on its own line, the payload last (its
    length is implied by the end, so no field can be shifted into another)."""
    head = f"redistate-event-1\n{prev}\n{seq}\n{type}\n{schema}\n{at_ms}\n".encode()
    return head + payload


def digest_of(prev: str, seq: int, type: str, schema: int, at_ms: int, payload: bytes) -> str:
    return hashlib.sha256(canonical(prev, seq, type, schema, at_ms, payload)).hexdigest()


def state_digest(chain_digest: str, state: bytes) -> str:
    """What binds a trim anchor's folded state to the chain digest it stands for."""
    head = b"redistate-anchor-1\n%s\n" % chain_digest.encode()
    return hashlib.sha256(head + state).hexdigest()


def default_reducer(state: Any, event: Event) -> Any:
    """``initialized`` replaces the state, ``updated`` merge-patches it (RFC 7386),
    ``deleted`` removes the keys it names (a list of keys, or a dict's keys); other
    types leave it as it is."""
    if event.type == "initialized":
        return event.payload
    if event.type == "updated":
        return merge_patch(state, event.payload)
    if event.type == "deleted" and isinstance(state, dict):
        names = event.payload if isinstance(event.payload, list) else list(event.payload or {})
        return {k: v for k, v in state.items() if k not in names}
    return state


def check_type(value: object) -> str:
    if not isinstance(value, str) or not _TYPE_RE.fullmatch(value):
        raise ValueError(f"event type {value!r:.80} must be 1-64 chars of [A-Za-z0-9_.:-]")
    return value


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where a trimmed chain continues: the last removed event's id, digest and
    position, and the state folded up to it ({} and "" when nothing was trimmed)."""

    id: str
    digest: str
    seq: int
    state: Any
    removed: int
    raw: bytes = b""  # the state as stored (encoded by the codec)
    seal: bytes = b""  # its state digest or seal as stored


class EventSpec:
    """The events' settings and every non-I/O step of their operations."""

    __slots__ = ("_migrations", "codec", "max_bytes", "signing")

    def __init__(
        self,
        codec: Codec,
        *,
        max_bytes: int,
        migrations: Migrations | None = None,
        signing: SigningKeys | None = None,
    ) -> None:
        self.codec = codec
        self.max_bytes = max_bytes
        self._migrations = migrations
        self.signing = signing

    def digest(
        self, key: str, prev: str, seq: int, type: str, schema: int, at_ms: int, payload: bytes
    ) -> str:
        """An event's chain link: its seal with signing keys, else its SHA-256 digest."""
        if self.signing is None:
            return digest_of(prev, seq, type, schema, at_ms, payload)
        data = canonical(prev, seq, type, schema, at_ms, payload)
        return self.signing.seal(b"event", key.encode("utf-8"), data).decode()

    def state_seal(self, key: str, chain_digest: str, state: bytes) -> str:
        """What binds a trim anchor's state to the chain digest (and, sealed, to ``key``)."""
        if self.signing is None:
            return state_digest(chain_digest, state)
        seal = self.signing.seal(b"anchor", key.encode("utf-8"), chain_digest.encode(), state)
        return seal.decode()

    def link_problem(self, key: str, fields: dict[bytes, bytes]) -> str | None:
        """Why an event's ``d`` does not cover its own fields — or None (see _check)."""
        prev, seq, kind = fields[b"prev"].decode(), int(fields[b"n"]), fields[b"t"].decode()
        schema, at_ms = int(fields[b"s"]), int(fields[b"at"])
        data = canonical(prev, seq, kind, schema, at_ms, fields[b"p"])  # built once
        return digest_problem(
            self.signing,
            fields[b"d"],
            lambda: hashlib.sha256(data).hexdigest().encode(),
            b"event",
            key.encode("utf-8"),
            data,
        )

    def resealed(self, digest: bytes) -> bool:
        """Whether a rewrite must seal this event anew (not under the primary key)."""
        return self.signing is not None and not self.signing.current(digest)

    @property
    def schema(self) -> int:
        """The schema payloads are appended with (``store.migrations``, kind "events")."""
        return 1 if self._migrations is None else self._migrations.current("event")

    def encode(self, key: str, payload: Any) -> bytes:
        data = self.codec.encode(payload, key.encode("utf-8"))
        if len(data) > self.max_bytes:
            raise StateTooLarge(len(data), self.max_bytes, key)
        return data

    def append_args(
        self,
        key: str,
        head: tuple[str, int],
        type: str,
        at_ms: int,
        data: bytes,
        lease: str,
        write_id: str,
        memory_ms: int,
    ) -> EventAppendArgs:
        """The arguments of event_append for an event after the chain end ``head``."""
        prev, seq = head[0], head[1] + 1
        digest = self.digest(key, prev, seq, type, self.schema, at_ms, data)
        return EventAppendArgs(
            prev, seq, type, self.schema, at_ms, data, digest, lease, write_id, memory_ms
        )

    def anchor(self, key: str, fields: dict[bytes, bytes]) -> Anchor:
        """The anchor hash (HGETALL reply) of the stream at ``key``."""
        if not fields:
            return Anchor("", "", 0, {}, 0)
        try:
            digest, state = fields[b"digest"].decode(), fields[b"state"]
            seal = fields[b"state_digest"]
            problem = digest_problem(
                self.signing,
                seal,
                lambda: state_digest(digest, state).encode(),
                b"anchor",
                key.encode("utf-8"),
                digest.encode(),
                state,
                unverifiable=False,
                what="state digest",
            )
            if problem is not None:
                raise IntegrityError(f"the trim anchor of {key!r} {problem}")
            return Anchor(
                fields[b"id"].decode(),
                digest,
                int(fields[b"seq"]),
                self.codec.decode(state, key.encode("utf-8")),
                int(fields.get(b"removed", b"0")),
                state,
                seal,
            )
        except (KeyError, ValueError, UnicodeDecodeError) as exc:
            raise IntegrityError(f"the trim anchor of {key!r} is malformed: {exc!r:.80}") from None

    @staticmethod
    def check_retention(keep: object, older_than: object) -> None:
        """Exactly one of ``keep`` (an int >= 0) and ``older_than`` (seconds).

        Raises:
            ValueError: neither, both, or a bad value.
        """
        if (keep is None) == (older_than is None):
            raise ValueError("trim takes keep= or older_than=, one of them")
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
            raise ValueError(f"keep must be an int >= 0, got {keep!r}")
        if older_than is not None:
            if isinstance(older_than, bool) or not isinstance(older_than, int | float):
                raise ValueError(f"older_than must be seconds (a number), got {older_than!r}")
            if not 0 <= older_than < 1e10:
                raise ValueError(f"older_than must be from 0 to 1e10 seconds, got {older_than!r}")

    @staticmethod
    def cut(
        entries: list[tuple[Any, dict[bytes, bytes]]],
        *,
        keep: int | None,
        older_than: float | None,
        now: float,
    ) -> int:
        """How many of the oldest ``entries`` a trim removes (arguments already checked
        by :meth:`check_retention`)."""
        if keep is not None:
            return max(0, len(entries) - keep)
        limit_ms = (now - (older_than or 0)) * 1000
        count = 0
        for entry_id, _ in entries:
            eid = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
            if int(eid.partition("-")[0]) >= limit_ms:
                break
            count += 1
        return count

    def rechained(
        self,
        key: str,
        anchor: tuple[str, int],
        entries: list[tuple[Any, dict[bytes, bytes]]],
        payload: Recode,
    ) -> tuple[list[tuple[Any, ...]], int]:
        """The chain rebuilt with ``payload(schema, data)``'s replacements — ARGV groups
        of event_rewrite's "add" (id, n, t, s, at, p, prev, d) — and how many events
        changed (with signing keys, also those sealed anew: not under the primary key).
        Types, times, positions and stream ids stay.

        Raises:
            IntegrityError: the chain does not verify as it is. A rewrite recomputes
                every digest after the first changed event, so rewriting a broken
                chain would turn the evidence of tampering into a valid chain.
        """
        check = self.verify(key, anchor, entries)
        if not check.ok:
            raise IntegrityError(
                f"not rewriting {key!r}: its events do not verify "
                f"(first bad {check.first_bad}: {check.problems[0]})"
            )
        prev, changed, rows = anchor[0], 0, []
        for entry_id, fields in entries:
            seq, kind, at_ms = int(fields[b"n"]), fields[b"t"].decode(), int(fields[b"at"])
            schema, data = int(fields[b"s"]), fields[b"p"]
            fresh = payload(schema, data)
            if fresh is not None:
                (schema, data), changed = fresh, changed + 1
            elif self.resealed(fields[b"d"]):
                changed += 1
            digest = self.digest(key, prev, seq, kind, schema, at_ms, data)
            rows.append((entry_id, seq, kind, schema, at_ms, data, prev, digest))
            prev = digest
        return rows, changed

    def migrated(self, key: str, schema: int, data: bytes) -> tuple[int, bytes] | None:
        """An event payload stored at ``schema`` migrated to :attr:`schema` and encoded
        again (``redistate migrate``), or None when it is there already.

        Raises:
            SchemaError: the payload is newer than this code, or no step leads on.
        """
        if schema == self.schema:
            return None
        where = f"an event of {key!r}"
        if self._migrations is None:
            raise SchemaError(f"{where} has schema {schema}, newer than this code")
        value = self.codec.decode(data, key.encode("utf-8"))
        value = self._migrations.upgrade("event", schema, value, where)
        return self.schema, self.codec.encode(value, key.encode("utf-8"))

    def event(
        self, key: str, entry_id: bytes | str, fields: dict[bytes, bytes], *, check: bool = True
    ) -> Event:
        """A stream entry as an Event: payload decoded and migrated to :attr:`schema`
        (``Event.schema`` says what it was appended with). IntegrityError if a field is
        missing or malformed, or (with signing keys, unless ``check`` is False: what was
        just sealed) its seal does not authenticate it; SchemaError if it is newer than
        this code. Whether it follows the event before it is :meth:`verify`'s part."""
        eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        try:
            seq, schema, at_ms = int(fields[b"n"]), int(fields[b"s"]), int(fields[b"at"])
            kind, prev, digest = fields[b"t"].decode(), fields[b"prev"].decode(), fields[b"d"]
            data = fields[b"p"]
        except (KeyError, ValueError, UnicodeDecodeError) as exc:
            raise IntegrityError(f"event {eid} of {key!r} is malformed: {exc!r:.120}") from None
        if check and self.signing is not None:
            problem = self.link_problem(key, fields)
            if problem is not None:
                raise IntegrityError(f"event {eid} of {key!r} {problem}")
        payload = self.codec.decode(data, key.encode("utf-8"))
        if self._migrations is not None:
            payload = self._migrations.upgrade("event", schema, payload, f"event {eid} of {key!r}")
        elif schema > 1:
            raise SchemaError(f"event {eid} of {key!r} has schema {schema}, newer than this code")
        return Event(
            eid,
            kind,
            payload,
            dt.datetime.fromtimestamp(at_ms / 1000, tz=dt.timezone.utc),
            prev,
            digest.decode("ascii", "replace"),
            seq,
            schema,
        )

    def verify(
        self, key: str, anchor: tuple[str, int], entries: Iterable[tuple[Any, dict[bytes, bytes]]]
    ) -> Verification:
        """Recompute the chain from ``anchor`` (digest, position: "" and 0 untrimmed)
        over the stream's entries, oldest first. Needs no codec key: it hashes bytes
        (but the signing keys, for a sealed chain: without them it cannot be checked)."""
        prev, seq = anchor
        count, first_bad, problems = 0, None, []
        for entry_id, fields in entries:
            count += 1
            eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
            problem = _check(prev, seq, fields) or self.link_problem(key, fields)
            if problem is not None:
                first_bad = first_bad or eid
                problems.append(f"event {eid}: {problem}")
            prev = fields.get(b"d", b"").decode("ascii", "replace")
            seq = _int(fields.get(b"n"), seq + 1)
        return Verification(not problems, count, first_bad, tuple(problems))


def _int(raw: bytes | None, default: int) -> int:
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def _check(prev: str, seq: int, fields: dict[bytes, bytes]) -> str | None:
    """Why this entry does not continue the chain (prev, seq) — or None; whether its
    digest covers it is checked next (EventSpec.link_problem)."""
    missing = [n for n in (b"n", b"t", b"s", b"at", b"p", b"prev", b"d") if n not in fields]
    if missing:
        return f"missing fields {b','.join(missing).decode()}"
    if not all(fields[n].isdigit() for n in (b"n", b"s", b"at")) or not _TYPE_RE.fullmatch(
        fields[b"t"].decode("utf-8", "replace")
    ):
        return "has a malformed field"
    if fields[b"prev"].decode("ascii", "replace") != prev:
        return "does not follow the event before it (an event was removed or reordered)"
    if _int(fields[b"n"], -1) != seq + 1:
        return f"is at position {fields[b'n'].decode(errors='replace')}, expected {seq + 1}"
    if not _DIGEST.fullmatch(fields[b"d"]):
        return "has a malformed digest"
    return None  # the digest itself: EventSpec.link_problem
