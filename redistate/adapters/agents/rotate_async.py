"""rotate-keys for OpenAI Agents SDK sessions (the source of
redistate.adapters.agents.rotate; the loop is redistate.admin.rotate).

Items not under the primary key are re-encoded in place by ``core/lua/recode_items.lua``,
a page at a time; one removed meanwhile is left (counted as changed). Not rotated: the
reply a pop keeps in its write memory for a resend (for the retry window only).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ...core import kinds
from ...core.scripts import script
from .recode import recoded_items
from .spec import AgentsRecodeArgs, AgentsRecodeReply

if TYPE_CHECKING:
    from ...admin.handlers_async import Current, Found, RotateHandler
    from ...admin.reports import RotateReport
    from ...core.connection_async import AsyncConnection
    from ...store_async import AsyncStore

__all__ = ["ROTATE"]

_AGENTS = script("recode_items").replying(AgentsRecodeReply.parse)
_PAGE: Final = 500  # items re-encoded per recode_items call


async def _rotate_agents(
    store: AsyncStore, conn: AsyncConnection, found: Found, current: Current, report: RotateReport
) -> None:
    key = found.key
    items: list[bytes] = await conn.idempotent("LRANGE", key, 0, -1)
    pairs, now = recoded_items(key, items, store.codec, current)
    report.current += now
    # Only the item list: its write memory (<key>:writes) is another part, not visited.
    for start in range(0, len(pairs), 2 * _PAGE):
        page = pairs[start : start + 2 * _PAGE]
        done = (await conn.script(_AGENTS, (key,), AgentsRecodeArgs(tuple(page)).argv())).replaced
        report.agent_items += done
        report.changed += len(page) // 2 - done


ROTATE: Final[Mapping[str, Mapping[str, RotateHandler]]] = {
    kinds.AGENTS.name: {"": _rotate_agents},
}
