"""Batches: several writes of any kind in one round trip per node (async source of truth).

``async with store.batch() as b:`` queues writes (each checked and encoded at the
call that queues it, as the single call would); leaving the block sends them all:
one pipeline per server (a cluster: per primary), each write its own script, so each
keeps its version check, TTL, lease and write id, and gets its own result or error
(:class:`~redistate.core.batching.Pending`). Writes are not atomic together; each
node applies its writes in the order they were queued.
"""

from __future__ import annotations

import inspect
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .core import telemetry
from .core._io import AsyncWithGuard, async_resolve
from .core.batching import Pending, Prepared
from .core.durability import Durability
from .core.errors import BatchError, BatchNotSent
from .records.mergepatch import merge_patch
from .records.spec import DEFAULT, TTL, Record
from .steps.spec import check_step_name

if TYPE_CHECKING:
    from .checkpoints.spec import Checkpoint
    from .checkpoints.tasks_async import AsyncCheckpoints
    from .events.spec import Event
    from .events.stream_async import AsyncEvents
    from .records.collection_async import AsyncCollection
    from .steps.runner_async import AsyncTaskRun
    from .store_async import AsyncStore

__all__ = [
    "AsyncBatch",
    "AsyncBatchCheckpoints",
    "AsyncBatchEvents",
    "AsyncBatchRecords",
    "AsyncBatchRun",
    "AsyncRunBatch",
    "BatchError",
    "BatchNotSent",
    "Pending",
]


class AsyncBatch(AsyncWithGuard):
    """Writes queued to be sent together: ``async with store.batch() as b``.

    Leaving the block sends them (:meth:`send`); an exception raised in the block
    sends nothing. Each queued write returns a :class:`Pending` whose ``result()`` is
    what the single call returns, or raises that write's own error. If any failed,
    leaving the block raises :class:`BatchError` listing them (index and kind), and
    every Pending stays readable. ``durability="replicated"``: one WAIT per node
    after its writes (the store's setting by default).
    """

    def __init__(self, store: AsyncStore, durability: Durability | None = None) -> None:
        self._store = store
        self._conn = store._conn
        self._replicas = self._conn.replicas(durability)
        self._durability = durability  # for what a write sends alone after the batch
        self._writes: list[tuple[Prepared, Pending[Any]]] = []
        self._sent = False
        self.sessions = AsyncBatchRecords(self, store.sessions, "sessions")
        """Queue writes to ``store.sessions``."""
        self.users = AsyncBatchRecords(self, store.users, "users")
        """Queue writes to ``store.users``."""
        self.checkpoints = AsyncBatchCheckpoints(self, store.checkpoints)
        """Queue checkpoint saves and delta logs."""
        self.events = AsyncBatchEvents(self, store.events)
        """Queue event appends."""

    def records(self, collection: AsyncCollection) -> AsyncBatchRecords:
        """Queue writes to ``collection`` (``store.collection("notes")``)."""
        return AsyncBatchRecords(self, collection, collection.name)

    def __len__(self) -> int:
        return len(self._writes)

    def _queue(self, what: str, prepared: Prepared) -> Pending[Any]:
        if self._sent:
            raise RuntimeError(f"this batch was sent already: queue {what} in a new store.batch()")
        pending: Pending[Any] = Pending(len(self._writes), what)
        self._writes.append((prepared, pending))
        return pending

    async def send(self) -> None:
        """Send every queued write (one round trip per node), then finish each in
        order. Called when the block ends; at most once.

        Raises:
            BatchError: some writes failed (each Pending has its own error).
            RuntimeError: sent already.
        """
        if self._sent:
            raise RuntimeError("this batch was sent already")
        self._sent = True
        writes = self._writes
        if not writes:
            return
        with telemetry.operation("batch", "", self._store.keys.namespace, batch=len(writes)):
            await self._send(writes)

    async def _send(self, writes: list[tuple[Prepared, Pending[Any]]]) -> None:
        try:
            replies = await self._conn.writes([p.call for p, _ in writes], self._replicas)
        except BaseException as exc:  # nothing came back (first contact, cancellation)
            for _, pending in writes:
                pending._fail(exc)
            raise
        failures: list[tuple[int, str, BaseException]] = []
        for (prepared, pending), reply in zip(writes, replies, strict=True):
            try:
                if isinstance(reply, Exception):
                    raise reply
                result = prepared.finish(reply)
                if inspect.isawaitable(result):  # more I/O after the reply (a merge's fold)
                    result = await async_resolve(result)
            except Exception as error:  # this write's own error; the others go on
                pending._fail(error)
                failures.append((pending.index, pending.kind, error))
            else:
                pending._set(result)
        if failures:
            raise BatchError(failures, len(writes))

    def discard(self) -> None:
        """Drop every queued write unsent (their results raise BatchNotSent)."""
        self._sent = True
        for _, pending in self._writes:
            pending._drop()

    async def __aenter__(self) -> AsyncBatch:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.discard()  # a half-built batch is not what the caller meant to send
            return
        if not self._sent:
            await self.send()


