"""Import: an export file into a namespace (the format: backup_format).

The whole file is checked first, against the store it goes to (backup_format.Limits:
the server's clock, read once, and the store's codec), then read again line by line:
each entity is written by its own script (lua/import_*.lua), the scripts pipelined per
server in batches, so client memory is bounded by a batch, not by the size of the file.
An import never deletes what the file does not replace: step records are merged (a
recorded step is never lost), user indexes are a union, and an event stream, an Agents
SDK session or a LangGraph thread that differs from the file's is refused unless
--force.
The second pass checks each line again before sending it, so a file changed between the
passes never writes a line that fails the checks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis.exceptions import NoScriptError

from .. import RedistateError, Store, kinds
from .._translate import translate
from ..keys import KeySpace
from ..scripts import Script, script
from .backup_export import EXAMPLES, Batch, per_server
from .backup_format import (
    AGENTS,
    EVENT_FIELDS,
    EVENTS,
    FENCE,
    FUTURE_ALLOWANCE_US,
    GRAPH,
    KINDS,
    RECORD,
    TASK,
    USER_INDEX,
    BadFile,
    Entity,
    Header,
    Limits,
    Progress,
    nothing,
    now_ms,
    plural,
    read_file,
)

__all__ = ["ImportReport", "import_call", "import_file"]


@dataclass
class ImportReport:
    """What an import wrote, and what it left as it was."""

    namespace: str
    imported: Counter[str] = field(default_factory=Counter)  # by line kind
    steps: int = 0  # step records written (absent in the store, or --force)
    refused: list[str] = field(default_factory=list)  # newer or other in the store (examples)
    refused_count: int = 0
    expired: int = 0  # TTL ran out since the export
    fences_kept: int = 0  # already at or above the file's value
    failed: list[str] = field(default_factory=list)  # server errors (examples)
    failed_count: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "imported": sum(self.imported.values()),
            **{plural(kind): self.imported[kind] for kind in KINDS},
            "steps": self.steps,
            "refused": self.refused_count,
            "refused_ids": self.refused,
            "expired": self.expired,
            "fences_kept": self.fences_kept,
            "failed": self.failed_count,
            "failures": self.failed,
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


_Call = tuple[Entity, Script, tuple[str, ...], tuple[Any, ...]]


def _run_batch(store: Store, calls: list[_Call], report: ImportReport, loaded: set[int]) -> None:
    """The scripts of a batch, pipelined per server; each is atomic on its own.
    ``loaded``: the servers (client ids) the scripts were loaded on, by this import."""
    for client, members in per_server(store, calls, lambda c: c[2][0]):
        if id(client) not in loaded:
            # Loaded up front: a batch of NOSCRIPT replies would each be sent again.
            for kind in KINDS:
                client.script_load(script(f"import_{kind}").source)
            loaded.add(id(client))
        pipe = client.pipeline(transaction=False)
        for _, run, keys, args in members:
            pipe.execute_command("EVALSHA", run.sha, len(keys), *keys, *args)
        replies = pipe.execute(raise_on_error=False)
        for (entity, run, keys, args), reply in zip(members, replies, strict=True):
            if isinstance(reply, NoScriptError):  # flushed since: a restart, a failover
                try:  # loads the script, then runs it (with the store's retries)
                    reply = store._conn.script(run, keys, args)
                except RedistateError as exc:
                    reply = exc
            _tally(report, entity, reply, store._conn.address)


def _tally(report: ImportReport, entity: Entity, reply: Any, address: str) -> None:
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


def import_file(
    store: Store,
    path: Path,
    *,
    namespace: str | None = None,
    force: bool = False,
    progress: Progress = nothing,
) -> ImportReport:
    """Import an export file into ``namespace`` (default: the file's), through
    ``store``'s connection. The whole file is checked first (its format, and each line
    against the store: backup_format.Limits): a bad line raises BadFile naming it, and
    nothing is written. ``progress(n)``: n more bytes read (the file is read twice).
    """
    seconds, micros = store._conn.idempotent("TIME")  # once: one bound for every line
    now_us = int(seconds) * 10**6 + int(micros)

    def limits(header: Header) -> Limits:
        keys = KeySpace(namespace or header.namespace)
        return Limits(keys, store.codec, now_us, store.signing)

    header: Header | None = None
    for item in read_file(path, progress, limits):
        if isinstance(item, Header):
            header = item
    if header is None:  # read_file raises first; this is for the type checker
        raise BadFile(f"{path}: no header line")
    keys = KeySpace(namespace or header.namespace)
    report = ImportReport(keys.namespace)
    pending: list[_Call] = []
    batch, pending_bytes, loaded = Batch(), 0, set[int]()
    for entity in read_file(path, progress, limits):
        if isinstance(entity, Header):
            continue
        ttl_ms = _time_left(entity, header.exported_ms, now_ms())
        if ttl_ms is None:
            report.expired += 1
            continue
        pending.append((entity, *import_call(keys, entity, ttl_ms, force)))
        pending_bytes += entity.size
        if len(pending) >= batch.size:
            _run_batch(store, pending, report, loaded)
            batch.adapt(len(pending), pending_bytes)
            pending, pending_bytes = [], 0
    _run_batch(store, pending, report, loaded)
    return report
