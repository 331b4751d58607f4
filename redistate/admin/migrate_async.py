"""Bring a namespace up to the schema this code writes; ``redistate migrate`` prints
the report (the source of redistate.admin.migrate).

The steps are the application's (``store.migrations``). This is the loop: it scans the
namespace and hands each main key to its kind's Migrator, from the kind's own folder,
``<Kind.home>/migrate_async.py`` (``MIGRATE[kind.name]``, see redistate.admin.handlers):
records are upgraded in batches by compare-and-set, checkpoints and event streams one
at a time. Kinds the registry marks as not migrated (redistate.core.kinds, Op.MIGRATE)
are left as they are.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Final

from ..core.errors import InvalidId
from ..core.kinds import Kind, Op, claim
from .handlers_async import Advance, Found, Migrator
from .reports import MigrateReport

if TYPE_CHECKING:
    from ..core.connection_async import AsyncConnection
    from ..store_async import AsyncStore
    from .handlers_async import MigratorFactory

__all__ = ["factory", "migrate"]

# The module of a kind's folder that holds its Migrator (the sync twin: its sync one).
_MIGRATE_MODULE: Final = "migrate_async"


@cache
def factory(kind: Kind) -> MigratorFactory:
    """What migrates ``kind``: ``<kind.home>/migrate_async.py``'s ``MIGRATE[kind.name]``.

    Raises:
        KeyError: the kind's folder has no Migrator for it.
    """
    module = importlib.import_module(f"..{kind.home}.{_MIGRATE_MODULE}", __package__)
    table: Mapping[str, MigratorFactory] = module.MIGRATE
    return table[kind.name]


async def migrate(
    store: AsyncStore, conn: AsyncConnection, advance: Advance = lambda n: None
) -> MigrateReport:
    """Write back every record, checkpoint and event of ``store``'s namespace stored at
    an older schema; ``advance(n)``: n more entities done."""
    report = MigrateReport()
    # One Migrator per factory: kinds that share a factory share it (and its batch).
    migrators: dict[MigratorFactory, Migrator] = {}
    async for raw_key in conn.scan(store.keys.namespace_pattern()):
        try:
            name, entity, part = store.keys.parse(raw_key)
        except InvalidId:
            continue
        kind: Kind | None = claim(name, part)
        if kind is None or part or not kind.applies(Op.MIGRATE):
            continue
        make = factory(kind)
        migrator = migrators.get(make)
        if migrator is None:
            migrator = migrators[make] = make(store, conn, report, advance)
        await migrator.add(Found(name, entity, raw_key.decode()))
    for migrator in migrators.values():
        await migrator.flush()
    return report
