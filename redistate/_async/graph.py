"""LangGraph threads: the I/O of redistate.langgraph's saver (async source of truth).

Each method is one script or command on one thread's slot, but for the run index
(``delete_for_runs``), which lives in each run's own slot.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from ..errors import InvalidId
from ..graph import MAX_PAGE, PARTS, GraphSpec, Stored
from ..scripts import script
from ._client import AsyncConnection

__all__ = ["AsyncGraph"]

_PUT = script("graph_put")
_WRITES = script("graph_writes")
_READ = script("graph_read")
_REMOVE = script("graph_remove")
_COPY = script("graph_copy")
_RUNS_SEEN = 4096  # (run, thread) pairs remembered as indexed (cleared when full)


class AsyncGraph:
    """The saver's storage: checkpoints, channel values and writes of threads."""

    __slots__ = ("_conn", "_runs_seen", "spec")

    def __init__(self, conn: AsyncConnection, spec: GraphSpec) -> None:
        self._conn = conn
        self.spec = spec
        self._runs_seen: set[tuple[str, str]] = set()

    async def put(
        self,
        thread_id: str,
        member: bytes,
        packed: bytes,
        run_id: str,
        refs: Sequence[bytes],
        blobs: Sequence[tuple[bytes, bytes]],
        guard: str,
    ) -> int:
        """graph_put; returns how many old checkpoints the history cap removed. A
        checkpoint of a run registers the thread under the run first (once per saver):
        an interrupted put leaves an entry for nothing, never a checkpoint unindexed."""
        keys = self.spec.thread_keys(thread_id)
        if run_id and (run_id, thread_id) not in self._runs_seen:
            await self._index_run(run_id, thread_id)
        flat = [value for pair in blobs for value in pair]
        args = (member, packed, run_id, self.spec.ttl_ms, guard, self.spec.keep, len(refs))
        return int(await self._conn.script(_PUT, keys, (*args, *refs, *flat)))

    async def _index_run(self, run_id: str, thread_id: str) -> None:
        run_key = self.spec.keys.graph_run(run_id)
        await self._conn.idempotent("SADD", run_key, thread_id)
        if self.spec.ttl_ms:
            await self._conn.idempotent("PEXPIRE", run_key, self.spec.ttl_ms)
        if len(self._runs_seen) >= _RUNS_SEEN:
            self._runs_seen.clear()
        self._runs_seen.add((run_id, thread_id))

    async def put_writes(
        self, thread_id: str, member: bytes, writes: Sequence[tuple[bytes, bool, bytes]], guard: str
    ) -> int:
        """graph_writes: (field suffix, replaces, packed write) each."""
        keys = self.spec.thread_keys(thread_id)
        flat = [v for suffix, replace, packed in writes for v in (suffix, int(replace), packed)]
        return int(await self._conn.script(_WRITES, keys, (member, self.spec.ttl_ms, guard, *flat)))

    async def read(
        self, thread_id: str, upper: bytes, lower: bytes, count: int
    ) -> list[tuple[bytes, Stored]]:
        """Up to ``count`` checkpoints from ``upper`` down to ``lower``, newest first."""
        keys = self.spec.thread_keys(thread_id)[: len(PARTS)]
        reply = await self._conn.script(_READ, keys, (upper, lower, min(count, MAX_PAGE)))
        return [self.spec.stored(entry) for entry in reply]

    async def pages(
        self, thread_id: str, upper: bytes, lower: bytes
    ) -> AsyncIterator[tuple[bytes, Stored]]:
        """Every checkpoint from ``upper`` down to ``lower``, read a page at a time."""
        while True:
            page = await self.read(thread_id, upper, lower, 100)
            for item in page:
                yield item
            if len(page) < 100:
                return
            upper = self.spec.after(page[-1][0])

    async def remove(self, thread_id: str, mode: str, run_id: str = "") -> int:
        keys = self.spec.thread_keys(thread_id)[: len(PARTS)]
        args = (mode, run_id) if run_id else (mode,)
        return int(await self._conn.script(_REMOVE, keys, args))

    async def delete(self, thread_id: str) -> int:
        """Every key of the thread (one DEL: they share a slot)."""
        keys = self.spec.thread_keys(thread_id)[: len(PARTS)]
        return int(await self._conn.idempotent("DEL", *keys))

    async def copy(self, source: str, target: str) -> int:
        """Checkpoints of ``source`` that ``target`` lacks, added to it (two threads, two
        slots: read in one step, written in one step). Returns how many."""
        parts = len(PARTS)
        dump = await self._conn.script(_COPY, self.spec.thread_keys(source)[:parts], ("dump",))
        cp, blobs, writes = (list(part) for part in dump)
        if not cp:
            return 0
        runs = {bytes(v).decode() for f, v in zip(cp[::2], cp[1::2], strict=True)
                if bytes(f).startswith(b"u|") and v}  # fmt: skip
        for run_id in sorted(runs):
            await self._index_run(run_id, target)
        args = ("load", self.spec.ttl_ms, len(cp) // 2, len(blobs) // 2, *cp, *blobs, *writes)
        return int(await self._conn.script(_COPY, self.spec.thread_keys(target)[:parts], args))

    async def threads(self) -> AsyncIterator[str]:
        """Every thread of the namespace (SCAN on every primary)."""
        async for key in self._conn.scan(self.spec.keys.graph_pattern()):
            try:
                kind, thread_id, part = self.spec.keys.parse(key)
            except InvalidId:
                continue
            if kind == "graph" and part == "idx":
                yield thread_id

    async def run_threads(self, run_id: str) -> list[str]:
        """The threads a run wrote checkpoints to."""
        members: Any = await self._conn.idempotent("SMEMBERS", self.spec.keys.graph_run(run_id))
        return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)

    async def forget_run(self, run_id: str) -> None:
        await self._conn.idempotent("DEL", self.spec.keys.graph_run(run_id))
        self._runs_seen = {pair for pair in self._runs_seen if pair[0] != run_id}
