"""migrate for records: sessions, user profiles and collection records
(the source of redistate.records.migrate; the loop is redistate.admin.migrate).

Records are read in batches (one round trip per server each); every one at an older
schema is written back migrated by compare-and-set (its TTL kept), so writes made
meanwhile are never lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ..core import kinds
from ..core.errors import SchemaError

if TYPE_CHECKING:
    from ..admin.handlers_async import Advance, Found, MigratorFactory
    from ..admin.reports import MigrateReport
    from ..core.connection_async import AsyncConnection
    from ..store_async import AsyncStore

__all__ = ["BATCH", "MIGRATE"]

BATCH: Final = 500  # records read per round trip


class _Upgrades:
    """Records of every record kind, upgraded a batch at a time."""

    __slots__ = ("_advance", "_batch", "_conn", "_report", "_store")

    def __init__(
        self, store: AsyncStore, conn: AsyncConnection, report: MigrateReport, advance: Advance
    ) -> None:
        self._store, self._conn, self._report, self._advance = store, conn, report, advance
        self._batch: list[Found] = []

    async def add(self, found: Found) -> None:
        self._batch.append(found)
        if len(self._batch) >= BATCH:
            await self.flush()

    async def flush(self) -> None:
        batch, report = self._batch, self._report
        if not batch:
            return
        values = await self._conn.gets([found.key for found in batch])
        for found, raw in zip(batch, values, strict=True):
            records = self._store.records_of(found.kind)
            try:
                if raw is not None and records.spec.outdated(found.key, raw):
                    report.upgraded += int(await records.upgrade(found.entity))
                else:
                    report.current += 1
            except SchemaError:
                report.note_newer(found.key)
        self._advance(len(batch))
        batch.clear()


# One factory for the three: they share one batch.
MIGRATE: Final[Mapping[str, MigratorFactory]] = {
    kinds.SESSION.name: _Upgrades,
    kinds.USER.name: _Upgrades,
    kinds.COLLECTION.name: _Upgrades,
}
