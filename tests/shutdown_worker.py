"""A worker stopped by SIGTERM mid-task, for tests/test_shutdown.py. Run as ``python -m
tests.shutdown_worker URL NS sync|async``.

Inside ``redistate.graceful()`` it owns the task ``job`` (lease ttl 60 s, waiting up to
30 s for it) and runs steps ``s0``..``s4`` in order; each step's effect is an RPUSH of
its number to the raw list ``<NS>:effects:{job}``, and after each step the run's state
records the next one. On entry it prints ``entered <phase> <state>``; after step
``s1`` (when the state says ``{"next": 2}`` was not there before) it prints ``mid`` and
waits for a signal. A run that finishes prints ``finished``. Modes ``set_name``,
``finaliser``, ``io_close``, ``failing_handover``, ``raised_once`` and ``two_blocks``
signal themselves where a stop could be lost or raised twice; in ``explicit_close`` and
``short_blocks`` the test sends it; ``failed_async_block`` opens an async block off the
main thread first.
"""

from __future__ import annotations

import asyncio
import io
import signal
import sys
import threading
import time
from typing import Any

import orjson
import redis

from redistate import AsyncStore, Shutdown, Store, graceful

STEPS = 5


def _entered(run: Any) -> str:
    phase = run.checkpoint.phase if run.checkpoint is not None else "-"
    return f"entered {phase} {orjson.dumps(run.state).decode()}"


def run_sync(url: str, namespace: str) -> None:
    raw = redis.Redis.from_url(url)
    effects = f"{namespace}:effects:{{job}}"
    with Store.from_url(url, namespace=namespace) as store, graceful():
        with store.task("job", ttl=60, wait=30) as run:
            print(_entered(run), flush=True)
            first = run.state.get("next", 0) == 0
            for i in range(STEPS):
                run.step(f"s{i}", lambda i=i: raw.rpush(effects, i))
                run.save({"next": i + 1})
                if first and i == 1:
                    print("mid", flush=True)
                    signal.pause()  # SIGTERM arrives here
        print("finished", flush=True)


async def run_async(url: str, namespace: str) -> None:
    raw = redis.Redis.from_url(url)
    effects = f"{namespace}:effects:{{job}}"
    store = AsyncStore.from_url(url, namespace=namespace)
    try:
        async with graceful(), store.task("job", ttl=60, wait=30) as run:
            print(_entered(run), flush=True)
            first = run.state.get("next", 0) == 0
            for i in range(STEPS):
                await run.step(f"s{i}", lambda i=i: raw.rpush(effects, i))
                await run.save({"next": i + 1})
                if first and i == 1:
                    print("mid", flush=True)
                    await asyncio.Event().wait()  # SIGTERM cancels this wait
        print("finished", flush=True)
    finally:
        await store.aclose()


def wait_sync(url: str, namespace: str) -> None:
    """Wait (up to 30 s) for ``job``, which the test holds: a stop ends the wait."""
    with Store.from_url(url, namespace=namespace) as store, graceful():
        print("waiting", flush=True)
        with store.task("job", ttl=60, wait=30):
            print("entered", flush=True)


def _work() -> None:
    """The worker's next call, a long one (a tool's): the stop, sent again once the
    spot where it would be lost is left, ends it."""
    time.sleep(30)
    print("worked", flush=True)


def stop_in_set_name() -> None:
    """SIGTERM handled while a class is made (as at a lazy import): Python before 3.12
    would turn the stop raised there into a RuntimeError (exit 1, a traceback)."""

    class Stops:
        def __set_name__(self, owner: type, name: str) -> None:
            signal.raise_signal(signal.SIGTERM)  # the handler runs here
            self.name = name

    with graceful():

        class Made:
            field = Stops()

        _work()


def stop_in_finaliser() -> None:
    """SIGTERM handled in a ``__del__``, which Python would only report ("Exception
    ignored") and go on."""

    class Drops:
        def __del__(self) -> None:
            signal.raise_signal(signal.SIGTERM)  # the handler runs here

    with graceful():
        Drops()  # dropped at once
        _work()


