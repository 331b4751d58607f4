"""Maintenance of one store's namespace as a library (the source of
redistate.admin.admin): ``store.admin.stats()``, ``store.admin.migrate()``... The CLI's
commands are these calls and a printout. Every command goes through the store's
retrying connection."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ..core import telemetry
from ..core.errors import InvalidId
from ..core.kinds import claim
from . import backup_async, migrate_async, rotate_async, stats_async
from .backup_format import Progress, nothing
from .reports import (
    ExportReport,
    ImportReport,
    KindStats,
    MigrateReport,
    RotateReport,
    Scanned,
)

if TYPE_CHECKING:
    from ..core.connection_async import AsyncConnection
    from ..store_async import AsyncStore

__all__ = ["AsyncAdmin"]


class AsyncAdmin:
    """Maintenance operations on ``store``'s namespace: each visits every kind of
    stored data the registry (redistate.core.kinds) declares."""

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

    async def export(self, sink: BinaryIO, progress: Progress = nothing) -> ExportReport:
        """Write every entity of the namespace, of every kind, to ``sink`` as JSON lines
        (redistate.admin.backup_format); ``progress(n)``: n more keys scanned. Each
        entity is read atomically; the file is not one point-in-time snapshot of the
        whole namespace. Left out: held leases, wake-up lists, write memories."""
        with telemetry.operation("export", "", self._store.keys.namespace):
            return await backup_async.export(self._store, self._conn, sink, progress)

    async def import_file(
        self,
        path: Path,
        *,
        namespace: str | None = None,
        force: bool = False,
        progress: Progress = nothing,
    ) -> ImportReport:
        """Import an export file into ``namespace`` (default: the file's). The whole
        file is checked against the store first: a bad line raises BadFile naming it
        and nothing is written. Newer (or, for streams, sessions and threads,
        different) stored entities are kept and counted as refused unless ``force``;
        nothing the file does not replace is deleted; fences are never lowered."""
        with telemetry.operation("import", "", self._store.keys.namespace):
            return await backup_async.import_file(
                self._store, self._conn, path, namespace=namespace, force=force, progress=progress
            )

    async def stats(
        self, samples: int = 200, expect_ttl: Iterable[str] = (), seed: int = 0
    ) -> list[KindStats]:
        """Keys, bytes and the largest entities per key kind; keys without a TTL in
        sessions and the ``expect_ttl`` kinds. Bytes: MEMORY USAGE of up to ``samples``
        keys per kind, extrapolated (payload bytes, "estimated", without it)."""
        with telemetry.operation("stats", "", self._store.keys.namespace):
            return await stats_async.collect(
                self._conn, self._store.keys, samples, expect_ttl, seed
            )

    async def migrate(self, advance: Callable[[int], None] = lambda n: None) -> MigrateReport:
        """Write back every record, checkpoint and audit event stored at an older
        schema, migrated by ``store.migrations``. Values newer than those steps are
        counted in ``newer`` and left as they are."""
        with telemetry.operation("migrate", "", self._store.keys.namespace):
            return await migrate_async.migrate(self._store, self._conn, advance)

    async def rotate_keys(self) -> RotateReport:
        """Re-encrypt every value the store's codec encodes with its primary key, and
        seal anew with the signing primary (redistate.admin.rotate says what is and is
        not rotated). Run it until it rewrites nothing; then the old keys can go.

        Raises:
            RedistateError: the store has neither an EncryptedCodec nor signing keys.
            IntegrityError: a value does not decrypt (nothing after it is rewritten).
        """
        with telemetry.operation("rotate_keys", "", self._store.keys.namespace):
            return await rotate_async.rotate(self._store, self._conn)
