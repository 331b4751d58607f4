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

__all__ = [
    "PARTS",
    "GraphDumpReply",
    "GraphHistoryArgs",
    "GraphHistoryReply",
    "GraphLoadArgs",
    "GraphLoadReply",
    "GraphPutArgs",
    "GraphPutReply",
    "GraphReadArgs",
    "GraphReadReply",
    "GraphRemoveArgs",
    "GraphRemoveReply",
    "GraphSpec",
    "GraphWritesArgs",
    "GraphWritesReply",
    "Stored",
    "pack",
    "unpack_parts",
]

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

    __slots__ = ("keep", "keys", "refresh", "ttl_ms")

    def __init__(
        self, keys: KeySpace, *, ttl_ms: int = 0, keep: int = 0, refresh: bool = False
    ) -> None:
        self.keys = keys
        self.ttl_ms = ttl_ms
        self.keep = keep
        self.refresh = refresh  # reads restart the thread's TTL too

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
        name = check_name(ns, "checkpoint_ns")
        # Below "<ns>\x01", exclusive: every "<ns>\0<id>" (an \xff bound would not be
        # UTF-8, which a REST API's JSON cannot carry).
        return b"(" + name + b"\x01", b"[" + name + b"\0"

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


@dataclass(frozen=True, slots=True)
class GraphPutArgs:
    """ARGV of graph_put."""

    member: bytes  # "<checkpoint_ns>\0<checkpoint_id>"
    packed: bytes  # the checkpoint (without channel values), metadata and parent id
    run_id: bytes  # b"" = none
    ttl_ms: int  # 0 = no expiry set
    guard: str  # lease value, "" = unguarded
    keep: int  # the most checkpoints per namespace, 0 = all
    delta: bool  # the checkpoint uses a DeltaChannel
    refs: tuple[bytes, ...]  # the blob fields the checkpoint uses
    blobs: tuple[tuple[bytes, bytes], ...]  # (blob field, packed value): the new ones

    def argv(self) -> tuple[Any, ...]:
        head = (self.member, self.packed, self.run_id, self.ttl_ms, self.guard, self.keep)
        flat = (value for pair in self.blobs for value in pair)
        return (*head, int(self.delta), len(self.refs), *self.refs, *flat)


@dataclass(frozen=True, slots=True)
class GraphPutReply:
    """A graph_put reply: how many old checkpoints the history cap removed; -1 for a
    resend of a checkpoint already stored (found before the fence check)."""

    removed: int

    @classmethod
    def parse(cls, reply: Any) -> GraphPutReply:
        return cls(int(reply))

    @property
    def wrote(self) -> bool:
        return True  # a resend notes nothing, but a replicated put still waits

    @property
    def guarded(self) -> bool:
        """Whether the script reached its fence check (which renews an inline lease)."""
        return self.removed != -1


@dataclass(frozen=True, slots=True)
class GraphWritesArgs:
    """ARGV of graph_writes."""

    member: bytes  # the checkpoint the writes belong to
    ttl_ms: int  # 0 = no expiry set
    guard: str  # lease value, "" = unguarded
    writes: tuple[tuple[bytes, bool, bytes], ...]  # (field suffix, replaces, packed)

    def argv(self) -> tuple[Any, ...]:
        flat = (
            v for suffix, replace, packed in self.writes for v in (suffix, int(replace), packed)
        )
        return (self.member, self.ttl_ms, self.guard, *flat)


@dataclass(frozen=True, slots=True)
class GraphWritesReply:
    """A graph_writes reply: how many writes were stored."""

    stored: int

    @classmethod
    def parse(cls, reply: Any) -> GraphWritesReply:
        return cls(int(reply))

    @property
    def wrote(self) -> bool:
        return True  # the thread's TTL is set even when every write was stored already


@dataclass(frozen=True, slots=True)
class GraphReadArgs:
    """ARGV of graph_read: a ZREVRANGEBYLEX range of members, the most to return, and
    the thread's TTL to refresh when it finds one (0: a read leaves it)."""

    upper: bytes
    lower: bytes
    count: int
    refresh_ms: int = 0

    def argv(self) -> tuple[Any, ...]:
        return (self.upper, self.lower, self.count, self.refresh_ms)


