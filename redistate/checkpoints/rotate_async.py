"""rotate-keys for task checkpoints and their delta log (the source of
redistate.checkpoints.rotate; the loop is redistate.admin.rotate).

Each checkpoint state (and delta) not under the primary key is re-encoded in place by
``lua/checkpoint_recode.lua``: sequence numbers and fences stay as they are; one
replaced meanwhile is left (counted as changed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from ..core import kinds
from ..core.scripts import script
from .spec import CheckpointRecodeArgs, CheckpointRecodeReply

if TYPE_CHECKING:
    from ..admin.handlers_async import Current, Found, RotateHandler
    from ..admin.reports import RotateReport
    from ..core.connection_async import AsyncConnection
    from ..store_async import AsyncStore

__all__ = ["ROTATE"]

_RECODE = script("checkpoint_recode").replying(CheckpointRecodeReply.parse)


async def _rotate_list(
    store: AsyncStore,
    conn: AsyncConnection,
    key: str,
    deltas: bool,
    current: Current,
    report: RotateReport,
) -> int:
    """Re-encode a task's checkpoint list (or delta log); how many elements replaced."""
    spec = store.checkpoints.spec
    items: list[Any] = await conn.idempotent("LRANGE", key, 0, -1)  # retried, translated
    pairs: list[bytes] = []
    for item in items:
        if deltas:
            found = spec.recoded_delta(key, item, current)
        else:
            found = spec.recoded_blob(key, item, current)
        if found is None:
            report.current += 1
        else:
            pairs.extend(found)
    if not pairs:
        return 0
    done = (await conn.script(_RECODE, (key,), CheckpointRecodeArgs(tuple(pairs)).argv())).replaced
    report.changed += len(pairs) // 2 - done
    return done


async def _rotate_checkpoints(
    store: AsyncStore, conn: AsyncConnection, found: Found, current: Current, report: RotateReport
) -> None:
    report.checkpoints += await _rotate_list(store, conn, found.key, False, current, report)


async def _rotate_deltas(
    store: AsyncStore, conn: AsyncConnection, found: Found, current: Current, report: RotateReport
) -> None:
    report.deltas += await _rotate_list(store, conn, found.key, True, current, report)


# By part of the task's keys: its checkpoint list and its delta log (the id list and
# the write memory hold nothing encoded).
ROTATE: Final[Mapping[str, Mapping[str, RotateHandler]]] = {
    kinds.TASK.name: {"": _rotate_checkpoints, "log": _rotate_deltas},
}
