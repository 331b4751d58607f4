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

from ...admin.backup_codec import Entity, Limits, LineCodec, Pairs, count, utf8
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
_COUNTS: Final = (b"seq", b"v", b"mtime")  # integers; "sum" is the encoded summary


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
        counts = {n: count(head.get(n, b"0"), f"parts.session {n.decode()}") for n in _COUNTS}
        subs = set()
        for member, _ in parts["subs"]:
            try:
                subs.add(subpath_bytes(utf8(member, "parts.subs member", "surrogatepass")))
            except InvalidId as exc:
                raise ValueError(f"parts.subs: {exc}") from None
        seen: set[bytes] = set()
        main = False
        for member, at in parts["log"]:
            if at != b"0":
                raise ValueError(f"parts.log member {member[:40]!r} has score {at!r}, not 0")
            sub, kind, rest = _split(member)
            if sub and sub not in subs:
                raise ValueError(f"parts.log member {member[:40]!r}: subpath not in subs")
            if kind == MARK:
                utf8(rest, "parts.log uuid", "surrogatepass")
                continue
            seq = rest[:SEQ_DIGITS]
            if len(seq) < SEQ_DIGITS or not seq.isdigit():
                raise ValueError(f"parts.log entry {member[:40]!r} has no 16-digit sequence")
            # Entries are numbered by one counter for every transcript: each number once,
            # none past it (the next append would reuse it, or write 17 digits).
            if not 0 < int(seq) <= counts[b"seq"] or seq in seen:
                raise ValueError(
                    f"parts.log entry {member[:40]!r}: sequence {int(seq)} is repeated or "
                    f"not from 1 to seq {counts[b'seq']}"
                )
            seen.add(seq)
            main = main or not sub
        # A main transcript's append writes its summary and time with its entries.
        missing = [n.decode() for n in (b"v", b"sum", b"mtime") if n not in head]
        if main and missing:
            raise ValueError(f"parts.session has no {', '.join(missing)} for its main transcript")

    def check(self, limits: Limits, entity: Entity) -> None:
        head, log, _ = entity.parts
        fields = dict(head)
        if int(fields.get(b"v", b"0")) > limits.max_us:
            raise limits.late("parts.session v", int(fields[b"v"]), limits.max_us)
        if int(fields.get(b"mtime", b"0")) > limits.max_ms:
            raise limits.late("parts.session mtime", int(fields[b"mtime"]), limits.max_ms)
        uuids: dict[bytes, set[str]] = {}  # subpath -> the uuids its entries carry
        marks: dict[bytes, set[str]] = {}
        try:
            if b"sum" in fields:
                summary = limits.codec.decode(fields[b"sum"], summary_context(entity.id))
                if not isinstance(summary, dict):
                    raise ValueError(f"the summary is {type(summary).__name__}, not an object")
            for member, _ in log:
                sub, kind, rest = _split(member)
                if kind == MARK:
                    marks.setdefault(sub, set()).add(rest.decode("utf-8", "surrogatepass"))
                    continue
                entry = limits.codec.decode(rest[SEQ_DIGITS:], context(entity.id, sub))
                if not isinstance(entry, dict):
                    raise ValueError(f"an entry is {type(entry).__name__}, not an object")
                if isinstance(entry.get("uuid"), str) and entry["uuid"]:
                    uuids.setdefault(sub, set()).add(entry["uuid"])
        except RedistateError as exc:
            raise ValueError(f"does not decode with the store's codec: {exc}") from None
        # A mark without its entry would make an append of that uuid store nothing.
        if uuids != marks:
            odd = sorted(uuids.keys() | marks.keys())
            sub = next(s for s in odd if uuids.get(s) != marks.get(s))
            raise ValueError(
                f"parts.log transcript {sub[:40]!r}: the uuids its entries carry and its "
                "marks differ"
            )


class _Projects(PartsCodec):
    def validate(self, entity_id: str, parts: Mapping[str, Pairs]) -> None:
        for member, at in parts["sessions"]:
            session = utf8(member, "parts.sessions member", "surrogatepass")
            try:
                session_path(entity_id, session)
            except InvalidId as exc:
                raise ValueError(f"parts.sessions member {session!r:.40}: {exc}") from None
            count(at, f"parts.sessions {session!r:.40} time")

    def check(self, limits: Limits, entity: Entity) -> None:
        # When a session was last entered, by the server's clock: one far ahead would
        # keep a gone session's entry from ever being pruned.
        for member, at in entity.parts[0]:
            if int(at) > limits.max_ms:
                raise limits.late(f"parts.sessions {member[:40]!r} time", int(at), limits.max_ms)


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