@dataclass(frozen=True, slots=True)
class GraphReadReply:
    """A graph_read reply: (member, Stored) per checkpoint, newest first."""

    found: tuple[tuple[bytes, Stored], ...]

    @classmethod
    def parse(cls, reply: Any) -> GraphReadReply:
        return cls(tuple(GraphSpec.stored(entry) for entry in reply))

    @property
    def wrote(self) -> bool:
        return False  # a read


@dataclass(frozen=True, slots=True)
class GraphHistoryArgs:
    """ARGV of graph_history: the target checkpoint's range (graph_read's; the newest
    in it is the target), the thread's TTL to restart when it is found (0: a read
    leaves it), and the channels to walk for, each once."""

    upper: bytes
    lower: bytes
    refresh_ms: int
    channels: tuple[bytes, ...]

    def argv(self) -> tuple[Any, ...]:
        return (self.upper, self.lower, self.refresh_ms, *self.channels)


@dataclass(frozen=True, slots=True)
class GraphHistoryReply:
    """A graph_history reply: the writes to the channels along the target's parent
    chain as (task id, packed write), oldest checkpoint first and each one's in
    LangGraph's order; and (channel number, packed value) for each channel that
    stopped at a stored value (number n: the n-th channel of the call, from 1)."""

    writes: tuple[tuple[str, bytes], ...]
    seeds: tuple[tuple[int, bytes], ...]

    @classmethod
    def parse(cls, reply: Any) -> GraphHistoryReply:
        wfields, wvalues, numbers, values = reply
        writes = tuple(
            (bytes(field).split(b"\0")[3].decode(), bytes(value))
            for field, value in zip(wfields, wvalues, strict=True)
        )  # a write field is "<ns>\0<checkpoint id>\0<task path>\0<task id>\0<idx>"
        seeds = tuple((int(n), bytes(v)) for n, v in zip(numbers, values, strict=True))
        return cls(writes, seeds)

    @property
    def wrote(self) -> bool:
        return False  # a read


@dataclass(frozen=True, slots=True)
class GraphRemoveArgs:
    """ARGV of graph_remove: the checkpoints of these runs, or (None) every one but the
    newest of each namespace."""

    run_ids: tuple[bytes, ...] | None = None

    def argv(self) -> tuple[Any, ...]:
        return ("latest",) if self.run_ids is None else ("runs", *self.run_ids)


@dataclass(frozen=True, slots=True)
class GraphRemoveReply:
    """A graph_remove reply: how many checkpoints were removed; ``refused``: "latest"
    on a thread that uses a DeltaChannel (nothing removed)."""

    removed: int
    refused: bool = False

    @classmethod
    def parse(cls, reply: Any) -> GraphRemoveReply:
        removed = int(reply)
        return cls(0, True) if removed == -1 else cls(removed)

    @property
    def wrote(self) -> bool:
        return self.removed > 0


DUMP_ARGS: Final = ("dump",)  # ARGV of graph_copy's first half, on the source thread


@dataclass(frozen=True, slots=True)
class GraphDumpReply:
    """A graph_copy "dump" reply: the source thread's hashes as flat field/value lists."""

    cp: tuple[bytes, ...]
    blobs: tuple[bytes, ...]
    writes: tuple[bytes, ...]

    @classmethod
    def parse(cls, reply: Any) -> GraphDumpReply:
        cp, blobs, writes = (tuple(part) for part in reply)
        return cls(cp, blobs, writes)

    @property
    def wrote(self) -> bool:
        return False  # a read


@dataclass(frozen=True, slots=True)
class GraphLoadArgs:
    """ARGV of graph_copy "load": a dump, added to the target thread."""

    ttl_ms: int  # 0 = none
    dump: GraphDumpReply

    def argv(self) -> tuple[Any, ...]:
        d = self.dump
        return ("load", self.ttl_ms, len(d.cp) // 2, len(d.blobs) // 2, *d.cp, *d.blobs, *d.writes)


@dataclass(frozen=True, slots=True)
class GraphLoadReply:
    """A graph_copy "load" reply: how many checkpoints were added."""

    added: int

    @classmethod
    def parse(cls, reply: Any) -> GraphLoadReply:
        return cls(int(reply))

    @property
    def wrote(self) -> bool:
        return True  # the thread's TTL is set even when nothing was added