class AsyncBatchRecords:
    """A collection's writes queued in a batch: ``b.sessions``, ``b.users``,
    ``b.records(store.collection("notes"))``. Same arguments and checks as the
    collection's own methods (``user=`` registration is not batched)."""

    __slots__ = ("_batch", "_collection", "_name")

    def __init__(self, batch: AsyncBatch, collection: AsyncCollection, name: str) -> None:
        self._batch = batch
        self._collection = collection
        self._name = name

    def put(
        self,
        id: str,
        data: Any,
        *,
        ttl: TTL = DEFAULT,
        if_version: int | None = None,
        lease: Any = None,
    ) -> Pending[Record]:
        """Queue :meth:`AsyncCollection.put`; its result is the written Record."""
        prepared = self._collection._prepare_put(id, data, ttl, if_version, lease)
        return self._batch._queue(f"{self._name}.put", prepared)

    def merge(
        self, id: str, patch: Any, *, ttl: TTL = DEFAULT, lease: Any = None, returning: bool = True
    ) -> Pending[Record]:
        """Queue :meth:`AsyncCollection.merge`; its result is the merged Record. A merge
        whose turn it is to fold the record's patches back does so after the batch
        (one more round trip, as alone)."""
        durability = self._batch._durability
        prepared = self._collection._prepare_merge(id, patch, ttl, lease, returning, durability)
        return self._batch._queue(f"{self._name}.merge", prepared)

    def delete(self, id: str, *, if_version: int | None = None, lease: Any = None) -> Pending[bool]:
        """Queue :meth:`AsyncCollection.delete`; its result is True if it existed."""
        prepared = self._collection._prepare_delete(id, if_version, lease)
        return self._batch._queue(f"{self._name}.delete", prepared)


class AsyncBatchCheckpoints:
    """Checkpoint writes queued in a batch: ``b.checkpoints``."""

    __slots__ = ("_batch", "_checkpoints")

    def __init__(self, batch: AsyncBatch, checkpoints: AsyncCheckpoints) -> None:
        self._batch = batch
        self._checkpoints = checkpoints

    def save(
        self,
        task_id: str,
        state: Any,
        *,
        phase: str | None = None,
        progress: float | None = None,
        metadata: dict[str, Any] | None = None,
        checkpoint_id: str | None = None,
        keep: int | None = None,
        ttl: TTL = DEFAULT,
        lease: Any = None,
    ) -> Pending[Checkpoint]:
        """Queue :meth:`AsyncCheckpoints.save`; its result is the Checkpoint."""
        prepared = self._checkpoints._prepare_save(
            task_id, state, phase, progress, metadata, checkpoint_id, keep, ttl, lease
        )
        return self._batch._queue("checkpoints.save", prepared)

    def log(
        self,
        task_id: str,
        delta: Any,
        *,
        delta_id: str | None = None,
        ttl: TTL = DEFAULT,
        lease: Any = None,
    ) -> Pending[int]:
        """Queue :meth:`AsyncCheckpoints.log`; its result is the log's length. Logged
        after the newest checkpoint when the delta reaches the server: a save queued
        before it in the same batch comes first."""
        durability = self._batch._durability
        prepared = self._checkpoints._prepare_log(task_id, delta, delta_id, ttl, lease, durability)
        return self._batch._queue("checkpoints.log", prepared)


