"""The task runner: lease, restore, guarded checkpoints, durable steps.

This is the async source of truth."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..checkpoints.spec import Checkpoint
from ..core import telemetry
from ..core._io import (
    AsyncWithGuard,
    AwaitableInSync,
    async_confirm,
    async_finish,
    async_handover,
    async_resolve,
    async_stop_pending,
)
from ..core.errors import (
    CodecError,
    LockLost,
    RedistateError,
    StateTooLarge,
    StepFailed,
    StepInterrupted,
)
from ..records.mergepatch import merge_patch
from .shutdown import stopping
from .spec import Step, check_step_name

if TYPE_CHECKING:
    from ..batch_async import AsyncRunBatch
    from ..core.durability import Durability
    from ..leases.lease_async import AsyncLease
    from ..store_async import AsyncStore

__all__ = ["AsyncTaskRun"]


async def _kept(done: Any) -> None:
    """What a hand-over ran to its end stays done (async_finish's undo)."""


def _every(turns: object, seconds: object) -> tuple[int | None, float | None]:
    """``save_every`` (turns, >= 1) and ``save_every_seconds`` (> 0), checked."""
    if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or turns < 1):
        raise ValueError(f"save_every must be an int >= 1 or None, got {turns!r:.80}")
    if seconds is not None and (
        isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0
    ):
        raise ValueError(f"save_every_seconds must be a number > 0 or None, got {seconds!r:.80}")
    return turns, None if seconds is None else float(seconds)


