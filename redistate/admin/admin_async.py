"""Maintenance of one store's namespace as a library (the source of
redistate.admin.admin): ``store.admin.stats()``, ``store.admin.migrate()``... The CLI's
commands are these calls and a printout. Every command goes through the store's
retrying connection."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING

from ..errors import InvalidId
from ..kinds import claim
from . import migrate_async, rotate_async, stats_async
from .reports import KindStats, MigrateReport, RotateReport, Scanned

if TYPE_CHECKING:
    from .._async._client import AsyncConnection
    from .._async.store import AsyncStore

__all__ = ["AsyncAdmin"]


class AsyncAdmin:
    """Maintenance operations on ``store``'s namespace: each visits every kind of
    stored data the registry (redistate.kinds) declares."""

    __slots__ = ("_conn", "_store")

    def __init__(self, store: AsyncStore, conn: AsyncConnection) -> None:
        self._store = store
        self._conn = conn

    async def scan(self) -> AsyncIterator[Scanned]:
        """Every key of the namespace (SCAN on every primary), parsed; a key that is
        not one redistate builds comes with kind None and its whole text as id."""
        keys = self._store.keys
        async for key in self._conn.scan(keys.namespace_pattern()):
            try:
                name, entity, part = keys.parse(key)
            except InvalidId:
                yield Scanned(key, None, "", key.decode("utf-8", "replace"), "")
                continue
            yield Scanned(key, claim(name, part), name, entity, part)

    async def stats(
        self, samples: int = 200, expect_ttl: Iterable[str] = (), seed: int = 0
    ) -> list[KindStats]:
        """Keys, bytes and the largest entities per key kind; keys without a TTL in
        sessions and the ``expect_ttl`` kinds. Bytes: MEMORY USAGE of up to ``samples``
        keys per kind, extrapolated (payload bytes, "estimated", without it)."""
        return await stats_async.collect(self._conn, self._store.keys, samples, expect_ttl, seed)

    async def migrate(self, advance: Callable[[int], None] = lambda n: None) -> MigrateReport:
        """Write back every record, checkpoint and audit event stored at an older
        schema, migrated by ``store.migrations``. Values newer than those steps are
        counted in ``newer`` and left as they are."""
        return await migrate_async.migrate(self._store, self._conn, advance)

    async def rotate_keys(self) -> RotateReport:
        """Re-encrypt every value the store's codec encodes with its primary key, and
        seal anew with the signing primary (redistate.admin.rotate says what is and is
        not rotated). Run it until it rewrites nothing; then the old keys can go.

        Raises:
            RedistateError: the store has neither an EncryptedCodec nor signing keys.
            IntegrityError: a value does not decrypt (nothing after it is rewritten).
        """
        return await rotate_async.rotate(self._store, self._conn)
