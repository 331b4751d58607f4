"""The I/O seam between the async source of truth and its generated sync twin.

``scripts/unasync.py`` rewrites ``async_sleep`` to ``sync_sleep``; routing sleeps
through here keeps the rewrite from turning ``await asyncio.sleep(x)`` into a
coroutine that is created and never awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, NoReturn

from .errors import LockLost

__all__ = [
    "sync_waiting",
    "async_waiting",
    "sync_stop_pending",
    "sync_handover",
    "async_stop_pending",
    "async_handover",
    "AsyncWithGuard",
    "AwaitableInSync",
    "WithGuard",
    "async_alive",
    "async_confirm",
    "async_event",
    "async_initialize",
    "async_lock",
    "async_loop",
    "async_finish",
    "async_idle",
    "async_join",
    "async_lost",
    "async_offload",
    "async_resolve",
    "async_sleep",
    "async_spawn",
    "async_stalled",
    "async_wait",
    "sync_alive",
    "sync_confirm",
    "sync_event",
    "sync_initialize",
    "sync_lock",
    "sync_loop",
    "sync_finish",
    "sync_idle",
    "sync_join",
    "sync_lost",
    "sync_offload",
    "sync_resolve",
    "sync_sleep",
    "sync_spawn",
    "sync_stalled",
    "sync_wait",
]


async def async_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


def sync_sleep(seconds: float) -> None:
    time.sleep(seconds)


async def async_offload(function: Callable[..., Any], *args: Any) -> Any:
    """Run a blocking ``function`` off the event loop (a diagnosis on a failure path)."""
    return await asyncio.to_thread(function, *args)


def sync_offload(function: Callable[..., Any], *args: Any) -> Any:
    return function(*args)


async def async_resolve(value: Awaitable[Any]) -> Any:
    """Await what a user callback returned (AsyncStore accepts coroutine functions)."""
    return await value


class AwaitableInSync(TypeError):
    """A sync store was given a function that returned an awaitable: a usage error of
    the caller, never the function's own failure (run.step does not record it)."""


def sync_resolve(value: Awaitable[Any]) -> Any:
    close = getattr(value, "close", None)
    if callable(close):
        close()  # a coroutine that is never awaited would warn at garbage collection
    raise AwaitableInSync("the function returned an awaitable: use AsyncStore for async functions")


# -- `with` on what needs `async with` ------------------------------------------------


class AsyncWithGuard:
    """Base of the async context managers (AsyncStore, its leases and task runs): a
    plain ``with`` gets a TypeError that says what to write instead."""

    def __enter__(self) -> NoReturn:
        name = type(self).__name__
        raise TypeError(
            f"{name} is asynchronous: use 'async with', not 'with' (inside an async "
            f"function); for a plain 'with', use redistate.Store instead of AsyncStore"
        )

    def __exit__(self, *exc: object) -> None:
        return None  # never reached: __enter__ raised


class WithGuard:
    """The sync twin's base: its classes are plain context managers."""


# -- background renewal: an asyncio task, or a daemon thread in the sync twin ---------

# Names the sync generator maps onto each other: AsyncEvent -> Event.
AsyncEvent = asyncio.Event
Event = threading.Event


def async_event() -> asyncio.Event:
    return asyncio.Event()


def sync_event() -> threading.Event:
    return threading.Event()


async def async_wait(event: asyncio.Event, timeout: float) -> bool:
    """Wait for ``event`` at most ``timeout`` seconds; True if it was set."""
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except asyncio.TimeoutError:
        return False
    return True


def sync_wait(event: threading.Event, timeout: float) -> bool:
    return event.wait(timeout)


def async_spawn(fn: Callable[[], Coroutine[Any, Any, None]], name: str) -> Any:
    """Run ``fn`` in the background (a task); returns a handle for :func:`async_join`.
    The task starts from an empty context, not the caller's: a worker that outlives
    the call that started it (the lease renewer) must not carry its span and
    operation (contextvars) into every later renewal."""
    loop = asyncio.get_running_loop()
    return contextvars.Context().run(loop.create_task, fn(), name=name)


def sync_spawn(fn: Callable[[], None], name: str) -> Any:
    thread = threading.Thread(target=fn, name=name, daemon=True)
    thread.start()
    return thread


def async_alive(handle: Any) -> bool:
    """Whether a handle from :func:`async_spawn` still runs, on this event loop."""
    if handle is None or handle.done():
        return False
    try:
        return bool(handle.get_loop() is asyncio.get_running_loop())
    except RuntimeError:
        return False


def sync_alive(handle: Any) -> bool:
    return handle is not None and bool(handle.is_alive())


def async_idle() -> float:
    """How long (s) a background worker with nothing to do waits before it ends: a task
    is cheap to start again (and must not outlive its loop's work); a thread is not."""
    return 0.0


def sync_idle() -> float:
    return 30.0


