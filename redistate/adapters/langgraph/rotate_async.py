"""rotate-keys for the LangGraph store's namespaces (the source of
redistate.adapters.langgraph.rotate; the loop is redistate.admin.rotate).

Each item whose value is not under the primary key is re-encoded in place by
``core/lua/recode_fields.lua``, a page at a time, with its times and expiry kept; one
written or deleted meanwhile is left (counted as changed). Not rotated: LangGraph
threads (the saver's serializer packs them, not the store's codec).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ...core import kinds
from ...core.batching import pairs
from ...core.scripts import script
from .memory import recoded_items

if TYPE_CHECKING:
    from ...admin.handlers_async import Current, Found, RotateHandler
    from ...admin.reports import RotateReport
    from ...core.connection_async import AsyncConnection
    from ...store_async import AsyncStore

__all__ = ["ROTATE"]

_RECODE = script("recode_fields")
_PAGE: Final = 500  # items re-encoded per recode_fields call


async def _rotate_memory(
    store: AsyncStore, conn: AsyncConnection, found: Found, current: Current, report: RotateReport
) -> None:
    items = pairs(await conn.idempotent("HGETALL", found.key))
    triples, now = recoded_items(found.entity, items, store.codec, current)
    report.current += now
    for start in range(0, len(triples), 3 * _PAGE):
        page = triples[start : start + 3 * _PAGE]
        done = int(await conn.script(_RECODE, (found.key,), page))
        report.memory_items += done
        report.changed += len(page) // 3 - done


ROTATE: Final[Mapping[str, Mapping[str, RotateHandler]]] = {
    kinds.MEMORY.name: {"": _rotate_memory},
}
