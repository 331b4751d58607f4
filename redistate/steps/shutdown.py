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
call, a wait), except inside a task run's own hand-over work (taking the lease and
restoring, saving and releasing it): there the stop waits for that work to end, and is
raised as it ends, whatever it ends with; so is one that comes as the block's own
entry or exit swaps the handlers. Nor is a stop lost where Python would only report it
(a ``__del__``, another finaliser), drop it (the ``close()`` an io object's finaliser
calls) or turn it into a RuntimeError (under ``__set_name__`` before 3.12, as a class
is made at import): it is raised as soon as that call returns, once. Not covered: a
stop raised inside C code that clears it (a dropped buffered file whose flush blocked
on a full pipe or socket) is lost, and the process goes on.

Async: the handler cancels the task that entered the block; the run's exit sees that
cancellation as the stop (its release runs to the end whatever cancels it), and the
block ends by raising ``Shutdown``.

Once asked, a stop stays asked until every block has closed (tasks cancelled later, as
``asyncio.run`` ends, save their runs too), and a second signal is ignored so that the
hand-over finishes; a block opened after that starts afresh. The previous handlers are
put back when the block ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType, TracebackType
from typing import Any, ClassVar

__all__ = [
    "Shutdown",
    "deferred",
    "graceful",
    "held_back",
    "raise_deferred",
    "stopping",
    "waiting",
]


class _Stop:
    """This process's stop: the signal that asked for it, and the hand-over sections
    (sync) running now, which hold it back until they end."""

    signum: int | None = None
    raised = False  # Shutdown has been raised (once is enough)
    again = False  # put off where it would be lost: sent again once it would not be
    senders: ClassVar[list[threading.Thread]] = []  # what sends it again (joined at exit)
    spot: FrameType | None = None  # the frame it was put off under
    depth = 0  # hand-over sections running (sync)
    waiting = 0  # waits for a lease inside them: holding nothing, a stop ends them
    blocks = 0  # graceful blocks open (sync and async)


_stop = _Stop()


class Shutdown(SystemExit):
    """The process was asked to stop by ``signum`` (raised by :func:`graceful`'s
    handler). A SystemExit: uncaught, the process exits with 128 + ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum

    def __reduce__(self) -> tuple[Any, ...]:
        return (Shutdown, (self.signum,))  # not (128 + signum,): a copy keeps its code

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}"


def stopping(exc: BaseException | None) -> str | None:
    """The signal's name if ``exc`` is the stop :func:`graceful` made (a Shutdown, or
    a cancellation once a stop was asked); else None."""
    if isinstance(exc, Shutdown):
        return signal.Signals(exc.signum).name
    if isinstance(exc, asyncio.CancelledError) and _stop.signum is not None:
        return signal.Signals(_stop.signum).name
    return None


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A task run's hand-over work (sync): a stop asked meanwhile is raised when it
    ends, not in the middle (a lease acquired and never released would make the
    successor wait out its TTL)."""
    _stop.depth += 1
    try:
        yield
    finally:
        _stop.depth -= 1
        raise_deferred()  # also when the section fails: the stop replaces its error


@contextlib.contextmanager
def waiting() -> Iterator[None]:
    """A wait for a lease held by another owner (sync): this process holds nothing
    yet, so a stop asked before or during it ends it at once."""
    if _stop.signum is not None and not _stop.raised:
        raise _raised(_stop.signum)
    _stop.waiting += 1
    try:
        yield
    finally:
        _stop.waiting -= 1


def _lost_at(frame: FrameType | None) -> FrameType | None:
    """The outermost frame under which an exception raised in ``frame`` would not end
    the process as itself, or None. Python only reports one raised under a
    ``__del__`` (or the hook that reports it), drops one raised in the ``close()`` an
    io object's finaliser calls without a word, and before 3.12 turns one raised under
    ``__set_name__`` (as a class is made) into a RuntimeError: exit 1, a traceback."""
    spot = None
    for outer in _stack(frame):
        name = outer.f_code.co_name
        if (
            name == "__del__"
            or outer.f_code is graceful._swallowed.__code__
            or (name == "__set_name__" and sys.version_info < (3, 12))
            or (name == "close" and _finalising(outer.f_locals.get("self")))
        ):
            spot = outer
    return spot


