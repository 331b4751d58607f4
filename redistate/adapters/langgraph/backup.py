"""Export and import of LangGraph threads and store namespaces
(redistate.admin.backup_codec). Pure: no I/O.

A thread's line holds its seven keys (kinds.GRAPH_PARTS) under their own names,
hashes as objects of base64 field: base64, sorted sets as [base64 member, score]
pairs, written whole (redistate.admin.backup_parts, lua/import_parts.lua).

A store namespace's line holds its live items, each with its times, its lifetime (what a
read with refresh renews) and its time left, ``ttl_ms`` (lua/import_memory.lua); the
line's ``ttl_ms`` is its last item's. The registry is not exported: an import announces each
namespace to it first (memory_announce.lua), as a put does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from ...admin.backup_codec import (
    MAX_TTL_MS,
    Entity,
    ImportReply,
    Limits,
    LineCodec,
    Pairs,
    Read,
    Ttl,
    b64,
    entity_id,
    field,
    first_present,
    pairs,
    ttl_of,
    unb64,
)
from ...admin.backup_parts import PartsCodec, Shape
from ...core import kinds
from ...core.envelope import MAX_VERSION
from ...core.errors import RedistateError
from ...core.keys import KeySpace
from ...core.scripts import Script, script
from .memory import MAX_KEY_BYTES, InvalidNamespace, Stored, context, namespace_id, namespace_of

__all__ = ["BACKUP", "GRAPH_ZSETS"]

# Which of a LangGraph thread's keys are sorted sets (lua/_graph.lua); the rest are hashes.
GRAPH_ZSETS: Final = frozenset({"idx", "widx", "runs"})
_GRAPH_FIELD: Final = re.compile(rb"[cru]\|.*|delta", re.S)  # the cp hash's fields


class _Threads(PartsCodec):
    def validate(self, entity_id: str, parts: Mapping[str, Pairs]) -> None:
        for name, _ in parts["idx"]:
            if b"\0" not in name:
                raise ValueError(f"parts.idx member {name[:40]!r} is not '<checkpoint_ns>\\0<id>'")
        for name, _ in parts["cp"]:
            if not _GRAPH_FIELD.fullmatch(name):
                raise ValueError(
                    f"parts.cp field {name[:40]!r} is not c|, r|, u|<checkpoint> or delta"
                )
        for name, raw in parts["refs"]:
            if not raw.isdigit() or len(raw) > 15:
                raise ValueError(f"parts.refs count {raw[:40]!r} for {name[:40]!r} is not a count")


_ANNOUNCE: Final = script("memory_announce")
_MEMORY_PARTS: Final = ("", "exp")  # the keys a namespace's line is read from
_UNANNOUNCED: Final = "unannounced"  # import_memory's refusal: announce again


def _ms(item: dict[str, Any], name: str, at: str, limit: int = MAX_TTL_MS) -> int:
    value = item.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ValueError(f"{at}.{name} must be an int from 0 to {limit}, got {value!r:.80}")
    return value


class _Namespaces(LineCodec):
    name = kinds.MEMORY.name
    one, many = "LangGraph store namespace", kinds.MEMORY.title
    left_out = frozenset({"tomb"})  # a sweep's marker, for the registry it works on

    def keys(self, keys: KeySpace, name: str, entity_id: str) -> tuple[str, ...]:
        return tuple(keys.memory(entity_id, part) for part in _MEMORY_PARTS)

    def commands(self, keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
        # TIME in the same MULTI: each item's time left is its expiry less this instant.
        return [
            ("HGETALL", keys[0]),
            ("ZRANGEBYSCORE", keys[1], "-inf", "+inf", "WITHSCORES"),
            ("TIME",),
        ]

    def line(self, read: Read, reply: Any, ttl: Ttl) -> dict[str, Any] | None:
        found, expiries, (seconds, micros) = pairs(reply[0]), pairs(reply[1]), reply[2]
        if first_present(read, _MEMORY_PARTS, [bool(found), bool(expiries)]) is None:
            return None
        now = int(seconds) * 1000 + int(micros) // 1000
        at = {member: float(score) for member, score in expiries}
        items = []
        for key, raw in sorted(found):
            stored = Stored.parse(raw)
            left: int | None = None
            if stored.ttl_ms:
                if key not in at:
                    raise ValueError(f"item {key[:40]!r} has a ttl but no expiry")
                if at[key] <= now:
                    continue  # expired: not yet deleted, never returned
                # The time left when the export started, never over the item's own TTL
                # (an item written during the export).
                left = min(stored.ttl_ms, ttl(int(at[key]) - now) or 0)
            items.append(
                {
                    "key": b64(key),
                    "created_ms": stored.created_ms,
                    "updated_ms": stored.updated_ms,
                    "lifetime_ms": stored.ttl_ms,  # what a read with refresh renews
                    "ttl_ms": left,
                    "value": b64(stored.data),
                }
            )
        if not items:
            return None
        return {"kind": self.name, "id": read.id, "ttl_ms": _last(items), "items": items}

    def parse(self, obj: dict[str, Any]) -> Entity:
        nsid = entity_id(obj)
        try:
            namespace_id(namespace_of(nsid))
        except InvalidNamespace as exc:
            raise ValueError(f"id {nsid!r:.80}: {exc}") from None
        raw = field(obj, "items", list)
        if not raw:
            raise ValueError("a store namespace needs items ('items' is empty)")
        items = []
        for n, item in enumerate(raw):
            at = f"items[{n}]"
            if not isinstance(item, dict):
                raise ValueError(f"{at} must be an object, got {item!r:.80}")
            key = unb64(item.get("key"), f"{at}.key")
            try:
                key.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                raise ValueError(f"{at}.key is not UTF-8: {key[:40]!r}") from None
            if len(key) > MAX_KEY_BYTES:
                raise ValueError(f"{at}.key is {len(key)} bytes; the limit is {MAX_KEY_BYTES}")
            created = _ms(item, "created_ms", at, MAX_VERSION)
            updated = _ms(item, "updated_ms", at, MAX_VERSION)
            ttl_ms = _ms(item, "lifetime_ms", at)
            left = item.get("ttl_ms")
            if ttl_ms == 0 and left is not None:
                raise ValueError(f"{at}.ttl_ms must be null for an item of lifetime_ms 0")
            if ttl_ms:
                left = _ms(item, "ttl_ms", at, ttl_ms)
            value = unb64(item.get("value"), f"{at}.value")
            items.append((key, created, updated, ttl_ms, left, value))
        if len({item[0] for item in items}) != len(items):
            raise ValueError("items name a key twice")
        ttl = ttl_of(obj)
        want = _last([{"ttl_ms": item[4]} for item in items])
        if ttl != want:
            raise ValueError(f"ttl_ms must be the last item's time left ({want}), got {ttl}")
        return Entity(self.name, "", nsid, ttl, (), items=tuple(sorted(items)))

    def check(self, limits: Limits, entity: Entity) -> None:
        for key, created, updated, _, _, value in entity.items:
            label = f"item {key[:40]!r}"
            for what, ms in (("created_ms", created), ("updated_ms", updated)):
                if ms > limits.max_ms:
                    raise limits.late(f"{label} {what}", ms, limits.max_ms)
            try:
                limits.codec.decode(value, context(entity.id, key.decode("utf-8", "surrogatepass")))
            except RedistateError as exc:
                raise ValueError(f"{label} does not decode with the store's codec: {exc}") from None

    def aged(self, entity: Entity, elapsed_ms: int) -> Entity:
        items = tuple(
            (key, created, updated, ttl, None if left is None else left - elapsed_ms, value)
            for key, created, updated, ttl, left, value in entity.items
            if left is None or left > elapsed_ms  # an item expired since: left out
        )
        return replace(entity, items=items)

    def announce(
        self, keys: KeySpace, entity: Entity
    ) -> tuple[Script, tuple[str, ...], tuple[Any, ...]]:
        registry = (keys.memory_names(), keys.memory_names("gens"))
        return _ANNOUNCE, registry, (entity.id,)

    def again(self, reply: ImportReply) -> bool:
        return not reply.written and reply.value == _UNANNOUNCED

    def call(
        self, keys: KeySpace, entity: Entity, ttl_ms: int, force: bool
    ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        # The namespace's keys expire with its last item: the script sets that, not ttl_ms.
        own = (
            keys.memory(entity.id),
            keys.memory(entity.id, "exp"),
            keys.memory(entity.id, "tomb"),
        )
        flat = [
            value
            for key, created, updated, ttl, left, data in entity.items
            for value in (key, created, updated, ttl, left or 0, data)
        ]
        return own, (entity.announced, int(force), *flat)


def _last(items: list[dict[str, Any]]) -> int | None:
    """A namespace's time left: its last item's, None while one never expires."""
    lefts = [item["ttl_ms"] for item in items]
    return None if any(left is None for left in lefts) else max(lefts)


BACKUP: Final[Mapping[str, LineCodec]] = {
    kinds.GRAPH.name: _Threads(
        kinds.GRAPH,
        [Shape(p, "zset" if p in GRAPH_ZSETS else "hash", p) for p in kinds.GRAPH_PARTS],
        "LangGraph thread",
    ),
    kinds.MEMORY.name: _Namespaces(),
}
