"""LangGraph threads: the I/O of redistate.langgraph's saver (async source of truth).

Each method is one script or command on one thread's slot; ``delete_runs`` and
``threads`` visit every thread of the namespace (SCAN).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from ...core import telemetry
from ...core.connection_async import AsyncConnection
from ...core.errors import InvalidId
from ...core.kinds import GRAPH, GRAPH_KEY
from ...core.scripts import script
from ...records.collection_async import register
from ...records.erasure import entry
from .graph import (
    DUMP_ARGS,
    MAX_PAGE,
    GraphDumpReply,
    GraphHistoryArgs,
    GraphHistoryReply,
    GraphLoadArgs,
    GraphLoadReply,
    GraphPutArgs,
    GraphPutReply,
    GraphReadArgs,
    GraphReadReply,
    GraphRemoveArgs,
    GraphRemoveReply,
    GraphSpec,
    GraphWritesArgs,
    GraphWritesReply,
    Stored,
)

__all__ = ["AsyncGraph"]

_PUT = script("graph_put").replying(GraphPutReply.parse)
_WRITES = script("graph_writes").replying(GraphWritesReply.parse)
_READ = script("graph_read").replying(GraphReadReply.parse)
_HISTORY = script("graph_history").replying(GraphHistoryReply.parse)
_REMOVE = script("graph_remove").replying(GraphRemoveReply.parse)
# graph_copy has two halves, each with its own reply (the same script).
_DUMP = script("graph_copy").replying(GraphDumpReply.parse)
_LOAD = script("graph_copy").replying(GraphLoadReply.parse)


class AsyncGraph:
    """The saver's storage: checkpoints, channel values and writes of threads."""

    __slots__ = ("_conn", "spec")

    def __init__(self, conn: AsyncConnection, spec: GraphSpec) -> None:
        self._conn = conn
        self.spec = spec

    async def register(self, user: str, thread_id: str) -> None:
        """Add the thread to ``user``'s index, before the write it registers."""
        await register(self._conn, self.spec.keys, user, entry(GRAPH_KEY, thread_id))

    async def put(
        self,
        thread_id: str,
        member: bytes,
        packed: bytes,
        run_id: bytes,
        refs: Sequence[bytes],
        blobs: Sequence[tuple[bytes, bytes]],
        delta: bool,
        guard: str,
        lease: Any = None,
    ) -> int:
        """graph_put; returns how many old checkpoints the history cap removed."""
        keys = self.spec.thread_keys(thread_id)
        args = GraphPutArgs(
            member, packed, run_id, self.spec.ttl_ms, guard, self.spec.keep, delta,
            tuple(refs), tuple(blobs),
        )  # fmt: skip
        return max(0, (await self._conn.script(_PUT, keys, args.argv(), lease=lease)).removed)

    async def put_writes(
        self,
        thread_id: str,
        member: bytes,
        writes: Sequence[tuple[bytes, bool, bytes]],
        guard: str,
        lease: Any = None,
    ) -> int:
        """graph_writes: (field suffix, replaces, packed write) each."""
        keys = self.spec.thread_keys(thread_id)
        args = GraphWritesArgs(member, self.spec.ttl_ms, guard, tuple(writes))
        return (await self._conn.script(_WRITES, keys, args.argv(), lease=lease)).stored

    async def read(
        self, thread_id: str, upper: bytes, lower: bytes, count: int
    ) -> list[tuple[bytes, Stored]]:
        """Up to ``count`` checkpoints from ``upper`` down to ``lower``, newest first."""
        keys = self.spec.own_keys(thread_id)
        refresh = self.spec.ttl_ms if self.spec.refresh else 0
        args = GraphReadArgs(upper, lower, min(count, MAX_PAGE), refresh)
        return list((await self._conn.script(_READ, keys, args.argv())).found)

    async def history(
        self, thread_id: str, upper: bytes, lower: bytes, channels: Sequence[bytes]
    ) -> GraphHistoryReply:
        """graph_history: the writes to ``channels`` along the parent chain of the
        newest checkpoint from ``upper`` down to ``lower``, and the nearest value each
        has stored, however long the chain (one script)."""
        keys = self.spec.own_keys(thread_id)
        refresh = self.spec.ttl_ms if self.spec.refresh else 0
        args = GraphHistoryArgs(upper, lower, refresh, tuple(channels))
        return await self._conn.script(_HISTORY, keys, args.argv())

    async def pages(
        self, thread_id: str, upper: bytes, lower: bytes, size: int = 100
    ) -> AsyncIterator[tuple[bytes, Stored]]:
        """Every checkpoint from ``upper`` down to ``lower``, read ``size`` at a time
        (a list with a limit and nothing to filter reads no more than it returns)."""
        while True:
            # A span per page (the saver's list is a generator: a span around it would
            # stay open while the caller works between items).
            with telemetry.operation("list", GRAPH.name, self.spec.keys.namespace, thread_id):
                page = await self.read(thread_id, upper, lower, size)
            for item in page:
                yield item
            if len(page) < size:
                return
            upper = self.spec.after(page[-1][0])

    async def keep_latest(self, thread_id: str) -> bool:
        """Only the newest checkpoint of each namespace stays; False (nothing removed)
        for a thread that uses a DeltaChannel."""
        keys = self.spec.own_keys(thread_id)
        return not (await self._conn.script(_REMOVE, keys, GraphRemoveArgs().argv())).refused

    async def delete_runs(self, run_ids: Sequence[bytes]) -> int:
        """Every checkpoint of these runs, in every thread of the namespace (one script
        per thread: the runs are indexed inside each thread, in its slot)."""
        removed = 0
        async for thread_id in self.threads():
            keys = self.spec.own_keys(thread_id)
            args = GraphRemoveArgs(tuple(run_ids))
            removed += (await self._conn.script(_REMOVE, keys, args.argv())).removed
        return removed

    async def delete(self, thread_id: str) -> int:
        """Every key of the thread (one DEL: they share a slot)."""
        keys = self.spec.own_keys(thread_id)
        return int(await self._conn.idempotent("DEL", *keys))

    async def copy(self, source: str, target: str) -> int:
        """Checkpoints of ``source`` that ``target`` lacks, added to it (two threads, two
        slots: read in one step, written in one step). Returns how many."""
        dump = await self._conn.script(_DUMP, self.spec.own_keys(source), DUMP_ARGS)
        if not dump.cp:
            return 0
        args = GraphLoadArgs(self.spec.ttl_ms, dump).argv()
        return (await self._conn.script(_LOAD, self.spec.own_keys(target), args)).added

    async def threads(self) -> AsyncIterator[str]:
        """Every thread of the namespace (SCAN on every primary)."""
        async for key in self._conn.scan(self.spec.keys.graph_pattern()):
            try:
                kind, thread_id, part = self.spec.keys.parse(key)
            except InvalidId:
                continue
            if kind == GRAPH_KEY and part == "idx":
                yield thread_id
