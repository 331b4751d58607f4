"""Export and import of Google ADK sessions, users and apps (redistate.admin.backup_codec).
Pure: no I/O. The script: lua/import_adk.lua, one for the three kinds.

Each kind is a hash and one collection in its hash slot, and each line holds both:
``state`` (the hash, base64 field -> base64 value) and the collection (a session's
``events``, oldest first; a user's ``sessions``, [session id, last update]; an app's
``users``). The two keys expire apart (a user's state lives on, the index of its
sessions expires with them): ``state_ttl_ms`` and ``<collection>_ttl_ms`` are each
key's time left, ``ttl_ms`` the entity's (the later one; null if one never expires).
Write memories are not exported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
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
    utf8,
)
from ...core import kinds
from ...core.errors import RedistateError
from ...core.keys import KeySpace
from ...core.scripts import Parsed, script
from .spec import LAST, SEEN, STATE, context, split_element, stamp

__all__ = ["BACKUP"]

_IMPORT: Final = script("import_adk").replying(ImportReply.parse)


@dataclass(frozen=True, slots=True)
class _Shape:
    """How one ADK kind is stored: its collection's part, Redis type and line field."""

    kind: kinds.Kind
    part: str  # the collection's part (its line field too)
    type: str  # "list", "zset" or "set"
    one: str
    scope: str  # what the codec binds its state values to (spec.context)


def _lifetime(*ttls: int | None) -> int | None:
    """An entity's time left: the later of its keys' (None: one never expires)."""
    if any(ttl is None for ttl in ttls):
        return None
    return max(ttl for ttl in ttls if ttl is not None)


def _ttl(obj: dict[str, Any], name: str) -> int | None:
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TTL_MS:
        raise ValueError(f"{name} must be null or an int from 0 to {MAX_TTL_MS}, got {value!r:.80}")
    return value


