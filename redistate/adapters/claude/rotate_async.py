"""rotate-keys for Claude Agent SDK sessions (the source of
redistate.adapters.claude.rotate; the loop is redistate.admin.rotate).

Each entry and summary not under the primary key is re-encoded in place, bound to the
same place (spec.context, spec.summary_context): entries by ``lua/claude_recode.lua``
(the member replaced, its head kept), the summary by ``core/lua/recode_fields.lua``,
a page at a time; one written or deleted meanwhile is left (counted as changed).
Counters, times, uuid marks, subpaths and write memories hold nothing encoded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ...admin.handlers_async import recode_pages
from ...core import kinds
from ...core.scripts import script
from .spec import ENTRY, SEQ_DIGITS, context, summary_context

if TYPE_CHECKING:
    from ...admin.handlers_async import Current, Found, RotateHandler
    from ...admin.reports import RotateReport
    from ...core.connection_async import AsyncConnection
    from ...store_async import AsyncStore

__all__ = ["ROTATE"]

_FIELDS = script("recode_fields")
_ENTRIES = script("claude_recode")


async def _send(
    conn: AsyncConnection, key: str, flat: list[bytes], width: int, report: RotateReport
) -> None:
    lua = _FIELDS if width == 3 else _ENTRIES
    report.claude_values += await recode_pages(conn, lua, key, flat, width, report)


async def _rotate_summary(
    store: AsyncStore, conn: AsyncConnection, found: Found, current: Current, report: RotateReport
) -> None:
    data = await conn.idempotent("HGET", found.key, "sum")
    if data is None:
        return  # a session with subagent transcripts only: no summary
    if current(data):
        report.current += 1
        return
    where = summary_context(found.entity)
    fresh = store.codec.encode(store.codec.decode(data, where), where)
    await _send(conn, found.key, [b"sum", data, fresh], 3, report)


async def _rotate_entries(
    store: AsyncStore, conn: AsyncConnection, found: Found, current: Current, report: RotateReport
) -> None:
    flat: list[bytes] = []
    for member in await conn.idempotent("ZRANGE", found.key, 0, -1):
        member = bytes(member)
        cut = next(i for i, byte in enumerate(member) if byte < 0x20)  # the subpath's end
        if member[cut : cut + 1] != ENTRY:
            continue  # a uuid's mark
        head = member[: cut + 1 + SEQ_DIGITS]
        data = member[len(head) :]
        if current(data):
            report.current += 1
            continue
        where = context(found.entity, member[:cut])
        flat += [member, head + store.codec.encode(store.codec.decode(data, where), where)]
    await _send(conn, found.key, flat, 2, report)


ROTATE: Final[Mapping[str, Mapping[str, RotateHandler]]] = {
    kinds.CLAUDE.name: {"": _rotate_summary, "log": _rotate_entries},
}
