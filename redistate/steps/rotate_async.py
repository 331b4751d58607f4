"""rotate-keys for durable step records (the source of redistate.steps.rotate;
the loop is redistate.admin.rotate).

Each step result not under the primary key is re-encoded in place by
``core/lua/recode_fields.lua``; one replaced meanwhile is left (counted as changed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ..core import kinds
from ..core.scripts import script
from .spec import StepRecodeArgs, StepRecodeReply

if TYPE_CHECKING:
    from ..admin.handlers_async import Current, Found, RotateHandler
    from ..admin.reports import RotateReport
    from ..core.connection_async import AsyncConnection
    from ..store_async import AsyncStore

__all__ = ["ROTATE"]

_STEPS = script("recode_fields").replying(StepRecodeReply.parse)


async def _rotate_steps(
    store: AsyncStore, conn: AsyncConnection, found: Found, current: Current, report: RotateReport
) -> None:
    key = found.key
    spec = store.checkpoints.step_spec
    fields: dict[bytes, bytes] = await conn.hgetall(key)
    triples: list[bytes] = []
    for name, raw in fields.items():
        fresh = spec.recoded(key, name.decode("utf-8"), raw, current)
        if fresh is None:
            report.current += 1
        else:
            triples += [name, raw, fresh]
    if triples:
        args = StepRecodeArgs(tuple(triples))
        done = (await conn.script(_STEPS, (key,), args.argv())).replaced
        report.steps += done
        report.changed += len(triples) // 3 - done


# Its one part: the hash of a task's step records.
ROTATE: Final[Mapping[str, Mapping[str, RotateHandler]]] = {
    kinds.STEPS.name: {kinds.STEPS.parts[0]: _rotate_steps},
}