class _Adk(LineCodec):
    def __init__(self, shape: _Shape) -> None:
        self.shape = shape
        self.name = shape.kind.name
        self.one, self.many = shape.one, shape.kind.title

    def keys(self, keys: KeySpace, name: str, entity_id: str) -> tuple[str, ...]:
        own = self.shape.kind
        return (own.key_of(keys, entity_id, ""), own.key_of(keys, entity_id, self.shape.part))

    def commands(self, keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
        read: tuple[Any, ...] = {
            "list": ("LRANGE", keys[1], 0, -1),
            "zset": ("ZRANGEBYSCORE", keys[1], "-inf", "+inf", "WITHSCORES"),
            "set": ("SMEMBERS", keys[1]),
        }[self.shape.type]
        return [("HGETALL", keys[0]), read, ("PTTL", keys[0]), ("PTTL", keys[1])]

    def line(self, read: Read, reply: Any, ttl: Ttl) -> dict[str, Any] | None:
        state, found, state_pttl, part_pttl = reply
        state = pairs(state)
        present = [bool(state), bool(found)]
        if first_present(read, ("", self.shape.part), present) is None:
            return None
        collection: list[Any]
        if self.shape.type == "zset":
            collection = sorted([b64(m), float(s)] for m, s in pairs(found))
        elif self.shape.type == "set":
            collection = sorted(b64(m) for m in found)
        else:
            collection = [b64(e) for e in found]
        state_ttl = ttl(int(state_pttl)) if state else None
        part_ttl = ttl(int(part_pttl)) if found else None
        lives = [t for t, here in ((state_ttl, state), (part_ttl, found)) if here]
        return {
            "kind": self.name,
            "id": read.id,
            "ttl_ms": _lifetime(*lives),
            "state": {b64(f): b64(v) for f, v in sorted(state)},
            "state_ttl_ms": state_ttl,
            self.shape.part: collection,
            f"{self.shape.part}_ttl_ms": part_ttl,
        }

    def parse(self, obj: dict[str, Any]) -> Entity:
        part = self.shape.part
        state: list[tuple[bytes, bytes]] = []
        for name, raw in field(obj, "state", dict).items():
            state.append((unb64(name, "state field"), unb64(raw, f"state[{name!r:.40}]")))
        if len({f for f, _ in state}) != len(state):
            raise ValueError("state names a field twice (in two base64 spellings)")
        raw_items = field(obj, part, list)
        items: list[tuple[bytes, bytes]] = []
        for n, item in enumerate(raw_items):
            at = f"{part}[{n}]"
            if self.shape.type == "zset":
                if not (isinstance(item, list) and len(item) == 2):
                    raise ValueError(f"{at} must be [base64 member, time], got {item!r:.80}")
                items.append((unb64(item[0], f"{at} member"), _stamp(item[1], f"{at} time")))
            else:
                items.append((unb64(item, at), b""))
        if self.shape.type != "list" and len({m for m, _ in items}) != len(items):
            raise ValueError(f"{part} lists a member twice")
        if not state and not items:
            raise ValueError(f"an {self.one} needs content (state and {part} are empty)")
        state_ttl, part_ttl = _ttl(obj, "state_ttl_ms"), _ttl(obj, f"{part}_ttl_ms")
        for ttl, here, what in ((state_ttl, state, "state"), (part_ttl, items, part)):
            if ttl is not None and not here:
                raise ValueError(f"{what}_ttl_ms must be null: {what} is empty")
        lives = [t for t, here in ((state_ttl, state), (part_ttl, items)) if here]
        ttl = ttl_of(obj)
        if ttl != _lifetime(*lives):
            raise ValueError(
                f"ttl_ms must be the later of state_ttl_ms and {part}_ttl_ms "
                f"({_lifetime(*lives)}), got {ttl}"
            )
        entity = entity_id(obj)
        if self.shape.kind is kinds.ADK:
            _session_fields(state, items)
        else:
            for member, _ in items:
                utf8(member, f"{part} member")
            for name, _ in state:
                utf8(name, "state field")
        parts: tuple[Pairs, ...] = (tuple(sorted(state)), tuple(items))
        return Entity(self.name, "", entity, ttl, (), parts=parts, ttls=(state_ttl, part_ttl))

    def check(self, limits: Limits, entity: Entity) -> None:
        state, items = entity.parts
        scope = self.shape.scope
        for name, value in state:
            if self.shape.kind is kinds.ADK:
                if name == LAST or name.startswith(SEEN):
                    continue  # a time, an event id's mark: nothing encoded
                key = name[len(STATE) :].decode("utf-8", "surrogatepass")
            else:
                key = name.decode("utf-8", "surrogatepass")
            try:
                limits.codec.decode(value, context(scope, entity.id, key))
            except RedistateError as exc:
                raise ValueError(
                    f"state {key!r:.40} does not decode with the store's codec: {exc}"
                ) from None
        if self.shape.kind is kinds.ADK:
            for n, (element, _) in enumerate(items):
                try:
                    limits.codec.decode(split_element(element)[2], context("event", entity.id, ""))
                except RedistateError as exc:
                    raise ValueError(
                        f"events[{n}] does not decode with the store's codec: {exc}"
                    ) from None

    def aged(self, entity: Entity, elapsed_ms: int) -> Entity:
        # A key whose time ran out since the export is imported empty (gone, as it is).
        parts, ttls = list(entity.parts), list(entity.ttls)
        for n, left in enumerate(entity.ttls):
            if left is not None:
                now = left - elapsed_ms
                parts[n], ttls[n] = (parts[n], now) if now > 0 else ((), None)
        return replace(entity, parts=tuple(parts), ttls=tuple(ttls))

    def call(
        self, keys: KeySpace, entity: Entity, ttl_ms: int, force: bool
    ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        # Each key gets its own time left (aged), not the entity's ttl_ms.
        state, items = entity.parts
        zset = self.shape.type == "zset"
        flat_items = [v for pair in items for v in (pair if zset else pair[:1])]
        return self.keys(keys, self.name, entity.id), (
            self.shape.type,
            int(force),
            *(ttl or 0 for ttl in entity.ttls),
            len(state),
            *(v for pair in state for v in pair),
            *flat_items,
        )

    def script(self) -> Parsed[ImportReply]:
        return _IMPORT


def _stamp(value: object, what: str) -> bytes:
    try:
        return stamp(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: {exc}") from None


def _session_fields(state: list[tuple[bytes, bytes]], events: list[tuple[bytes, bytes]]) -> None:
    """A session's hash holds its last update time, "s:" state fields and "e:" marks
    of its event ids; its events are "<timestamp>:<schema>:<encoded event>"."""
    if not state:
        raise ValueError("an ADK session needs its state (its last update time, m:last)")
    names = {name: value for name, value in state}
    if LAST not in names:
        raise ValueError("state has no m:last (the session's last update time)")
    try:
        _stamp(float(names[LAST]), "state m:last")
    except ValueError:
        raise ValueError(f"state m:last {names[LAST][:40]!r} is not a time in seconds") from None
    for name, value in names.items():
        if name.startswith(SEEN) and len(name) > len(SEEN):
            if value != b"1":
                raise ValueError(f"state field {name[:40]!r} (an event id's mark) is not 1")
        elif name != LAST and not name.startswith(STATE):
            raise ValueError(f"state field {name[:40]!r} is not m:last, s:<key> or e:<id>")
        if name != LAST:
            utf8(name, "state field")
    for n, (element, _) in enumerate(events):
        try:
            _stamp(split_element(element)[0], f"events[{n}] time")
        except ValueError:
            found = element[:40]
            raise ValueError(
                f"events[{n}] is not '<timestamp>:<schema>:<event>': {found!r}"
            ) from None


BACKUP: Final[Mapping[str, LineCodec]] = {
    shape.kind.name: _Adk(shape)
    for shape in (
        _Shape(kinds.ADK, "events", "list", "ADK session", "session"),
        _Shape(kinds.ADK_USER, "sessions", "zset", "ADK user state", "user"),
        _Shape(kinds.ADK_APP, "users", "set", "ADK app state", "app"),
    )
}
