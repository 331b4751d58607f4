"""Export and import of OpenAI Agents SDK sessions (redistate.admin.backup_codec): a
line holds a session's items, oldest first. Pure: no I/O. The script:
lua/import_agents.lua.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ...admin.backup_codec import (
    Entity,
    Limits,
    LineCodec,
    Read,
    Ttl,
    b64,
    entity_id,
    field,
    pttls,
    ttl_of,
    unb64,
)
from ...core import kinds
from ...core.errors import RedistateError
from ...core.keys import KeySpace

__all__ = ["BACKUP"]


class _Sessions(LineCodec):
    name = kinds.AGENTS.name
    one, many = "Agents SDK session", kinds.AGENTS.title

    def keys(self, keys: KeySpace, name: str, entity_id: str) -> tuple[str, ...]:
        return (keys.agent_session(entity_id),)

    def commands(self, keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
        return [("LRANGE", keys[0], 0, -1), *pttls(keys)]

    def line(self, read: Read, reply: Any, ttl: Ttl) -> dict[str, Any] | None:
        items, pttl = reply
        if not items:
            return None
        return {
            "kind": self.name,
            "id": read.id,
            "ttl_ms": ttl(int(pttl)),
            "items": [b64(i) for i in items],
        }

    def parse(self, obj: dict[str, Any]) -> Entity:
        items = field(obj, "items", list)
        if not items:
            raise ValueError("an agents session needs items ('items' is empty)")
        data = tuple(unb64(x, f"items[{i}]") for i, x in enumerate(items))
        return Entity(self.name, "", entity_id(obj), ttl_of(obj), data)

    def check(self, limits: Limits, entity: Entity) -> None:
        context = limits.keys.agent_session(entity.id).encode("utf-8")
        for n, item in enumerate(entity.data):
            try:
                limits.codec.decode(item, context)
            except RedistateError as exc:
                raise ValueError(
                    f"items[{n}] does not decode with the store's codec: {exc}"
                ) from None

    def call(
        self, keys: KeySpace, entity: Entity, ttl_ms: int, force: bool
    ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        return (keys.agent_session(entity.id),), (ttl_ms, int(force), *entity.data)


BACKUP: Final[Mapping[str, LineCodec]] = {kinds.AGENTS.name: _Sessions()}
