"""migrate for Google ADK sessions (the source of redistate.adapters.adk.migrate; the
loop is redistate.admin.migrate).

Each event stored at an older schema than ``store.migrations`` reaches for
``"adk-events"`` is upgraded by the registered steps (on its JSON dict), checked by the
installed ADK's ``Event`` model when google-adk is importable, and put back in place by
``core/lua/recode_items.lua``: an event trimmed or rewritten meanwhile is left (counted
as changed). State values are the application's own and carry no schema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ...admin.handlers_async import EachEntity
from ...core import kinds
from ...core.errors import RedistateError, SchemaError
from ...core.scripts import script
from .spec import EVENTS, context, event_element, split_element

if TYPE_CHECKING:
    from ...admin.handlers_async import Found, MigratorFactory
    from ...admin.reports import MigrateReport
    from ...core.connection_async import AsyncConnection
    from ...store_async import AsyncStore

__all__ = ["MIGRATE"]

_ITEMS = script("recode_items")
_PAGE: Final = 500  # events put back per call


def _validator() -> Callable[[Any], object] | None:
    try:  # an operator's machine may run migrate without ADK: steps still apply
        from google.adk.events.event import Event
    except ImportError:
        return None
    return Event.model_validate


async def _session(
    store: AsyncStore, conn: AsyncConnection, found: Found, report: MigrateReport
) -> None:
    key = store.keys.adk_session(found.entity, "events")
    where, target = context("event", found.entity, ""), store.migrations.current(EVENTS)
    validate = _validator()
    flat: list[bytes] = []
    for n, element in enumerate(await conn.idempotent("LRANGE", key, 0, -1)):
        element = bytes(element)
        name = f"{key} [{n}]"
        try:
            at, schema, data = split_element(element)
            if schema == target:
                continue
            value = store.migrations.upgrade(EVENTS, schema, store.codec.decode(data, where), name)
            if validate is not None:
                validate(value)  # ADK would refuse to read it: leave it, and say so
            fresh = store.codec.encode(value, where)
            if len(fresh) > store._max_bytes:
                raise ValueError(f"{len(fresh)} bytes, over the limit {store._max_bytes}")
        except SchemaError:
            report.note_newer(name)
            continue
        except (RedistateError, ValueError) as exc:  # pydantic's ValidationError too
            report.note_invalid(f"{name}: {' '.join(str(exc).split()):.200}")
            continue
        flat += [element, event_element(at, target, fresh)]
    for start in range(0, len(flat), 2 * _PAGE):
        page = flat[start : start + 2 * _PAGE]
        done = int(await conn.script(_ITEMS, (key,), page))
        report.adk_events += done
        report.changed += len(page) // 2 - done


MIGRATE: Final[Mapping[str, MigratorFactory]] = {kinds.ADK.name: EachEntity.of(_session)}
