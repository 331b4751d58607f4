"""rotate-keys for Google ADK sessions, users' and apps' state (the source of
redistate.adapters.adk.rotate; the loop is redistate.admin.rotate).

Each state value and event not under the primary key is re-encoded in place, bound to
the same place (spec.context): state fields by ``core/lua/recode_fields.lua``, events by
``core/lua/recode_items.lua``, a page at a time; one written meanwhile is left (counted
as changed). Times, indexes and write memories hold nothing encoded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ...admin.handlers_async import recode_pages
from ...core import kinds
from ...core.batching import pairs
from ...core.scripts import script
from .spec import LAST, STATE, context, split_element

if TYPE_CHECKING:
    from ...admin.handlers_async import Current, Found, RotateHandler
    from ...admin.reports import RotateReport
    from ...core.codec import Codec
    from ...core.connection_async import AsyncConnection
    from ...store_async import AsyncStore

__all__ = ["ROTATE"]

_FIELDS = script("recode_fields")
_ITEMS = script("recode_items")


def _recode(codec: Codec, data: bytes, where: bytes) -> bytes:
    return codec.encode(codec.decode(data, where), where)


async def _send(
    conn: AsyncConnection, key: str, flat: list[bytes], width: int, report: RotateReport
) -> None:
    lua = _FIELDS if width == 3 else _ITEMS
    report.adk_values += await recode_pages(conn, lua, key, flat, width, report)


def _state_handler(scope: str, prefix: bytes) -> RotateHandler:
    async def rotate(
        store: AsyncStore,
        conn: AsyncConnection,
        found: Found,
        current: Current,
        report: RotateReport,
    ) -> None:
        triples: list[bytes] = []
        for name, data in pairs(await conn.idempotent("HGETALL", found.key)):
            if name == LAST or not name.startswith(prefix):
                continue  # a time: nothing encoded
            if current(data):
                report.current += 1
                continue
            key = name[len(prefix) :].decode("utf-8", "surrogatepass")
            where = context(scope, found.entity, key)
            triples += [name, data, _recode(store.codec, data, where)]
        await _send(conn, found.key, triples, 3, report)

    return rotate


async def _rotate_events(
    store: AsyncStore, conn: AsyncConnection, found: Found, current: Current, report: RotateReport
) -> None:
    where = context("event", found.entity, "")
    pairs_: list[bytes] = []
    for element in await conn.idempotent("LRANGE", found.key, 0, -1):
        element = bytes(element)
        _, _, data = split_element(element)
        if current(data):
            report.current += 1
            continue
        head = element[: len(element) - len(data)]  # "<timestamp>:<schema>:"
        pairs_ += [element, head + _recode(store.codec, data, where)]
    await _send(conn, found.key, pairs_, 2, report)


ROTATE: Final[Mapping[str, Mapping[str, RotateHandler]]] = {
    kinds.ADK.name: {"": _state_handler("session", STATE), "events": _rotate_events},
    kinds.ADK_USER.name: {"": _state_handler("user", b"")},
    kinds.ADK_APP.name: {"": _state_handler("app", b"")},
}
