"""A LangGraph ``BaseStore`` on plain Redis: ``RedistateStore`` (``redistate[langgraph]``).

Long-term memory shared across threads, processes and machines (``store.put(("users",
uid), "profile", {...})``) on Redis OSS 7+, Valkey, a Cluster or Sentinel, no modules.
Each namespace's items live in its own hash slot, so a put of one namespace is one
script; the TTL is set by the same script as the write, and an expired item is never
returned, even before Redis deletes it.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, Final, cast

from langgraph.store.base import BaseStore, Op, Result, TTLConfig

from ...leases.guard import guard_args
from ...store import Store
from ...store_async import AsyncStore
from . import memory_ops, memory_ops_async
from .memory import Owners, SweepReport
from .namespaces import Namespaces
from .namespaces_async import AsyncNamespaces

__all__ = ["LoopThreadError", "RedistateStore"]


_log = logging.getLogger("redistate")
_SWEEP_FAILED: Final = {"redistate_event": "store_sweep_failed"}


class LoopThreadError(asyncio.InvalidStateError, RuntimeError):
    """A sync call on the event loop's own thread, where it would wait for itself
    (LangGraph's async stores raise InvalidStateError there)."""


class RedistateStore(BaseStore):
    """LangGraph ``BaseStore`` over a redistate store.

    ``RedistateStore(store)`` takes a ``Store`` (``batch`` native, ``abatch`` in a
    worker thread) or an ``AsyncStore`` (``abatch`` native; ``batch`` from another
    thread than the loop's runs on the loop, as LangGraph's async stores do).
    ``ttl=TTLConfig(default_ttl=minutes, refresh_on_read=True)`` as LangGraph's; a put's
    ``ttl`` (minutes) overrides it. ``index=`` (semantic search) is refused: nothing
    here stores embeddings.

    ``user=`` registers each namespace a put writes to the user it belongs to, for
    ``store.users.erase(user)``: the index of the label holding the user id (``user=1``
    for ``("users", uid)``) or a function of the namespace returning the id or None.
    The namespace is registered before its first put (one SADD per namespace and
    process); erasure deletes its items.

    Call ``sweep()`` now and then (or ``start_ttl_sweeper()``) to delete expired items
    of namespaces nobody writes and take emptied namespaces out of the registry; reads
    never return an expired item either way.
    """

    supports_ttl = True

    def __init__(
        self,
        store: Store | AsyncStore,
        *,
        ttl: TTLConfig | None = None,
        index: Any = None,
        user: int | Callable[[tuple[str, ...]], str | None] | None = None,
    ) -> None:
        if index is not None:
            raise NotImplementedError(memory_ops_async.NOT_SEMANTIC)
        if not isinstance(store, Store | AsyncStore):
            raise TypeError(f"store must be a Store or AsyncStore, got {type(store).__name__}")
        self.store = store
        self.ttl_config = ttl
        self._codec = store.codec
        self._max_bytes = store._max_bytes
        self._async: AsyncNamespaces | None = None
        self._sync: Namespaces | None = None
        if isinstance(store, AsyncStore):
            self._async = store.memory_namespaces()
        else:
            self._sync = store.memory_namespaces()
        # The loop sync calls from other threads run on: the one building the store (as
        # LangGraph's async stores), else the one abatch last ran on.
        self._loop: asyncio.AbstractEventLoop | None = None
        if self._async is not None:
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                pass
        self._lease: Any = None
        self._owners = None if user is None else Owners(user)  # shared by with_lease clones
        # (thread, event) over a Store; (task, asyncio event) over an AsyncStore
        self._sweeper: tuple[Any, Any] | None = None

    def with_lease(self, lease: Any) -> RedistateStore:
        """This store, writing the namespace whose labels joined by "." are
        ``lease.name`` (``store.lock("users.u1")`` for ``("users", "u1")``) only while
        ``lease`` holds it: each put and delete there is checked inside its script and
        raises ``LockLost`` once a newer owner took the lease. Other namespaces are
        written unguarded."""
        guard_args(lease, lease.name, self.store.keys.lock(lease.name))  # refuse bad ones now
        clone = copy.copy(self)
        clone._lease = lease
        clone._sweeper = None
        return clone

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` (reads first, then puts) and return their results in order."""
        if self._sync is not None:
            return memory_ops.run(
                self._sync,
                self._codec,
                self._max_bytes,
                self.ttl_config,
                ops,
                self._lease,
                self._owners,
            )
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        loop = self._loop
        if running is not None and running is loop:
            raise LoopThreadError(
                "RedistateStore's sync methods were called on its event loop's thread:"
                " use the async ones (aget, aput, asearch...) there"
            )
        if loop is None or loop.is_closed():
            raise RuntimeError(
                "this RedistateStore has an AsyncStore: call abatch (or its sync methods"
                " from another thread than the event loop's, once it runs there)"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(list(ops)), loop).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """The async ``batch``."""
        if self._async is None:
            return await asyncio.to_thread(self.batch, list(ops))
        self._loop = asyncio.get_running_loop()
        return await memory_ops_async.run(
            self._async,
            self._codec,
            self._max_bytes,
            self.ttl_config,
            ops,
            self._lease,
            self._owners,
        )

    def sweep(self) -> SweepReport:
        """Delete every expired item and take namespaces with none left out of the
        registry (a Store's sync call; ``asweep`` for an AsyncStore)."""
        if self._sync is None:
            raise RuntimeError("this RedistateStore has an AsyncStore: await asweep()")
        return self._sync.sweep()

    async def asweep(self) -> SweepReport:
        """The async ``sweep``."""
        if self._async is None:
            return await asyncio.to_thread(self.sweep)
        return await self._async.sweep()

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Any:
        """Sweep every ``sweep_interval_minutes`` (else the TTLConfig's, else 5) until
        ``stop_ttl_sweeper()``, as LangGraph's stores: over a Store in a daemon thread
        (returned); over an AsyncStore ``await store.start_ttl_sweeper()`` starts a
        task on the running loop and returns it. A failed sweep is logged and the next
        one runs on time."""
        minutes = float(
            sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        )
        if self._sync is None:
            return self._start_task(minutes)
        if self._sweeper is not None:
            return self._sweeper[0]
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(minutes * 60):
                try:
                    self.sweep()
                except Exception:  # the thread lives on: the next sweep may succeed
                    _log.exception("LangGraph store sweep failed", extra=_SWEEP_FAILED)

        thread = threading.Thread(target=loop, name="redistate-store-sweeper", daemon=True)
        self._sweeper = (thread, stop)
        thread.start()
        return thread

    async def _start_task(self, minutes: float) -> asyncio.Task[None]:
        if self._sweeper is not None and not self._sweeper[0].done():
            return cast("asyncio.Task[None]", self._sweeper[0])
        stop = asyncio.Event()

        async def loop() -> None:
            while True:
                try:
                    await asyncio.wait_for(stop.wait(), minutes * 60)
                    return
                except asyncio.TimeoutError:
                    pass
                try:
                    await self.asweep()
                except Exception:
                    _log.exception("LangGraph store sweep failed", extra=_SWEEP_FAILED)

        task = asyncio.get_running_loop().create_task(loop(), name="redistate-store-sweeper")
        self._sweeper = (task, stop)
        return task

    def stop_ttl_sweeper(self, timeout: float | None = None) -> Any:
        """Stop the sweeper; whether it stopped within ``timeout`` (over an AsyncStore:
        ``await store.stop_ttl_sweeper()``)."""
        if self._sync is None:
            return self._stop_task(timeout)
        if self._sweeper is None:
            return True
        thread, stop = self._sweeper
        stop.set()
        thread.join(timeout)
        self._sweeper = None
        return not thread.is_alive()

    async def _stop_task(self, timeout: float | None) -> bool:
        if self._sweeper is None:
            return True
        task, stop = self._sweeper
        stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except asyncio.TimeoutError:
            return False
        self._sweeper = None
        return True
