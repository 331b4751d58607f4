"""One renewer per store for every lease it renews (async source of truth).

A lease with ``renew=True`` is renewed a third of its TTL after its last renewal was
sent. Starting a thread (or a task) per acquisition cost more than the acquisition
itself, so each store keeps one worker and a heap of due times; the worker waits for
the earliest and starts its renewal (a thread or task of its own, so that a renewal
held up by an unreachable node holds up no other lease), which puts the lease back
with its next due time. A lease held for less than a third of its TTL starts nothing.
The worker stays a while once nothing is due (a thread is dear to start again).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import os
import threading
import time
from typing import Any, Protocol

from ..core._io import (
    async_alive,
    async_event,
    async_idle,
    async_spawn,
    async_wait,
)

__all__ = ["AsyncRenewals", "AsyncRenewing"]


class AsyncRenewing(Protocol):
    """What the renewer needs of a lease."""

    def _renews(self, token: str) -> bool:
        """Whether the acquisition ``token`` names still holds and renews."""
        ...

    async def _renew_due(self, token: str) -> float | None:
        """Renew now if the acquisition ``token`` names is still held and renewing;
        the monotonic time of the next renewal, or None."""
        ...


class AsyncRenewals:
    """The due renewals of one store's leases, and the worker that runs them.

    A released lease stays in the heap until it comes due (then it is dropped): removing
    it at once would cost O(n). When released ones outnumber the live ones, the heap is
    rebuilt without them. The worker is woken only for a renewal due before the one it
    waits for, so taking and releasing leases in a row wakes no thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the heap and the worker; never held while waiting
        self._due: list[tuple[float, int, AsyncRenewing, str]] = []
        self._order = itertools.count()  # ties: first come, first renewed
        self._live = 0  # added and not released
        self._next = math.inf  # what the worker waits for: inf when idle, -inf when busy
        self._wake = async_event()
        self._worker: Any = None
        self._running: set[Any] = set()  # renewals in flight (a task must be referenced)
        self._pid = os.getpid()

    def add(self, lease: AsyncRenewing, token: str, due: float) -> None:
        """Renew ``lease`` at ``due`` (monotonic), and then as it says, for as long as
        it holds the acquisition ``token`` names (a lease taken again renews anew)."""
        if self._pid != os.getpid():
            # A forked child renews none of its parent's leases, and the parent's lock
            # may have been held by a thread the child does not have.
            self._lock = threading.Lock()
            self._due, self._pid, self._worker, self._live = [], os.getpid(), None, 0
            self._running = set()
        with self._lock:
            self._live += 1
            if len(self._due) >= 64 and len(self._due) > 2 * self._live:
                self._due = [e for e in self._due if e[2]._renews(e[3])]
                heapq.heapify(self._due)
            wake = self._push(lease, token, due)
        if wake:
            self._wake.set()

    def _push(self, lease: AsyncRenewing, token: str, due: float) -> bool:
        """(Under the lock.) Queue a renewal, start the worker if none runs; whether
        the worker must be woken for it."""
        heapq.heappush(self._due, (due, next(self._order), lease, token))
        if not async_alive(self._worker):
            self._wake = async_event()  # made anew: an event may belong to a loop
            self._next = math.inf
            self._worker = async_spawn(self._run, "redistate lease renewals")
        return due < self._next

    def release(self) -> None:
        """One lease added earlier stops renewing (it leaves the heap when due)."""
        with self._lock:
            self._live = max(self._live - 1, 0)

    async def _run(self) -> None:
        while True:
            # Cleared before the heap is read: an add after the read wakes the wait.
            self._wake.clear()
            with self._lock:
                if not self._due:
                    self._next, delay, lease = math.inf, async_idle(), None
                else:
                    due, _, lease, token = self._due[0]
                    delay = due - time.monotonic()
                    if delay <= 0:
                        heapq.heappop(self._due)
                        self._next = -math.inf  # busy: what comes is seen after
                    else:
                        self._next = due
            if lease is None or delay > 0:
                woken = await async_wait(self._wake, max(delay, 0.0))
                if lease is None and not woken:
                    with self._lock:
                        if not self._due:  # nothing came meanwhile: this worker ends
                            self._worker = None
                            return
                continue
            renewal = async_spawn(
                functools.partial(self._renew, lease, token), "redistate lease renewal"
            )
            with self._lock:  # the ones over are dropped here, not by themselves
                self._running = {r for r in self._running if async_alive(r)}
                self._running.add(renewal)

    async def _renew(self, lease: AsyncRenewing, token: str) -> None:
        """One lease's renewal, and its next turn in the heap."""
        try:
            following = await lease._renew_due(token)
        except Exception:  # a bug in one lease must not stop the others
            following = None
        if following is None:
            return
        with self._lock:
            wake = self._push(lease, token, following)
        if wake:
            self._wake.set()
