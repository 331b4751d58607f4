"""Audit events: a tamper-evident hash chain per entity (async source of truth)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

from ..checkpoints.spec import Verification
from ..core import telemetry
from ..core._backoff import backoff_delay
from ..core._io import async_sleep
from ..core.batching import Call, Prepared
from ..core.connection_async import AsyncConnection
from ..core.errors import ConflictError, IntegrityError
from ..core.keys import KeySpace
from ..core.kinds import EVENTS_KEY
from ..core.scripts import script
from ..leases.guard import guard_args
from ..records.collection_async import register
from ..records.erasure import entry
from ..records.spec import new_write_id
from .spec import (
    Anchor,
    AppendStatus,
    Event,
    EventAppendReply,
    EventSpec,
    EventStageArgs,
    EventStageReply,
    EventSwapArgs,
    EventSwapReply,
    EventTrimArgs,
    EventTrimReply,
    Recode,
    Reducer,
    check_type,
    default_reducer,
)

__all__ = ["AsyncEvents"]

_APPEND = script("event_append").replying(EventAppendReply.parse)
_TRIM = script("event_trim").replying(EventTrimReply.parse)
# event_rewrite has two modes, each with its own reply (the same script).
_STAGE = script("event_rewrite").replying(EventStageReply.parse)
_SWAP = script("event_rewrite").replying(EventSwapReply.parse)
_PAGE = 1000  # stream entries per read
_HEADS = 4096  # chain ends remembered per store (cleared when full)


class AsyncEvents:
    """``store.events``: append-only, hash-chained events per entity, in one stream in
    the entity's hash slot. See redistate.events.spec for the chain."""

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

    async def append(
        self, entity: str, type: str, payload: Any, *, lease: Any = None, user: str | None = None
    ) -> Event:
        """Add an event after the chain's current end: one script that appends only if
        the chain still ends where this store computed the digest from; otherwise it
        answers with the end, and the append is tried again from there (concurrent
        appenders never fork the chain). ``user=`` registers the entity's events to that
        user first (one more round trip), so ``store.users.erase(user)`` deletes them.

        Raises:
            ValueError: a malformed type. InvalidId: a malformed entity id.
            StateTooLarge, CodecError: the payload (nothing written).
            LockLost: ``lease`` no longer holds the entity's lock.
            ConflictError: still not at the end after the store's ``attempts``.
        """
        with telemetry.operation("append", "events", self.keys.namespace, entity):
            prepared, _ = self._prepare_append(entity, type, payload, lease)
            if user is not None:
                await register(self._conn, self.keys, user, entry(EVENTS_KEY, entity))
            run, keys, args, wid, _lease = prepared.call
            reply = await self._conn.script(run, keys, args, lease=lease, wid=wid)
            return await prepared.finish(reply)  # type: ignore[no-any-return]

    def _prepare_append(
        self,
        entity: str,
        type: str,
        payload: Any,
        lease: Any,
        head: tuple[str, int] | None = None,
    ) -> tuple[Prepared, tuple[str, int]]:
        """:meth:`append`'s checks and first call after ``head`` (by default the end
        this store saw), and the chain end it makes: a batch chains its appends to one
        entity. Its finish tries again from the real end if that was not it."""
        check_type(type)
        key = self.keys.events(entity)
        lock_key, guard = guard_args(lease, entity, self.keys.lock(entity))
        data = self.spec.encode(key, payload)
        keys = (key, self.keys.events_anchor(entity), lock_key, self.keys.writes(key))
        at_ms, write_id = time.time_ns() // 1_000_000, new_write_id()
        start = self._heads.get(entity, ("", 0)) if head is None else head
        memory_ms = self._conn.memory_ms
        args = self.spec.append_args(key, start, type, at_ms, data, guard, write_id, memory_ms)

        async def finish(reply: EventAppendReply) -> Event:
            sent = args
            for attempt in range(self.attempts):
                if reply.status is not AppendStatus.MOVED:
                    self._remember(entity, (sent.digest, sent.seq))
                    eid = reply.id
                    if not eid:  # a resend whose event is no longer among the newest
                        eid = await self._find(key, sent.digest)
                    return self.spec.event(key, eid, sent.fields(), check=False)
                end = (reply.end, reply.seq)
                if attempt + 1 >= self.attempts:
                    break
                if attempt >= 1:  # a second miss: others are appending too; spread out
                    await async_sleep(backoff_delay(attempt - 1))
                sent = self.spec.append_args(
                    key, end, type, at_ms, data, guard, write_id, self._conn.memory_ms
                )
                reply = await self._conn.script(
                    _APPEND, keys, sent.argv(), lease=lease, wid=write_id
                )
            raise ConflictError(key, reply.seq, -1)

        call = Call(_APPEND, keys, args.argv(), write_id, lease)
        return Prepared("append", call, finish), (args.digest, args.seq)

    async def _find(self, key: str, digest: str) -> str:
        """The stream id of the event with ``digest`` ("" if trimmed since)."""
        async for eid, fields in self._entries(key):
            if fields.get(b"d") == digest.encode():
                return eid.decode() if isinstance(eid, bytes) else str(eid)
        return ""

    async def _snapshot(self, entity: str) -> tuple[Anchor, list[tuple[bytes, Any]]]:
        """The anchor and every entry, read consistently: again if a trim changed the
        anchor meanwhile (each trim does), so a reader never mixes two generations."""
        key, anchor_key = self.keys.events(entity), self.keys.events_anchor(entity)
        for _ in range(self.attempts):
            before = await self._conn.hgetall(anchor_key)
            entries = [entry async for entry in self._entries(key)]
            if await self._conn.hgetall(anchor_key) == before:
                return self.spec.anchor(key, before), entries
        raise ConflictError(anchor_key, -1, -1)

    def _remember(self, entity: str, head: tuple[str, int]) -> None:
        if len(self._heads) >= _HEADS:
            self._heads.clear()
        self._heads[entity] = head

    async def _entries(
        self, key: str, start: str = "-", end: str = "+"
    ) -> AsyncIterator[tuple[bytes, dict[bytes, bytes]]]:
        while True:
            page = await self._conn.xrange(key, start, end, _PAGE)
            for item in page:
                yield item
            if len(page) < _PAGE:
                return
            last = page[-1][0]
            start = "(" + (last.decode() if isinstance(last, bytes) else str(last))

    async def read(
        self, entity: str, start: str | None = None, end: str | None = None
    ) -> list[Event]:
        """Events from ``start`` to ``end`` (stream ids, both inclusive; None: the
        first / the last), oldest first, payloads decoded."""
        with telemetry.operation("read", "events", self.keys.namespace, entity):
            key = self.keys.events(entity)
            return [
                self.spec.event(key, eid, fields)
                async for eid, fields in self._entries(key, start or "-", end or "+")
            ]

    async def verify(self, entity: str) -> Verification:
        """Recompute the whole chain (from the trim anchor, if trimmed): ``ok`` False and
        ``first_bad`` the first event that was removed around, reordered or edited."""
        with telemetry.operation("verify", "events", self.keys.namespace, entity):
            key = self.keys.events(entity)
            try:
                anchor, entries = await self._snapshot(entity)
            except IntegrityError as exc:  # the anchor itself was edited
                return Verification(False, 0, "anchor", (str(exc),))
            return self.spec.verify(key, (anchor.digest, anchor.seq), entries)

    async def fold(
        self, entity: str, reducer: Reducer | None = None, until: str | None = None
    ) -> Any:
        """The state the events describe, up to and including event ``until`` (a stream
        id; None: all): ``reducer(state, event)`` from {} (default: initialized /
        updated / deleted, see redistate.events.spec.default_reducer). After a trim, from
        the state the default reducer had folded up to the last removed event.

        Raises:
            ValueError: ``until`` names an event that was trimmed.
        """
        with telemetry.operation("fold", "events", self.keys.namespace, entity):
            reduce = reducer or default_reducer
            key = self.keys.events(entity)
            anchor, entries = await self._snapshot(entity)
            if until is not None and anchor.id and _id_key(until) <= _id_key(anchor.id):
                raise ValueError(
                    f"events of {entity!r} up to {anchor.id} were trimmed; {until} too"
                )
            limit = None if until is None else _id_key(until)
            state: Any = anchor.state
            for eid, fields in entries:
                if limit is not None and _id_key(_text(eid)) > limit:
                    break
                state = reduce(state, self.spec.event(key, eid, fields))
            return state

    async def trim(
        self, entity: str, *, keep: int | None = None, older_than: float | None = None
    ) -> int:
        """Remove the oldest events — all but the newest ``keep``, or those appended
        more than ``older_than`` seconds ago — after verifying them; an anchor keeps
        the chain verifiable and ``fold`` complete. Returns how many were removed.

        Raises:
            ValueError: neither or both of ``keep`` / ``older_than``, or a bad value.
            IntegrityError: the events to remove do not verify (nothing is removed:
                trimming must not erase the evidence).
        """
        with telemetry.operation("trim", "events", self.keys.namespace, entity):
            self.spec.check_retention(keep, older_than)
            key = self.keys.events(entity)
            anchor_key = self.keys.events_anchor(entity)
            anchor, entries = await self._snapshot(entity)
            cut = self.spec.cut(entries, keep=keep, older_than=older_than, now=time.time())
            if cut == 0:
                return 0
            # The whole chain, not only what goes: an event edited with its digest recomputed
            # verifies alone, and only the link to the next one shows it.
            check = self.spec.verify(key, (anchor.digest, anchor.seq), entries)
            if not check.ok:
                raise IntegrityError(
                    f"not trimming {entity!r}: its events do not verify "
                    f"(first bad {check.first_bad}: {check.problems[0]})"
                )
            state = anchor.state
            for eid, fields in entries[:cut]:
                state = default_reducer(state, self.spec.event(key, eid, fields))
            last_id, last = entries[cut - 1]
            data = self.spec.encode(key, state)
            digest = last[b"d"].decode()
            seal = self.spec.state_seal(key, digest, data)
            args = EventTrimArgs(_text(last_id), digest, last[b"n"], data, seal).argv()
            return (await self._conn.script(_TRIM, (key, anchor_key), args)).removed

    async def rewrite(
        self, entity: str, payload: Recode, anchor: Callable[[bytes], bytes | None] | None = None
    ) -> int:
        """Replace ``entity``'s events with the same events whose payloads
        ``payload(schema, data)`` re-encodes (None: as they are), the chain recomputed
        from the first one changed, and the trim anchor's stored state with
        ``anchor(state)``'s. Built in a staging stream in pages, then swapped in by one
        script only if no append or trim happened meanwhile. For ``redistate
        rotate-keys`` and ``redistate migrate``: every digest after the first changed
        event changes, so a digest of the chain's end kept elsewhere must be taken anew.
        Returns how many events changed (0: nothing written).

        Raises:
            IntegrityError: the chain does not verify (nothing is rewritten).
            ConflictError: the stream changed meanwhile (nothing replaced): call again.
        """
        with telemetry.operation("rewrite", "events", self.keys.namespace, entity):
            key = self.keys.events(entity)
            keys = (key, self.keys.events_staging(entity), self.keys.events_anchor(entity))
            found, entries = await self._snapshot(entity)
            rows, changed = self.spec.rechained(key, (found.digest, found.seq), entries, payload)
            state = anchor(found.raw) if anchor is not None and found.id else None
            if state is None and found.id and self.spec.resealed(found.seal):
                state = found.raw  # the same state, sealed with the primary key
            if changed == 0 and state is None:
                return 0
            for start in range(0, len(rows), _PAGE):
                page = [value for row in rows[start : start + _PAGE] for value in row]
                await self._conn.script(
                    _STAGE, keys, EventStageArgs(start == 0, tuple(page)).argv()
                )
            swap = EventSwapArgs()
            if entries:
                last_id, last = entries[-1]
                swap = EventSwapArgs(_text(last_id), last[b"d"], len(rows), rows[-1][-1])
            if state is not None:
                seal = self.spec.state_seal(key, found.digest, state)
                swap = replace(swap, state=state, state_seal=seal)
            if not (await self._conn.script(_SWAP, keys, swap.argv())).swapped:
                raise ConflictError(key, len(rows), -1)
            self._heads.pop(entity, None)
            return changed + (state is not None)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _id_key(stream_id: str) -> tuple[int, int]:
    """A stream id as a sortable pair; ``<ms>`` alone means every id of that ms, as
    XRANGE's end does."""
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq) if seq else 2**64
