"""The export file format: one namespace as JSON lines. Pure: no I/O on Redis.

Format version 1, one JSON object a line, keys relative to the namespace (a file can be
imported into another one), raw bytes in base64 beside readable fields::

    {"format": "redistate-export", "version": 1, "namespace": "app",
     "exported_ms": 1767225600000, "exported_at": "2026-01-01T00:00:00+00:00"}
    {"kind": "record", "collection": "session", "id": "s1", "version": 1767225599000001,
     "ttl_ms": 3599000, "value": "<base64 of the stored envelope>"}
    {"kind": "task", "id": "t1", "seq": 3, "ttl_ms": null, "checkpoints": ["<base64>", ...],
     "ids": ["<base64>", ...], "log": ["<base64>", ...]}
    {"kind": "fence", "id": "t1", "fence": 4}
    {"kind": "end", "entities": 3}

``ttl_ms`` is the time left as of ``exported_ms`` (null: no expiry); lists are in Redis
order (checkpoints and ids newest first, deltas oldest first). The end line says the file
is complete.

A file may be crafted or damaged: before an import writes anything, every line is checked
against the store it goes to (:class:`Limits`): payloads decode with its codec, digests
match, and no version, fence or time is later than the server's clock plus
:data:`FUTURE_ALLOWANCE_US` (a value near 2**53 would leave no room for the next write).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from .. import RedistateError
from ..checkpoints import _DAMAGED, _DELTA_RE, _ENTRY_RE, CheckpointSpec
from ..codec import Codec
from ..envelope import MAX_VERSION, unpack
from ..keys import RESERVED_KINDS, KeySpace, check_kind, escape_id
from ..mergelog import frames
from ..records import RecordSpec
from ..signing import SigningKeys

__all__ = [
    "FORMAT",
    "VERSION",
    "MAX_TTL_MS",
    "KINDS",
    "NOT_RECORDS",
    "BUILT_IN_RECORDS",
    "FUTURE_ALLOWANCE_US",
    "Limits",
    "is_record_kind",
    "Progress",
    "nothing",
    "now_ms",
    "b64",
    "encode_line",
    "newest_seq",
    "BadFile",
    "Entity",
    "Header",
    "parse_entity",
    "read_file",
]

FORMAT: Final = "redistate-export"
VERSION: Final = 1
MAX_TTL_MS: Final = 100 * 365 * 86400 * 1000  # what the scripts accept (rs_ttl)
KINDS: Final = ("record", "task", "fence")  # what a file holds
# Kinds that are not records (events: streams, not exported yet; agents and graph: the
# framework adapters' own shapes, not exported yet).
NOT_RECORDS: Final = frozenset({"task", "fence", "lock", "events", "agents", "graph"})
# The store's own record collections; every other reserved kind holds no records (or
# none yet), so a record line there is refused, and export leaves such keys out.
BUILT_IN_RECORDS: Final = frozenset({"session", "user"})
MAX_SEQ: Final = MAX_VERSION - 1  # a checkpoint seq an import accepts
# How far past the importing server's clock a version, fence or time may be: an export
# from a server whose clock ran ahead (NTP keeps it to milliseconds) imports. More is a
# crafted or damaged line: a version far ahead outranks every live write until the
# clock catches up, and near 2**53 no write can follow it.
FUTURE_ALLOWANCE_US: Final = 3600 * 10**6  # 1 hour
PROGRESS_BYTES: Final = 1 << 20  # progress is reported in steps of this many bytes

Progress = Callable[[int], None]  # called with how many more keys or bytes are done


def nothing(_: int) -> None:
    """A Progress that reports nowhere."""


def now_ms() -> int:
    """The wall clock in ms since the epoch: the clock of ``exported_ms``."""
    return time.time_ns() // 1_000_000


def b64(data: bytes) -> str:
    """Raw bytes as the file holds them."""
    return base64.b64encode(data).decode("ascii")


def encode_line(obj: dict[str, Any]) -> bytes:
    """One line of the file."""
    return orjson.dumps(obj) + b"\n"


def newest_seq(entries: Sequence[bytes]) -> int:
    """Highest seq among readable id entries (as checkpoint_save reads them), 0 if none."""
    seqs = [int(m.group(1)) for e in entries if (m := _ENTRY_RE.fullmatch(e))]
    return max(seqs, default=0)


def is_record_kind(name: str) -> bool:
    """Whether records of collection ``name`` may exist: a user collection (any name
    ``store.collection()`` accepts) or a built-in one (sessions, users)."""
    return name in BUILT_IN_RECORDS or name not in RESERVED_KINDS


# -- reading a file --------------------------------------------------------------------


class BadFile(RedistateError):
    """A line of an export file that cannot be imported."""


@dataclass(frozen=True, slots=True)
class Entity:
    """One entity line, checked: what the import script needs apart from TTL and force."""

    kind: str  # record | task | fence
    name: str  # the record's collection; "" otherwise
    id: str
    ttl_ms: int | None
    data: tuple[bytes, ...]  # record: (value,); task: blobs, ids, log; fence: (value,)
    counts: tuple[int, int] = (0, 0)  # task: blobs, ids

    @property
    def label(self) -> str:
        return f"{self.name or self.kind} {self.id}"


def _field(obj: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = obj.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"field {name!r} is missing or not a {_kind_name(kind)}: {value!r:.80}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _bytes(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise ValueError(f"{what} must be a base64 string, got {text!r:.80}")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{what} is not valid base64: {text!r:.80}") from None


def _ttl(obj: dict[str, Any]) -> int | None:
    ttl = obj.get("ttl_ms")
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 <= ttl <= MAX_TTL_MS:
        raise ValueError(f"ttl_ms must be null or an int from 0 to {MAX_TTL_MS}, got {ttl!r:.80}")
    return ttl


def _id(obj: dict[str, Any]) -> str:
    entity = _field(obj, "id", str)
    escape_id(entity)  # InvalidId for an id no key can hold
    return str(entity)


def _record(obj: dict[str, Any]) -> Entity:
    name = _field(obj, "collection", str)
    check_kind(name)
    if not is_record_kind(name):
        raise ValueError(
            f"collection {name!r} is not a record kind (reserved by redistate; records "
            f"live in {sorted(BUILT_IN_RECORDS)} or in unreserved collections)"
        )
    entity, value = _id(obj), _bytes(obj.get("value"), "value")
    envelope = unpack(f"{name} {entity}", value)  # IntegrityError if not a record
    if envelope.log:
        frames(f"{name} {entity}", envelope.payload)  # IntegrityError if cut or malformed
    version = envelope.version
    if obj.get("version") != version:
        raise ValueError(f"version {obj.get('version')!r} is not the value's own ({version})")
    return Entity("record", name, entity, _ttl(obj), (value,))


def _task(obj: dict[str, Any]) -> Entity:
    parts = [_field(obj, name, list) for name in ("checkpoints", "ids", "log")]
    blobs, entries, log = (
        [_bytes(x, f"{name}[{i}]") for i, x in enumerate(part)]
        for name, part in zip(("checkpoints", "ids", "log"), parts, strict=True)
    )
    if not (blobs or entries or log):
        raise ValueError("a task needs checkpoints, ids or a log")
    if len(blobs) != len(entries):
        # The store writes both lists in one script: they only differ if edited.
        raise ValueError(f"{len(blobs)} checkpoints but {len(entries)} ids: they must align")
    seq = newest_seq(entries)
    if obj.get("seq") != seq:
        raise ValueError(f"seq {obj.get('seq')!r} is not the newest in its ids ({seq})")
    data = (*blobs, *entries, *log)
    return Entity("task", "", _id(obj), _ttl(obj), data, (len(blobs), len(entries)))


def _fence(obj: dict[str, Any]) -> Entity:
    value = _field(obj, "fence", int)
    if not 0 < value <= MAX_VERSION:
        raise ValueError(f"fence must be from 1 to 2**53-1, got {value}")
    return Entity("fence", "", _id(obj), None, (b"%d" % value,))


_PARSERS: Final = {"record": _record, "task": _task, "fence": _fence}


def parse_entity(obj: dict[str, Any]) -> Entity:
    """An entity line (a JSON object), checked.

    Raises:
        ValueError, TypeError or RedistateError: naming the field that is wrong.
    """
    kind = obj.get("kind")
    parse = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parse is None:
        raise ValueError(f"unknown kind {kind!r:.40} (record, task, fence or end)")
    return parse(obj)


class Limits:
    """What a line must respect to be imported into one store, checked before anything
    is written: its payloads decode with the store's codec (under the keys they will
    have), checkpoint and delta digests match, no record version, fence, checkpoint seq
    or time is later than the server's clock allows. Pure: the server time is read once
    by the caller."""

    __slots__ = ("_records", "_spec", "codec", "keys", "max_us", "now_us", "signing")

    def __init__(
        self, keys: KeySpace, codec: Codec, now_us: int, signing: SigningKeys | None = None
    ) -> None:
        self.keys, self.codec, self.now_us, self.signing = keys, codec, now_us, signing
        # The next version or fence after an imported one must still be exact.
        self.max_us = min(MAX_VERSION - 1, now_us + FUTURE_ALLOWANCE_US)
        self._spec = CheckpointSpec(keys, codec, signing=signing)
        self._records: dict[str, RecordSpec] = {}  # by collection

    def _late(self, what: str, value: int, limit: int) -> ValueError:
        clock = dt.datetime.fromtimestamp(self.now_us / 1e6, tz=dt.timezone.utc)
        return ValueError(
            f"{what} {value} is over the limit {limit}: the server's clock "
            f"({clock:%Y-%m-%dT%H:%M:%SZ}) plus {FUTURE_ALLOWANCE_US // 10**6} s"
        )

    def check(self, entity: Entity) -> None:
        """Raises ValueError naming the entity, the field, its value and the limit."""
        try:
            if entity.kind == "record":
                self._record(entity)
            elif entity.kind == "task":
                self._task(entity)
            elif (fence := int(entity.data[0])) > self.max_us:
                raise self._late("fence", fence, self.max_us)
        except ValueError as exc:
            raise ValueError(f"{entity.label}: {exc}") from None

    def _record(self, entity: Entity) -> None:
        key = self.keys.record(entity.name, entity.id)
        envelope = unpack(key, entity.data[0])
        if envelope.version > self.max_us:
            raise self._late("version", envelope.version, self.max_us)
        spec = self._records.get(entity.name)
        if spec is None:
            spec = self._records[entity.name] = RecordSpec(
                self.keys, entity.name, self.codec, ttl=None, max_bytes=1, signing=self.signing
            )
        try:  # seals checked (signing keys), patches folded, as a read does
            spec._stored(key, envelope)
        except RedistateError as exc:
            raise ValueError(f"value does not decode with the store's codec: {exc}") from None

    def _task(self, entity: Entity) -> None:
        blobs, entries = entity.counts
        checkpoints, ids = entity.data[:blobs], entity.data[blobs : blobs + entries]
        key, log_key = self.keys.task(entity.id), self.keys.task_log(entity.id)
        max_ms = self.max_us // 1000
        for n, (entry, blob) in enumerate(zip(ids, checkpoints, strict=True)):
            match = _ENTRY_RE.fullmatch(entry)
            if match is None:
                raise ValueError(f"ids[{n}] is not a checkpoint entry: {entry[:80]!r}")
            seq, created_ms, fence = (int(match.group(i)) for i in (1, 2, 3))
            if seq > MAX_SEQ:
                raise ValueError(
                    f"ids[{n}] seq {seq} is over the limit {MAX_SEQ} (the next save's "
                    f"seq, one more, must stay exact in the scripts: at most 2**53-1)"
                )
            for field_name, value, limit in (
                (f"ids[{n}] created_ms", created_ms, max_ms),
                (f"ids[{n}] fence", fence, self.max_us),
            ):
                if value > limit:
                    raise self._late(field_name, value, limit)
            try:
                self._spec._saved(entity.id, key, entry, blob)
            except (RedistateError, ValueError) as exc:
                raise ValueError(f"checkpoints[{n}]: {exc}") from None
        for n, raw in enumerate(entity.data[blobs + entries :]):
            head = _DELTA_RE.match(raw)
            if head is not None and int(head.group(3)) > max_ms:
                raise self._late(f"log[{n}] time (ms)", int(head.group(3)), max_ms)
            if head is None or self._spec._delta(raw, log_key)[2] is _DAMAGED:
                raise ValueError(
                    f"log[{n}] is damaged (header, digest, or the store's codec cannot "
                    f"decode it): {raw[:80]!r}"
                )


@dataclass
class Header:
    namespace: str
    exported_ms: int


def _header(obj: dict[str, Any]) -> Header:
    if obj.get("format") != FORMAT:
        raise ValueError(f"not a redistate export (no {FORMAT!r} header line)")
    version = obj.get("version")
    if version != VERSION:
        raise ValueError(f"format version {version!r} is not supported (this redistate reads 1)")
    namespace = KeySpace(_field(obj, "namespace", str)).namespace
    return Header(namespace, _field(obj, "exported_ms", int))


def _lines(path: Path, progress: Progress) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, JSON object) of each line; BadFile for one that is not an object."""
    unreported = 0
    with open(path, "rb") as source:
        for number, raw in enumerate(source, 1):
            unreported += len(raw)
            if unreported >= PROGRESS_BYTES:
                progress(unreported)
                unreported = 0
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise BadFile(f"{path}:{number}: not valid JSON ({exc})") from None
            if not isinstance(obj, dict):
                raise BadFile(f"{path}:{number}: not a JSON object")
            yield number, obj
    progress(unreported)


