"""Graceful shutdown: a process asked to stop (SIGTERM from a container runtime, SIGINT)
hands its task over at once instead of leaving its lease to expire.

``with redistate.graceful():`` (sync) or ``async with redistate.graceful():`` around a
worker's loop: while the block runs, the signals make the task run in progress stop
where it is. ``store.task()``'s exit then saves the run's state with phase
"interrupted" (guarded by its lease, which still holds), releases the lease (a waiting
successor is woken at once and resumes from that state; recorded steps are not run
again) and lets the stop go on: the process exits with status 128 + the signal's
number, as a process the signal killed, with no traceback.

Sync: the handler raises :class:`Shutdown` in the main thread, wherever it is (a tool
call, a wait). Async: the handler cancels the task that entered the block; the run's
exit sees that cancellation as the stop, and the block ends by raising ``Shutdown``.
The previous handlers are put back when the block ends.
"""

from __future__ import annotations

import asyncio
import signal
from types import FrameType, TracebackType
from typing import Any

__all__ = ["Shutdown", "graceful", "stopping"]

_requested: list[int] = []  # the signal that asked this process to stop, once it did


class Shutdown(SystemExit):
    """The process was asked to stop by ``signum`` (raised by :func:`graceful`'s
    handler). A SystemExit: uncaught, the process exits with 128 + ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}"


def stopping(exc: BaseException | None) -> str | None:
    """The signal's name if ``exc`` is the stop :func:`graceful` made (a Shutdown, or
    the cancellation its async handler made); else None."""
    if isinstance(exc, Shutdown):
        return signal.Signals(exc.signum).name
    if isinstance(exc, asyncio.CancelledError) and _requested:
        return signal.Signals(_requested[0]).name
    return None


class graceful:
    """Turn ``signals`` (SIGTERM and SIGINT) into a graceful stop while the block runs
    (see the module's documentation). In the main thread only (Python runs signal
    handlers there)."""

    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
        self.signals = tuple(signal.Signals(s) for s in signals)
        self._previous: dict[int, Any] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None

    def __enter__(self) -> graceful:
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._raise)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
        _requested.clear()  # handled: a later block starts afresh

    def _raise(self, signum: int, frame: FrameType | None) -> None:
        if _requested:
            return  # stopping already: let the hand-over (save, release) finish
        _requested.append(signum)
        raise Shutdown(signum)

    async def __aenter__(self) -> graceful:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        for sig in self.signals:
            self._loop.add_signal_handler(sig, self._cancel, sig)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._loop is not None
        for sig in self.signals:
            self._loop.remove_signal_handler(sig)
        signum = _requested[0] if _requested else None
        _requested.clear()  # handled: a later block starts afresh
        if isinstance(exc, asyncio.CancelledError) and signum is not None:
            raise Shutdown(signum) from None

    def _cancel(self, signum: int) -> None:
        if not _requested:
            _requested.append(signum)
            if self._task is not None:
                self._task.cancel(f"stopped by {signal.Signals(signum).name}")