async def async_join(handle: Any) -> None:
    if handle is not None and handle is not asyncio.current_task():
        await handle


def sync_join(handle: Any) -> None:
    if handle is not None and handle is not threading.current_thread():
        handle.join()


async def async_finish(
    fn: Callable[[], Coroutine[Any, Any, Any]], undo: Callable[[Any], Coroutine[Any, Any, Any]]
) -> Any:
    """Run ``fn`` to completion even if the caller is cancelled meanwhile; then, for a
    cancelled caller, ``undo`` its result and let the cancellation through. (A command
    cancelled mid-flight may still run on the server; this learns what it did.)"""
    task = asyncio.ensure_future(fn())
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        try:
            await undo(await task)
        except Exception:
            pass  # best effort: the caller is going away
        raise


def sync_finish(fn: Callable[[], Any], undo: Callable[[Any], Any]) -> Any:
    return fn()  # nothing cancels a synchronous call half way


# -- cluster clients -------------------------------------------------------------------


def async_loop() -> object:
    """The event loop the caller runs in: an async connection's sockets belong to it."""
    return asyncio.get_running_loop()


def sync_loop() -> object:
    """None: a sync connection's sockets belong to no loop."""
    return None


def async_handover() -> contextlib.AbstractContextManager[None]:
    """A task run's hand-over work (taking its lease, saving and releasing it): async,
    nothing to hold back (a stop is a cancellation, and the release is shielded)."""
    return contextlib.nullcontext()


def sync_handover() -> contextlib.AbstractContextManager[None]:
    """Sync: a stop (redistate.graceful()) asked meanwhile waits for it to end, and is
    raised as it ends."""
    from ..steps.shutdown import deferred

    return deferred()


def async_waiting() -> contextlib.AbstractContextManager[None]:
    """A wait for a busy lease: async, a stop cancels it anyway."""
    return contextlib.nullcontext()


def sync_waiting() -> contextlib.AbstractContextManager[None]:
    """Sync: a stop held back by the hand-over it is part of ends the wait at once."""
    from ..steps.shutdown import waiting

    return waiting()


def async_stop_pending() -> bool:
    """Whether a stop was asked and held back by a hand-over (sync only)."""
    return False


def sync_stop_pending() -> bool:
    from ..steps.shutdown import held_back

    return held_back()


def async_lock() -> asyncio.Lock:
    return asyncio.Lock()


def sync_lock() -> threading.Lock:
    return threading.Lock()


async def async_initialize(client: Any, lock: asyncio.Lock) -> None:
    """Learn a cluster's topology once, before the first command: redis-py's asyncio
    RedisCluster re-initializes (and drops connections) when many coroutines make its
    first commands at once."""
    async with lock:
        await client.initialize()  # a no-op once initialized


def sync_initialize(client: Any, lock: threading.Lock) -> None:
    return None  # a sync RedisCluster learns its topology when it is built


# -- a lease's local deadline, checked before a guarded write is sent -----------------
# Flavour-neutral on purpose: LangGraph's saver may guard a sync store's writes with an
# AsyncLease (or the other way round); `_overdue` is plain code in both flavours.


def async_stalled(seconds: float) -> str:
    """Why an asyncio renewal task did not run for ``seconds`` past its time."""
    return (
        f"the event loop was blocked for {seconds:.1f} s, past the renewal time (a "
        f"blocking call in async code? run it with asyncio.to_thread)"
    )


def sync_stalled(seconds: float) -> str:
    return (
        f"the renewal thread did not run for {seconds:.1f} s past its time (was the "
        f"process paused: SIGSTOP, a long GC, a suspended machine?)"
    )


async def async_confirm(lease: Any) -> None:
    """Raise LockLost if ``lease`` is lost, not held or past its local deadline; the
    first to find it so marks it lost (its ``on_lost`` runs)."""
    problem = lease._overdue()
    if problem is not None:
        await async_lost(lease, lease._lateness())
        lease._reported = True  # the caller hears it now: leaving the block won't repeat it
        raise LockLost(problem)


def sync_confirm(lease: Any) -> None:
    problem = lease._overdue()
    if problem is not None:
        sync_lost(lease, lease._lateness())
        lease._reported = True
        raise LockLost(problem)


async def async_lost(lease: Any, why: str | None = None) -> None:
    """Mark ``lease`` lost for good (``why``: what happened, if first to say) and run
    its ``on_lost`` once."""
    marked = lease._mark_lost(why)
    if inspect.isawaitable(marked):
        await marked


def sync_lost(lease: Any, why: str | None = None) -> None:
    marked = lease._mark_lost(why)
    if inspect.iscoroutine(marked):  # an AsyncLease guarding a sync store's write:
        marked.close()  # its on_lost needs its own loop; the flag is set at least
        lease._why = lease._why or why
        lease.lost.set()
