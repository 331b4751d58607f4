"""Claude Agent SDK transcripts: the I/O of redistate.claude (async source of truth;
``transcripts.py`` is the generated sync twin).

A store's first append to a session's main transcript enters it in its project's index
and reads its summary (one round trip, ``lua/claude_index.lua`` and
``lua/claude_head.lua``), then appends (``lua/claude_append.lua``); later ones renew
the index entry and append in one pipeline. A load is one command; a listing two round
trips (the index, then each session's hash).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ...core import kinds
from ...core.batching import Call, raise_first
from ...core.connection_async import AsyncConnection
from ...core.keys import KeySpace
from ...core.scripts import script
from ...records.collection_async import register
from ...records.erasure import entry
from ...records.spec import new_write_id
from .spec import AppendArgs, AppendReply, entry_range

__all__ = ["AsyncClaudeTranscripts"]

_APPEND: Final = script("claude_append").replying(AppendReply.parse)
_INDEX: Final = script("claude_index")
_HEAD: Final = script("claude_head")
_DROP: Final = script("claude_drop")
_PRUNE: Final = script("prune_index")


class AsyncClaudeTranscripts:
    """Claude Agent SDK sessions and project indexes in one redistate namespace."""

    __slots__ = ("_conn", "keys")

    def __init__(self, conn: AsyncConnection, keys: KeySpace) -> None:
        self._conn = conn
        self.keys = keys

    @property
    def memory_ms(self) -> int:
        """How long a write id is remembered (the retry window)."""
        return self._conn.memory_ms

    def _session(self, path: str) -> tuple[str, str, str, str]:
        head = self.keys.claude_session(path)
        log, subs = self.keys.claude_session(path, "log"), self.keys.claude_session(path, "subs")
        return head, log, subs, self.keys.writes(head)

    async def register(self, user: str, path: str) -> None:
        """Add the session to ``user``'s index, before the write it registers."""
        await register(self._conn, self.keys, user, entry(kinds.CLAUDE_KEY, path))

    async def enter(
        self, project: str, path: str, session_id: str, ttl_ms: int
    ) -> tuple[int, bytes]:
        """Enter the session in its project's index and read its summary's version
        and value (b"": none), in one round trip, before the append that folds from
        it: a listing never misses a session that exists."""
        index, head = self.keys.claude_project(project), self.keys.claude_session(path)
        calls = [(_INDEX, (index,), (session_id, ttl_ms)), (_HEAD, (head,), ())]
        replies = raise_first(await self._conn.scripts(calls))
        return int(replies[1][0]), bytes(replies[1][1])

    async def append(
        self, project: str, path: str, session_id: str, args: AppendArgs, index: bool
    ) -> AppendReply:
        """Append a batch (one script in the session's slot); with ``index``, the
        session's index entry is renewed first, in the same round trip."""
        wid = new_write_id()
        calls: list[Call] = []
        if index:
            entry = (self.keys.claude_project(project),)
            calls.append(Call(_INDEX, entry, (session_id, args.ttl_ms)))
        calls.append(
            Call(_APPEND, self._session(path), (self._conn.memory_ms, wid, *args.argv()), wid=wid)
        )
        replies = raise_first(await self._conn.writes(calls))
        reply: AppendReply = replies[-1]
        return reply

    async def load(self, path: str, sub: bytes) -> list[bytes]:
        """A transcript's members (entries only), oldest first."""
        low, high = entry_range(sub)
        log = self.keys.claude_session(path, "log")
        return list(await self._conn.idempotent("ZRANGEBYLEX", log, low, high))

    async def sessions(self, project: str) -> list[bytes]:
        """The session ids a project's index lists (some may be gone: see prune)."""
        index = self.keys.claude_project(project)
        return [bytes(s) for s in await self._conn.idempotent("ZRANGE", index, 0, -1)]

    async def prune(self, project: str, session_ids: Sequence[bytes | str]) -> None:
        """Take sessions found gone off their project's index (those entered over a
        minute ago: prune_index)."""
        if session_ids:
            await self._conn.script(_PRUNE, (self.keys.claude_project(project),), session_ids)

    async def heads(self, paths: Sequence[str], summary: bool) -> list[list[Any]]:
        """Each session's main-transcript write time (None: gone, or no main
        transcript) and, with ``summary``, its encoded summary: one round trip per
        server."""
        fields = ("mtime", "sum") if summary else ("mtime",)
        groups = [
            (self.keys.claude_session(p), [("HMGET", self.keys.claude_session(p), *fields)])
            for p in paths
        ]
        return [list(r[0]) for r in await self._conn.batch_checked(groups, atomic=False)]

    async def subkeys(self, path: str) -> list[bytes]:
        """The session's subpaths."""
        return list(await self._conn.idempotent("SMEMBERS", self.keys.claude_session(path, "subs")))

    async def delete(self, path: str) -> None:
        """Delete a session with every transcript of it: one DEL (its keys share a
        slot). Its index entry goes at a listing a minute on (prune_index): taken off
        here, it could go after another process's append made the session again."""
        keys = self._session(path)
        await self._conn.batch_checked([(keys[0], [("DEL", *keys)])], atomic=False)

    async def drop(self, path: str, sub: bytes) -> None:
        """Delete one subagent transcript: its entries, its uuids and its subpath."""
        keys = (self.keys.claude_session(path, "log"), self.keys.claude_session(path, "subs"))
        await self._conn.script(_DROP, keys, (sub,))