class AsyncBatchEvents:
    """Event appends queued in a batch: ``b.events``. Appends to one entity are
    chained in the order queued; an append whose chain end this store did not know
    (another writer appended) is tried again from the real end after the batch."""

    __slots__ = ("_batch", "_events", "_heads")

    def __init__(self, batch: AsyncBatch, events: AsyncEvents) -> None:
        self._batch = batch
        self._events = events
        self._heads: dict[str, tuple[str, int]] = {}

    def append(self, entity: str, type: str, payload: Any, *, lease: Any = None) -> Pending[Event]:
        """Queue :meth:`AsyncEvents.append`; its result is the Event."""
        head = self._heads.get(entity)
        prepared, end = self._events._prepare_append(entity, type, payload, lease, head)
        pending: Pending[Event] = self._batch._queue("events.append", prepared)
        self._heads[entity] = end
        return pending


class AsyncRunBatch(AsyncBatch):
    """``async with run.batch() as b``: a batch whose ``b.run`` queues the task run's
    own guarded writes (see :class:`AsyncBatchRun`)."""

    def __init__(
        self, store: AsyncStore, run: AsyncTaskRun, durability: Durability | None = None
    ) -> None:
        super().__init__(store, durability)
        self.run = AsyncBatchRun(self, run)
        """Queue the run's save, log and step records, guarded by its lease."""

    async def __aenter__(self) -> AsyncRunBatch:
        return self


class AsyncBatchRun:
    """A task run's writes queued in a batch, each guarded by the run's lease; the run
    (``state``, ``checkpoint``, its step records) follows each one that succeeds, in
    the order queued."""

    __slots__ = ("_batch", "_run")

    def __init__(self, batch: AsyncBatch, run: AsyncTaskRun) -> None:
        self._batch = batch
        self._run = run

    def save(
        self,
        state: Any,
        *,
        phase: str | None = None,
        progress: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Pending[Checkpoint]:
        """Queue ``run.save``; once applied, ``state`` is the run's state."""
        run = self._run
        prepared = run._store.checkpoints._prepare_save(
            run.task_id, state, phase, progress, metadata, None, None, DEFAULT, run.lease
        )

        async def saved(checkpoint: Checkpoint) -> Checkpoint:
            run.state, run.checkpoint = state, checkpoint
            return checkpoint

        return self._batch._queue("run.save", _then(prepared, saved))

    def log(self, delta: dict[str, Any]) -> Pending[int]:
        """Queue ``run.log``; once applied, the delta is merged into the run's state.
        Its result is the log's length."""
        run = self._run
        prepared = run._store.checkpoints._prepare_log(
            run.task_id, delta, None, DEFAULT, run.lease, self._batch._durability
        )

        async def logged(length: int) -> int:
            run.state = merge_patch(run.state, delta)
            return length

        return self._batch._queue("run.log", _then(prepared, logged))

    def record(self, name: str, result: Any) -> Pending[Any]:
        """Queue the record of step ``name``'s result, computed by the caller (an
        idempotent step run outside ``run.step``): once applied, ``run.step(name, ...)``
        returns it without a call. A result recorded before is final: the Pending's
        result is the recorded one. Until the batch is sent nothing is recorded, so a
        crash before that runs the work again on resume (as for an idempotent step).

        Raises:
            CodecError, StateTooLarge: the result cannot be recorded (nothing queued).
        """
        run = self._run
        check_step_name(name)
        spec = run._store.checkpoints.step_spec
        key = run._store.keys.task_steps(run.task_id)
        now = time.time_ns() // 1_000_000
        record = spec.done(key, name, True, run.lease.fence, now, now, result)
        prepared = run._store.checkpoints._prepare_step(run.task_id, name, record, run.lease)

        async def recorded(found: bytes | None) -> Any:
            step = spec.parse(key, name, found if found is not None else record)
            run._steps[name] = step
            return step.result

        return self._batch._queue("run.record", _then(prepared, recorded))


def _then(prepared: Prepared, after: Any) -> Prepared:
    """``prepared`` whose result then goes through ``after`` (the run follows it)."""

    async def finish(reply: Any) -> Any:
        result = prepared.finish(reply)
        if inspect.isawaitable(result):
            result = await async_resolve(result)
        return await after(result)

    return Prepared(prepared.kind, prepared.call, finish)
