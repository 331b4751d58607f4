"""The task runner: lease + restore + guarded checkpoints (async source of truth)."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..checkpoints import Checkpoint
from ..errors import LockLost, RedistateError
from ..mergepatch import merge_patch

if TYPE_CHECKING:
    from .leases import AsyncLease
    from .store import AsyncStore

__all__ = ["AsyncTaskRun"]


class AsyncTaskRun:
    """``async with store.task("t1") as run``: own the task, resume its state, save
    guarded checkpoints. What most agent code should use.

    On entry: acquire the task's lease (waiting up to ``wait``), restore the newest
    intact checkpoint plus its deltas (``run.state`` is ``{}`` on a first run). Every
    save and log is guarded by the lease. If the block raises, a checkpoint with phase
    "failed" and the exception's repr is saved (while the lease still holds), then the
    exception propagates. The lease is released on exit.
    """

    def __init__(self, store: AsyncStore, task_id: str, *, ttl: float, wait: float | None) -> None:
        self._store = store
        self.task_id = task_id
        self.lease: AsyncLease = store.lock(task_id, ttl=ttl, wait=wait)
        self.state: Any = {}
        self.resumed = False
        self.checkpoint: Checkpoint | None = None
        self.skipped: tuple[str, ...] = ()

    @property
    def fence(self) -> int | None:
        """The lease's fencing number: larger than every earlier owner's."""
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
        checkpoint = await self._store.checkpoints.save(
            self.task_id, state, phase=phase, progress=progress, metadata=metadata, lease=self.lease
        )
        self.state, self.checkpoint = state, checkpoint
        return checkpoint

    async def log(self, delta: dict[str, Any]) -> None:
        """Log a guarded merge patch after the newest checkpoint and apply it to
        ``run.state``.

        Raises:
            LockLost: another instance owns the task now; nothing was written.
        """
        await self._store.checkpoints.log(self.task_id, delta, lease=self.lease)
        self.state = merge_patch(self.state, delta)

    async def __aenter__(self) -> AsyncTaskRun:
        await self.lease.acquire()
        try:
            restored = await self._store.checkpoints.restore(self.task_id)
        except BaseException:
            await self.lease.release()
            raise
        if restored is not None:
            self.state, self.checkpoint = restored.state, restored.checkpoint
            self.resumed, self.skipped = True, restored.skipped
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            # Only errors are failures: a cancellation or exit is not recorded as one.
            if isinstance(exc, Exception) and not isinstance(exc, LockLost):
                try:
                    await self.save(
                        self.state, phase="failed", metadata={"error": repr(exc)[:2000]}
                    )
                except RedistateError:
                    pass  # the block's own exception is the one to report
        finally:
            try:
                await self.lease.release()
            except RedistateError:
                if exc is None:
                    raise  # the block's own error matters more than a failed release
