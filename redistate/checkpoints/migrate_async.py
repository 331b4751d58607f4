"""migrate for task checkpoints (the source of redistate.checkpoints.migrate;
the loop is redistate.admin.migrate).

Checkpoints are rewritten in place (``lua/checkpoint_migrate.lua``), except one that
deltas made against its older schema still follow: a patch cannot be migrated, so it
waits for the task's next save (counted as held).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ..admin.handlers_async import EachEntity
from ..core import kinds
from ..core.errors import SchemaError
from ..core.scripts import script
from .spec import CheckpointMigrateArgs, CheckpointMigrateReply

if TYPE_CHECKING:
    from ..admin.handlers_async import Found, MigratorFactory
    from ..admin.reports import MigrateReport
    from ..core.connection_async import AsyncConnection
    from ..store_async import AsyncStore

__all__ = ["MIGRATE"]

_MIGRATE = script("checkpoint_migrate").replying(CheckpointMigrateReply.parse)


async def _task(
    store: AsyncStore, conn: AsyncConnection, found: Found, report: MigrateReport
) -> None:
    spec = store.checkpoints.spec
    key, _, log_key = spec.task_keys(found.entity)
    triples: list[bytes | str] = []
    for blob in (await conn.lranges((key, 0, -1)))[0]:
        try:
            fresh = spec.migrated_blob(key, blob)
        except SchemaError:
            report.note_newer(key)
            continue
        if fresh is not None:
            triples.extend(fresh)
    if triples:
        args = CheckpointMigrateArgs(spec.schema, tuple(triples))
        done = await conn.script(_MIGRATE, (key, log_key), args.argv())
        report.checkpoints += done.replaced
        report.held += done.held


MIGRATE: Final[Mapping[str, MigratorFactory]] = {kinds.TASK.name: EachEntity.of(_task)}
