"""The export file format: one namespace as JSON lines. Pure: no I/O on Redis.

Format version 2 (version-1 files, which have only the record, task and fence lines
and no step records, still import). One JSON object a line, keys relative to the
namespace (a file can be imported into another one), raw bytes in base64 beside
readable fields::

    {"format": "redistate-export", "version": 2, "namespace": "app",
     "exported_ms": 1767225600000, "exported_at": "2026-01-01T00:00:00+00:00"}
    {"kind": "record", "collection": "session", "id": "s1", "version": 1767225599000001,
     "ttl_ms": 3599000, "value": "<base64 of the stored envelope>"}
    {"kind": "task", "id": "t1", "seq": 3, "ttl_ms": null, "checkpoints": ["<base64>", ...],
     "ids": ["<base64>", ...], "log": ["<base64>", ...],
     "steps": {"<step name>": "<base64 of the step record>", ...}}
    {"kind": "fence", "id": "t1", "fence": 4}
    {"kind": "events", "id": "e1", "ttl_ms": null, "anchor": {"<field>": "<base64>"} | null,
     "events": [["<stream id>", {"<field>": "<base64>", ...}], ...]}
    {"kind": "user_index", "id": "u1", "owns": ["<kind>:<id>", ...]}
    {"kind": "agents", "id": "chat", "ttl_ms": 60000, "items": ["<base64>", ...]}
    {"kind": "graph", "id": "thread", "ttl_ms": null, "parts": {"cp": {"<b64 field>":
     "<b64 value>"}, "idx": [["<b64 member>", 0], ...], ...}}
    {"kind": "end", "entities": 8}

``ttl_ms`` is the time left as of ``exported_ms`` (null: no expiry); lists are in Redis
order (checkpoints and ids newest first, deltas, events and agents items oldest first).
A graph line holds the seven keys of a LangGraph thread (kinds.GRAPH_PARTS): hashes
as objects, sorted sets as [member, score] pairs. The end line says the file is
complete. Not in a file: held leases (a lease belongs to the process holding it),
lease wake-up lists, write memories (``<key>:writes``) and the staging stream of an
event rewrite in progress.

A file may be crafted or damaged: before an import writes anything, every line is checked
against the store it goes to (:class:`Limits`): payloads decode with its codec, digests,
seals and event chains verify, and no version, fence, stream id or time is later than
the server's clock plus :data:`FUTURE_ALLOWANCE_US` (a value near 2**53 would leave no
room for the next write).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from .. import RedistateError
from ..checkpoints.spec import _DAMAGED, _DELTA_RE, _ENTRY_RE, CheckpointSpec
from ..core import kinds
from ..core.codec import Codec
from ..core.envelope import MAX_VERSION, unpack
from ..core.keys import KeySpace, check_kind, escape_id
from ..core.signing import SigningKeys
from ..events.spec import EventSpec
from ..records.erasure import entry
from ..records.mergelog import frames
from ..records.spec import RecordSpec
from ..steps.spec import StepSpec, check_step_name

__all__ = [
    "FORMAT",
    "VERSION",
    "READS",
    "MAX_TTL_MS",
    "RECORD",
    "TASK",
    "FENCE",
    "EVENTS",
    "USER_INDEX",
    "AGENTS",
    "GRAPH",
    "KINDS",
    "NOT_RECORDS",
    "BUILT_IN_RECORDS",
    "EVENT_FIELDS",
    "ANCHOR_FIELDS",
    "GRAPH_ZSETS",
    "FUTURE_ALLOWANCE_US",
    "Limits",
    "is_record_kind",
    "plural",
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
VERSION: Final = 2
READS: Final = (1, 2)  # the versions an import reads
MAX_TTL_MS: Final = 100 * 365 * 86400 * 1000  # what the scripts accept (rs_ttl)
# Line kinds: "record" for every versioned record (sessions, users, collections: the
# line names its collection); the others are named by their kind (redistate.core.kinds).
RECORD: Final = "record"
TASK: Final = kinds.TASK.name  # with its step records (kinds.STEPS)
FENCE: Final = kinds.FENCE.name
EVENTS: Final = kinds.EVENTS.name
USER_INDEX: Final = kinds.USER_INDEX.name
AGENTS: Final = kinds.AGENTS.name
GRAPH: Final = kinds.GRAPH.name
KINDS: Final = (RECORD, TASK, FENCE, EVENTS, USER_INDEX, AGENTS, GRAPH)  # what a file holds
# Key kinds that hold no records (used by the CLI's ls, rotate-keys).
_RECORD_KEYS: Final = frozenset(k.key for k in kinds.KINDS if k.records)
NOT_RECORDS: Final = frozenset(k.key for k in kinds.KINDS if not k.records) - _RECORD_KEYS
# The store's own record collections; every other reserved kind holds no records, so a
# record line there is refused, and export leaves such keys out.
BUILT_IN_RECORDS: Final = _RECORD_KEYS - {kinds.ANY}
# The fields of a stream entry (event_append writes them) and of a trim anchor
# (event_trim), in the order the import scripts take them.
EVENT_FIELDS: Final = ("n", "t", "s", "at", "p", "prev", "d")
ANCHOR_FIELDS: Final = ("id", "seq", "digest", "state", "state_digest", "removed")
_ANCHOR_NEEDS: Final = frozenset(ANCHOR_FIELDS) - {"removed"}
# Which of a LangGraph thread's keys are sorted sets (lua/_graph.lua); the rest are hashes.
GRAPH_ZSETS: Final = frozenset({"idx", "widx", "runs"})
_GRAPH_FIELD: Final = re.compile(rb"[cru]\|.*|delta", re.S)  # the cp hash's fields
_STREAM_ID: Final = re.compile(r"(\d{1,15})-(\d{1,15})")  # exact in the scripts' numbers
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
    return name in BUILT_IN_RECORDS or name not in kinds.RESERVED


def plural(kind: str) -> str:
    """A line kind's name in a ``--json`` summary: records, tasks, user_indexes..."""
    if kind.endswith("s"):
        return kind
    return kind + ("es" if kind.endswith("x") else "s")


