"""Fenced leases with renewal (async source of truth)."""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, cast

from ..core import telemetry
from ..core._io import (
    AsyncEvent,
    AsyncWithGuard,
    async_confirm,
    async_event,
    async_finish,
    async_resolve,
    async_sleep,
    async_stalled,
    async_waiting,
)
from ..core.connection_async import AsyncConnection
from ..core.errors import LockLost, LockTimeout, RedistateError
from ..core.keys import KeySpace
from ..core.scripts import script
from .renewals_async import AsyncRenewals
from .spec import (
    INLINE,
    SHORT_WAIT,
    LockAbandonArgs,
    LockAbandonReply,
    LockAcquireArgs,
    LockAcquireReply,
    LockExtendArgs,
    LockExtendReply,
    LockReleaseArgs,
    LockReleaseReply,
    check_lease_ttl,
    check_renew,
    check_wait,
    holder_fence,
    lease_value,
    lost_message,
    new_token,
    reading_args,
    refusal,
    taken_or_expired,
    valid_until,
    wait_budget,
)

__all__ = ["AsyncLease"]

_log = logging.getLogger("redistate")


def _renewals(conn: AsyncConnection) -> AsyncRenewals:
    """The store's one renewer (made on first use)."""
    if conn.renewals is None:
        conn.renewals = AsyncRenewals()
    return cast("AsyncRenewals", conn.renewals)


_ACQUIRE = script("lock_acquire").replying(LockAcquireReply.parse)
_ACQUIRE_READING = script("lock_acquire_reading").replying(LockAcquireReply.parse)
_RELEASE = script("lock_release").replying(LockReleaseReply.parse)
_EXTEND = script("lock_extend").replying(LockExtendReply.parse)
_ABANDON = script("lock_abandon").replying(LockAbandonReply.parse)


