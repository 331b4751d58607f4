"""Pydantic AI conversations: the I/O of redistate.pydantic_ai (async source of truth;
``conversations.py`` is the generated sync twin).

A save is one round trip: the conversation is entered in its scope's index and in the
index of every conversation (``lua/pai_index.lua``), then its record and new entries
are written by one script in its slot (``lua/pai_write.lua``), which writes nothing on
a conflict. Each of the three is safe to resend: the new revision is unique, so a save
resent after its reply was lost finds it stored. A record is one command, a history
one script (``lua/pai_history.lua``), a listing one command for the index and one
round trip per server for the records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ...core import kinds
from ...core.batching import raise_first
from ...core.connection_async import AsyncConnection
from ...core.keys import KeySpace
from ...core.scripts import script
from ...records.collection_async import register
from ...records.erasure import entry
from .spec import FIELDS

__all__ = ["AsyncConversations"]

_WRITE: Final = script("pai_write")
_INDEX: Final = script("pai_index")
_HISTORY: Final = script("pai_history")
_DELETE: Final = script("pai_delete")
_DETAILS: Final = script("pai_details")
_PRUNE: Final = script("prune_index")
_PAGE: Final = 500  # index members read, and conversations probed, per round trip


class AsyncConversations:
    """Pydantic AI conversations and their indexes in one redistate namespace."""

    __slots__ = ("_conn", "keys")

    def __init__(self, conn: AsyncConnection, keys: KeySpace) -> None:
        self._conn = conn
        self.keys = keys

    def _keys(self, conversation_id: str) -> tuple[str, str, str]:
        k = self.keys
        return (
            k.conversation(conversation_id),
            k.conversation(conversation_id, "entries"),
            k.conversation(conversation_id, "parents"),
        )

    async def register(self, user: str, conversation_id: str) -> None:
        """Add the conversation to ``user``'s index, before the write it registers."""
        await register(self._conn, self.keys, user, entry(kinds.PYDANTIC_AI_KEY, conversation_id))

    async def record(self, conversation_id: str) -> list[Any]:
        """The record's fields in ``spec.FIELDS`` order (None for each: no record)."""
        return list(await self._conn.idempotent("HMGET", self._keys(conversation_id)[0], *FIELDS))

    async def records(self, conversation_ids: Sequence[str]) -> list[list[Any]]:
        """Many records' fields: one round trip per server."""
        groups = []
        for cid in conversation_ids:
            key = self.keys.conversation(cid)
            groups.append((key, [("HMGET", key, *FIELDS)]))
        return [list(r[0]) for r in await self._conn.batch_checked(groups, atomic=False)]

    async def history(self, conversation_id: str, head: str, limit: int) -> list[Any]:
        """``pai_history``'s reply: ``[1, id, parent, entry, ...]`` oldest first, or
        ``[0, id]`` when the conversation does not hold an entry on the way."""
        _, entries, parents = self._keys(conversation_id)
        return list(await self._conn.script(_HISTORY, (entries, parents), (head, limit)))

    async def write(
        self, conversation_id: str, scope: str | None, argv: Sequence[Any], details: Sequence[Any]
    ) -> list[Any]:
        """Enter the conversation in its indexes and write it (``pai_write``, ``argv``
        from its ARGV[1]), in one round trip; with ``details`` (``pai_details``' ARGV),
        a new conversation's title and metadata are set in it too, once it is written.
        Returns pai_write's reply."""
        upd, ttl_ms = argv[3], argv[6]
        indexed = (conversation_id, upd, ttl_ms)
        calls: list[tuple[Any, Sequence[str], Sequence[Any]]] = [
            (_INDEX, (self.keys.conversations(None),), indexed)
        ]
        if scope is not None:
            calls.append((_INDEX, (self.keys.conversations(scope),), indexed))
        calls.append((_WRITE, self._keys(conversation_id), argv))
        if details:
            calls.append((_DETAILS, self._keys(conversation_id)[:1], details))
        replies = raise_first(await self._conn.scripts(calls))
        return list(replies[len(calls) - 1 - bool(details)])

    async def reindex(self, conversation_id: str, scope: str | None, upd: int) -> None:
        """Put back a conversation's save time in its indexes after a save that
        conflicted had entered its own (only where the conversation is listed)."""
        lists = [self.keys.conversations(None)]
        if scope is not None:
            lists.append(self.keys.conversations(scope))
        await self._conn.batch_checked(
            [(key, [("ZADD", key, "XX", upd, conversation_id)]) for key in lists], atomic=False
        )

    async def delete(self, conversation_id: str, revision: str) -> bool:
        """Delete the conversation if its record is at ``revision``."""
        return bool(await self._conn.script(_DELETE, self._keys(conversation_id), (revision,)))

    async def details(self, conversation_id: str, argv: Sequence[Any]) -> int:
        """``pai_details``: the new details version, 0 if the record moved on."""
        return int(await self._conn.script(_DETAILS, self._keys(conversation_id)[:1], argv))

    async def listed(self, scope: str | None, start: int, count: int) -> list[tuple[bytes, int]]:
        """A page of an index, most recently saved first: (conversation id, ms)."""
        key = self.keys.conversations(scope)
        flat = await self._conn.idempotent(
            "ZRANGE", key, start, start + count - 1, "REV", "WITHSCORES"
        )
        if flat and isinstance(flat[0], list | tuple):  # RESP3: pairs
            return [(bytes(m), int(float(s))) for m, s in flat]
        return [(bytes(m), int(float(s))) for m, s in zip(flat[::2], flat[1::2], strict=True)]

    async def prune(self, scope: str | None, conversation_ids: Sequence[str]) -> None:
        """Take conversations a listing found gone off an index (those entered over a
        minute ago: prune_index)."""
        if conversation_ids:
            await self._conn.script(_PRUNE, (self.keys.conversations(scope),), conversation_ids)

    async def locate(self, entry_id: str) -> str | None:
        """A conversation that holds the entry (any: a fork's copy is the same entry
        with the same history), found by probing every listed conversation, a page at
        a time; None if none does."""
        start = 0
        while True:
            page = await self.listed(None, start, _PAGE)
            if not page:
                return None
            ids = [m.decode("utf-8", "surrogatepass") for m, _ in page]
            groups = []
            for cid in ids:
                key = self.keys.conversation(cid, "parents")
                groups.append((key, [("HEXISTS", key, entry_id)]))
            found = await self._conn.batch_checked(groups, atomic=False)
            for cid, reply in zip(ids, found, strict=True):
                if reply[0]:
                    return cid
            start += _PAGE