def stream_id(text: object, what: str) -> tuple[int, int]:
    """A stream id ``<ms>-<seq>`` as numbers (both at most 15 digits, not 0-0).

    Raises:
        ValueError: naming ``what``.
    """
    match = _STREAM_ID.fullmatch(text) if isinstance(text, str) else None
    if match is None or text == "0-0":
        raise ValueError(
            f"{what} must be a stream id <ms>-<seq> (at most 15 digits each, not 0-0), "
            f"got {text!r:.80}"
        )
    return int(match.group(1)), int(match.group(2))


# -- reading a file --------------------------------------------------------------------


class BadFile(RedistateError):
    """A line of an export file that cannot be imported."""


Pairs = tuple[tuple[bytes, bytes], ...]


@dataclass(frozen=True, slots=True)
class Entity:
    """One entity line, checked: what the import script needs apart from TTL and force."""

    kind: str  # a line kind (KINDS)
    name: str  # the record's collection; "" otherwise
    id: str
    ttl_ms: int | None
    # record: (value,); task: blobs, ids, log; fence: (value,); user_index: entries;
    # agents: items; events and graph: ()
    data: tuple[bytes, ...]
    counts: tuple[int, int] = (0, 0)  # task: blobs, ids
    steps: Pairs = ()  # task: (step name, record), by name
    events: tuple[tuple[str, dict[bytes, bytes]], ...] = ()  # events: (stream id, fields)
    anchor: Pairs = ()  # events: the trim anchor's fields (ANCHOR_FIELDS order); () none
    parts: tuple[Pairs, ...] = ()  # graph: each part's (field, value) or (member, score)

    @property
    def label(self) -> str:
        return f"{self.name or self.kind} {self.id}"

    @property
    def size(self) -> int:
        """About how many bytes the import script is sent (a batch's budget)."""
        pairs = (*self.steps, *self.anchor, *(p for part in self.parts for p in part))
        fields = sum(len(v) for _, f in self.events for v in f.values())
        return sum(map(len, self.data)) + sum(len(a) + len(b) for a, b in pairs) + fields


