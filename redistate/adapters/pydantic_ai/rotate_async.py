"""rotate-keys for Pydantic AI conversations (the source of
redistate.adapters.pydantic_ai.rotate; the loop is redistate.admin.rotate).

A record's body, title and metadata, and each entry, not under the primary key are
re-encoded in place, bound to the same place (spec.record_context, spec.entry_context),
by ``core/lua/recode_fields.lua`` a page at a time; one written or deleted meanwhile
is left (counted as changed). Revisions, times, scopes and parents hold nothing
encoded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ...admin.handlers_async import recode_pages
from ...core import kinds
from ...core.batching import pairs
from ...core.scripts import script
from .spec import entry_context, record_context

if TYPE_CHECKING:
    from ...admin.handlers_async import Current, Found, RotateHandler
    from ...admin.reports import RotateReport
    from ...core.connection_async import AsyncConnection
    from ...store_async import AsyncStore

__all__ = ["ROTATE"]

_FIELDS = script("recode_fields")
_ENCODED: Final = {b"body": "body", b"title": "title", b"meta": "meta"}


async def _recode(
    store: AsyncStore,
    conn: AsyncConnection,
    key: str,
    found: list[tuple[bytes, bytes, bytes]],
    current: Current,
    report: RotateReport,
) -> None:
    """Re-encode (field, value, context) triples of one hash."""
    flat: list[bytes] = []
    for field, data, where in found:
        if current(data):
            report.current += 1
            continue
        flat += [field, data, store.codec.encode(store.codec.decode(data, where), where)]
    report.pydantic_values += await recode_pages(conn, _FIELDS, key, flat, 3, report)


async def _rotate_record(
    store: AsyncStore, conn: AsyncConnection, found: Found, current: Current, report: RotateReport
) -> None:
    fields = pairs(await conn.idempotent("HGETALL", found.key))
    triples = [
        (bytes(f), bytes(v), record_context(found.entity, _ENCODED[bytes(f)]))
        for f, v in fields
        if bytes(f) in _ENCODED
    ]
    await _recode(store, conn, found.key, triples, current, report)


async def _rotate_entries(
    store: AsyncStore, conn: AsyncConnection, found: Found, current: Current, report: RotateReport
) -> None:
    fields = pairs(await conn.idempotent("HGETALL", found.key))
    triples = [
        (bytes(f), bytes(v), entry_context(bytes(f).decode("utf-8", "surrogatepass")))
        for f, v in fields
    ]
    await _recode(store, conn, found.key, triples, current, report)


ROTATE: Final[Mapping[str, Mapping[str, RotateHandler]]] = {
    kinds.PYDANTIC_AI.name: {"": _rotate_record, "entries": _rotate_entries},
}
