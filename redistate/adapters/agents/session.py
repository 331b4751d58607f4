"""OpenAI Agents SDK sessions in Redis: ``RedistateSession`` (needs ``redistate[openai-agents]``).

One Redis list per session, ``ns:agents:{id}``, oldest item first; each item is one
element, encoded by the store's codec (JSON, or encrypted). Every call is one round
trip: LRANGE, or one script in the session's hash slot (``lua/agents_*.lua``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar, cast

from agents.items import TResponseInputItem
from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings, coerce_session_settings

from ...core import telemetry
from ...core._ttl import check_ttl
from ...core.errors import CodecError, IntegrityError, InvalidId, StateTooLarge
from ...core.kinds import AGENTS
from ...core.scripts import Script, script
from ...records.spec import new_write_id
from ...store import Store
from ...store_async import AsyncStore
from .spec import (
    AgentsAddArgs,
    AgentsAddReply,
    AgentsClearArgs,
    AgentsClearReply,
    AgentsPopArgs,
    AgentsPopReply,
)

__all__ = ["RedistateSession"]

_T = TypeVar("_T")
_log = logging.getLogger("redistate")
_ADD = script("agents_add").replying(AgentsAddReply.parse)
_POP = script("agents_pop").replying(AgentsPopReply.parse)
_CLEAR = script("agents_clear").replying(AgentsClearReply.parse)


def _positive(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int or None, got {type(value).__name__}")
    if not 1 <= value <= 10**15:
        raise ValueError(f"{what} must be from 1 to 10**15, got {value}")
    return value


async def _to_the_end(call: Awaitable[_T]) -> _T:
    """Await a write to its end even when the caller is cancelled meanwhile, then pass
    the cancellation on: the caller is never left not knowing whether a batch landed
    (as with the SDK's own sessions)."""
    task = asyncio.ensure_future(call)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller sees
        raise cancelled
    return task.result()


class RedistateSession(SessionABC):
    """An Agents SDK ``Session`` kept in a redistate store, shared by every process
    that opens the same ``session_id`` in the same namespace.

    Args:
        session_id: the conversation's id (any str of 1-512 UTF-8 bytes).
        store: an ``AsyncStore``, or a ``Store`` (its calls then run in a worker thread).
        ttl: seconds the session lives after its last ``add_items`` (None: the list's
            expiry is left as it is, none for a new one).
        max_items: keep only this many newest items (None: all), trimmed in the same step.
        max_bytes: largest encoded item (default: the store's ``max_bytes``).
        session_settings: the SDK's settings; ``limit`` is ``get_items``'s default.
        user: register the session to this user (``store.users.erase(user)`` deletes
            it): added to the user's index before this object's first ``add_items``.

    Raises:
        InvalidId: a malformed ``session_id`` or ``user``.
    """

    def __init__(
        self,
        session_id: str,
        *,
        store: AsyncStore | Store,
        ttl: float | None = None,
        max_items: int | None = None,
        max_bytes: int | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        user: str | None = None,
    ) -> None:
        if not isinstance(store, AsyncStore | Store):
            raise TypeError(
                f"store must be a redistate AsyncStore or Store, got {type(store).__name__}"
            )
        self._key = store.keys.agent_session(session_id)  # validates the id
        if user is not None:
            try:
                store.keys.user_index(user)  # validates it: bad input writes nothing
            except InvalidId as exc:
                raise InvalidId(f"user: {exc}") from None
        self.session_id = session_id
        self.user = user
        self._ns = store.keys.namespace
        # Registered once per object, before its first write (reads register nothing).
        self._registered = user is None
        self.store = store
        self.session_settings = (
            SessionSettings()
            if session_settings is None
            else coerce_session_settings(session_settings)
        )
        self._ttl_ms = check_ttl(ttl)
        self._max_items = 0 if max_items is None else _positive(max_items, "max_items")
        self._max_bytes = (
            store._max_bytes if max_bytes is None else _positive(max_bytes, "max_bytes")
        )
        # <key>:writes (same hash slot; AgentItems.run passes it) remembers recent write
        # ids for the retry window: an add, pop or clear whose reply was lost is not
        # applied twice.
        self._context = self._key.encode("utf-8")
        self._codec = store.codec
        self._async = store.agent_items() if isinstance(store, AsyncStore) else None
        self._sync = store.agent_items() if isinstance(store, Store) else None
        items = self._async or self._sync
        assert items is not None
        self._memory_ms = items.memory_ms

    @property
    def key(self) -> str:
        """The Redis key of the session's items."""
        return self._key

    async def _register(self) -> None:
        """Add the session to its user's index, before the write it registers (so an
        interrupted write leaves at most an entry for nothing, see redistate.records.erasure)."""
        assert self.user is not None
        if self._async is not None:
            await self._async.register(self.user, self.session_id)
        else:
            assert self._sync is not None
            await asyncio.to_thread(self._sync.register, self.user, self.session_id)
        self._registered = True

    async def _script(self, lua: Script, args: Sequence[Any], wid: str | None = None) -> Any:
        if self._async is not None:
            return await self._async.run(lua, self._key, args, wid)
        assert self._sync is not None
        return await asyncio.to_thread(self._sync.run, lua, self._key, args, wid)

    def _decode(self, data: bytes) -> TResponseInputItem:
        return cast("TResponseInputItem", self._codec.decode(data, self._context))

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The items, oldest first; with ``limit`` (else ``session_settings.limit``),
        the newest ``limit`` of them. As the SDK's SQLiteSession: 0 gives none, a
        negative limit all, and an item the store's codec cannot read (not JSON;
        encrypted with another key, or copied from another session) is skipped and
        logged, ``limit`` counting the items returned."""
        with telemetry.operation("get_items", AGENTS.name, self._ns, self.session_id):
            if limit is None:
                limit = self.session_settings.limit if self.session_settings else None
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
                raise TypeError(f"limit must be an int or None, got {type(limit).__name__}")
            if limit == 0:
                return []
            if limit is None or limit < 0:
                return self._readable(await self._read(0))
            window = limit
            while True:  # a wider window only when unreadable items sit among the newest
                raw = await self._read(-window)
                items = self._readable(raw)
                if len(items) >= limit or len(raw) < window:
                    return items[-limit:]
                window *= 2

    async def _read(self, start: int) -> list[bytes]:
        if self._async is not None:
            return await self._async.read(self._key, start)
        assert self._sync is not None
        return await asyncio.to_thread(self._sync.read, self._key, start)

    def _readable(self, raw: Sequence[bytes]) -> list[TResponseInputItem]:
        out = []
        for data in raw:
            try:
                out.append(self._decode(data))
            except (CodecError, IntegrityError) as exc:
                self._unreadable("skipped", exc)
        return out

    def _unreadable(self, what: str, exc: Exception) -> None:
        _log.warning(
            "Agents SDK session %r: %s an item the store's codec cannot read (%s)",
            self.session_id,
            what,
            exc,
            extra={"redistate_event": "agents_item_unreadable", "session_key": self._key},
        )

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` as one batch (never interleaved with another) and set the
        TTL. Every item is encoded first: a bad one raises and nothing is written.

        Raises:
            CodecError: an item the codec cannot encode (not JSON, NaN...).
            StateTooLarge: an encoded item over ``max_bytes``.
        """
        with telemetry.operation("add_items", AGENTS.name, self._ns, self.session_id):
            if not isinstance(items, list | tuple):
                raise TypeError(f"items must be a list, got {type(items).__name__}")
            if not items:
                return
            encoded: list[bytes] = []
            for i, item in enumerate(items):
                try:
                    data = self._codec.encode(item, self._context)
                except CodecError as exc:
                    raise CodecError(f"item {i} of {len(items)} for {self._key!r}: {exc}") from exc
                if len(data) > self._max_bytes:
                    raise StateTooLarge(len(data), self._max_bytes, self._key)
                encoded.append(data)
            wid = new_write_id()
            args = AgentsAddArgs(
                self._ttl_ms, self._max_items, self._memory_ms, wid, tuple(encoded)
            )
            if not self._registered:
                await self._register()
            await _to_the_end(self._script(_ADD, args.argv(), wid))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item; None if there is none. As the SDK's
        SQLiteSession, an item the codec cannot read is dropped (and logged) and the
        next one popped."""
        with telemetry.operation("pop_item", AGENTS.name, self._ns, self.session_id):
            while True:
                args = AgentsPopArgs(self._memory_ms, new_write_id())
                reply: AgentsPopReply = await _to_the_end(self._script(_POP, args.argv()))
                if reply.item is None:
                    return None
                try:
                    return self._decode(reply.item)
                except (CodecError, IntegrityError) as exc:
                    self._unreadable("dropped", exc)

    async def clear_session(self) -> None:
        """Delete every item of the session."""
        with telemetry.operation("clear_session", AGENTS.name, self._ns, self.session_id):
            wid = new_write_id()
            args = AgentsClearArgs(self._memory_ms, wid)
            await _to_the_end(self._script(_CLEAR, args.argv(), wid))

    def __repr__(self) -> str:
        user = "" if self.user is None else f", user={self.user!r}"
        return f"RedistateSession({self.session_id!r}, key={self._key!r}{user})"
