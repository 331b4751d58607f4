"""Export and import, the pure half: what to read for each scanned key and the file
line it becomes, and the script call that imports each checked line (the format:
backup_format; the I/O: backup_async). What a scanned key belongs to is the kind
registry's answer (redistate.core.kinds). Left out of a file: held leases, lease wake-up
lists, write memories and the staging stream of an event rewrite in progress.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..core import kinds
from ..core._translate import translate
from ..core.envelope import unpack
from ..core.errors import IntegrityError, InvalidId, RedistateError
from ..core.keys import KeySpace
from ..core.scripts import Script, script
from .backup_format import (
    AGENTS,
    EVENT_FIELDS,
    EVENTS,
    FENCE,
    FUTURE_ALLOWANCE_US,
    GRAPH,
    GRAPH_ZSETS,
    RECORD,
    TASK,
    USER_INDEX,
    Entity,
    b64,
    newest_seq,
)
from .reports import EXAMPLES, ExportReport, ImportReport

__all__ = ["Batch", "Read", "entity_line", "import_call", "plan", "tally", "time_left"]

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


class Batch:
    """How many entities one round trip carries: grows while batches are small, shrinks
    after a large one, so a batch holds about BATCH_BYTES whatever the entity sizes."""

    def __init__(self) -> None:
        self.size = 64

    def adapt(self, count: int, nbytes: int) -> None:
        per = max(1, nbytes // max(1, count))
        self.size = max(1, min(MAX_BATCH, BATCH_BYTES // per))


@dataclass(frozen=True, slots=True)
class Read:
    """One entity to read: its line kind, id, the key the scan found and the commands."""

    kind: str  # a line kind
    name: str  # the record's collection; "" otherwise
    id: str
    part: str  # which of the entity's keys the scan found
    found: bytes
    keys: tuple[str, ...]

    def commands(self) -> list[tuple[Any, ...]]:
        """The commands that read the entity, in one MULTI/EXEC. Their names are bytes:
        redis-py's reply callbacks (keyed by str names) would parse the "QUEUED" reply
        as a stream or a hash."""
        return [(name.encode(), *args) for name, *args in self._commands()]

    def _commands(self) -> list[tuple[Any, ...]]:
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


def plan(keys: KeySpace, key: bytes, report: ExportReport) -> Read | None:
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
        return Read(RECORD, kind, entity, part, key, (keys.record(kind, entity),))
    if line == TASK:
        return Read(TASK, "", entity, part, key, (*keys.task_keys(entity), keys.task_steps(entity)))
    if line == EVENTS:
        both = (keys.events(entity), keys.events_anchor(entity))
        return Read(EVENTS, "", entity, part, key, both)
    if line == USER_INDEX:
        return Read(USER_INDEX, "", entity, part, key, (keys.user_index(entity),))
    if line == AGENTS:
        return Read(AGENTS, "", entity, part, key, (keys.agent_session(entity),))
    if line == GRAPH:
        parts = tuple(keys.graph_thread(entity, p) for p in kinds.GRAPH_PARTS)
        return Read(GRAPH, "", entity, part, key, parts)
    return Read(FENCE, "", entity, part, key, (keys.fence(entity),))


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


def _first(read: Read, parts: Sequence[str], present: Sequence[bool]) -> int | None:
    """The index of the key that writes the entity's line: the first present one, in
    ``parts`` order. None if that is not the key the scan found (it writes the line:
    an entity is read at each of its keys the scan finds, with no memory of the
    entities already written), or nothing is left."""
    first = next((i for i, p in enumerate(parts) if present[i]), None)
    if first is None or parts[first] != read.part:
        return None
    return first


def _task_line(read: Read, reply: Any, ttl: Callable[[int], int | None]) -> dict[str, Any] | None:
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


def _events_line(read: Read, reply: Any, ttl: Callable[[int], int | None]) -> dict[str, Any] | None:
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


def _graph_line(read: Read, reply: Any, ttl: Callable[[int], int | None]) -> dict[str, Any] | None:
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


def entity_line(read: Read, reply: Any, read_ms: int, started_ms: int) -> dict[str, Any] | None:
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


def import_call(
    keys: KeySpace, entity: Entity, ttl_ms: int, force: bool
) -> tuple[Script, tuple[str, ...], tuple[Any, ...]]:
    """(script, KEYS, ARGV) that imports ``entity`` into ``keys``' namespace with a TTL
    of ``ttl_ms`` (0: none). Every key is in the entity's hash slot."""
    flag = 1 if force else 0
    run = script(f"import_{entity.kind}")
    if entity.kind == RECORD:
        args: tuple[Any, ...] = (entity.data[0], ttl_ms, flag)
        return run, (keys.record(entity.name, entity.id),), args
    if entity.kind == TASK:
        blobs, entries = entity.counts
        checkpoints = entity.data[: blobs + entries]
        steps = [value for pair in entity.steps for value in pair]
        log = entity.data[blobs + entries :]
        args = (ttl_ms, flag, blobs, entries, len(entity.steps), *checkpoints, *steps, *log)
        task = (*keys.task_keys(entity.id), keys.task_steps(entity.id))
        return run, task, args
    if entity.kind == EVENTS:
        anchor = [value for pair in entity.anchor for value in pair]
        rows = [
            value
            for eid, fields in entity.events
            for value in (eid, *(fields[name.encode()] for name in EVENT_FIELDS))
        ]
        both = (keys.events(entity.id), keys.events_anchor(entity.id))
        return run, both, (ttl_ms, flag, len(entity.anchor), *anchor, *rows)
    if entity.kind == USER_INDEX:
        return run, (keys.user_index(entity.id),), entity.data
    if entity.kind == AGENTS:
        return run, (keys.agent_session(entity.id),), (ttl_ms, flag, *entity.data)
    if entity.kind == GRAPH:
        thread = tuple(keys.graph_thread(entity.id, part) for part in kinds.GRAPH_PARTS)
        pairs = [value for part in entity.parts for pair in part for value in pair]
        return run, thread, (ttl_ms, flag, *(len(part) for part in entity.parts), *pairs)
    allowance_ms = FUTURE_ALLOWANCE_US // 1000
    return run, (keys.fence(entity.id),), (*entity.data, allowance_ms)


def _time_left(entity: Entity, exported_ms: int, now: int) -> int | None:
    """TTL to set now (0: none); None if it ran out since the export. A clock behind
    the exporter's never lengthens a TTL."""
    if entity.ttl_ms is None:
        return 0
    left = entity.ttl_ms - max(0, now - exported_ms)
    return left if left > 0 else None


def time_left(entity: Entity, exported_ms: int, now: int) -> int | None:
    """TTL to set now (0: none); None if it ran out since the export. A clock behind
    the exporter's never lengthens a TTL."""
    if entity.ttl_ms is None:
        return 0
    left = entity.ttl_ms - max(0, now - exported_ms)
    return left if left > 0 else None


def tally(report: ImportReport, entity: Entity, reply: Any, address: str) -> None:
    if isinstance(reply, Exception):
        report.failed_count += 1
        if len(report.failed) < EXAMPLES:
            problem = reply if isinstance(reply, RedistateError) else translate(reply, address)
            report.failed.append(f"{entity.label}: {problem}")
        return
    if entity.kind == TASK:
        report.steps += int(reply[2])  # written even when the lists are refused
    if int(reply[0]) == 1:
        report.imported[entity.kind] += 1
    elif entity.kind == FENCE:
        report.fences_kept += 1
    else:
        report.refused_count += 1
        if len(report.refused) < EXAMPLES:
            report.refused.append(entity.label)