def _field(obj: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = obj.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"field {name!r} is missing or not a {_kind_name(kind)}: {value!r:.80}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds_ = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds_)


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
    return Entity(RECORD, name, entity, _ttl(obj), (value,))


def _steps(obj: dict[str, Any]) -> Pairs:
    steps = obj.get("steps", {})  # a version-1 line has none
    if not isinstance(steps, dict):
        raise ValueError(f"field 'steps' must be an object of step name: base64, got {steps!r:.80}")
    out = []
    for name, raw in sorted(steps.items()):
        check_step_name(name)  # InvalidId: empty or over 512 bytes
        out.append((name.encode("utf-8"), _bytes(raw, f"steps[{name!r:.80}]")))
    return tuple(out)


def _task(obj: dict[str, Any]) -> Entity:
    parts = [_field(obj, name, list) for name in ("checkpoints", "ids", "log")]
    blobs, entries, log = (
        [_bytes(x, f"{name}[{i}]") for i, x in enumerate(part)]
        for name, part in zip(("checkpoints", "ids", "log"), parts, strict=True)
    )
    steps = _steps(obj)
    if not (blobs or entries or log or steps):
        raise ValueError("a task needs checkpoints, ids, a log or steps")
    if len(blobs) != len(entries):
        # The store writes both lists in one script: they only differ if edited.
        raise ValueError(f"{len(blobs)} checkpoints but {len(entries)} ids: they must align")
    seq = newest_seq(entries)
    if obj.get("seq") != seq:
        raise ValueError(f"seq {obj.get('seq')!r} is not the newest in its ids ({seq})")
    data = (*blobs, *entries, *log)
    counts = (len(blobs), len(entries))
    return Entity(TASK, "", _id(obj), _ttl(obj), data, counts, steps=steps)


def _fence(obj: dict[str, Any]) -> Entity:
    value = _field(obj, "fence", int)
    if not 0 < value <= MAX_VERSION:
        raise ValueError(f"fence must be from 1 to 2**53-1, got {value}")
    return Entity(FENCE, "", _id(obj), None, (b"%d" % value,))


def _fields(value: object, names: Sequence[str], needs: frozenset[str], what: str) -> Pairs:
    """An object of ``names`` (each base64; ``needs`` required), in ``names``' order."""
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be an object of field: base64, got {value!r:.80}")
    unknown = sorted(set(value) - set(names))
    missing = sorted(needs - set(value))
    if unknown or missing:
        raise ValueError(
            f"{what} has unknown fields {unknown} or lacks {missing} (fields: {list(names)})"
        )
    return tuple((n.encode(), _bytes(value[n], f"{what}.{n}")) for n in names if n in value)


def _digits(raw: bytes, what: str) -> int:
    if not raw.isdigit() or len(raw) > 15:
        raise ValueError(f"{what} must be digits (at most 15), got {raw[:40]!r}")
    return int(raw)


def _events(obj: dict[str, Any]) -> Entity:
    entity = _id(obj)
    anchor: Pairs = ()
    after, where = (0, 0), "0-0"
    if obj.get("anchor") is not None:
        anchor = _fields(obj["anchor"], ANCHOR_FIELDS, _ANCHOR_NEEDS, "anchor")
        found = dict(anchor)
        where = found[b"id"].decode("ascii", "replace")
        after = stream_id(where, "anchor.id")
        _digits(found[b"seq"], "anchor.seq")
        if b"removed" in found:
            _digits(found[b"removed"], "anchor.removed")
    events = []
    for n, item in enumerate(_field(obj, "events", list)):
        if not (isinstance(item, list) and len(item) == 2):
            raise ValueError(
                f"events[{n}] must be [stream id, {{field: base64}}], got {item!r:.80}"
            )
        at = stream_id(item[0], f"events[{n}] id")
        if at <= after:
            raise ValueError(f"events[{n}] id {item[0]} is not after {where} (the one before)")
        after, where = at, item[0]
        fields = _fields(item[1], EVENT_FIELDS, frozenset(EVENT_FIELDS), f"events[{n}]")
        events.append((str(item[0]), dict(fields)))
    if not (events or anchor):
        raise ValueError("an events line needs events or an anchor")
    return Entity(EVENTS, "", entity, _ttl(obj), (), events=tuple(events), anchor=anchor)


def _user_index(obj: dict[str, Any]) -> Entity:
    owns = _field(obj, "owns", list)
    if not owns:
        raise ValueError("a user index needs entries ('owns' is empty)")
    for n, item in enumerate(owns):
        kind, sep, entity = item.partition(":") if isinstance(item, str) else ("", "", "")
        try:
            if not sep:
                raise ValueError(item)
            check_kind(kind)
            if entry(kind, entity) != item:
                raise ValueError(item)
        except ValueError:
            raise ValueError(
                f"owns[{n}] {item!r:.80} is not an index entry '<kind>:<id>' (a kind of "
                f"[a-z][a-z0-9_-]*, an id of 1-512 UTF-8 bytes)"
            ) from None
    if len(set(owns)) != len(owns):
        raise ValueError("owns lists an entry twice")
    data = tuple(sorted(str(item).encode("utf-8") for item in owns))
    return Entity(USER_INDEX, "", _id(obj), None, data)


def _agents(obj: dict[str, Any]) -> Entity:
    items = _field(obj, "items", list)
    if not items:
        raise ValueError("an agents session needs items ('items' is empty)")
    data = tuple(_bytes(x, f"items[{i}]") for i, x in enumerate(items))
    return Entity(AGENTS, "", _id(obj), _ttl(obj), data)


def _score(value: object, what: str) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {value!r:.80}")
    if isinstance(value, int):
        if abs(value) > MAX_VERSION:
            raise ValueError(f"{what} {value} is over the limit of ±2**53-1")
        return b"%d" % value
    return repr(value).encode()


def _graph_part(part: str, value: object) -> Pairs:
    what = f"parts.{part}"
    pairs: list[tuple[bytes, bytes]] = []
    if part in GRAPH_ZSETS:
        if not isinstance(value, list):
            raise ValueError(f"{what} must be a list of [base64 member, score], got {value!r:.80}")
        for n, item in enumerate(value):
            if not (isinstance(item, list) and len(item) == 2):
                raise ValueError(f"{what}[{n}] must be [base64 member, score], got {item!r:.80}")
            pairs.append(
                (_bytes(item[0], f"{what}[{n}] member"), _score(item[1], f"{what}[{n}] score"))
            )
        if len({m for m, _ in pairs}) != len(pairs):
            raise ValueError(f"{what} lists a member twice")
    else:
        if not isinstance(value, dict):
            raise ValueError(f"{what} must be an object of base64 field: base64, got {value!r:.80}")
        for field_b64, raw in value.items():
            name = _bytes(field_b64, f"{what} field")
            pairs.append((name, _bytes(raw, f"{what}[{field_b64!r:.40}]")))
        if len({f for f, _ in pairs}) != len(pairs):
            raise ValueError(f"{what} names a field twice (in two base64 spellings)")
    for name, raw in pairs:
        if part == "idx" and b"\0" not in name:
            raise ValueError(f"{what} member {name[:40]!r} is not '<checkpoint_ns>\\0<id>'")
        if part == "cp" and not _GRAPH_FIELD.fullmatch(name):
            raise ValueError(f"{what} field {name[:40]!r} is not c|, r|, u|<checkpoint> or delta")
        if part == "refs" and (not raw.isdigit() or len(raw) > 15):
            raise ValueError(f"{what} count {raw[:40]!r} for {name[:40]!r} is not a count")
    return tuple(sorted(pairs))


def _graph(obj: dict[str, Any]) -> Entity:
    parts = _field(obj, "parts", dict)
    if sorted(parts) != sorted(kinds.GRAPH_PARTS):
        raise ValueError(
            f"parts must name exactly {list(kinds.GRAPH_PARTS)}, got {sorted(parts)!r:.200}"
        )
    found = tuple(_graph_part(part, parts[part]) for part in kinds.GRAPH_PARTS)
    if not any(found):
        raise ValueError("a graph thread needs content (every part is empty)")
    return Entity(GRAPH, "", _id(obj), _ttl(obj), (), parts=found)


_PARSERS: Final = {
    RECORD: _record, TASK: _task, FENCE: _fence, EVENTS: _events,
    USER_INDEX: _user_index, AGENTS: _agents, GRAPH: _graph,
}  # fmt: skip


def parse_entity(obj: dict[str, Any]) -> Entity:
    """An entity line (a JSON object), checked.

    Raises:
        ValueError, TypeError or RedistateError: naming the field that is wrong.
    """
    kind = obj.get("kind")
    parse = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parse is None:
        raise ValueError(f"unknown kind {kind!r:.40} ({', '.join(KINDS)} or end)")
    return parse(obj)


class Limits:
    """What a line must respect to be imported into one store, checked before anything
    is written: its payloads decode with the store's codec (under the keys they will
    have), checkpoint, delta and step digests or seals match, event chains verify from
    their anchor, no record version, fence, checkpoint seq, stream id or time is later
    than the server's clock allows. Pure: the server time is read once by the caller."""

    __slots__ = (
        "_events", "_records", "_spec", "_steps", "codec", "keys", "max_us", "now_us",
        "signing",
    )  # fmt: skip

    def __init__(
        self, keys: KeySpace, codec: Codec, now_us: int, signing: SigningKeys | None = None
    ) -> None:
        self.keys, self.codec, self.now_us, self.signing = keys, codec, now_us, signing
        # The next version or fence after an imported one must still be exact.
        self.max_us = min(MAX_VERSION - 1, now_us + FUTURE_ALLOWANCE_US)
        self._spec = CheckpointSpec(keys, codec, signing=signing)
        # Only decoding is asked of these: no size limit applies.
        self._steps = StepSpec(codec, max_bytes=MAX_VERSION, signing=signing)
        self._events = EventSpec(codec, max_bytes=MAX_VERSION, signing=signing)
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
            if entity.kind == RECORD:
                self._record(entity)
            elif entity.kind == TASK:
                self._task(entity)
                self._task_steps(entity)
            elif entity.kind == EVENTS:
                self._event_chain(entity)
            elif entity.kind == AGENTS:
                self._agents(entity)
            elif entity.kind == FENCE and (fence := int(entity.data[0])) > self.max_us:
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
        for n, (entry_, blob) in enumerate(zip(ids, checkpoints, strict=True)):
            match = _ENTRY_RE.fullmatch(entry_)
            if match is None:
                raise ValueError(f"ids[{n}] is not a checkpoint entry: {entry_[:80]!r}")
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
                self._spec._saved(entity.id, key, entry_, blob)
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

    def _task_steps(self, entity: Entity) -> None:
        key, max_ms = self.keys.task_steps(entity.id), self.max_us // 1000
        for raw_name, raw in entity.steps:
            name = raw_name.decode("utf-8")
            what = f"steps[{name!r:.80}]"
            try:  # digest or seal, and the payload decoded, as a resumed run reads it
                step = self._steps.parse(key, name, raw)
            except RedistateError as exc:
                raise ValueError(
                    f"{what} does not decode with the store's step spec: {exc}"
                ) from None
            for field_name, at in (("started", step.started_at), ("ended", step.ended_at)):
                ms = 0 if at is None else round(at.timestamp() * 1000)
                if ms > max_ms:
                    raise self._late(f"{what} {field_name} (ms)", ms, max_ms)
            if (step.fence or 0) > self.max_us:
                raise self._late(f"{what} fence", step.fence or 0, self.max_us)

    def _event_chain(self, entity: Entity) -> None:
        key, max_ms = self.keys.events(entity.id), self.max_us // 1000
        context = key.encode("utf-8")
        try:  # its state seal checked and its state decoded, as a fold reads it
            anchor = self._events.anchor(key, dict(entity.anchor))
        except RedistateError as exc:
            raise ValueError(f"anchor: {exc}") from None
        if anchor.id and stream_id(anchor.id, "anchor.id")[0] > max_ms:
            raise self._late("anchor.id (ms)", stream_id(anchor.id, "anchor.id")[0], max_ms)
        check = self._events.verify(key, (anchor.digest, anchor.seq), entity.events)
        if not check.ok:
            raise ValueError(
                f"the events do not verify from their anchor under the store's signing "
                f"keys (first bad {check.first_bad}: {check.problems[0]})"
            )
        for n, (eid, fields) in enumerate(entity.events):
            if (ms := stream_id(eid, f"events[{n}] id")[0]) > max_ms:
                raise self._late(f"events[{n}] id {eid} (ms)", ms, max_ms)
            try:
                self.codec.decode(fields[b"p"], context)
            except RedistateError as exc:
                raise ValueError(
                    f"events[{n}] ({eid}) payload does not decode with the store's codec: {exc}"
                ) from None

    def _agents(self, entity: Entity) -> None:
        context = self.keys.agent_session(entity.id).encode("utf-8")
        for n, item in enumerate(entity.data):
            try:
                self.codec.decode(item, context)
            except RedistateError as exc:
                raise ValueError(
                    f"items[{n}] does not decode with the store's codec: {exc}"
                ) from None


@dataclass
class Header:
    namespace: str
    exported_ms: int


def _header(obj: dict[str, Any]) -> Header:
    if obj.get("format") != FORMAT:
        raise ValueError(f"not a redistate export (no {FORMAT!r} header line)")
    version = obj.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version not in READS:
        reads = " and ".join(map(str, READS))
        raise ValueError(
            f"format version {version!r} is not supported (this redistate reads {reads})"
        )
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
