"""Graceful shutdown (``redistate.graceful()``): a worker SIGTERMed mid-task saves its
state as "interrupted", releases its lease and exits 128 + 15; a worker already waiting
for the task is woken by that release (its lease would only expire after 60 s, past
its 30 s wait: acquiring at all shows the hand-over), resumes from the saved state and
runs no recorded step again. Real processes and signals (tests/shutdown_worker.py)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import pytest

from tests import spawn
from tests.conftest import Backend


def _worker(url: str, namespace: str, mode: str) -> subprocess.Popen[bytes]:
    return spawn.module("shutdown_worker", url, namespace, mode)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_sigtermed_worker_hands_its_task_to_the_waiting_one(
    server_backend: Backend, namespace: str, mode: str
) -> None:
    first = _worker(server_backend.url, namespace, mode)
    second = None
    try:
        assert spawn.line(first) == "entered - {}"
        assert spawn.line(first) == "mid"  # s0 and s1 ran and were saved; it waits
        second = _worker(server_backend.url, namespace, mode)  # waits for the lease
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 128 + signal.SIGTERM
        assert first.stderr is not None and b"Traceback" not in first.stderr.read()
        # Woken by the release: the saved state, marked interrupted.
        assert spawn.line(second) == 'entered interrupted {"next":2}'
        assert spawn.line(second) == "finished"
        assert second.wait(timeout=60) == 0
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    raw = server_backend.raw()
    try:
        # Each step's effect once: s0 and s1 by the first worker, replayed by the second.
        assert raw.lrange(f"{namespace}:effects:{{job}}", 0, -1) == [
            b"0",
            b"1",
            b"2",
            b"3",
            b"4",
        ]
    finally:
        raw.close()


def test_a_worker_waiting_for_a_busy_task_stops_at_once(
    server_backend: Backend, namespace: str
) -> None:
    """Waiting holds nothing: SIGTERM ends the wait (exit 143, no traceback) instead of
    being held back until the 30 s wait runs out (which would exit 1, LockTimeout)."""
    from redistate import Store

    with Store.from_url(server_backend.url, namespace=namespace) as store:
        held = store.lock("job", ttl=60, renew=False).acquire()
        waiter = _worker(server_backend.url, namespace, "wait")
        try:
            assert spawn.line(waiter) == "waiting"
            waiter.send_signal(signal.SIGTERM)
            code = waiter.wait(timeout=60)
            assert waiter.stderr is not None
            err = waiter.stderr.read().decode()
            assert code == 128 + signal.SIGTERM, err
            assert "Traceback" not in err
            assert held.held  # never taken from its holder
        finally:
            if waiter.poll() is None:
                waiter.kill()
                waiter.wait()
            held.release()


@pytest.mark.parametrize("where", ["set_name", "finaliser", "io_close", "failing_handover"])
def test_a_stop_is_not_lost_where_python_would_change_or_swallow_it(where: str) -> None:
    """A stop handled while a class is made (Python < 3.12 wraps it in a RuntimeError),
    in a finaliser (Python reports it and goes on), in an io object's close() run by
    its finaliser (Python drops it), or held back by a hand-over section that fails:
    the process still ends as stopped (143, no traceback, nothing reported), its next
    call (30 s long) cut short."""
    process = _worker("-", "-", where)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, err.decode()
    assert not err, err.decode()  # no traceback, no "Exception ignored"
    assert b"worked" not in out


def test_a_stop_put_off_and_raised_is_not_raised_again() -> None:
    """Put off in a finaliser, then raised by a hand-over section before it was sent
    again: nothing sends it after, so the worker's cleanup runs to its end."""
    process = _worker("-", "-", "raised_once")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, err.decode()
    assert out == b"cleanup finished\n" and not err, err.decode()


def test_a_stop_in_an_explicit_close_is_not_put_off() -> None:
    """Only the close() an io object's finaliser calls hides a stop: one called by a
    ``with`` (an upload finishing, 30 s here) is cut short at once."""
    process = _worker("-", "-", "explicit_close")
    try:
        assert spawn.line(process) == "closing"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, err.decode()
    assert b"closed" not in out and not err, err.decode()


@pytest.mark.parametrize("mode", ["two_blocks", "failed_async_block"])
def test_a_block_after_one_a_stop_ended_hears_its_own_stop(mode: str) -> None:
    """A stop ends a block and is caught (a supervisor loop, a test run), or an async
    block failed to open (off the main thread): the next block still turns SIGTERM
    into Shutdown instead of ignoring it."""
    process = _worker("-", "-", mode)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    assert out == b"first block stopped\nsecond block stopped\n" and not err, err.decode()


def test_a_stop_at_any_moment_of_short_blocks_leaves_the_handlers_as_they_were() -> None:
    """SIGTERM lands anywhere in a loop of short blocks, their entries and exits too:
    the process is either stopped by Shutdown with the handlers put back, or killed by
    the signal between two blocks (the default handler was back); never left with a
    block's handler in (Ctrl-C ignored for good) or the signal lost. 40 moments: the
    bug this guards left handlers in one run of five."""
    for _ in range(40):
        process = _worker("-", "-", "short_blocks")
        try:
            assert spawn.line(process) == "ready"
            time.sleep(random.uniform(0.0, 0.03))  # a moment to land at, not a wait
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=60)
        finally:
            process.kill()
        outcome = (process.returncode, out.decode().strip())
        assert outcome in {(-signal.SIGTERM, ""), (0, "restored")}, (outcome, err.decode())
        assert not err, err.decode()


def test_graceful_puts_back_the_handlers_it_replaced() -> None:
    """Sync: the previous handlers; async: the application's own loop handler."""
    import asyncio

    from redistate import graceful

    before, hook = signal.getsignal(signal.SIGUSR1), sys.unraisablehook
    with graceful(signals=(signal.SIGUSR1,)):
        assert signal.getsignal(signal.SIGUSR1) is not before
        assert sys.unraisablehook != hook  # a stop swallowed by a finaliser is sent again
    assert signal.getsignal(signal.SIGUSR1) is before and sys.unraisablehook == hook

    async def main() -> list[str]:
        seen: list[str] = []
        fired = asyncio.Event()

        def app() -> None:
            seen.append("app")
            fired.set()

        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, app)
        async with graceful(signals=(signal.SIGUSR1,)):
            pass
        signal.raise_signal(signal.SIGUSR1)
        await asyncio.wait_for(fired.wait(), 30)  # the application's handler ran
        loop.remove_signal_handler(signal.SIGUSR1)
        return seen

    assert asyncio.run(main()) == ["app"]
    # SIGKILL cannot be caught: the block is refused and nothing stays installed.
    with pytest.raises(OSError), graceful(signals=(signal.SIGUSR1, signal.SIGKILL)):
        pass
    assert signal.getsignal(signal.SIGUSR1) is before


def test_a_copied_or_pickled_stop_keeps_its_exit_status() -> None:
    """A Shutdown sent to another process or kept as a copy still exits 128 + signal."""
    import copy
    import pickle

    from redistate import Shutdown

    stop = Shutdown(signal.SIGTERM)
    for again in (pickle.loads(pickle.dumps(stop)), copy.copy(stop), copy.deepcopy(stop)):
        assert (again.code, again.signum) == (128 + signal.SIGTERM, signal.SIGTERM)
