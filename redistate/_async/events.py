"""Audit events: a tamper-evident hash chain per entity (async source of truth)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from .._backoff import backoff_delay
from .._io import async_sleep
from ..checkpoints import Verification
from ..errors import ConflictError
from ..events import Event, EventSpec, Reducer, check_type, default_reducer
from ..keys import KeySpace
from ..leases import guard_args
from ..records import new_write_id
from ..scripts import script
from ._client import AsyncConnection

__all__ = ["AsyncEvents"]

_APPEND = script("event_append")
_PAGE = 1000  # stream entries per read
_HEADS = 4096  # chain ends remembered per store (cleared when full)


class AsyncEvents:
    """``store.events``: append-only, hash-chained events per entity, in one stream in
    the entity's hash slot. See redistate.events for the chain."""

    __slots__ = ("_conn", "_heads", "attempts", "keys", "spec")

    def __init__(
        self, conn: AsyncConnection, keys: KeySpace, spec: EventSpec, *, attempts: int = 100
    ) -> None:
        self._conn = conn
        self.keys = keys
        self.spec = spec
        self.attempts = attempts
        # Where each entity's chain ended when this store last saw it: an append from
        # the one writer of an entity is then one round trip.
        self._heads: dict[str, tuple[str, int]] = {}

    async def append(self, entity: str, type: str, payload: Any, *, lease: Any = None) -> Event:
        """Add an event after the chain's current end: one script that appends only if
        the chain still ends where this store computed the digest from; otherwise it
        answers with the end, and the append is tried again from there (concurrent
        appenders never fork the chain).

        Raises:
            ValueError: a malformed type. InvalidId: a malformed entity id.
            StateTooLarge, CodecError: the payload (nothing written).
            LockLost: ``lease`` no longer holds the entity's lock.
            ConflictError: still not at the end after the store's ``attempts``.
        """
        check_type(type)
        key = self.keys.events(entity)
        lock_key, guard = guard_args(lease, entity, self.keys.lock(entity))
        data = self.spec.encode(key, payload)
        keys = (key, self.keys.events_anchor(entity), lock_key, self.keys.writes(key))
        at_ms, write_id = time.time_ns() // 1_000_000, new_write_id()
        head = self._heads.get(entity, ("", 0))
        for attempt in range(self.attempts):
            args, digest = self.spec.append_args(
                head, type, at_ms, data, guard, write_id, self._conn.memory_ms
            )
            reply = await self._conn.script(_APPEND, keys, args)
            status = int(reply[0])
            if status != 0:
                seq = head[1] + 1
                self._remember(entity, (digest, seq))
                eid = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
                return self.spec.event(key, eid or f"{at_ms}-0", _fields(args))
            end = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
            head = (end, int(reply[2]))
            if attempt >= 1:  # a second miss: others are appending too; spread out
                await async_sleep(backoff_delay(attempt - 1))
        raise ConflictError(key, head[1], -1)

    def _remember(self, entity: str, head: tuple[str, int]) -> None:
        if len(self._heads) >= _HEADS:
            self._heads.clear()
        self._heads[entity] = head

    async def _entries(
        self, key: str, start: str = "-", end: str = "+"
    ) -> AsyncIterator[tuple[bytes, dict[bytes, bytes]]]:
        while True:
            page = await self._conn.xrange(key, start, end, _PAGE)
            for entry in page:
                yield entry
            if len(page) < _PAGE:
                return
            last = page[-1][0]
            start = "(" + (last.decode() if isinstance(last, bytes) else str(last))

    async def read(
        self, entity: str, start: str | None = None, end: str | None = None
    ) -> list[Event]:
        """Events from ``start`` to ``end`` (stream ids, both inclusive; None: the
        first / the last), oldest first, payloads decoded."""
        key = self.keys.events(entity)
        return [
            self.spec.event(key, eid, fields)
            async for eid, fields in self._entries(key, start or "-", end or "+")
        ]

    async def verify(self, entity: str) -> Verification:
        """Recompute the whole chain (from the trim anchor, if trimmed): ``ok`` False and
        ``first_bad`` the first event that was removed around, reordered or edited."""
        key = self.keys.events(entity)
        anchor = await self._conn.hgetall(self.keys.events_anchor(entity))
        start = (anchor.get(b"digest", b"").decode(), int(anchor.get(b"seq", b"0") or 0))
        entries = [entry async for entry in self._entries(key)]
        return self.spec.verify(key, start, entries)

    async def fold(
        self, entity: str, reducer: Reducer | None = None, until: str | None = None
    ) -> Any:
        """The state the events describe, up to and including event ``until`` (a stream
        id; None: all): ``reducer(state, event)`` from {} (default: initialized /
        updated / deleted, see redistate.events.default_reducer)."""
        reduce = reducer or default_reducer
        key = self.keys.events(entity)
        state: Any = {}
        async for eid, fields in self._entries(key, "-", until or "+"):
            state = reduce(state, self.spec.event(key, eid, fields))
        return state


def _fields(args: tuple[Any, ...]) -> dict[bytes, bytes]:
    """The fields event_append stored for ``args`` (to build the Event without a read)."""
    prev, seq, kind, schema, at_ms, data, digest = args[:7]
    return {
        b"n": str(seq).encode(),
        b"t": kind.encode(),
        b"s": str(schema).encode(),
        b"at": str(at_ms).encode(),
        b"p": data,
        b"prev": prev.encode(),
        b"d": digest.encode(),
    }
