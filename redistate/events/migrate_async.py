"""migrate for audit event streams (the source of redistate.events.migrate; the
loop is redistate.admin.migrate).

Events are rewritten after their chain verifies, the chain recomputed from the first
migrated event (``AsyncEvents.rewrite``); a stream appended to meanwhile is left for
the next run, a chain that does not verify is left as it is and named.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ..admin.handlers_async import EachEntity
from ..core import kinds
from ..core.errors import ConflictError, IntegrityError, SchemaError

if TYPE_CHECKING:
    from ..admin.handlers_async import Found, MigratorFactory
    from ..admin.reports import MigrateReport
    from ..core.connection_async import AsyncConnection
    from ..store_async import AsyncStore

__all__ = ["MIGRATE"]


async def _events(
    store: AsyncStore, conn: AsyncConnection, found: Found, report: MigrateReport
) -> None:
    key = store.keys.events(found.entity)
    try:
        report.events += await store.events.rewrite(
            found.entity, lambda schema, data: store.events.spec.migrated(key, schema, data)
        )
    except SchemaError:
        report.note_newer(key)
    except ConflictError:
        report.changed += 1
    except IntegrityError:
        report.unverified.append(key)


MIGRATE: Final[Mapping[str, MigratorFactory]] = {kinds.EVENTS.name: EachEntity.of(_events)}
