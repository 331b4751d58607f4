"""Claude Agent SDK transcripts, the pure half: ids and keys, how an entry is stored,
the scripts' arguments and replies (``lua/claude_*.lua``). No I/O, no SDK import.

A session is the entity ``<project>/<session id>`` ("%" and "/" in the project
percent-escaped, so the split is exact). All its transcripts, the main one and each
subagent's (``subpath``), are one sorted set in its hash slot, every member at score 0
so that they sort by their bytes: an entry is ``<subpath>\\0<seq:16 digits><encoded
entry>`` and a ``uuid`` it carries is marked by ``<subpath>\\1<uuid>`` (the main
transcript's subpath is ""). One transcript is then one lexicographic range, read,
counted or deleted in one command; a subpath holds no byte below 0x20, so no range
reaches into another. The session's hash holds the entry counter, the summary the SDK
folds and its version, and the main transcript's last write time (ms).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from ...core.errors import InvalidId
from ...core.keys import escape_id, path_part

__all__ = [
    "ENTRY",
    "MARK",
    "SEQ_DIGITS",
    "AppendArgs",
    "AppendReply",
    "Appended",
    "context",
    "entry_range",
    "session_path",
    "split_member",
    "subpath_bytes",
    "summary_context",
]

ENTRY: Final = b"\x00"  # after the subpath: an entry follows
MARK: Final = b"\x01"  # after the subpath: a uuid's mark follows
SEQ_DIGITS: Final = 16
_MAX_SUBPATH: Final = 512  # bytes, UTF-8


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidId(f"{what} must be a non-empty str, got {value!r:.80}")
    return value


def session_path(project_key: object, session_id: object) -> str:
    """The entity id of a session. Raises InvalidId naming the part that is wrong."""
    path = f"{path_part(project_key, 'project_key')}/{_text(session_id, 'session_id')}"
    try:
        escape_id(path)
    except InvalidId as exc:
        raise InvalidId(f"project_key and session_id together: {exc}") from None
    return path


def subpath_bytes(subpath: object) -> bytes:
    """A key's subpath as members begin with it (b"" for the main transcript).

    Raises:
        InvalidId: not a str, empty, over 512 UTF-8 bytes, or holding a character
            below U+0020 (it would reach into another transcript's range).
    """
    if subpath is None:
        return b""
    raw = _text(subpath, "subpath").encode("utf-8", "surrogatepass")
    if len(raw) > _MAX_SUBPATH:
        raise InvalidId(f"subpath is {len(raw)} UTF-8 bytes, over the limit of {_MAX_SUBPATH}")
    if min(raw) < 0x20:
        raise InvalidId(f"subpath {subpath!r:.80} holds a control character (below U+0020)")
    return raw


def entry_range(sub: bytes) -> tuple[bytes, bytes]:
    """ZRANGEBYLEX bounds of a transcript's entries (its marks excluded)."""
    return b"[" + sub + ENTRY, b"(" + sub + MARK


def split_member(member: bytes, sub: bytes) -> bytes:
    """The encoded entry of one of ``sub``'s members. Raises ValueError if it is not
    ``<subpath>\\0<seq><entry>``."""
    head = len(sub) + 1
    seq = member[head : head + SEQ_DIGITS]
    if member[:head] != sub + ENTRY or len(seq) != SEQ_DIGITS or not seq.isdigit():
        raise ValueError(f"not '<subpath>\\0<seq><entry>': {bytes(member)[:60]!r}")
    return bytes(member[head + SEQ_DIGITS :])


def context(path: str, sub: bytes) -> bytes:
    """What the codec binds an entry to: its session and transcript (an entry moved
    to another does not decode)."""
    return b"claude\0entry\0" + path.encode("utf-8", "surrogatepass") + b"\0" + sub


def summary_context(path: str) -> bytes:
    """What the codec binds a session's summary to."""
    return b"claude\0summary\0" + path.encode("utf-8", "surrogatepass")


@dataclass(frozen=True, slots=True)
class AppendArgs:
    """ARGV of claude_append (after the write memory and the write id)."""

    ttl_ms: int  # 0 = leave the expiry as it is
    sub: bytes  # b"": the main transcript
    # The summary version the fold started from (main transcript only; None: no fold)
    # and the folded summary, encoded.
    version: int | None
    summary: bytes
    uuids: Sequence[bytes]  # one per entry, b"" for an entry without one
    entries: Sequence[bytes]  # encoded, in order

    def argv(self) -> tuple[Any, ...]:
        version = "-" if self.version is None else self.version
        return (
            self.ttl_ms,
            self.sub,
            version,
            self.summary,
            len(self.entries),
            *self.uuids,
            *self.entries,
        )


class Appended(Enum):
    """What claude_append did."""

    APPENDED = 1
    RESENT = 2  # a resend of an append already made: nothing written again
    MOVED = 3  # the summary moved on since the fold, or an entry's uuid is stored


@dataclass(frozen=True, slots=True)
class AppendReply:
    """A claude_append reply. APPENDED: the main transcript's write time ``mtime``
    (ms) and the summary's new ``version``. MOVED: the summary's ``version`` and
    ``summary`` (encoded, b"" for none) as stored, and which ``stored`` uuids of the
    batch the transcript holds already."""

    status: Appended
    mtime: int = 0
    version: int = 0
    summary: bytes = b""
    stored: tuple[bytes, ...] = ()

    @classmethod
    def parse(cls, reply: Any) -> AppendReply:
        status = Appended(int(reply[0]))
        if status is Appended.APPENDED:
            return cls(status, int(reply[1]), int(reply[2]))
        if status is Appended.MOVED:
            stored = tuple(bytes(u) for u in reply[3:])
            return cls(status, 0, int(reply[1]), bytes(reply[2]), stored)
        return cls(status)

    @property
    def wrote(self) -> bool:
        return self.status is not Appended.MOVED