def read_file(
    path: Path, progress: Progress, limits: Callable[[Header], Limits] | None = None
) -> Iterator[Header | Entity]:
    """The header, then each entity; BadFile (naming the line) for anything wrong,
    including a missing end line. ``limits``: given the header, what every entity must
    also respect (:class:`Limits`)."""
    lines = _lines(path, progress)
    first = next(lines, None)
    if first is None:
        raise BadFile(f"{path}: empty file, not a redistate export")
    try:
        header = _header(first[1])
    except (ValueError, RedistateError) as exc:
        raise BadFile(f"{path}:1: {exc}") from None
    yield header
    check = None if limits is None else limits(header)
    count, ended = 0, 0
    for number, obj in lines:
        kind = obj.get("kind")
        try:
            if ended:
                raise ValueError(f"a line after the end line (line {ended})")
            if kind == "end":
                if obj.get("entities") != count:
                    raise ValueError(
                        f"the end line counts {obj.get('entities')!r} entities, "
                        f"the file holds {count}"
                    )
                ended = number
                continue
            entity = parse_entity(obj)
            if check is not None:
                check.check(entity)
        except (ValueError, TypeError, RedistateError) as exc:
            raise BadFile(f"{path}:{number}: {exc}") from None
        count += 1
        yield entity
    if not ended:
        raise BadFile(f"{path}: no end line after line {count + 1}: the file is incomplete")