def _stack(frame: FrameType | None) -> Iterator[FrameType]:
    """``frame`` and the frames it runs under, innermost first."""
    while frame is not None:
        yield frame
        frame = frame.f_back


def _finalising(obj: object) -> bool:
    """Whether ``obj`` is an io object whose C finaliser runs its close() now (it
    sets ``_finalizing`` first): an explicit close() lets the stop through."""
    return isinstance(obj, io.IOBase) and getattr(obj, "_finalizing", False) is True


def _opening_or_closing(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs under graceful's own entry or exit (handlers being
    swapped): a stop there is held back and raised once they are in a known state."""
    codes = (graceful.__enter__.__code__, graceful.__exit__.__code__)
    return any(outer.f_code in codes for outer in _stack(frame))


def _under(spot: FrameType, frame: FrameType | None) -> bool:
    """Whether ``frame`` is ``spot`` or runs under it."""
    return any(outer is spot for outer in _stack(frame))


def _call_again(signum: int) -> None:
    """Send ``signum`` to the main thread again as soon as it left the spot where the
    stop would be lost. Not from here: the handler would run again at once, still
    there. A real signal, which also ends a blocking call the thread went on to."""
    if _stop.again:
        return  # a sender is on it: `again` stayed True since it started, so it loops
    _stop.again = True  # a sender that saw it False may be leaving: start a new one
    main = threading.main_thread().ident
    assert main is not None  # the handler runs in the main thread, started
    sender = threading.Thread(
        target=_send_again, args=(signum, main), name="redistate-stop", daemon=True
    )
    _stop.senders.append(sender)
    sender.start()


def _send_again(signum: int, main: int) -> None:
    # Until the handler ran where the stop holds (it clears `again`): the spots are
    # short (a __del__, a close(), a __set_name__), so polling the main thread's stack
    # every ms costs nothing and needs no hook inside them. The spot is compared by
    # identity, not looked into: this thread does not read the other's locals.
    while _stop.again:
        spot = _stop.spot
        if spot is None or not _under(spot, sys._current_frames().get(main)):
            signal.pthread_kill(main, signum)
        time.sleep(0.001)


def _no_more_sends() -> None:
    """Stop sending the signal again (the block ends: the handler goes)."""
    _stop.again, _stop.spot = False, None
    while _stop.senders:
        _stop.senders.pop().join()


def _raised(signum: int) -> Shutdown:
    """The stop, to raise now: nothing sends it again."""
    _stop.raised, _stop.again, _stop.spot = True, False, None
    return Shutdown(signum)


def _opened() -> None:
    """A graceful block opens: the first since the last one closed starts afresh (a
    stop that ended an earlier block, caught, does not deafen this one)."""
    if _stop.blocks == 0:
        _no_more_sends()
        _stop.signum, _stop.raised = None, False
    _stop.blocks += 1


def held_back() -> bool:
    """Whether a stop was asked while a hand-over section ran and not raised yet."""
    return _stop.signum is not None and not _stop.raised


def raise_deferred() -> None:
    """Raise the stop a hand-over section held back, if one did (sync)."""
    if _stop.depth == 0 and _stop.signum is not None and not _stop.raised:
        raise _raised(_stop.signum)


class graceful:
    """Turn ``signals`` (SIGTERM and SIGINT) into a graceful stop while the block runs
    (see the module's documentation). In the main thread only (Python runs signal
    handlers there)."""

    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
        self.signals = tuple(signal.Signals(s) for s in signals)
        self._previous: dict[int, Any] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._handles: dict[int, Any] = {}  # the loop's own handlers replaced (async)
        self._unraisable: Callable[[Any], object] | None = None  # the hook replaced (sync)

    def __enter__(self) -> graceful:
        _opened()
        try:
            for sig in self.signals:  # recorded first: a stop may land in signal()
                self._previous[sig] = signal.getsignal(sig)
                signal.signal(sig, self._raise)
            self._unraisable = sys.unraisablehook
            sys.unraisablehook = self._swallowed
        except BaseException:
            self._close()
            raise
        signum = _stop.signum
        if signum is not None and _stop.depth == 0 and not _stop.raised:
            self._close()  # asked as the handlers went in: raised now
            raise _raised(signum)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            _no_more_sends()  # a signal sent after the handler went would kill
        finally:
            self._close()
        signum = _stop.signum  # put off, or asked as this exit ran: raised now
        if signum is not None and not _stop.raised and stopping(exc) is None:
            raise _raised(signum)

    def _close(self) -> None:
        try:
            self._restore()
        finally:
            _stop.blocks -= 1

    def _restore(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
        if self._unraisable is not None and sys.unraisablehook == self._swallowed:
            sys.unraisablehook = self._unraisable
        self._unraisable = None

    def _swallowed(self, unraisable: Any) -> None:
        """A finaliser that is no ``__del__`` (a weakref callback, a generator closed
        as it is dropped) ended with the stop, which Python only reports: raise it
        again after."""
        exc = unraisable.exc_value
        if isinstance(exc, Shutdown) and _stop.signum is not None:
            _stop.raised = False
            _call_again(_stop.signum)
        elif isinstance(exc, OSError) and str(exc) in {
            f"Signal {int(s)} ignored due to race condition" for s in self.signals
        }:
            # Caught while the handler was in, run after the previous one (SIG_DFL)
            # went back: deliver it to that one rather than lose it.
            signal.raise_signal(int(str(exc).split()[1]))
        elif self._unraisable is not None:
            self._unraisable(unraisable)

    def _raise(self, signum: int, frame: FrameType | None) -> None:
        if _stop.signum is not None and (_stop.raised or not _stop.again):
            return  # stopping already: let the hand-over (save, release) finish
        _stop.signum = signum
        if (_stop.depth and not _stop.waiting) or _opening_or_closing(frame):
            _stop.again, _stop.spot = False, None
            return  # held back: raised as the hand-over section (or the entry/exit) ends
        spot = _lost_at(frame)
        if spot is not None:
            _stop.spot = spot  # kept only until the stop is raised
            _call_again(signum)  # `again` never goes False meanwhile
            return
        raise _raised(signum)

    async def __aenter__(self) -> graceful:
        loop = self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        _opened()
        handlers: dict[int, Any] = getattr(loop, "_signal_handlers", {})
        try:
            for sig in self.signals:
                self._previous[sig] = signal.getsignal(sig)
                if sig in handlers:  # the application's own loop handler, put back after
                    self._handles[sig] = handlers[sig]
                loop.add_signal_handler(sig, self._cancel, sig)
        except BaseException:
            try:
                self._unhook()  # raises too off the main thread
            finally:
                _stop.blocks -= 1
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._unhook()
        finally:
            _stop.blocks -= 1
        if isinstance(exc, asyncio.CancelledError) and _stop.signum is not None:
            raise Shutdown(_stop.signum) from None

    def _unhook(self) -> None:
        loop = self._loop
        assert loop is not None
        for sig, previous in self._previous.items():
            loop.remove_signal_handler(sig)
            handle = self._handles.get(sig)
            if handle is not None:
                loop.add_signal_handler(sig, handle._callback, *handle._args)
            else:
                signal.signal(sig, previous)
        self._previous.clear()
        self._handles.clear()

    def _cancel(self, signum: int) -> None:
        if _stop.signum is None:
            _stop.signum = signum
            if self._task is not None:
                self._task.cancel(f"stopped by {signal.Signals(signum).name}")
