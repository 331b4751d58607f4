"""OpenAI Agents SDK sessions: the I/O of redistate.agents (async source of truth).

One list per session (``KeySpace.agent_session``) and its write memory; every call is
one round trip: LRANGE, or one script in the session's hash slot (``lua/agents_*.lua``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.connection_async import AsyncConnection
from ...core.keys import KeySpace
from ...core.kinds import AGENTS_KEY
from ...core.scripts import Script
from ...records.collection_async import register
from ...records.erasure import entry

__all__ = ["AsyncAgentItems"]


class AsyncAgentItems:
    """The items of Agents SDK sessions in one namespace."""

    __slots__ = ("_conn", "keys")

    def __init__(self, conn: AsyncConnection, keys: KeySpace) -> None:
        self._conn = conn
        self.keys = keys

    @property
    def memory_ms(self) -> int:
        """How long a write id is remembered (the retry window): ARGV of the scripts."""
        return self._conn.memory_ms

    async def read(self, key: str, start: int) -> list[bytes]:
        """The session's items from ``start`` (negative: from the end), oldest first."""
        return list(await self._conn.idempotent("LRANGE", key, start, -1))

    async def run(self, lua: Script, key: str, args: Sequence[Any], wid: str | None = None) -> Any:
        """One of the session scripts on the list and its write memory, with the
        store's durability; ``wid``: the id the memory keeps for the call."""
        keys = (key, self.keys.writes(key))
        replicas = self._conn.replicas(None)
        return await self._conn.script(lua, keys, args, replicas=replicas, wid=wid)

    async def register(self, user: str, session_id: str) -> None:
        """Add the session to ``user``'s index, before the write it registers."""
        await register(self._conn, self.keys, user, entry(AGENTS_KEY, session_id))