class AsyncTaskRun(AsyncWithGuard):
    """``async with store.task("t1") as run``: own the task, resume its state, save
    guarded checkpoints. What most agent code should use.

    On entry: acquire the task's lease (waiting up to ``wait``), restore the newest
    intact checkpoint plus its deltas (``run.state`` is ``{}`` on a first run) and read
    the task's step records. Every save, log and step record is guarded by the lease.
    If the block raises, a checkpoint with phase "failed" and the exception's repr is
    saved (while the lease still holds), then the exception propagates. The lease is
    released on exit.
    """

    def __init__(
        self,
        store: AsyncStore,
        task_id: str,
        *,
        ttl: float,
        wait: float | None,
        renew: bool | str = True,
        save_every: int | None = None,
        save_every_seconds: float | None = None,
    ) -> None:
        self._every = _every(save_every, save_every_seconds)
        self._turns = 0  # turns since the last save
        self._sending: tuple[Any] | None = None  # the state of a save in flight
        self._saved_at = time.monotonic()
        self._store = store
        self.task_id = task_id
        self.lease: AsyncLease = store.lock(task_id, ttl=ttl, wait=wait, renew=renew)
        """The task's lease; it guards every save, log and step record."""
        self.state: Any = {}
        """The task's state: restored on entry ({} on a first run), then what
        ``save`` and ``log`` made it."""
        self.resumed = False
        """Whether an earlier owner left a checkpoint or step records."""
        self.checkpoint: Checkpoint | None = None
        """The checkpoint ``state`` comes from (restored, or the last saved)."""
        self.skipped: tuple[str, ...] = ()
        """Damaged checkpoints and deltas the restore on entry skipped."""
        # Only the owner writes step records, so what was read on entry plus what this
        # run recorded is all there is while the lease holds.
        self._steps: dict[str, Step] = {}

    @property
    def fence(self) -> int | None:
        """The lease's fencing number: larger than every earlier owner's (kept after
        the block, for logs; ``run.lease.held`` says whether it is still held)."""
        return self.lease.fence

    async def save(
        self,
        state: Any,
        *,
        phase: str | None = None,
        progress: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Checkpoint:
        """Save a guarded checkpoint and make ``state`` the run's state.

        Raises:
            LockLost: another instance owns the task now; nothing was written.
        """
        self._sending = (state,)  # what a stop hands over if this save is cut short
        checkpoint = await self._store.checkpoints.save(
            self.task_id, state, phase=phase, progress=progress, metadata=metadata, lease=self.lease
        )
        self._sending = None
        self._turns, self._saved_at = 0, time.monotonic()
        self.state, self.checkpoint = state, checkpoint
        return checkpoint

    async def turn(self, state: Any, *, phase: str | None = None) -> bool:
        """One turn of an agent loop ended with ``state``: it becomes ``run.state``, and
        is saved (guarded, like :meth:`save`) once ``save_every`` turns or
        ``save_every_seconds`` have passed since the last save, whichever comes first.
        True if it saved. Between saves an interruption (``redistate.graceful()``)
        still saves the newest state.

        Raises:
            LockLost: another instance owns the task now; nothing was written.
        """
        self.state = state
        self._turns += 1
        turns, seconds = self._every
        due = (turns is not None and self._turns >= turns) or (
            seconds is not None and time.monotonic() - self._saved_at >= seconds
        )
        if due:
            await self.save(state, phase=phase)
        return due

    async def log(self, delta: dict[str, Any]) -> None:
        """Log a guarded merge patch after the newest checkpoint and apply it to
        ``run.state``.

        Raises:
            LockLost: another instance owns the task now; nothing was written.
        """
        await self._store.checkpoints.log(self.task_id, delta, lease=self.lease)
        self.state = merge_patch(self.state, delta)

    async def step(
        self,
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        idempotent: bool = True,
        retry_failed: bool = False,
        **kwargs: Any,
    ) -> Any:
        """``fn(*args, **kwargs)`` run at most once for this task: a result recorded by
        any earlier owner is returned without calling ``fn``. Otherwise ``fn`` runs
        and its result (a JSON value, through the store's codec) is recorded by a
        guarded write — one round trip; a step that is not idempotent records its start
        first (two). With AsyncStore ``fn`` may be a coroutine function (a blocking one
        starves the lease's renewal: run it in a thread). Returns the result as a resume
        would see it (decoded JSON: tuples come back as lists). A name is one step:
        called again, it returns the first result whatever the arguments.

        Raises:
            StepInterrupted: ``idempotent=False`` and an earlier owner started the step
                and never recorded its end: it may have had its effect.
            StepFailed: a failure recorded earlier (``retry_failed=True`` runs it again).
            LockLost: the lease is lost (a renewal or a write was refused) or past its
                local deadline (the process was paused or its loop blocked longer
                than the lease): raised before ``fn`` is called. Found only when
                recording the result: the result is not recorded, the new owner's
                records are never overwritten.
            CodecError, StateTooLarge: the result cannot be recorded; recorded as the
                step's failure instead (a retry must say ``retry_failed=True``).
            Exception: whatever ``fn`` raises, after recording it as the step's failure.
        """
        # The span holds fn's own spans (a tool call's); it is not a database
        # operation's duration, so db.client.operation.duration leaves it out.
        with telemetry.operation("step", "task", self._store.keys.namespace, self.task_id, False):
            return await self._step(name, fn, args, kwargs, idempotent, retry_failed)

    async def _step(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        idempotent: bool,
        retry_failed: bool,
    ) -> Any:
        check_step_name(name)
        known = self._steps.get(name)
        try:
            replay = known is not None and known.replay(
                idempotent=idempotent, retry_failed=retry_failed
            )
        except StepInterrupted:
            telemetry.event("redistate.steps", outcome="interrupted")
            raise
        except StepFailed:
            telemetry.event("redistate.steps", outcome="failed")
            raise
        if replay:
            assert known is not None  # replay is False without a known step
            telemetry.note(telemetry.REPLAYED)
            telemetry.event("redistate.steps", outcome="replayed")
            return known.result
        spec = self._store.checkpoints.step_spec
        key, fence = self._store.keys.task_steps(self.task_id), self.lease.fence
        started = time.time_ns() // 1_000_000
        if not idempotent:  # the marker that makes a crash inside fn visible on resume
            marker = spec.started(key, name, idempotent, fence, started)
            await self._record(name, marker)
        # Last thing before fn: a lease known lost (a refused write, a failed renewal)
        # or past its local deadline (a paused process, a blocked loop) calls nothing.
        try:
            await async_confirm(self.lease)
        except LockLost as exc:
            raise LockLost(f"{exc}: step {name!r} was not run") from None
        try:
            with telemetry.caller():  # the tool's own store calls are its own operations
                result = fn(*args, **kwargs)
                if inspect.isawaitable(result):
                    result = await async_resolve(result)
        except AwaitableInSync:
            raise  # the caller's mistake, not the step's failure
        except Exception as exc:
            ended = time.time_ns() // 1_000_000
            try:
                await self._record(name, spec.failed(key, name, idempotent, fence, started,
                                                     ended, exc))  # fmt: skip
            except RedistateError:
                pass  # fn's own exception is the one to report (e.g. the lease is lost)
            telemetry.event("redistate.steps", outcome="failed")
            raise
        ended = time.time_ns() // 1_000_000
        try:
            record = spec.done(key, name, idempotent, fence, started, ended, result)
        except (CodecError, StateTooLarge) as exc:
            # Its effect happened: calling it again by accident must not be silent.
            telemetry.event("redistate.steps", outcome="failed")
            await self._record(name, spec.failed(key, name, idempotent, fence, started,
                                                 ended, exc))  # fmt: skip
            raise
        try:
            step = await self._record(name, record)
        except LockLost:  # ran, and a successor holds the task: its result is not kept
            telemetry.event("redistate.steps", outcome="refused")
            raise
        telemetry.event("redistate.steps", outcome="recorded")
        return step.result

    def batch(self, *, durability: Durability | None = None) -> AsyncRunBatch:
        """A batch (``async with run.batch() as b``) whose ``b.run`` queues this run's
        guarded writes: ``save``, ``log`` and ``record`` (a step's result), beside any
        other write of the store (``b.sessions``, ``b.events``...). See
        redistate.batch."""
        from ..batch_async import AsyncRunBatch

        return AsyncRunBatch(self._store, self, durability)

    async def _record(self, name: str, record: bytes) -> Step:
        """Write a step record; the run's view of the step afterwards (the result
        recorded before, if one was: a result is final)."""
        checkpoints = self._store.checkpoints
        key = self._store.keys.task_steps(self.task_id)
        found = await checkpoints._record_step(self.task_id, name, record, self.lease)
        step = checkpoints.step_spec.parse(key, name, found if found is not None else record)
        self._steps[name] = step
        return step

    async def steps(self) -> list[Step]:
        """The task's recorded steps, read from the store (status, timing, fence)."""
        return await self._store.checkpoints.steps(self.task_id)

    async def __aenter__(self) -> AsyncTaskRun:
        # The reads go with the acquire: one round trip when the lease is free.
        checkpoints = self._store.checkpoints
        # Sync: a stop asked meanwhile is raised as the section ends, the lease released.
        with async_handover():
            read = await self.lease._acquire(checkpoints._entry_reads(self.task_id))
            try:
                restored, self._steps = await checkpoints._entered(self.task_id, read)
            except BaseException:
                await async_finish(self.lease.release, _kept)
                raise
            if async_stop_pending():
                await async_finish(self.lease.release, _kept)
        if restored is not None:
            self.state, self.checkpoint = restored.state, restored.checkpoint
            self.skipped = restored.skipped
        # Anything an earlier owner recorded, checkpoint or only step records, is a resume.
        self.resumed = restored is not None or bool(self._steps)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with async_handover():  # sync: a stop asked meanwhile waits for the release
            await self._exit(exc)

    async def _exit(self, exc: BaseException | None) -> None:
        told = self.lease._reported  # the block already heard (and maybe caught) a LockLost
        try:
            stop = stopping(exc)
            if stop is not None:  # redistate.graceful(): saved for the successor, then released
                # The newest state asked for: a save in flight may have been applied.
                state = self.state if self._sending is None else self._sending[0]
                try:
                    await async_finish(
                        lambda: self.save(state, phase="interrupted", metadata={"signal": stop}),
                        _kept,
                    )
                except RedistateError:
                    pass  # lost meanwhile: the successor resumes from the last save
            # Only errors are failures: a cancellation or exit is not recorded as one.
            elif isinstance(exc, Exception) and not isinstance(exc, LockLost):
                try:
                    await self.save(
                        self.state, phase="failed", metadata={"error": repr(exc)[:2000]}
                    )
                except RedistateError:
                    pass  # the block's own exception is the one to report
        finally:
            try:
                await async_finish(self.lease.release, _kept)  # never cut short: a held lease
            except LockLost:
                if exc is None and not told:
                    raise  # lost unnoticed inside the block: say so, once
            except RedistateError:
                if exc is None:
                    raise  # the block's own error matters more than a failed release
