"""LangGraph threads in plain Redis, the pure half: names, fields, packing, replies.

A thread is seven keys in its hash slot (``KeySpace.graph_thread``; lua/_graph.lua
describes each): the checkpoints (packed by the saver's serializer), a lexicographic
index of ``<checkpoint_ns>\\0<checkpoint_id>`` (LangGraph's ids sort by time), channel
values stored once per version with a count of the checkpoints that use them, pending
writes indexed in LangGraph's order, and the thread's runs. This module knows nothing
of LangGraph's types (redistate.langgraph does): it turns names into fields and script
replies into tuples of bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from ...core.keys import KeySpace

__all__ = ["PARTS", "GraphSpec", "Stored", "pack", "unpack_parts"]

# The thread's keys, in the order every graph script takes them (KEYS[1..7]).
PARTS: Final = ("cp", "idx", "blobs", "refs", "writes", "widx", "runs")
_IDX_OFFSET: Final = 10**9  # write indexes go down to -4 (LangGraph's special writes)
MAX_PAGE: Final = 1000


def pack(*parts: bytes) -> bytes:
    """Parts as one value, each ``<length>:<bytes>`` (any bytes may follow)."""
    return b"".join(b"%d:%s" % (len(part), part) for part in parts)


def unpack_parts(data: bytes, where: str) -> list[bytes]:
    """Invert :func:`pack`.

    Raises:
        ValueError: ``data`` is not a packed value.
    """
    parts, at = [], 0
    while at < len(data):
        colon = data.find(b":", at)
        length = data[at:colon]
        if colon < 0 or not length.isdigit():
            raise ValueError(f"{where} is not a packed value: {data[:40]!r}")
        end = colon + 1 + int(length)
        if end > len(data):
            raise ValueError(f"{where} is truncated")
        parts.append(data[colon + 1 : end])
        at = end
    return parts


def check_name(value: object, what: str) -> bytes:
    """A thread-level name (namespace, checkpoint/task id, channel, version) as bytes.

    Raises:
        TypeError: not a str (versions may be int or float too).
        ValueError: holds NUL or \\x01 (the separators of the fields built from it).
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}: {value!r:.80}")
    text = str(value)
    if "\x00" in text or "\x01" in text:
        raise ValueError(f"{what} {text!r:.80} must not contain NUL or \\x01")
    return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True, slots=True)
class Stored:
    """One checkpoint as graph_read returned it: its namespace and id, the packed
    checkpoint, channel values by (channel, version) name, and its writes in order as
    (task id, task path, packed write)."""

    ns: str
    checkpoint_id: str
    packed: bytes
    blobs: dict[tuple[str, str], bytes]
    writes: list[tuple[str, str, bytes]]


class GraphSpec:
    """Every key, field and range the saver uses, and the parsing of replies."""

    __slots__ = ("keep", "keys", "ttl_ms")

    def __init__(self, keys: KeySpace, *, ttl_ms: int = 0, keep: int = 0) -> None:
        self.keys = keys
        self.ttl_ms = ttl_ms
        self.keep = keep

    def own_keys(self, thread_id: str) -> tuple[str, ...]:
        """The thread's seven keys: KEYS[1..7] of every graph script."""
        return tuple(self.keys.graph_thread(thread_id, part) for part in PARTS)

    def thread_keys(self, thread_id: str) -> tuple[str, ...]:
        """KEYS[1..8] of the writing scripts: the thread's seven, then its lock key."""
        return (*self.own_keys(thread_id), self.keys.lock(thread_id))

    @staticmethod
    def member(ns: str, checkpoint_id: str) -> bytes:
        return check_name(ns, "checkpoint_ns") + b"\0" + check_name(checkpoint_id, "checkpoint_id")

    @staticmethod
    def blob_field(ns: str, channel: str, version: Any) -> bytes:
        return b"\0".join(
            (check_name(ns, "checkpoint_ns"), check_name(channel, "channel"),
             check_name(version, "channel version"))
        )  # fmt: skip

    @staticmethod
    def write_suffix(task_path: str, task_id: str, idx: int) -> bytes:
        """The part of a write's field after its checkpoint: sorts like LangGraph's
        ``writes_sort_key`` (task path, task id, index; special writes below 0)."""
        if (
            isinstance(idx, bool)
            or not isinstance(idx, int)
            or not -_IDX_OFFSET < idx < _IDX_OFFSET
        ):
            raise ValueError(f"write index {idx!r} is outside ±{_IDX_OFFSET}")
        path, task = check_name(task_path, "task_path"), check_name(task_id, "task_id")
        return b"%s\0%s\0%010d" % (path, task, idx + _IDX_OFFSET)

    # -- ranges for graph_read (ZREVRANGEBYLEX: newest first) ---------------------------

    def latest(self, ns: str) -> tuple[bytes, bytes]:
        prefix = check_name(ns, "checkpoint_ns") + b"\0"
        return b"[" + prefix + b"\xff", b"[" + prefix

    def exactly(self, ns: str, checkpoint_id: str) -> tuple[bytes, bytes]:
        m = self.member(ns, checkpoint_id)
        return b"[" + m, b"[" + m

    def listing(self, ns: str | None, before: str | None) -> tuple[bytes, bytes]:
        """The range of a list(): one namespace or all, below ``before`` if given (in
        every namespace when it is all of them: the caller filters the rest)."""
        if ns is None:
            return b"+", b"-"
        upper, lower = self.latest(ns)
        if before is not None:
            upper = b"(" + self.member(ns, before)
        return upper, lower

    @staticmethod
    def after(member: bytes) -> bytes:
        """The upper end of the next page after a page ending with ``member``."""
        return b"(" + member

    # -- replies ------------------------------------------------------------------------

    @staticmethod
    def stored(entry: Sequence[Any]) -> tuple[bytes, Stored]:
        """(member, Stored) of one graph_read entry."""
        member, packed, refs, values, wfields, wvalues = entry
        ns, _, checkpoint_id = bytes(member).partition(b"\0")
        blobs: dict[tuple[str, str], bytes] = {}
        for field, value in zip(refs, values, strict=True):
            if value:  # gone: a version nothing stores ("empty" is packed, not b"")
                _, channel, version = bytes(field).split(b"\0", 2)
                blobs[(channel.decode(), version.decode())] = bytes(value)
        writes = []
        for field, value in zip(wfields, wvalues, strict=True):
            parts = bytes(field).split(b"\0")
            writes.append((parts[3].decode(), parts[2].decode(), bytes(value)))
        return bytes(member), Stored(
            ns.decode(), checkpoint_id.decode(), bytes(packed), blobs, writes
        )
