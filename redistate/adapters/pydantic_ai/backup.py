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
from typing import Any, Final

from ...admin.backup_codec import Entity, Limits, LineCodec, Pairs, count, utf8
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
    text = utf8(data, what, "surrogatepass")
    try:
        escape_id(text)
    except InvalidId as exc:
        raise ValueError(f"{what} {data[:40]!r}: {exc}") from None
    return text


def _loops(parents: Mapping[bytes, bytes]) -> bytes | None:
    """An entry whose parents lead back to itself (a history would never end), or None."""
    ends: set[bytes] = set()  # entries whose parents reach a first entry
    for start in parents:
        path: list[bytes] = []
        at = start
        while at and at not in ends:
            if at in path:
                return at
            path.append(at)
            at = parents[at]
        ends.update(path)
    return None


class _Conversations(PartsCodec):
    def validate(self, entity_id: str, parts: Mapping[str, Pairs]) -> None:
        record = dict(parts["record"])
        for name in record.keys() - _FIELDS:
            raise ValueError(f"parts.record field {name[:40]!r} is not one of {list(FIELDS)}")
        for name in _NEEDED:
            if not record.get(name):
                raise ValueError(f"parts.record has no {name.decode()}")
        utf8(record[b"rev"], "parts.record rev")
        # upd is the client's save time (ms; before 1970 is negative): it orders
        # listings and is not held to the server's clock.
        count(record[b"upd"], "parts.record upd", signed=True)
        count(record.get(b"dver", b"0"), "parts.record dver")
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
        looped = _loops(parents)
        if looped is not None:
            raise ValueError(f"entry {looped[:40]!r}: its parents lead back to it")

    def check(self, limits: Limits, entity: Entity) -> None:
        record, entries, _ = entity.parts
        fields = dict(record)
        decoded: dict[bytes, Any] = {}
        try:
            for name, where in _ENCODED.items():
                if name in fields:
                    decoded[name] = limits.codec.decode(
                        fields[name], record_context(entity.id, where)
                    )
            for entry, data in entries:
                value = limits.codec.decode(
                    data, entry_context(entry.decode("utf-8", "surrogatepass"))
                )
                if not (isinstance(value, dict) and isinstance(value.get("message"), dict)):
                    raise ValueError(f"entry {entry[:40]!r} is not {{kind, message}}")
        except RedistateError as exc:
            raise ValueError(f"does not decode with the store's codec: {exc}") from None
        _record(entity.id, fields, decoded, {entry for entry, _ in entries})


def _record(
    conversation_id: str,
    fields: Mapping[bytes, bytes],
    decoded: Mapping[bytes, Any],
    ids: set[bytes],
) -> None:
    """The decoded body agrees with the record's own fields (what a save compares,
    what a listing filters by) and names only stored entries."""
    body = decoded[b"body"]
    if not isinstance(body, dict):
        raise ValueError(f"the record's body is {type(body).__name__}, not an object")
    scope = fields[b"scope"].decode("utf-8", "surrogatepass") if b"scope" in fields else None
    for name, want in (
        ("conversation_id", conversation_id),
        ("revision", fields[b"rev"].decode()),
        ("scope", scope),
    ):
        if body.get(name) != want:
            raise ValueError(
                f"the record's body has {name} {body.get(name)!r:.40}, not {want!r:.40}"
            )
    branches = body.get("branches", [])
    if not isinstance(branches, list):
        raise ValueError(f"the record's branches are {type(branches).__name__}, not a list")
    for what, entry in [("head", body.get("head_id")), *(("branch", b) for b in branches)]:
        if entry is not None and (
            not isinstance(entry, str) or entry.encode("utf-8", "surrogatepass") not in ids
        ):
            raise ValueError(f"the record's {what} {entry!r:.40} is not in parts.entries")
    if not isinstance(decoded.get(b"title", ""), str):
        raise ValueError("the record's title is not text")
    if not isinstance(decoded.get(b"meta", {}), dict):
        raise ValueError("the record's metadata is not an object")


class _Indexes(PartsCodec):
    def validate(self, entity_id: str, parts: Mapping[str, Pairs]) -> None:
        if entity_id != "all" and not entity_id.startswith("="):
            raise ValueError(f"id {entity_id!r:.80} is not 'all' or '=<scope>'")
        for member, at in parts["conversations"]:
            conversation = _id(member, "parts.conversations member")
            count(at, f"parts.conversations {conversation!r:.40} time", signed=True)


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
