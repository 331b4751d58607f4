"""Export and import of LangGraph threads (redistate.admin.backup_codec): a line holds
a thread's seven keys (kinds.GRAPH_PARTS), hashes as objects of base64 field: base64,
sorted sets as [base64 member, score] pairs. Pure: no I/O. The script:
lua/import_graph.lua.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from ...admin.backup_codec import (
    Entity,
    LineCodec,
    Pairs,
    Read,
    Ttl,
    b64,
    entity_id,
    field,
    first_present,
    pairs,
    pttls,
    ttl_of,
    unb64,
)
from ...core import kinds
from ...core.envelope import MAX_VERSION
from ...core.keys import KeySpace

__all__ = ["BACKUP", "GRAPH_ZSETS"]

# Which of a LangGraph thread's keys are sorted sets (lua/_graph.lua); the rest are hashes.
GRAPH_ZSETS: Final = frozenset({"idx", "widx", "runs"})
_GRAPH_FIELD: Final = re.compile(rb"[cru]\|.*|delta", re.S)  # the cp hash's fields


def _reply_score(raw: Any) -> int | float:
    value = float(raw)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def _score(value: object, what: str) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {value!r:.80}")
    if isinstance(value, int):
        if abs(value) > MAX_VERSION:
            raise ValueError(f"{what} {value} is over the limit of ±2**53-1")
        return b"%d" % value
    return repr(value).encode()


def _graph_part(part: str, value: object) -> Pairs:
    what = f"parts.{part}"
    found: list[tuple[bytes, bytes]] = []
    if part in GRAPH_ZSETS:
        if not isinstance(value, list):
            raise ValueError(f"{what} must be a list of [base64 member, score], got {value!r:.80}")
        for n, item in enumerate(value):
            if not (isinstance(item, list) and len(item) == 2):
                raise ValueError(f"{what}[{n}] must be [base64 member, score], got {item!r:.80}")
            found.append(
                (unb64(item[0], f"{what}[{n}] member"), _score(item[1], f"{what}[{n}] score"))
            )
        if len({m for m, _ in found}) != len(found):
            raise ValueError(f"{what} lists a member twice")
    else:
        if not isinstance(value, dict):
            raise ValueError(f"{what} must be an object of base64 field: base64, got {value!r:.80}")
        for field_b64, raw in value.items():
            name = unb64(field_b64, f"{what} field")
            found.append((name, unb64(raw, f"{what}[{field_b64!r:.40}]")))
        if len({f for f, _ in found}) != len(found):
            raise ValueError(f"{what} names a field twice (in two base64 spellings)")
    for name, raw in found:
        if part == "idx" and b"\0" not in name:
            raise ValueError(f"{what} member {name[:40]!r} is not '<checkpoint_ns>\\0<id>'")
        if part == "cp" and not _GRAPH_FIELD.fullmatch(name):
            raise ValueError(f"{what} field {name[:40]!r} is not c|, r|, u|<checkpoint> or delta")
        if part == "refs" and (not raw.isdigit() or len(raw) > 15):
            raise ValueError(f"{what} count {raw[:40]!r} for {name[:40]!r} is not a count")
    return tuple(sorted(found))


class _Threads(LineCodec):
    name = kinds.GRAPH.name
    one, many = "LangGraph thread", kinds.GRAPH.title

    def keys(self, keys: KeySpace, name: str, entity_id: str) -> tuple[str, ...]:
        return tuple(keys.graph_thread(entity_id, p) for p in kinds.GRAPH_PARTS)

    def commands(self, keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
        reads: list[tuple[Any, ...]] = [
            ("ZRANGEBYSCORE", key, "-inf", "+inf", "WITHSCORES")
            if part in GRAPH_ZSETS
            else ("HGETALL", key)
            for part, key in zip(kinds.GRAPH_PARTS, keys, strict=True)
        ]
        return [*reads, *pttls(keys)]

    def line(self, read: Read, reply: Any, ttl: Ttl) -> dict[str, Any] | None:
        contents, found_ttls = reply[:7], reply[7:]
        found = [pairs(content) for content in contents]
        first = first_present(read, kinds.GRAPH_PARTS, [bool(p) for p in found])
        if first is None:
            return None
        parts: dict[str, Any] = {}
        for part, items in zip(kinds.GRAPH_PARTS, found, strict=True):
            if part in GRAPH_ZSETS:
                parts[part] = [[b64(m), _reply_score(s)] for m, s in items]
            else:
                parts[part] = {b64(f): b64(v) for f, v in sorted(items)}
        return {
            "kind": self.name,
            "id": read.id,
            "ttl_ms": ttl(int(found_ttls[first])),
            "parts": parts,
        }

    def parse(self, obj: dict[str, Any]) -> Entity:
        parts = field(obj, "parts", dict)
        if sorted(parts) != sorted(kinds.GRAPH_PARTS):
            raise ValueError(
                f"parts must name exactly {list(kinds.GRAPH_PARTS)}, got {sorted(parts)!r:.200}"
            )
        found = tuple(_graph_part(part, parts[part]) for part in kinds.GRAPH_PARTS)
        if not any(found):
            raise ValueError("a graph thread needs content (every part is empty)")
        return Entity(self.name, "", entity_id(obj), ttl_of(obj), (), parts=found)

    def call(
        self, keys: KeySpace, entity: Entity, ttl_ms: int, force: bool
    ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        thread = self.keys(keys, self.name, entity.id)
        flat = [value for part in entity.parts for pair in part for value in pair]
        return thread, (ttl_ms, int(force), *(len(part) for part in entity.parts), *flat)


BACKUP: Final[Mapping[str, LineCodec]] = {kinds.GRAPH.name: _Threads()}