def stop_in_io_close() -> None:
    """SIGTERM handled in the ``close()`` an io object's finaliser calls (an HTTP
    response, a socket's file dropped), which Python drops without a word."""

    class Stream(io.RawIOBase):
        def close(self) -> None:
            signal.raise_signal(signal.SIGTERM)  # the handler runs here
            super().close()

    with graceful():
        Stream()  # dropped at once
        _work()


def stop_raised_once() -> None:
    """SIGTERM put off in a ``__del__``, then raised by the next hand-over section
    before it was sent again: the cleanup after it is not stopped a second time."""
    from redistate.steps.shutdown import deferred

    class Drops:
        def __del__(self) -> None:
            signal.raise_signal(signal.SIGTERM)

    with graceful():
        try:
            Drops()
            with deferred():  # as a task run's entry: raises the stop held back
                pass
        finally:
            for thread in threading.enumerate():  # whatever would send it again
                if thread.name == "redistate-stop":
                    thread.join()
            print("cleanup finished", flush=True)


def stop_in_explicit_close() -> None:
    """SIGTERM while an io object's close() is called as usual (by a ``with``: an upload
    finishing): the stop ends it at once, as anywhere else."""

    class Upload(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def close(self) -> None:
            if not self.closed and not getattr(self, "sent", False):
                self.sent = True  # once: the finaliser closes it again if cut short
                print("closing", flush=True)
                time.sleep(30)  # the last part's upload: the test sends SIGTERM now
                print("closed", flush=True)
            super().close()

    with graceful(), Upload():
        pass


def stops_in_two_blocks() -> None:
    """A block ended by a stop that was caught, then another block: it hears its own."""
    for block in ("first", "second"):
        try:
            with graceful():
                signal.raise_signal(signal.SIGTERM)
                print(f"{block} block ran on", flush=True)
        except Shutdown:
            print(f"{block} block stopped", flush=True)


def stop_in_failing_handover() -> None:
    """SIGTERM held back by a hand-over section that then fails (a wait that timed out,
    a connection error): the stop is raised, not the section's error."""
    from redistate.core.errors import LockTimeout
    from redistate.steps.shutdown import deferred

    with graceful(), deferred():
        signal.raise_signal(signal.SIGTERM)  # held back
        raise LockTimeout("the section's own error")


def after_a_failed_async_block() -> None:
    """An async block that fails to open (off the main thread) leaves no block counted
    open: the blocks after it hear their stop."""

    async def enter() -> None:
        async with graceful():
            pass

    failed: list[BaseException] = []
    thread = threading.Thread(target=lambda: _catch(failed, lambda: asyncio.run(enter())))
    thread.start()
    thread.join()
    assert failed and isinstance(failed[0], ValueError), failed  # signals: main thread
    stops_in_two_blocks()


def _catch(into: list[BaseException], fn: Any) -> None:
    try:
        fn()
    except BaseException as exc:  # the thread's failure, checked by the main thread
        into.append(exc)


def short_blocks() -> None:
    """Short blocks one after another until a stop (the test's SIGTERM, at any moment):
    then the handlers and hook are those from before, whatever the moment was."""
    hook = sys.unraisablehook
    print("ready", flush=True)
    try:
        while True:
            with graceful():
                pass
    except Shutdown:
        pass
    term, interrupt = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    if (term, interrupt, sys.unraisablehook) == (signal.SIG_DFL, signal.default_int_handler, hook):
        print("restored", flush=True)
    else:
        print(f"left installed: {term} {interrupt} {sys.unraisablehook}", flush=True)


# Modes that need no server: each signals itself (or waits for the test's signal).
ALONE = {
    "set_name": stop_in_set_name,
    "finaliser": stop_in_finaliser,
    "io_close": stop_in_io_close,
    "explicit_close": stop_in_explicit_close,
    "failing_handover": stop_in_failing_handover,
    "raised_once": stop_raised_once,
    "two_blocks": stops_in_two_blocks,
    "failed_async_block": after_a_failed_async_block,
    "short_blocks": short_blocks,
}


def main() -> None:
    url, namespace, mode = sys.argv[1:4]
    if mode in ALONE:
        ALONE[mode]()
    elif mode == "wait":
        wait_sync(url, namespace)
    elif mode == "sync":
        run_sync(url, namespace)
    else:
        asyncio.run(run_async(url, namespace))


if __name__ == "__main__":
    main()
