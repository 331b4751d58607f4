"""Export and import of versioned records (sessions, users, collections: one "record"
line each, naming its collection) and of user indexes (redistate.admin.backup_codec).
Pure: no I/O. The scripts: lua/import_record.lua, lua/import_user_index.lua.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..admin.backup_codec import (
    Entity,
    Limits,
    LineCodec,
    Read,
    Ttl,
    b64,
    entity_id,
    field,
    text,
    ttl_of,
    unb64,
)
from ..core import kinds
from ..core.envelope import unpack
from ..core.errors import RedistateError
from ..core.keys import KeySpace, check_kind
from .erasure import entry
from .mergelog import frames
from .spec import RecordSpec

__all__ = ["BACKUP", "BUILT_IN_RECORDS", "RECORD", "is_record_kind"]

# Every versioned record's line kind: the line names its collection.
RECORD: Final = "record"
_RECORD_KEYS: Final = frozenset(k.key for k in kinds.KINDS if k.records)
# The store's own record collections; every other reserved kind holds no records, so a
# record line there is refused, and export leaves such keys out.
BUILT_IN_RECORDS: Final = _RECORD_KEYS - {kinds.ANY}


def is_record_kind(name: str) -> bool:
    """Whether records of collection ``name`` may exist: a user collection (any name
    ``store.collection()`` accepts) or a built-in one (sessions, users)."""
    return name in BUILT_IN_RECORDS or name not in kinds.RESERVED


class _Records(LineCodec):
    name = RECORD
    one, many = "record", "records"
    since = 1

    def keys(self, keys: KeySpace, name: str, entity_id: str) -> tuple[str, ...]:
        return (keys.record(name, entity_id),)

    def line(self, read: Read, reply: Any, ttl: Ttl) -> dict[str, Any] | None:
        value, pttl = reply
        if value is None:
            return None  # deleted or expired since the scan found it
        envelope = unpack(read.keys[0], value)  # IntegrityError if not a record
        return {
            "kind": RECORD,
            "collection": read.name,
            "id": read.id,
            "version": envelope.version,
            "ttl_ms": ttl(int(pttl)),
            "value": b64(value),
        }

    def parse(self, obj: dict[str, Any]) -> Entity:
        name = field(obj, "collection", str)
        check_kind(name)
        if not is_record_kind(name):
            raise ValueError(
                f"collection {name!r} is not a record kind (reserved by redistate; records "
                f"live in {sorted(BUILT_IN_RECORDS)} or in unreserved collections)"
            )
        entity, value = entity_id(obj), unb64(obj.get("value"), "value")
        envelope = unpack(f"{name} {entity}", value)  # IntegrityError if not a record
        if envelope.log:
            frames(f"{name} {entity}", envelope.payload)  # IntegrityError if cut or malformed
        version = envelope.version
        if obj.get("version") != version:
            raise ValueError(f"version {obj.get('version')!r} is not the value's own ({version})")
        return Entity(RECORD, name, entity, ttl_of(obj), (value,))

    def check(self, limits: Limits, entity: Entity) -> None:
        key = limits.keys.record(entity.name, entity.id)
        envelope = unpack(key, entity.data[0])
        if envelope.version > limits.max_us:
            raise limits.late("version", envelope.version, limits.max_us)
        spec = limits.made((self, entity.name), lambda: self._spec(limits, entity.name))
        try:  # seals checked (signing keys), patches folded, as a read does
            spec._stored(key, envelope)
        except RedistateError as exc:
            raise ValueError(f"value does not decode with the store's codec: {exc}") from None

    @staticmethod
    def _spec(limits: Limits, name: str) -> RecordSpec:
        keys, codec, signing = limits.keys, limits.codec, limits.signing
        return RecordSpec(keys, name, codec, ttl=None, max_bytes=1, signing=signing)

    def call(
        self, keys: KeySpace, entity: Entity, ttl_ms: int, force: bool
    ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        return (keys.record(entity.name, entity.id),), (entity.data[0], ttl_ms, int(force))


class _UserIndex(LineCodec):
    name = kinds.USER_INDEX.name
    one, many = "user index", kinds.USER_INDEX.title

    def keys(self, keys: KeySpace, name: str, entity_id: str) -> tuple[str, ...]:
        return (keys.user_index(entity_id),)

    def commands(self, keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
        return [("SMEMBERS", keys[0])]

    def line(self, read: Read, reply: Any, ttl: Ttl) -> dict[str, Any] | None:
        owns = sorted(text(m) for m in reply[0])
        return {"kind": self.name, "id": read.id, "owns": owns} if owns else None

    def parse(self, obj: dict[str, Any]) -> Entity:
        owns = field(obj, "owns", list)
        if not owns:
            raise ValueError("a user index needs entries ('owns' is empty)")
        for n, item in enumerate(owns):
            kind, sep, entity = item.partition(":") if isinstance(item, str) else ("", "", "")
            try:
                if not sep:
                    raise ValueError(item)
                check_kind(kind)
                if entry(kind, entity) != item:
                    raise ValueError(item)
            except ValueError:
                raise ValueError(
                    f"owns[{n}] {item!r:.80} is not an index entry '<kind>:<id>' (a kind of "
                    f"[a-z][a-z0-9_-]*, an id of 1-512 UTF-8 bytes)"
                ) from None
        if len(set(owns)) != len(owns):
            raise ValueError("owns lists an entry twice")
        data = tuple(sorted(str(item).encode("utf-8") for item in owns))
        return Entity(self.name, "", entity_id(obj), None, data)

    def call(
        self, keys: KeySpace, entity: Entity, ttl_ms: int, force: bool
    ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        return (keys.user_index(entity.id),), entity.data


_RECORDS: Final = _Records()
BACKUP: Final[Mapping[str, LineCodec]] = {
    **{kind.name: _RECORDS for kind in kinds.KINDS if kind.records},
    kinds.USER_INDEX.name: _UserIndex(),
}
