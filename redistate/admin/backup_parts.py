"""The line codec of an entity held in a few keys of one hash slot that expire together,
each a hash, a sorted set or a set (a Claude Agent SDK session, a Pydantic AI
conversation, a LangGraph thread), and of an index: one sorted set that an import
merges into the stored one. Pure: no I/O. The script: lua/import_parts.lua.

A line holds ``parts``, each key under its label: a hash as an object of base64 field:
base64 value, a sorted set as [base64 member, score] pairs, a set as a sorted list of
base64 members; ``ttl_ms`` is the first present key's time left, which an import sets
on every key. An entity stored different is refused (``force`` replaces it). An index
never is: the file's members are added (each keeps the later score) and it lives at
least the line's time, as an adapter's index lives as long as what it lists.

A kind's codec is a :class:`PartsCodec` naming its keys, with the checks of its own
values in :meth:`PartsCodec.validate` (the line alone) and ``check`` (against the
store: its codec, its clock).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..core import kinds
from ..core.keys import KeySpace
from ..core.scripts import Parsed, script
from .backup_codec import (
    Entity,
    ImportReply,
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
    reply_score,
    score,
    ttl_of,
    unb64,
)

__all__ = ["PartsCodec", "Shape"]

_IMPORT: Final = script("import_parts").replying(ImportReply.parse)
_LETTER: Final = {"hash": "h", "zset": "z", "set": "s"}

Type = Literal["hash", "zset", "set"]


@dataclass(frozen=True, slots=True)
class Shape:
    """One key of an entity: its part (``""``: the main key), its Redis type and the
    name of its field in the line."""

    part: str
    type: Type
    label: str


class PartsCodec(LineCodec):
    """Lines of ``kind``: its keys ``shapes``, read and written whole; with ``index``,
    one sorted set merged into the stored one on import."""

    def __init__(
        self, kind: kinds.Kind, shapes: Sequence[Shape], one: str, *, index: bool = False
    ) -> None:
        if index and [s.type for s in shapes] != ["zset"]:
            raise ValueError("an index is one sorted set")
        self.kind, self.shapes, self.index = kind, tuple(shapes), index
        self.name, self.one, self.many = kind.name, one, kind.title
        self._parts = tuple(s.part for s in self.shapes)

    def keys(self, keys: KeySpace, name: str, entity_id: str) -> tuple[str, ...]:
        return tuple(self.kind.key_of(keys, entity_id, part) for part in self._parts)

    def commands(self, keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
        reads: list[tuple[Any, ...]] = []
        for shape, key in zip(self.shapes, keys, strict=True):
            if shape.type == "hash":
                reads.append(("HGETALL", key))
            elif shape.type == "zset":
                reads.append(("ZRANGEBYSCORE", key, "-inf", "+inf", "WITHSCORES"))
            else:
                reads.append(("SMEMBERS", key))
        return [*reads, *pttls(keys)]

    def line(self, read: Read, reply: Any, ttl: Ttl) -> dict[str, Any] | None:
        count = len(self.shapes)
        contents, left = reply[:count], reply[count:]
        first = first_present(read, self._parts, [bool(c) for c in contents])
        if first is None:
            return None
        parts: dict[str, Any] = {}
        for shape, content in zip(self.shapes, contents, strict=True):
            if shape.type == "hash":
                parts[shape.label] = {b64(f): b64(v) for f, v in sorted(pairs(content))}
            elif shape.type == "zset":
                parts[shape.label] = [[b64(m), reply_score(s)] for m, s in pairs(content)]
            else:
                parts[shape.label] = sorted(b64(m) for m in content)
        return {"kind": self.name, "id": read.id, "ttl_ms": ttl(int(left[first])), "parts": parts}

    def parse(self, obj: dict[str, Any]) -> Entity:
        parts = field(obj, "parts", dict)
        labels = [s.label for s in self.shapes]
        if sorted(parts) != sorted(labels):
            raise ValueError(f"parts must name exactly {labels}, got {sorted(parts)!r:.200}")
        found = tuple(_part(shape, parts[shape.label]) for shape in self.shapes)
        if not any(found):
            raise ValueError(f"a {self.one} needs content (every part is empty)")
        entity = entity_id(obj)
        self.validate(entity, {s.label: p for s, p in zip(self.shapes, found, strict=True)})
        return Entity(self.name, "", entity, ttl_of(obj), (), parts=found)

    def validate(self, entity_id: str, parts: Mapping[str, Pairs]) -> None:
        """Raises ValueError naming the part and the value that the kind's own
        operations would not have written (each part by its label: a hash's (field,
        value) pairs, a sorted set's (member, score), a set's (member, b""))."""
        return None

    def call(
        self, keys: KeySpace, entity: Entity, ttl_ms: int, force: bool
    ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        flat: list[bytes] = []
        for shape, part in zip(self.shapes, entity.parts, strict=True):
            for pair in part:
                flat += pair[:1] if shape.type == "set" else pair
        return self.keys(keys, self.name, entity.id), (
            ttl_ms,
            int(force),
            "merge" if self.index else "whole",
            "".join(_LETTER[s.type] for s in self.shapes),
            *(len(part) for part in entity.parts),
            *flat,
        )

    def script(self) -> Parsed[ImportReply]:
        return _IMPORT


def _part(shape: Shape, value: object) -> Pairs:
    """A part of a line as sorted (field, value), (member, score) or (member, b"")
    pairs; ValueError naming it and the item that is wrong."""
    what = f"parts.{shape.label}"
    found: list[tuple[bytes, bytes]] = []
    if shape.type == "hash":
        if not isinstance(value, dict):
            raise ValueError(f"{what} must be an object of base64 field: base64, got {value!r:.80}")
        for name, raw in value.items():
            found.append((unb64(name, f"{what} field"), unb64(raw, f"{what}[{name!r:.40}]")))
        if len({f for f, _ in found}) != len(found):
            raise ValueError(f"{what} names a field twice (in two base64 spellings)")
    elif shape.type == "zset":
        if not isinstance(value, list):
            raise ValueError(f"{what} must be a list of [base64 member, score], got {value!r:.80}")
        for n, item in enumerate(value):
            if not (isinstance(item, list) and len(item) == 2):
                raise ValueError(f"{what}[{n}] must be [base64 member, score], got {item!r:.80}")
            found.append(
                (unb64(item[0], f"{what}[{n}] member"), score(item[1], f"{what}[{n}] score"))
            )
    else:
        if not isinstance(value, list):
            raise ValueError(f"{what} must be a list of base64 members, got {value!r:.80}")
        found = [(unb64(item, f"{what}[{n}]"), b"") for n, item in enumerate(value)]
    if shape.type != "hash" and len({m for m, _ in found}) != len(found):
        raise ValueError(f"{what} lists a member twice")
    return tuple(sorted(found))