class AsyncLease(AsyncWithGuard):
    """A fenced lock on ``name``: ``async with store.lock("t1") as lease: ...``.

    ``lease.fence`` strictly increases per name across holders, expiry, deletion,
    restarts and failovers; it stays readable after release (what the lease held, for
    logs), while ``lease.held`` says whether it is held now. With ``renew=True`` a
    background task extends the lease every ttl/3; with ``renew="inline"`` each guarded
    write extends it in its own script (nothing runs between calls: a serverless
    function, frozen between invocations, keeps it only by writing within the TTL).
    The lease keeps a local deadline (when the last acquire, extend or inline renewal
    was sent, plus the TTL, less a drift margin): once it has passed, or a renewal
    fails, or any guarded write is refused with LockLost, ``lease.lost`` is set,
    ``on_lost`` runs, guarded writes raise LockLost without sending anything and
    ``run.step`` calls no function. Under
    ``durability="replicated"`` acquire and extend wait for a replica like writes do.
    """

    def __init__(
        self,
        conn: AsyncConnection,
        keys: KeySpace,
        name: str,
        *,
        ttl: float = 30,
        wait: float | None = None,
        renew: bool | str = True,
        on_lost: Callable[[AsyncLease], Any] | None = None,
    ) -> None:
        self._conn = conn
        self.name = name
        """The lease's name: the id of the entities whose writes it guards."""
        self.key = keys.lock(name)
        self._namespace = keys.namespace
        self._held_since = 0.0  # monotonic, at the last acquire (for the hold time)
        self._wake = keys.lock_wake(name)
        self._writes = keys.writes(self.key)
        self._fence_key = keys.fence(name)
        self._keys = (self.key, self._fence_key, self._wake)
        self.ttl_ms = check_lease_ttl(ttl)
        self.wait = check_wait(wait)
        self.renew = check_renew(renew)
        if on_lost is not None and not callable(on_lost):
            raise TypeError(f"on_lost must be a callable or None, got {type(on_lost).__name__}")
        self.on_lost = on_lost
        self.token = new_token()
        self.fence: int | None = None
        """The fencing number of the last acquire (None before): larger than every
        earlier holder's; kept after release, for logs."""
        self.lost: AsyncEvent = async_event()
        """Set once the lease is known lost (``lease.lost.is_set()``)."""
        self._stop = False  # released: the store's renewer skips it from now on
        # Set while no renewal of this lease is in flight; release waits for it.
        self._quiet: AsyncEvent = async_event()
        self._quiet.set()
        self._turn = threading.Lock()  # a renewal starts, or release stops it: not both
        self._used = False
        self._budget: float | None = None
        self._valid_until: float | None = None  # the local deadline, while held
        self._renewed = 0.0  # when the last successful acquire/extend was sent
        # Released (or refused at release): ``fence`` stays, for logs; ``value`` goes.
        self._released = False
        self._why: str | None = None  # what happened, once lost (for every LockLost)
        self._reported = False  # a LockLost about it reached the caller
        self._renewing: float | None = None  # when the renewal in flight was sent

    @property
    def held(self) -> bool:
        """Acquired, not released and not known lost (``remaining`` says for how long
        by the local clock)."""
        return self.value is not None and self._valid_until is not None and not self.lost.is_set()

    @property
    def value(self) -> str | None:
        """The lock key's value while this lease holds it (None before acquire and
        after release; a lost lease keeps it until released)."""
        if self.fence is None or self._released:
            return None
        return lease_value(self.token, self.fence)

    @property
    def remaining(self) -> float:
        """Seconds the lease is still known to hold by the local clock (0 when lost,
        not held or past its deadline): what a long tool call can count on."""
        if self._valid_until is None or self.lost.is_set():
            return 0.0
        return max(self._valid_until - time.monotonic(), 0.0)

    def _overdue(self) -> str | None:
        """Why a guarded write must not be sent now (lost, not held, or past the
        local deadline), or None. Pure: see redistate.core._io.async_confirm."""
        if self.lost.is_set():
            what = self._why or "was refused by the server"
            return lost_message(self.name, self.fence, f"was lost: it {what}", self.key)
        if self._valid_until is None:
            since = "released" if self._released else "never acquired"
            return f"lease {self.name!r} is not held ({since}): acquire it first"
        late = self._lateness()
        return None if late is None else lost_message(self.name, self.fence, late, self.key)

    def _lateness(self) -> str | None:
        """How the lease ran past its local deadline, or None while it has not."""
        if self._valid_until is None:
            return None
        now = time.monotonic()
        late = now - self._valid_until
        if late < 0:
            return None
        if self.renew is False:
            why = "renew=False and no extend() in time"
        elif self.renew == INLINE:
            why = "renew='inline' and no guarded write or extend() in time"
        elif self._renewing is not None:
            why = f"its renewal, sent {now - self._renewing:.1f} s ago, has had no reply"
        else:  # the renewal was due a third of the TTL after the last one and never ran
            why = async_stalled(now - (self._renewed + self.ttl_ms / 3000))
        return (
            f"ran past its deadline {late:.3f} s ago with no renewal since (ttl "
            f"{self.ttl_ms} ms): {why}; another owner may hold it now, nothing was sent"
        )

    def _written(self, sent: float, args: Sequence[Any]) -> None:
        """A guarded write sent at ``sent`` (monotonic) with ``args`` reached the
        server's fence check, which extended an inline lease (``renew="inline"``) to
        the TTL its guard argument carried: the local deadline moves with it (never
        back: the script's PEXPIRE GT never shortens it either)."""
        value = self.value
        if self.renew != INLINE or value is None:
            return
        prefix = f"{value};"  # this acquisition's guard: an older one renews nothing
        ttl = next(
            (a[len(prefix) :] for a in args if isinstance(a, str) and a.startswith(prefix)), None
        )
        until = self._valid_until  # read once: a release on another thread clears it
        if ttl is None or until is None or self.lost.is_set():
            return
        self._valid_until = max(until, valid_until(sent, int(ttl)))
        self._renewed = max(self._renewed, sent)

    def _refused(self, reply: str) -> str:
        """The LockLost message of a guarded write the server refused (its RSLOCKLOST
        ``reply``); the lease is lost for that reason. Plain code in both flavours."""
        self._why = self._why or refusal(reply, self.fence)
        self._reported = True
        return lost_message(self.name, self.fence, f"{self._why}; nothing was written", self.key)

    async def _holder(self) -> str:
        """What became of the lease, read from its lock key (after a refusal)."""
        try:
            return taken_or_expired(holder_fence(await self._conn.get(self.key)))
        except RedistateError:
            return "expired or was taken over (the lock key could not be read)"

    async def acquire(self) -> AsyncLease:
        """Take the lease, waiting (woken by the holder's release, never polling) at most
        ``wait`` seconds; ``wait=0`` tries once, ``None`` waits as long as it takes.

        Raises:
            LockTimeout: not acquired before the deadline.
        """
        await self._acquire(())
        return self

    async def _acquire(self, reads: Sequence[tuple[Any, ...]]) -> list[Any] | None:
        """:meth:`acquire`, with ``reads`` (LRANGE and HGETALL of keys of the lease's
        hash slot) made by its first try's script right after it took the lease: their
        replies; None when a later try took it (read them now)."""
        with telemetry.operation("acquire", "lease", self._namespace, self.name):
            return await self._acquiring(reads)

    async def _acquiring(self, reads: Sequence[tuple[Any, ...]]) -> list[Any] | None:
        if self.value is not None:
            raise RuntimeError(f"lease {self.name!r} is already held (fence {self.fence})")
        if self._used:  # a lease object taken again: a fresh token and fresh events
            self.token = new_token()
            self.lost, self._stop = async_event(), False
            self._why, self._reported = None, False
        self._used = True
        asked = time.monotonic()
        deadline = None if self.wait is None else asked + self.wait
        # The first try's reads, filled only if it took the lease; replicated acquires
        # WAIT, so they go the usual way.
        read: list[list[Any] | None] = [None]
        if self._conn.replicas(None):
            reads = ()
        while True:
            # The same token on every try: an acquire resent after a lost reply finds
            # the lease held by this token and reports it acquired.
            # Retries of this call end with the caller's deadline, not the policy's.
            sent = time.monotonic()  # the server runs this try no earlier
            self._budget = None if deadline is None else max(deadline - sent, 0.0)
            first, reads = reads, ()
            attempt = functools.partial(self._try_reading, first, read) if first else None
            try:
                reply: LockAcquireReply = await async_finish(
                    attempt or self._try_acquire, self._undo_acquire
                )
            except RedistateError:
                # The reply was lost: the script may have taken the lock for a caller
                # who will never know. Give it back, best effort.
                await self._abandon()
                raise
            if reply.acquired:
                self._held_since = time.monotonic()
                telemetry.event("redistate.lease.acquired")
                telemetry.event("redistate.lease.wait", self._held_since - asked)
                self.fence, self._released = reply.fence, False
                self._valid_until = valid_until(sent, max(reply.ttl_ms, 0))
                self._renewed = sent
                if self.renew is True:
                    self._quiet = async_event()  # made anew: an event may belong to a loop
                    self._quiet.set()
                    _renewals(self._conn).add(self, self.token, sent + self.ttl_ms / 3000)
                return read[0]
            budget = wait_budget(deadline, time.monotonic(), reply.remaining_ms, self._conn.timeout)
            if deadline is not None and budget <= 0:
                raise LockTimeout(
                    f"lease {self.name!r} still held by another owner after {self.wait:g} s"
                )
            with async_waiting():  # holding nothing: a stop (graceful()) ends it
                if budget < SHORT_WAIT:
                    # Redis times out blocked clients only every 1/hz s (100 ms by
                    # default): a lease about to expire is waited out with a timer.
                    await async_sleep(budget)
                else:
                    await self._conn.blpop(self._wake, budget, self._budget)

    async def _try_acquire(self) -> LockAcquireReply:
        args = LockAcquireArgs(self.token, self.ttl_ms).argv()
        replicas = self._conn.replicas(None)
        # Annotated: the reply's Any-typed reads make mypy's overload choice Any.
        reply: LockAcquireReply = await self._conn.script(
            _ACQUIRE, self._keys, args, self._budget, replicas
        )
        return reply

    async def _try_reading(
        self, reads: Sequence[tuple[Any, ...]], read: list[list[Any] | None]
    ) -> LockAcquireReply:
        """A first try whose script also makes ``reads`` once it took the lease (their
        replies go to ``read[0]``): one call, retried like an acquire (the same token
        finds the lease its own)."""
        keys, specs = reading_args(reads)
        args = (*LockAcquireArgs(self.token, self.ttl_ms).argv(), *specs)
        reply: LockAcquireReply = await self._conn.script(
            _ACQUIRE_READING, (*self._keys, *keys), args, self._budget
        )
        if reply.acquired:
            read[0] = reply.reads
        return reply

    async def _undo_acquire(self, reply: LockAcquireReply) -> None:
        if reply.acquired:  # acquired for a caller that was cancelled meanwhile
            await self._abandon()

    async def _abandon(self) -> None:
        try:
            args = LockAbandonArgs(self.token).argv()
            await self._conn.script(_ABANDON, (self.key, self._wake), args)
        except RedistateError:
            pass  # unreachable: the lock expires with its TTL

    async def extend(self, ttl: float | None = None) -> None:
        """Push the expiry out to ``ttl`` (default: the lease's) from now.

        Raises:
            LockLost: the lease expired, was taken over or ran past its local deadline
                (it is never brought back).
        """
        with telemetry.operation("extend", "lease", self._namespace, self.name):
            ttl_ms = self.ttl_ms if ttl is None else check_lease_ttl(ttl)
            await async_confirm(self)
            self.ttl_ms = ttl_ms  # renewal keeps the new ttl
            if not await self._extend(ttl_ms):
                await self._mark_lost(await self._holder())
                self._reported = True
                raise LockLost(
                    lost_message(self.name, self.fence, f"is no longer held: {self._why}", self.key)
                )

    async def _extend(self, ttl_ms: int) -> bool:
        if self.value is None:
            self._reported = True
            raise LockLost(f"lease {self.name!r} is not held")
        # Retries stop at a third of the lease: a renewal that cannot get through by
        # then reports the lease lost while it still has time left, not after expiry.
        budget = self.ttl_ms / 3000
        keys, args = (self.key, self._fence_key), LockExtendArgs(self.value, ttl_ms).argv()
        sent = time.monotonic()
        replicas = self._conn.replicas(None)
        reply = await self._conn.script(_EXTEND, keys, args, budget, replicas)
        if not reply.extended:
            return False
        if not self.lost.is_set():
            self._valid_until, self._renewed = valid_until(sent, ttl_ms), sent
        return True

    async def release(self) -> None:
        """Give the lease back and wake one waiter; stops renewal.

        Raises:
            LockLost: it was no longer held; the current holder's lock is untouched.
        """
        with telemetry.operation("release", "lease", self._namespace, self.name):
            await self._release()

    async def _release(self) -> None:
        value = self.value
        with self._turn:
            renewing = self.renew is True and not self._stop and self.fence is not None
            self._stop = True
        if renewing:
            _renewals(self._conn).release()
        await self._quiet.wait()  # a renewal in flight finishes first
        self._valid_until = None
        if value is None:
            self._reported = True
            raise LockLost(f"lease {self.name!r} is not held")
        args = LockReleaseArgs(value, self._conn.memory_ms).argv()
        keys = (self.key, self._wake, self._writes)
        released = await self._conn.script(_RELEASE, keys, args, wid=value)
        self._released = True
        if released.released:
            telemetry.event("redistate.lease.hold", time.monotonic() - self._held_since)
        if not released.released:
            await self._mark_lost(await self._holder())
            self._reported = True
            what = f"could not be released: it {self._why}"
            raise LockLost(lost_message(self.name, self.fence, what, self.key))

    def _renews(self, token: str) -> bool:
        """Whether the acquisition ``token`` names still holds and renews."""
        return token == self.token and not self._stop and not self.lost.is_set()

    async def _renew_due(self, token: str) -> float | None:
        """One renewal, run by the store's renewer when it is due; the monotonic time
        the next is due, or None when renewal stops (released, or lost). Every ttl/3
        from when the last extend was *sent*, not from its reply: the server set the
        expiry no earlier, so reply latency does not eat the slack."""
        with self._turn:
            if self._stop or self.lost.is_set() or token != self.token:
                # Released, or a refused write or the deadline said so first, or this
                # is an earlier acquisition's turn.
                return None
            self._quiet.clear()
        try:
            late = self._lateness()
            if late is not None:  # woken past the deadline: the loop (or process) stalled
                await self._mark_lost(late)
                return None
            self._renewing = time.monotonic()
            try:
                held = await self._extend(self.ttl_ms)
                why = None if held else await self._holder()
            except RedistateError as exc:
                # Unreachable or refused: cannot prove we still hold it.
                held, why = False, f"could not be renewed ({exc})"
            finally:
                self._renewing = None
            if not held:
                await self._mark_lost(why)
                return None
            return self._renewed + self.ttl_ms / 3000
        finally:
            self._quiet.set()

    async def _mark_lost(self, why: str | None = None) -> None:
        """The lease is lost for good (``why``: what happened, kept for every later
        LockLost): set ``lost`` and run ``on_lost`` once."""
        if self.lost.is_set():
            return
        self._why = self._why or why
        self.lost.set()
        if self.on_lost is not None:
            try:
                with telemetry.caller():  # on_lost's own store calls are its operations
                    result = self.on_lost(self)
                    if inspect.isawaitable(result):
                        await async_resolve(result)
            except Exception as exc:  # a callback's bug must not stop release or renewal
                warnings.warn(
                    f"on_lost callback of lease {self.name!r} raised {exc!r}", stacklevel=1
                )
        # After on_lost: a waiter woken by ``lost`` finds the callback run (as before).
        telemetry.event("redistate.lease.lost")
        _log.warning(
            "lease %r (fence %s) lost: %s",
            self.name,
            self.fence,
            self._why,
            extra={
                "redistate_event": "lease_lost",
                "redistate_lease": self.name,
                "redistate_fence": self.fence,
            },
        )

    async def __aenter__(self) -> AsyncLease:
        return await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._released and not self.lost.is_set():
            return  # released inside the block, as asked: nothing to give back
        told = self._reported  # the block already heard (and maybe caught) a LockLost
        try:
            await self.release()
        except LockLost:
            if exc is None and not told:
                raise  # lost unnoticed inside the block: say so, once
        except RedistateError:
            if exc is None:
                raise  # the block's own error matters more than a failed release
