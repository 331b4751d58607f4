"""Export: every entity of a namespace to a file (the format: backup_format).

Reads SCAN batches (each entity's keys in one MULTI/EXEC, so a task's lists and step
records, an event stream and its anchor, a LangGraph thread's seven keys are a
consistent view) and writes each entity as it is read: client memory is bounded by a
batch, not by the number of keys. What a scanned key belongs to is the kind registry's
answer (redistate.kinds). Left out: held leases, lease wake-up lists, write memories
and the staging stream of an event rewrite in progress.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Final, TypeVar

from .. import Store, kinds
from .._translate import translate
from ..envelope import unpack
from ..errors import IntegrityError, InvalidId
from ..keys import KeySpace
from .backup_format import (
    AGENTS,
    EVENTS,
    FENCE,
    FORMAT,
    GRAPH,
    GRAPH_ZSETS,
    KINDS,
    RECORD,
    TASK,
    USER_INDEX,
    VERSION,
    Progress,
    b64,
    encode_line,
    newest_seq,
    nothing,
    now_ms,
    plural,
)

__all__ = ["EXAMPLES", "Batch", "ExportReport", "export_namespace", "per_server"]

EXAMPLES: Final = 5  # ids listed in a report, at most
BATCH_BYTES: Final = 4 * 1024 * 1024  # aim of one read or write batch: bounds memory
MAX_BATCH: Final = 512
PROGRESS_KEYS: Final = 1000  # progress is reported in steps of this many keys
# A rewrite's staging stream is left out: it expires, and the stream it would replace
# is exported. So are write memories (_memory).
STAGING: Final = "staging"
# The line that carries a kind's keys: records share one line kind; step records go
# in their task's line.
_LINE: Final = {  # by kind name
    **{k.name: RECORD for k in kinds.KINDS if k.records},
    kinds.TASK.name: TASK, kinds.STEPS.name: TASK, kinds.FENCE.name: FENCE,
    kinds.EVENTS.name: EVENTS, kinds.USER_INDEX.name: USER_INDEX,
    kinds.AGENTS.name: AGENTS, kinds.GRAPH.name: GRAPH,
}  # fmt: skip
# A task's keys in the order _Read.keys holds them (KeySpace.task_keys, then steps),
# and the order in which the first existing one writes the line.
_TASK_PARTS: Final = ("", "ids", "log", "steps")
_TASK_ORDER: Final = (0, 2, 1, 3)
_EVENT_PARTS: Final = ("", "anchor")

T = TypeVar("T")


class Batch:
    """How many entities one round trip carries: grows while batches are small, shrinks
    after a large one, so a batch holds about BATCH_BYTES whatever the entity sizes."""

    def __init__(self) -> None:
        self.size = 64

    def adapt(self, count: int, nbytes: int) -> None:
        per = max(1, nbytes // max(1, count))
        self.size = max(1, min(MAX_BATCH, BATCH_BYTES // per))


@dataclass
class ExportReport:
    """What an export wrote and what it left out."""

    namespace: str
    entities: Counter[str] = field(default_factory=Counter)  # by line kind
    steps: int = 0  # step records, in their tasks' lines
    keys: int = 0  # keys the scan found in the namespace
    not_exported: int = 0  # held leases, wake lists, write memories, staging streams
    unknown: list[str] = field(default_factory=list)  # keys redistate did not recognise
    unknown_count: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "entities": sum(self.entities.values()),
            **{plural(kind): self.entities[kind] for kind in KINDS},
            "steps": self.steps,
            "keys": self.keys,
            "not_exported": self.not_exported,
            "unknown": self.unknown_count,
            "unknown_keys": self.unknown,
        }

    def skip_unknown(self, key: bytes | str) -> None:
        self.unknown_count += 1
        if len(self.unknown) < EXAMPLES:
            self.unknown.append(key.decode("utf-8", "replace") if isinstance(key, bytes) else key)


@dataclass(frozen=True, slots=True)
class _Read:
    """One entity to read: its line kind, id, the key the scan found and the commands."""

    kind: str  # a line kind
    name: str  # the record's collection; "" otherwise
    id: str
    part: str  # which of the entity's keys the scan found
    found: bytes
    keys: tuple[str, ...]

    def commands(self) -> list[tuple[Any, ...]]:
        pttls = [("PTTL", k) for k in self.keys]
        if self.kind == TASK:
            ranges: list[tuple[Any, ...]] = [("LRANGE", k, 0, -1) for k in self.keys[:3]]
            return [*ranges, ("HGETALL", self.keys[3]), *pttls]
        if self.kind == EVENTS:
            return [("XRANGE", self.keys[0], "-", "+"), ("HGETALL", self.keys[1]), *pttls]
        if self.kind == USER_INDEX:
            return [("SMEMBERS", self.keys[0])]
        if self.kind == AGENTS:
            return [("LRANGE", self.keys[0], 0, -1), *pttls]
        if self.kind == GRAPH:
            reads: list[tuple[Any, ...]] = [
                ("ZRANGEBYSCORE", key, "-inf", "+inf", "WITHSCORES")
                if part in GRAPH_ZSETS
                else ("HGETALL", key)
                for part, key in zip(kinds.GRAPH_PARTS, self.keys, strict=True)
            ]
            return [*reads, *pttls]
        return [("GET", self.keys[0]), *pttls]


def _plan(keys: KeySpace, key: bytes, report: ExportReport) -> _Read | None:
    """What to read for a scanned key, or None (left out, or not redistate's)."""
    try:
        kind, entity, part = keys.parse(key)
    except InvalidId:
        report.skip_unknown(key)
        return None
    owner = kinds.claim(kind, part)
    if owner is None:
        report.skip_unknown(key)  # a reserved kind's key no kind builds, a stray part
        return None
    line = _LINE.get(owner.name)
    carrier = kinds.TASK if owner is kinds.STEPS else owner  # steps: in the task's line
    if line is None or not carrier.applies(kinds.Op.EXPORT) or _memory(owner, part):
        report.not_exported += 1  # held leases, wake lists, write memories, staging
        return None
    if line == RECORD:
        return _Read(RECORD, kind, entity, part, key, (keys.record(kind, entity),))
    if line == TASK:
        return _Read(
            TASK, "", entity, part, key, (*keys.task_keys(entity), keys.task_steps(entity))
        )
    if line == EVENTS:
        both = (keys.events(entity), keys.events_anchor(entity))
        return _Read(EVENTS, "", entity, part, key, both)
    if line == USER_INDEX:
        return _Read(USER_INDEX, "", entity, part, key, (keys.user_index(entity),))
    if line == AGENTS:
        return _Read(AGENTS, "", entity, part, key, (keys.agent_session(entity),))
    if line == GRAPH:
        parts = tuple(keys.graph_thread(entity, p) for p in kinds.GRAPH_PARTS)
        return _Read(GRAPH, "", entity, part, key, parts)
    return _Read(FENCE, "", entity, part, key, (keys.fence(entity),))


def _memory(owner: kinds.Kind, part: str) -> bool:
    """Whether ``part`` is a write memory (``KeySpace.writes`` of the kind's main key)
    or a staging stream: a LangGraph thread has no main key, its "writes" is content."""
    return part == STAGING or (part == kinds.WRITES and "" in owner.parts)


def _ttl_at_start(pttl: int, read_ms: int, started_ms: int) -> int | None:
    """A PTTL reply made relative to the export's start: the time left then."""
    return None if pttl < 0 else pttl + (read_ms - started_ms)


def _pairs(reply: Any) -> list[tuple[bytes, Any]]:
    """A hash or WITHSCORES reply as pairs: RESP2 gives a flat list, RESP3 a map (a
    hash) or a list of pairs (a sorted set)."""
    if isinstance(reply, dict):
        return list(reply.items())
    if reply and isinstance(reply[0], list | tuple):
        return [(a, b) for a, b in reply]
    return list(zip(reply[::2], reply[1::2], strict=True))


def _score(raw: Any) -> int | float:
    value = float(raw)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def _first(read: _Read, parts: Sequence[str], present: Sequence[bool]) -> int | None:
    """The index of the key that writes the entity's line: the first present one, in
    ``parts`` order. None if that is not the key the scan found (it writes the line:
    an entity is read at each of its keys the scan finds, with no memory of the
    entities already written), or nothing is left."""
    first = next((i for i, p in enumerate(parts) if present[i]), None)
    if first is None or parts[first] != read.part:
        return None
    return first


def _task_line(read: _Read, reply: Any, ttl: Callable[[int], int | None]) -> dict[str, Any] | None:
    lists, steps, pttls = reply[:3], _pairs(reply[3]), reply[4:]
    present = [bool(lists[0]), bool(lists[1]), bool(lists[2]), bool(steps)]
    parts = [_TASK_PARTS[i] for i in _TASK_ORDER]
    first = _first(read, parts, [present[i] for i in _TASK_ORDER])
    if first is None:
        return None
    return {
        "kind": TASK,
        "id": read.id,
        "seq": newest_seq(lists[1]),
        "ttl_ms": ttl(int(pttls[_TASK_ORDER[first]])),
        "checkpoints": [b64(b) for b in lists[0]],
        "ids": [b64(e) for e in lists[1]],
        "log": [b64(d) for d in lists[2]],
        "steps": {bytes(n).decode("utf-8"): b64(r) for n, r in sorted(steps)},
    }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _events_line(
    read: _Read, reply: Any, ttl: Callable[[int], int | None]
) -> dict[str, Any] | None:
    entries, anchor, pttls = reply[0], _pairs(reply[1]), reply[2:]
    present = [int(pttls[0]) != -2, bool(anchor)]
    first = _first(read, _EVENT_PARTS, present)
    if first is None:
        return None
    events = []
    for eid, fields in entries:
        events.append([_text(eid), {_text(f): b64(v) for f, v in _pairs(fields)}])
    return {
        "kind": EVENTS,
        "id": read.id,
        "ttl_ms": ttl(int(pttls[first])),
        "anchor": {_text(f): b64(v) for f, v in anchor} if anchor else None,
        "events": events,
    }


def _graph_line(read: _Read, reply: Any, ttl: Callable[[int], int | None]) -> dict[str, Any] | None:
    contents, pttls = reply[:7], reply[7:]
    pairs = [_pairs(content) for content in contents]
    first = _first(read, kinds.GRAPH_PARTS, [bool(p) for p in pairs])
    if first is None:
        return None
    parts: dict[str, Any] = {}
    for part, found in zip(kinds.GRAPH_PARTS, pairs, strict=True):
        if part in GRAPH_ZSETS:
            parts[part] = [[b64(m), _score(s)] for m, s in found]
        else:
            parts[part] = {b64(f): b64(v) for f, v in sorted(found)}
    return {"kind": GRAPH, "id": read.id, "ttl_ms": ttl(int(pttls[first])), "parts": parts}


def _entity(read: _Read, reply: Any, read_ms: int, started_ms: int) -> dict[str, Any] | None:
    """The file line of one read entity; None if it is gone or not redistate's.

    Raises:
        IntegrityError: the keys hold values redistate did not write.
    """
    if any(isinstance(part, Exception) for part in reply):
        raise IntegrityError(f"{read.found!r:.200} holds an unexpected type of value")

    def ttl(pttl: int) -> int | None:
        return _ttl_at_start(pttl, read_ms, started_ms)

    if read.kind == TASK:
        return _task_line(read, reply, ttl)
    if read.kind == EVENTS:
        return _events_line(read, reply, ttl)
    if read.kind == GRAPH:
        return _graph_line(read, reply, ttl)
    if read.kind == USER_INDEX:
        owns = sorted(_text(m) for m in reply[0])
        return {"kind": USER_INDEX, "id": read.id, "owns": owns} if owns else None
    if read.kind == AGENTS:
        items, pttl = reply
        if not items:
            return None
        return {
            "kind": AGENTS,
            "id": read.id,
            "ttl_ms": ttl(int(pttl)),
            "items": [b64(i) for i in items],
        }
    value, pttl = reply
    if value is None:
        return None  # deleted or expired since the scan found it
    if read.kind == FENCE:
        if not value.isdigit():
            raise IntegrityError(f"{read.found!r:.200} is not a fence")
        return {"kind": FENCE, "id": read.id, "fence": int(value)}
    envelope = unpack(read.keys[0], value)  # IntegrityError if not a record
    return {
        "kind": RECORD,
        "collection": read.name,
        "id": read.id,
        "version": envelope.version,
        "ttl_ms": ttl(int(pttl)),
        "value": b64(value),
    }


def per_server(
    store: Store, items: Sequence[T], key: Callable[[T], str]
) -> list[tuple[Any, list[T]]]:
    """``items`` grouped by the server that holds ``key(item)``: the store's client, or
    on a cluster a plain client of each primary. One pipeline per group, so a batch
    costs a round trip per server."""
    groups: dict[int, tuple[Any, list[T]]] = {}
    for item in items:
        client = store._conn._node_client(key(item))
        groups.setdefault(id(client), (client, []))[1].append(item)
    return list(groups.values())


def _read_batch(store: Store, reads: list[_Read]) -> Iterator[tuple[_Read, Any, int]]:
    """Each entity's commands in its own MULTI/EXEC, all pipelined per server (on a
    cluster, per primary: every entity's keys share one slot)."""
    for client, members in per_server(store, reads, lambda r: r.keys[0]):
        pipe = client.pipeline(transaction=False)
        for read in members:
            pipe.execute_command("MULTI")
            for name, *args in read.commands():
                # The name as bytes: redis-py's reply callbacks (keyed by str names)
                # would parse the "QUEUED" reply as a stream or a hash.
                pipe.execute_command(name.encode(), *args)
            pipe.execute_command("EXEC")
        replies = pipe.execute(raise_on_error=False)
        read_ms = now_ms()
        at = 0
        for read in members:
            at += 2 + len(read.commands())
            reply = replies[at - 1]
            if isinstance(reply, Exception):  # the whole EXEC failed (MOVED, OOM...)
                raise translate(reply, store._conn.address) from reply
            yield read, reply, read_ms


def export_namespace(store: Store, sink: BinaryIO, progress: Progress = nothing) -> ExportReport:
    """Write every entity of ``store``'s namespace to ``sink``; ``progress(n)`` is called
    with the number of keys scanned since its last call."""
    keys = store.keys
    report = ExportReport(keys.namespace)
    started_ms = now_ms()
    exported_at = dt.datetime.fromtimestamp(started_ms / 1000, tz=dt.timezone.utc)
    header = {"format": FORMAT, "version": VERSION, "namespace": keys.namespace}
    sink.write(
        encode_line({**header, "exported_ms": started_ms, "exported_at": exported_at.isoformat()})
    )
    batch = Batch()
    pending: list[_Read] = []

    def flush() -> None:
        written = 0
        for read, reply, read_ms in _read_batch(store, pending):
            try:
                line = _entity(read, reply, read_ms, started_ms)
            except (IntegrityError, ValueError, TypeError, UnicodeDecodeError):
                report.skip_unknown(read.found)
                continue
            if line is not None:
                data = encode_line(line)
                written += len(data)
                sink.write(data)
                report.entities[line["kind"]] += 1
                report.steps += len(line.get("steps", ()))
        batch.adapt(len(pending), written)
        pending.clear()

    reported = 0
    for key in store._conn.scan(keys.namespace_pattern()):
        report.keys += 1
        if report.keys - reported >= PROGRESS_KEYS:  # a bar's update costs ~µs: not per key
            progress(report.keys - reported)
            reported = report.keys
        read = _plan(keys, key, report)
        if read is not None:
            pending.append(read)
            if len(pending) >= batch.size:
                flush()
    flush()
    progress(report.keys - reported)
    sink.write(encode_line({"kind": "end", "entities": sum(report.entities.values())}))
    return report
