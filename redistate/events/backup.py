"""Export and import of audit event streams (redistate.admin.backup_codec): a line
holds a stream's entries and its trim anchor; the staging stream of a rewrite in
progress is left out (it expires, and the stream it would replace is exported). Pure:
no I/O. The script: lua/import_events.lua.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..admin.backup_codec import (
    Entity,
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
    pttls,
    text,
    ttl_of,
    unb64,
)
from ..core import kinds
from ..core.envelope import MAX_VERSION
from ..core.errors import RedistateError
from ..core.keys import KeySpace
from .spec import EventSpec

__all__ = ["ANCHOR_FIELDS", "BACKUP", "EVENT_FIELDS", "stream_id"]

# The fields of a stream entry (event_append writes them) and of a trim anchor
# (event_trim), in the order the import scripts take them.
EVENT_FIELDS: Final = ("n", "t", "s", "at", "p", "prev", "d")
ANCHOR_FIELDS: Final = ("id", "seq", "digest", "state", "state_digest", "removed")
_ANCHOR_NEEDS: Final = frozenset(ANCHOR_FIELDS) - {"removed"}
_STREAM_ID: Final = re.compile(r"(\d{1,15})-(\d{1,15})")  # exact in the scripts' numbers
_PARTS: Final = ("", "anchor")  # the keys a line is read from
STAGING: Final = "staging"  # a rewrite's staging stream: not exported


def stream_id(text: object, what: str) -> tuple[int, int]:
    """A stream id ``<ms>-<seq>`` as numbers (both at most 15 digits, not 0-0).

    Raises:
        ValueError: naming ``what``.
    """
    match = _STREAM_ID.fullmatch(text) if isinstance(text, str) else None
    if match is None or text == "0-0":
        raise ValueError(
            f"{what} must be a stream id <ms>-<seq> (at most 15 digits each, not 0-0), "
            f"got {text!r:.80}"
        )
    return int(match.group(1)), int(match.group(2))


def _fields(value: object, names: Sequence[str], needs: frozenset[str], what: str) -> Pairs:
    """An object of ``names`` (each base64; ``needs`` required), in ``names``' order."""
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be an object of field: base64, got {value!r:.80}")
    unknown = sorted(set(value) - set(names))
    missing = sorted(needs - set(value))
    if unknown or missing:
        raise ValueError(
            f"{what} has unknown fields {unknown} or lacks {missing} (fields: {list(names)})"
        )
    return tuple((n.encode(), unb64(value[n], f"{what}.{n}")) for n in names if n in value)


def _digits(raw: bytes, what: str) -> int:
    if not raw.isdigit() or len(raw) > 15:
        raise ValueError(f"{what} must be digits (at most 15), got {raw[:40]!r}")
    return int(raw)


class _Events(LineCodec):
    name = kinds.EVENTS.name
    one, many = "event stream", kinds.EVENTS.title
    left_out = frozenset({STAGING})

    def keys(self, keys: KeySpace, name: str, entity_id: str) -> tuple[str, ...]:
        return (keys.events(entity_id), keys.events_anchor(entity_id))

    def commands(self, keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
        return [("XRANGE", keys[0], "-", "+"), ("HGETALL", keys[1]), *pttls(keys)]

    def line(self, read: Read, reply: Any, ttl: Ttl) -> dict[str, Any] | None:
        entries, anchor, found_ttls = reply[0], pairs(reply[1]), reply[2:]
        present = [int(found_ttls[0]) != -2, bool(anchor)]
        first = first_present(read, _PARTS, present)
        if first is None:
            return None
        events = []
        for eid, fields in entries:
            events.append([text(eid), {text(f): b64(v) for f, v in pairs(fields)}])
        return {
            "kind": self.name,
            "id": read.id,
            "ttl_ms": ttl(int(found_ttls[first])),
            "anchor": {text(f): b64(v) for f, v in anchor} if anchor else None,
            "events": events,
        }

    def parse(self, obj: dict[str, Any]) -> Entity:
        entity = entity_id(obj)
        anchor: Pairs = ()
        after, where = (0, 0), "0-0"
        if obj.get("anchor") is not None:
            anchor = _fields(obj["anchor"], ANCHOR_FIELDS, _ANCHOR_NEEDS, "anchor")
            found = dict(anchor)
            where = found[b"id"].decode("ascii", "replace")
            after = stream_id(where, "anchor.id")
            _digits(found[b"seq"], "anchor.seq")
            if b"removed" in found:
                _digits(found[b"removed"], "anchor.removed")
        events = []
        for n, item in enumerate(field(obj, "events", list)):
            if not (isinstance(item, list) and len(item) == 2):
                raise ValueError(
                    f"events[{n}] must be [stream id, {{field: base64}}], got {item!r:.80}"
                )
            at = stream_id(item[0], f"events[{n}] id")
            if at <= after:
                raise ValueError(f"events[{n}] id {item[0]} is not after {where} (the one before)")
            after, where = at, item[0]
            fields = _fields(item[1], EVENT_FIELDS, frozenset(EVENT_FIELDS), f"events[{n}]")
            events.append((str(item[0]), dict(fields)))
        if not (events or anchor):
            raise ValueError("an events line needs events or an anchor")
        return Entity(self.name, "", entity, ttl_of(obj), (), events=tuple(events), anchor=anchor)

    def check(self, limits: Limits, entity: Entity) -> None:
        # Only decoding is asked of the spec: no size limit applies.
        spec = limits.made(
            EventSpec,
            lambda: EventSpec(limits.codec, max_bytes=MAX_VERSION, signing=limits.signing),
        )
        key, max_ms = limits.keys.events(entity.id), limits.max_ms
        context = key.encode("utf-8")
        try:  # its state seal checked and its state decoded, as a fold reads it
            anchor = spec.anchor(key, dict(entity.anchor))
        except RedistateError as exc:
            raise ValueError(f"anchor: {exc}") from None
        if anchor.id and stream_id(anchor.id, "anchor.id")[0] > max_ms:
            raise limits.late("anchor.id (ms)", stream_id(anchor.id, "anchor.id")[0], max_ms)
        check = spec.verify(key, (anchor.digest, anchor.seq), entity.events)
        if not check.ok:
            raise ValueError(
                f"the events do not verify from their anchor under the store's signing "
                f"keys (first bad {check.first_bad}: {check.problems[0]})"
            )
        for n, (eid, fields) in enumerate(entity.events):
            if (ms := stream_id(eid, f"events[{n}] id")[0]) > max_ms:
                raise limits.late(f"events[{n}] id {eid} (ms)", ms, max_ms)
            try:
                limits.codec.decode(fields[b"p"], context)
            except RedistateError as exc:
                raise ValueError(
                    f"events[{n}] ({eid}) payload does not decode with the store's codec: {exc}"
                ) from None

    def call(
        self, keys: KeySpace, entity: Entity, ttl_ms: int, force: bool
    ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        anchor = [value for pair in entity.anchor for value in pair]
        rows = [
            value
            for eid, fields in entity.events
            for value in (eid, *(fields[name.encode()] for name in EVENT_FIELDS))
        ]
        both = self.keys(keys, self.name, entity.id)
        return both, (ttl_ms, int(force), len(entity.anchor), *anchor, *rows)


BACKUP: Final[Mapping[str, LineCodec]] = {kinds.EVENTS.name: _Events()}
