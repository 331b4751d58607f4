"""Export and import of Claude Agent SDK sessions and project indexes
(redistate.admin.backup_parts). Pure: no I/O.

A session's line holds its three keys as they are stored (spec.py): ``session`` (the
counter, the summary's version and value, the main transcript's write time), ``log``
(every transcript's entries and uuid marks, at score 0) and ``subs`` (its subpaths).
A project's line holds its index (session id -> when last entered, ms), which an
import merges into the stored one. Write memories are not exported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ...admin.backup_codec import Entity, Limits, LineCodec, Pairs
from ...admin.backup_parts import PartsCodec, Shape
from ...core import kinds
from ...core.errors import InvalidId, RedistateError
from .spec import (
    ENTRY,
    MARK,
    SEQ_DIGITS,
    context,
    session_path,
    subpath_bytes,
    summary_context,
)

__all__ = ["BACKUP"]

_HEAD: Final = frozenset({b"seq", b"v", b"sum", b"mtime"})
_COUNTS: Final = (b"seq", b"v", b"mtime")


def _text(data: bytes, what: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{what} {data[:40]!r} is not UTF-8") from None
    if not text:
        raise ValueError(f"{what} is empty")
    return text


def _split(member: bytes) -> tuple[bytes, bytes, bytes]:
    """A log member's subpath, its separator (ENTRY or MARK) and what follows."""
    cut = next((i for i, byte in enumerate(member) if byte < 0x20), None)
    if cut is None or member[cut : cut + 1] not in (ENTRY, MARK):
        raise ValueError(
            f"parts.log member {member[:60]!r} is not '<subpath>\\0…' or '<subpath>\\1…'"
        )
    return member[:cut], member[cut : cut + 1], member[cut + 1 :]


class _Sessions(PartsCodec):
    def validate(self, entity_id: str, parts: Mapping[str, Pairs]) -> None:
        project, slash, session = entity_id.partition("/")
        if not (project and slash and session):
            raise ValueError(f"id {entity_id!r:.80} is not '<project key>/<session id>'")
        head = dict(parts["session"])
        for name in head.keys() - _HEAD:
            raise ValueError(f"parts.session field {name[:40]!r} is not seq, v, sum or mtime")
        for name in _COUNTS:
            value = head.get(name, b"0")
            if not value.isdigit() or len(value) > 16:
                raise ValueError(f"parts.session {name.decode()} {value[:40]!r} is not a count")
        subs = set()
        for member, _ in parts["subs"]:
            try:
                subs.add(subpath_bytes(_text(member, "parts.subs member")))
            except InvalidId as exc:
                raise ValueError(f"parts.subs: {exc}") from None
        entries = 0
        for member, at in parts["log"]:
            if at != b"0":
                raise ValueError(f"parts.log member {member[:40]!r} has score {at!r}, not 0")
            sub, kind, rest = _split(member)
            if sub and sub not in subs:
                raise ValueError(f"parts.log member {member[:40]!r}: subpath not in subs")
            if kind == MARK:
                _text(rest, "parts.log uuid")
            elif len(rest) < SEQ_DIGITS or not rest[:SEQ_DIGITS].isdigit():
                raise ValueError(f"parts.log entry {member[:40]!r} has no 16-digit sequence")
            else:
                entries += 1
        if entries > int(head.get(b"seq", b"0")):
            raise ValueError(f"parts.log holds {entries} entries, over seq {head.get(b'seq')!r}")

    def check(self, limits: Limits, entity: Entity) -> None:
        head, log, _ = entity.parts
        fields = dict(head)
        if int(fields.get(b"v", b"0")) > limits.max_us:
            raise limits.late("parts.session v", int(fields[b"v"]), limits.max_us)
        if int(fields.get(b"mtime", b"0")) > limits.max_ms:
            raise limits.late("parts.session mtime", int(fields[b"mtime"]), limits.max_ms)
        try:
            if b"sum" in fields:
                limits.codec.decode(fields[b"sum"], summary_context(entity.id))
            for member, _ in log:
                sub, kind, rest = _split(member)
                if kind == ENTRY:
                    limits.codec.decode(rest[SEQ_DIGITS:], context(entity.id, sub))
        except RedistateError as exc:
            raise ValueError(f"does not decode with the store's codec: {exc}") from None


class _Projects(PartsCodec):
    def validate(self, entity_id: str, parts: Mapping[str, Pairs]) -> None:
        for member, _ in parts["sessions"]:
            session = _text(member, "parts.sessions member")
            try:
                session_path(entity_id, session)
            except InvalidId as exc:
                raise ValueError(f"parts.sessions member {session!r:.40}: {exc}") from None


BACKUP: Final[Mapping[str, LineCodec]] = {
    kinds.CLAUDE.name: _Sessions(
        kinds.CLAUDE,
        (Shape("", "hash", "session"), Shape("log", "zset", "log"), Shape("subs", "set", "subs")),
        "Claude Agent SDK session",
    ),
    kinds.CLAUDE_PROJECT.name: _Projects(
        kinds.CLAUDE_PROJECT,
        (Shape("", "zset", "sessions"),),
        "Claude Agent SDK project index",
        index=True,
    ),
}
