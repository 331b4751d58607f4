"""rotate-keys for records: sessions, user profiles and collection records
(the source of redistate.records.rotate; the loop is redistate.admin.rotate).

A record not under the primary key (its patches folded) is decrypted and written back
encrypted with the primary by ``lua/record_compact.lua``, its version and TTL kept; one
written meanwhile is left (counted as changed: the next run rotates it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from ..core import kinds
from ..core.errors import RedistateError
from ..core.scripts import script
from .spec import RecordCompactReply, new_write_id

if TYPE_CHECKING:
    from ..admin.handlers_async import Current, Found, RotateHandler
    from ..admin.reports import RotateReport
    from ..core.connection_async import AsyncConnection
    from ..store_async import AsyncStore

__all__ = ["ROTATE"]

_COMPACT = script("record_compact").replying(RecordCompactReply.parse)


async def _rotate_record(
    store: AsyncStore, conn: AsyncConnection, found: Found, current: Current, report: RotateReport
) -> None:
    kind, key = found.kind, found.key
    raw = await conn.get(key)
    if raw is None:
        return
    spec = store.records_of(kind).spec
    if not spec.stale(key, raw, current):  # counts every old part
        report.current += 1
        return
    args = spec.compact_args(key, spec.compaction(key, raw), new_write_id(), conn.memory_ms)
    if args is None:
        raise RedistateError(f"{key!r} re-encrypted would pass its max_bytes: not rotated")
    done = await conn.script(_COMPACT, spec.compact_keys(key), args.argv())
    if done.rewritten:
        report.records += 1
    else:
        report.changed += 1


# By kind, then by part of its keys (the write memory holds ids, nothing encoded).
_RECORD: Final[Mapping[str, RotateHandler]] = {"": _rotate_record}
ROTATE: Final[Mapping[str, Mapping[str, RotateHandler]]] = {
    kinds.SESSION.name: _RECORD,
    kinds.USER.name: _RECORD,
    kinds.COLLECTION.name: _RECORD,
}
