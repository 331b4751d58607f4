"""Export and import of fences (redistate.admin.backup_codec): a held lease belongs to
the process that holds it and is not exported (kinds.LEASE), its fence is, so that a
restored store never hands out a fence already used. Pure: no I/O. The script:
lua/import_fence.lua.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from ..admin.backup_codec import (
    FUTURE_ALLOWANCE_US,
    Entity,
    ImportReply,
    Limits,
    LineCodec,
    Read,
    Ttl,
    entity_id,
    field,
)
from ..core import kinds
from ..core.envelope import MAX_VERSION
from ..core.errors import IntegrityError
from ..core.keys import KeySpace

if TYPE_CHECKING:
    from ..admin.reports import ImportReport

__all__ = ["BACKUP"]


class _Fences(LineCodec):
    name = kinds.FENCE.name
    one, many = "fence", "fences"
    since = 1

    def keys(self, keys: KeySpace, name: str, entity_id: str) -> tuple[str, ...]:
        return (keys.fence(entity_id),)

    def line(self, read: Read, reply: Any, ttl: Ttl) -> dict[str, Any] | None:
        value, _ = reply
        if value is None:
            return None  # deleted or expired since the scan found it
        if not value.isdigit():
            raise IntegrityError(f"{read.found!r:.200} is not a fence")
        return {"kind": self.name, "id": read.id, "fence": int(value)}

    def parse(self, obj: dict[str, Any]) -> Entity:
        value = field(obj, "fence", int)
        if not 0 < value <= MAX_VERSION:
            raise ValueError(f"fence must be from 1 to 2**53-1, got {value}")
        return Entity(self.name, "", entity_id(obj), None, (b"%d" % value,))

    def check(self, limits: Limits, entity: Entity) -> None:
        if (fence := int(entity.data[0])) > limits.max_us:
            raise limits.late("fence", fence, limits.max_us)

    def call(
        self, keys: KeySpace, entity: Entity, ttl_ms: int, force: bool
    ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        allowance_ms = FUTURE_ALLOWANCE_US // 1000
        return (keys.fence(entity.id),), (*entity.data, allowance_ms)

    def tally(self, report: ImportReport, entity: Entity, reply: ImportReply) -> bool:
        if not super().tally(report, entity, reply):
            report.fences_kept += 1  # already at or above the file's: never lowered
        return True


BACKUP: Final[Mapping[str, LineCodec]] = {kinds.FENCE.name: _Fences()}
