"""rotate-keys for audit event streams (the source of redistate.events.rotate;
the loop is redistate.admin.rotate).

Events are rewritten after their chain is verified (``AsyncEvents.rewrite``): their
digests cover the encrypted payloads, so the chain is recomputed from the first
re-encrypted event (a digest of its end kept elsewhere must be taken anew); a chain
that does not verify is left as it is and named. The trim anchor is re-encoded with
its stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ..core import kinds
from ..core.errors import ConflictError, IntegrityError

if TYPE_CHECKING:
    from ..admin.handlers_async import Current, Found, RotateHandler
    from ..admin.reports import RotateReport
    from ..core.connection_async import AsyncConnection
    from ..store_async import AsyncStore

__all__ = ["ROTATE"]


async def _rotate_events(
    store: AsyncStore, conn: AsyncConnection, found: Found, current: Current, report: RotateReport
) -> None:
    entity = found.entity
    codec, aad = store.codec, store.keys.events(entity).encode("utf-8")

    def again(data: bytes) -> bytes | None:
        return None if current(data) else codec.encode(codec.decode(data, aad), aad)

    def payload(schema: int, data: bytes) -> tuple[int, bytes] | None:
        fresh = again(data)
        return None if fresh is None else (schema, fresh)

    try:
        report.events += await store.events.rewrite(entity, payload, again)
    except ConflictError:
        report.changed += 1  # appended or trimmed meanwhile: the next run rotates it
    except IntegrityError:
        report.unverified.append(store.keys.events(entity))


# The stream itself (its anchor is re-encoded with it; staging and the write memory
# hold nothing to rotate).
ROTATE: Final[Mapping[str, Mapping[str, RotateHandler]]] = {
    kinds.EVENTS.name: {"": _rotate_events},
}
