"""Bring a namespace up to the schema this code writes; ``redistate migrate`` prints
the report (the source of redistate.admin.migrate).

The steps are the application's (``store.migrations``). Records are read in batches
(one round trip per server each); every one at an older schema is written back migrated
by compare-and-set (its TTL kept), so writes made meanwhile are never lost. Checkpoints
are rewritten in place (lua/checkpoint_migrate.lua), except one that deltas made against
its older schema still follow: a patch cannot be migrated, so it waits for the task's
next save (counted as held). Audit events are rewritten after their chain verifies, the
chain recomputed from the first migrated event (events.rewrite). Kinds the registry
marks as not migrated (redistate.core.kinds, Op.MIGRATE) are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from ..core.errors import ConflictError, IntegrityError, InvalidId, SchemaError
from ..core.kinds import COLLECTION, EVENTS, SESSION, TASK, USER, Kind, Op, claim
from ..core.scripts import script
from .reports import MigrateReport

if TYPE_CHECKING:
    from ..core.connection_async import AsyncConnection
    from ..store_async import AsyncStore

__all__ = ["HANDLED", "migrate"]

BATCH: Final = 500
_MIGRATE = script("checkpoint_migrate")
# The kinds migrate rewrites; the registry says why the others are left (a test holds
# this equal to every kind where Op.MIGRATE applies).
HANDLED: Final = frozenset({SESSION, USER, COLLECTION, TASK, EVENTS})


async def migrate(
    store: AsyncStore, conn: AsyncConnection, advance: Callable[[int], None] = lambda n: None
) -> MigrateReport:
    """Write back every record, checkpoint and event of ``store``'s namespace stored at
    an older schema; ``advance(n)``: n more entities done."""
    report = MigrateReport()
    batch: list[tuple[str, str, str]] = []  # records: (collection, id, key)

    async def flush() -> None:
        values = await conn.gets([key for _, _, key in batch])
        for (name, entity, key), raw in zip(batch, values, strict=True):
            records = store.records_of(name)
            try:
                if raw is not None and records.spec.outdated(key, raw):
                    report.upgraded += int(await records.upgrade(entity))
                else:
                    report.current += 1
            except SchemaError:
                report.note_newer(key)
        advance(len(batch))
        batch.clear()

    async for raw_key in conn.scan(store.keys.namespace_pattern()):
        try:
            name, entity, part = store.keys.parse(raw_key)
        except InvalidId:
            continue
        kind: Kind | None = claim(name, part)
        if kind is None or part or not kind.applies(Op.MIGRATE):
            continue
        if kind is TASK:
            await _task(store, conn, entity, report)
            advance(1)
        elif kind is EVENTS:
            await _events(store, entity, report)
            advance(1)
        else:
            batch.append((name, entity, raw_key.decode()))
            if len(batch) >= BATCH:
                await flush()
    if batch:
        await flush()
    return report


async def _task(
    store: AsyncStore, conn: AsyncConnection, task_id: str, report: MigrateReport
) -> None:
    spec = store.checkpoints.spec
    key, _, log_key = spec.task_keys(task_id)
    triples: list[bytes | str] = []
    for blob in (await conn.lranges((key, 0, -1)))[0]:
        try:
            found = spec.migrated_blob(key, blob)
        except SchemaError:
            report.note_newer(key)
            continue
        if found is not None:
            triples.extend(found)
    if triples:
        done = await conn.script(_MIGRATE, (key, log_key), (spec.schema, *triples))
        report.checkpoints += int(done[0])
        report.held += int(done[1])


async def _events(store: AsyncStore, entity: str, report: MigrateReport) -> None:
    key = store.keys.events(entity)
    try:
        report.events += await store.events.rewrite(
            entity, lambda schema, data: store.events.spec.migrated(key, schema, data)
        )
    except SchemaError:
        report.note_newer(key)
    except ConflictError:
        report.changed += 1
    except IntegrityError:
        report.unverified.append(key)
