"""Export and import of Pydantic AI conversations and their indexes
(redistate.admin.backup_parts). Pure: no I/O.

A conversation's line holds its three keys as they are stored (spec.py): ``record``
(revision, encoded body, save time, scope, title, metadata and their version),
``entries`` (entry id -> encoded entry) and ``parents`` (entry id -> the entry before
it). An index's line (every conversation's, ``all``, or one scope's, ``=<scope>``)
holds conversation id -> save time (ms), which an import merges into the stored one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ...admin.backup_codec import Entity, Limits, LineCodec, Pairs
from ...admin.backup_parts import PartsCodec, Shape
from ...core import kinds
from ...core.errors import InvalidId, RedistateError
from ...core.keys import escape_id
from .spec import FIELDS, entry_context, record_context

__all__ = ["BACKUP"]

_FIELDS: Final = frozenset(name.encode() for name in FIELDS)
_NEEDED: Final = (b"rev", b"body", b"upd")
_ENCODED: Final = {b"body": "body", b"title": "title", b"meta": "meta"}


def _id(data: bytes, what: str) -> str:
    """An id a key can hold (an entry's, a conversation's, a scope)."""
    try:
        text = data.decode("utf-8")
        escape_id(text)
    except UnicodeDecodeError:
        raise ValueError(f"{what} {data[:40]!r} is not UTF-8") from None
    except InvalidId as exc:
        raise ValueError(f"{what} {data[:40]!r}: {exc}") from None
    return text


class _Conversations(PartsCodec):
    def validate(self, entity_id: str, parts: Mapping[str, Pairs]) -> None:
        record = dict(parts["record"])
        for name in record.keys() - _FIELDS:
            raise ValueError(f"parts.record field {name[:40]!r} is not one of {list(FIELDS)}")
        for name in _NEEDED:
            if not record.get(name):
                raise ValueError(f"parts.record has no {name.decode()}")
        for name in (b"upd", b"dver"):
            value = record.get(name, b"0")
            if not value.isdigit() or len(value) > 16:
                raise ValueError(f"parts.record {name.decode()} {value[:40]!r} is not a count")
        if b"scope" in record:
            _id(record[b"scope"], "parts.record scope")
        entries = {entry for entry, _ in parts["entries"]}
        parents = dict(parts["parents"])
        if entries != parents.keys():
            odd = sorted(entries ^ parents.keys())[0]
            raise ValueError(f"entry {odd[:40]!r} is in only one of parts.entries and parents")
        for entry, parent in parents.items():
            _id(entry, "entry id")
            if parent and parent not in entries:
                raise ValueError(f"entry {entry[:40]!r}: parent {parent[:40]!r} is not stored")

    def check(self, limits: Limits, entity: Entity) -> None:
        record, entries, _ = entity.parts
        fields = dict(record)
        if int(fields[b"upd"]) > limits.max_ms:
            raise limits.late("parts.record upd", int(fields[b"upd"]), limits.max_ms)
        decoded = {}
        try:
            for name, where in _ENCODED.items():
                if name in fields:
                    decoded[name] = limits.codec.decode(
                        fields[name], record_context(entity.id, where)
                    )
            for entry, data in entries:
                limits.codec.decode(data, entry_context(entry.decode()))
        except RedistateError as exc:
            raise ValueError(f"does not decode with the store's codec: {exc}") from None
        body = decoded[b"body"]
        head = body.get("head_id") if isinstance(body, dict) else None
        if head is not None and head.encode() not in {entry for entry, _ in entries}:
            raise ValueError(f"the record's head {head!r:.40} is not in parts.entries")


class _Indexes(PartsCodec):
    def validate(self, entity_id: str, parts: Mapping[str, Pairs]) -> None:
        if entity_id != "all" and not entity_id.startswith("="):
            raise ValueError(f"id {entity_id!r:.80} is not 'all' or '=<scope>'")
        for member, _ in parts["conversations"]:
            _id(member, "parts.conversations member")


BACKUP: Final[Mapping[str, LineCodec]] = {
    kinds.PYDANTIC_AI.name: _Conversations(
        kinds.PYDANTIC_AI,
        (
            Shape("", "hash", "record"),
            Shape("entries", "hash", "entries"),
            Shape("parents", "hash", "parents"),
        ),
        "Pydantic AI conversation",
    ),
    kinds.PYDANTIC_AI_LIST.name: _Indexes(
        kinds.PYDANTIC_AI_LIST,
        (Shape("", "zset", "conversations"),),
        "Pydantic AI conversation index",
        index=True,
    ),
}
