"""Export and import, the I/O (the source of redistate.admin.backup): one namespace to
and from a JSON-lines file (the format: backup_format; lines and calls: backup_lines
and each kind's backup.py, found by backup_codec).

Export reads SCAN batches, each entity's keys in one MULTI/EXEC (a task's lists and
step records, an event stream and its anchor, a LangGraph thread's seven keys are a
consistent view), and writes each entity as it is read. Import checks the whole file
first, against the store it goes to (backup_codec.Limits: the server's clock, read
once, and the store's codec), then reads it again line by line and writes each entity
with its own script (lua/import_*.lua in the kind's folder), the scripts of a batch
in one round trip per server (a LangGraph store namespace is announced to its
registry first: one more round trip, and again if a sweep was forgetting it). Both
stream: client memory is bounded by a batch, not by the number of keys or the size of
the file. An import never deletes what the file does not replace: step records are
merged, user indexes are a union, a store namespace keeps items the file does not
name, and an event stream, an Agents SDK session or a LangGraph thread that differs
from the file's is refused unless ``force``. The second pass checks each line again
before sending it, so a file changed between the passes never writes a line that
fails the checks.
Every command goes through the store's retrying connection.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Final

from ..core.batching import raise_first
from ..core.errors import IntegrityError, RedistateError
from ..core.keys import KeySpace
from .backup_format import (
    END,
    FORMAT,
    VERSION,
    BadFile,
    Entity,
    Header,
    Limits,
    Progress,
    encode_line,
    nothing,
    now_ms,
    read_file,
)
from .backup_lines import (
    ANNOUNCES,
    Batch,
    Read,
    again,
    aged,
    announcement,
    entity_line,
    import_call,
    plan,
    tally,
    time_left,
)
from .reports import ExportReport, ImportReport

if TYPE_CHECKING:
    from ..core.connection_async import AsyncConnection
    from ..store_async import AsyncStore

__all__ = ["export", "import_file"]

PROGRESS_KEYS: Final = 1000  # progress is reported in steps of this many keys


async def export(
    store: AsyncStore, conn: AsyncConnection, sink: BinaryIO, progress: Progress = nothing
) -> ExportReport:
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
    pending: list[Read] = []

    async def flush() -> None:
        written = 0
        replies = await conn.batch([(read.keys[0], read.commands()) for read in pending])
        read_ms = now_ms()
        for read, reply in zip(pending, replies, strict=True):
            try:
                line = entity_line(read, reply, read_ms, started_ms)
            except IntegrityError:
                report.skip_unknown(read.found)  # not a value redistate writes
                continue
            except (RedistateError, ValueError, TypeError, UnicodeDecodeError) as exc:
                report.skip_damaged(read.found, exc)
                continue
            if line is not None:
                data = encode_line(line)
                written += len(data)
                sink.write(data)
                read.codec.exported(report, line)
        batch.adapt(len(pending), written)
        pending.clear()

    reported = 0
    async for key in conn.scan(keys.namespace_pattern()):
        report.keys += 1
        if report.keys - reported >= PROGRESS_KEYS:  # a bar's update costs ~µs: not per key
            progress(report.keys - reported)
            reported = report.keys
        read = plan(keys, key, report)
        if read is not None:
            pending.append(read)
            if len(pending) >= batch.size:
                await flush()
    if pending:
        await flush()
    progress(report.keys - reported)
    sink.write(encode_line({"kind": END, "entities": sum(report.entities.values())}))
    return report


async def import_file(
    store: AsyncStore,
    conn: AsyncConnection,
    path: Path,
    *,
    namespace: str | None = None,
    force: bool = False,
    progress: Progress = nothing,
) -> ImportReport:
    """Import an export file into ``namespace`` (default: the file's). The whole file
    is checked first (its format, and each line against the store:
    backup_format.Limits): a bad line raises BadFile naming it, and nothing is written.
    ``progress(n)``: n more bytes read (the file is read twice).
    """
    seconds, micros = await conn.idempotent("TIME")  # once: one bound for every line
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
    pending: list[tuple[Entity, int]] = []
    batch, pending_bytes = Batch(), 0

    async def flush() -> None:
        todo = pending
        for _ in range(ANNOUNCES):
            # A kind whose registry is in another slot announces its entities first.
            calls = [
                (n, call)
                for n, (entity, _) in enumerate(todo)
                if (call := announcement(keys, entity)) is not None
            ]
            if calls:
                replies = await conn.scripts([call for _, call in calls])
                todo = list(todo)
                for (n, _), reply in zip(calls, raise_first(replies), strict=True):
                    todo[n] = (replace(todo[n][0], announced=int(reply)), todo[n][1])
            replies = await conn.scripts([import_call(keys, e, t, force) for e, t in todo])
            stale, landed = [], []
            for (entity, ttl_ms), reply in zip(todo, replies, strict=True):
                if again(entity, reply):
                    stale.append((entity, ttl_ms))  # a sweep was forgetting it: again
                else:
                    tally(report, entity, reply, store.address)
                    if calls and not isinstance(reply, Exception):
                        landed.append(entity)
            # Announced again once written: a sweep that forgot an announcement and
            # cleared its tomb just before the write is undone (one round trip).
            after = [call for e in landed if (call := announcement(keys, e)) is not None]
            if after:
                raise_first(await conn.scripts(after))
            if not stale:
                return
            todo = stale
        for entity, _ in todo:
            problem = RedistateError(f"swept from the registry {ANNOUNCES} times in a row")
            tally(report, entity, problem, store.address)

    for entity in read_file(path, progress, limits):
        if isinstance(entity, Header):
            continue
        now = now_ms()
        ttl_ms = time_left(entity, header.exported_ms, now)
        if ttl_ms is None:
            report.expired += 1
            continue
        entity = aged(entity, header.exported_ms, now)
        pending.append((entity, ttl_ms))
        pending_bytes += entity.size
        if len(pending) >= batch.size:
            await flush()
            batch.adapt(len(pending), pending_bytes)
            pending, pending_bytes = [], 0
    if pending:
        await flush()
    return report
