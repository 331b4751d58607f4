"""What the rotate-keys and migrate loops call in each kind's folder (the source of
redistate.admin.handlers).

A kind's folder (``Kind.home``) holds its handlers: ``<home>/rotate_async.py`` exposes
``ROTATE[kind.name][part]``, a :data:`RotateHandler` per part of the kind's keys that
holds encoded values; ``<home>/migrate_async.py`` exposes ``MIGRATE[kind.name]``, a
:data:`MigratorFactory`. The loops (redistate.admin.rotate, redistate.admin.migrate)
scan, claim each key's kind, import the folder's module and call these.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol, TypeAlias

if TYPE_CHECKING:
    from ..core.connection_async import AsyncConnection
    from ..core.scripts import Script
    from ..store_async import AsyncStore
    from .reports import MigrateReport, RotateReport

__all__ = [
    "Advance",
    "Current",
    "EachEntity",
    "EntityMigration",
    "Found",
    "Migrator",
    "MigratorFactory",
    "RotateHandler",
    "recode_pages",
]

PAGE: Final = 500  # values a recode script re-encodes per call


@dataclass(frozen=True, slots=True)
class Found:
    """A scanned key, parsed: its key kind (a collection's own name), entity id, key."""

    kind: str
    entity: str
    key: str


Current = Callable[[bytes], bool]  # whether a value is under the primary (counts it if not)
Advance = Callable[[int], None]  # n more entities done (migrate's progress)

# Quoted: the store, connection and reports are imported for types only.
RotateHandler: TypeAlias = (
    "Callable[[AsyncStore, AsyncConnection, Found, Current, RotateReport], Awaitable[None]]"
)
"""Re-encrypts (and re-seals) one key: counts what it rewrote, found current or found
changed meanwhile in the report."""


async def recode_pages(
    conn: AsyncConnection,
    lua: Script,
    key: str,
    flat: Sequence[bytes],
    width: int,
    report: RotateReport,
) -> int:
    """Send ``flat`` (``width`` arguments per value: what a recode script such as
    ``recode_fields`` takes) to ``lua`` on ``key``, a page at a time; count the values
    changed meanwhile (not replaced) in ``report``. Returns how many were replaced."""
    replaced = 0
    for start in range(0, len(flat), width * PAGE):
        page = flat[start : start + width * PAGE]
        done = int(await conn.script(lua, (key,), page))
        replaced += done
        report.changed += len(page) // width - done
    return replaced


class Migrator(Protocol):
    """Migrates the main keys of one kind (or of kinds sharing it) as the scan finds
    them: ``add`` each, then ``flush`` once at the end; calls ``advance`` for each
    entity done."""

    async def add(self, found: Found) -> None: ...

    async def flush(self) -> None: ...


MigratorFactory: TypeAlias = (
    "Callable[[AsyncStore, AsyncConnection, MigrateReport, Advance], Migrator]"
)
"""Makes a kind's Migrator for one run. Kinds whose MIGRATE entries are the same
factory share one Migrator (the record kinds: one batch for all)."""

EntityMigration: TypeAlias = (
    "Callable[[AsyncStore, AsyncConnection, Found, MigrateReport], Awaitable[None]]"
)


class EachEntity:
    """A Migrator that migrates each entity when it is found, one at a time:
    ``MIGRATE = {kind.name: EachEntity.of(function)}``."""

    __slots__ = ("_advance", "_conn", "_migrate", "_report", "_store")

    def __init__(
        self,
        migrate: EntityMigration,
        store: AsyncStore,
        conn: AsyncConnection,
        report: MigrateReport,
        advance: Advance,
    ) -> None:
        self._migrate = migrate
        self._store, self._conn, self._report, self._advance = store, conn, report, advance

    @staticmethod
    def of(migrate: EntityMigration) -> MigratorFactory:
        """The factory of EachEntity migrators calling ``migrate``."""

        def factory(
            store: AsyncStore, conn: AsyncConnection, report: MigrateReport, advance: Advance
        ) -> Migrator:
            return EachEntity(migrate, store, conn, report, advance)

        return factory

    async def add(self, found: Found) -> None:
        await self._migrate(self._store, self._conn, found, self._report)
        self._advance(1)

    async def flush(self) -> None:
        pass  # nothing held back
