"""Export: every entity of a namespace to a file (the format: backup_format).

Reads SCAN batches (each entity's keys in one MULTI/EXEC, so a task's lists are a
consistent view) and writes each entity as it is read: client memory is bounded by a
batch, not by the number of keys.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Final, TypeVar

from .. import Store
from .._translate import translate
from ..envelope import unpack
from ..errors import IntegrityError, InvalidId
from ..keys import KeySpace
from .backup_format import (
    FORMAT,
    KINDS,
    VERSION,
    Progress,
    b64,
    encode_line,
    is_record_kind,
    newest_seq,
    nothing,
    now_ms,
)

__all__ = ["EXAMPLES", "Batch", "ExportReport", "export_namespace", "per_server"]

EXAMPLES: Final = 5  # ids listed in a report, at most
BATCH_BYTES: Final = 4 * 1024 * 1024  # aim of one read or write batch: bounds memory
MAX_BATCH: Final = 512
PROGRESS_KEYS: Final = 1000  # progress is reported in steps of this many keys

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
    entities: Counter[str] = field(default_factory=Counter)  # record / task / fence
    keys: int = 0  # keys the scan found in the namespace
    not_exported: int = 0  # held leases, wake lists, write memories
    event_streams: int = 0  # audit event streams: not in export format 1 yet
    user_indexes: int = 0  # what is registered to each user: not in format 1 yet
    framework_keys: int = 0  # LangGraph threads, Agents SDK sessions: not in format 1 yet
    unknown: list[str] = field(default_factory=list)  # keys redistate did not recognise
    unknown_count: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "entities": sum(self.entities.values()),
            **{f"{kind}s": self.entities[kind] for kind in KINDS},
            "keys": self.keys,
            "not_exported": self.not_exported,
            "event_streams_left_out": self.event_streams,
            "user_indexes_left_out": self.user_indexes,
            "framework_keys_left_out": self.framework_keys,
            "unknown": self.unknown_count,
            "unknown_keys": self.unknown,
        }

    def skip_unknown(self, key: bytes | str) -> None:
        self.unknown_count += 1
        if len(self.unknown) < EXAMPLES:
            self.unknown.append(key.decode("utf-8", "replace") if isinstance(key, bytes) else key)


@dataclass(frozen=True, slots=True)
class _Read:
    """One entity to read: its kind, id, the key the scan found and the commands."""

    kind: str  # record | task | fence
    name: str  # the record's collection; "" otherwise
    id: str
    part: str  # which of a task's keys the scan found
    found: bytes
    keys: tuple[str, ...]

    def commands(self) -> list[tuple[Any, ...]]:
        if self.kind == "task":
            ranges = [("LRANGE", k, 0, -1) for k in self.keys]
            return [*ranges, *(("PTTL", k) for k in self.keys)]
        return [("GET", self.keys[0]), ("PTTL", self.keys[0])]


def _plan(keys: KeySpace, key: bytes, report: ExportReport) -> _Read | None:
    """What to read for a scanned key, or None (left out, or not redistate's)."""
    try:
        kind, entity, part = keys.parse(key)
    except InvalidId:
        report.skip_unknown(key)
        return None
    if kind == "events":
        report.event_streams += 1  # streams and anchors: not in export format 1 yet
        return None
    if kind in ("graph", "agents"):
        report.framework_keys += 1  # the adapters' own shapes: not in format 1 yet
        return None
    if kind == "user" and part == "owns":
        report.user_indexes += 1
        return None
    if kind == "lock" or part in ("writes", "steps"):
        report.not_exported += 1  # held leases, wake lists, write memories, step records
        return None
    if kind == "task" and part in ("", "ids", "log"):
        return _Read("task", "", entity, part, key, keys.task_keys(entity))
    if kind == "fence" and not part:
        return _Read("fence", "", entity, part, key, (keys.fence(entity),))
    if is_record_kind(kind) and not part:
        return _Read("record", kind, entity, part, key, (keys.record(kind, entity),))
    report.skip_unknown(key)
    return None


def _ttl_at_start(pttl: int, read_ms: int, started_ms: int) -> int | None:
    """A PTTL reply made relative to the export's start: the time left then."""
    return None if pttl < 0 else pttl + (read_ms - started_ms)


def _entity(read: _Read, reply: Any, read_ms: int, started_ms: int) -> dict[str, Any] | None:
    """The file line of one read entity; None if it is gone or not redistate's.

    Raises:
        IntegrityError: the keys hold values redistate did not write.
    """
    if any(isinstance(part, Exception) for part in reply):
        raise IntegrityError(f"{read.found!r:.200} holds an unexpected type of value")
    if read.kind == "task":
        lists, pttls = reply[:3], reply[3:]
        # Read at each of its keys the scan finds; written at the first that exists,
        # in the order list, log, ids (no memory of the tasks already written).
        first = next((i for i in (0, 2, 1) if lists[i]), None)
        if first is None or ("", "ids", "log")[first] != read.part:
            return None
        return {
            "kind": "task",
            "id": read.id,
            "seq": newest_seq(lists[1]),
            "ttl_ms": _ttl_at_start(int(pttls[first]), read_ms, started_ms),
            "checkpoints": [b64(b) for b in lists[0]],
            "ids": [b64(e) for e in lists[1]],
            "log": [b64(d) for d in lists[2]],
        }
    value, pttl = reply
    if value is None:
        return None  # deleted or expired since the scan found it
    if read.kind == "fence":
        if not value.isdigit():
            raise IntegrityError(f"{read.found!r:.200} is not a fence")
        return {"kind": "fence", "id": read.id, "fence": int(value)}
    envelope = unpack(read.keys[0], value)  # IntegrityError if not a record
    return {
        "kind": "record",
        "collection": read.name,
        "id": read.id,
        "version": envelope.version,
        "ttl_ms": _ttl_at_start(int(pttl), read_ms, started_ms),
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
            for command in read.commands():
                pipe.execute_command(*command)
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
            except IntegrityError:
                report.skip_unknown(read.found)
                continue
            if line is not None:
                data = encode_line(line)
                written += len(data)
                sink.write(data)
                report.entities[line["kind"]] += 1
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
