"""An embedded store in a forked child: refused, never a silent loss (real forks)."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from typing import Any

from redistate import AsyncStore, ForkedStore, Store

FORK = multiprocessing.get_context("fork")


def _child_writes(store: Store, results: Any) -> None:
    kept = 0
    errors: list[str] = []
    for i in range(150):
        try:
            store.sessions.put(f"s{i}", {"i": i})
            kept += 1
        except ForkedStore as exc:
            errors.append(str(exc))
    own = Store.embedded()  # a store the child makes itself is its own, and works
    own.sessions.put("mine", {"ok": True})
    got = own.sessions.get("mine")
    results.put((kept, len(errors), errors[0] if errors else "", got is not None))


def test_a_forked_child_cannot_write_to_the_parents_embedded_store() -> None:
    store = Store.embedded()
    store.sessions.put("before", {"n": 1})  # used before the fork: the common case
    results = FORK.Queue()
    child = FORK.Process(target=_child_writes, args=(store, results))
    child.start()
    kept, refused, message, own_works = results.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0
    assert (kept, refused, own_works) == (0, 150, True)
    assert f"process {os.getpid()}" in message and "from_url" in message
    assert "nothing was sent" in message
    # The parent's store is untouched and goes on working.
    assert store.sessions.get("s0") is None
    assert store.sessions.get("before") is not None
    store.sessions.put("after", {"n": 2})
    assert store.sessions.get("after") is not None
    store.close()


def test_a_forked_child_cannot_use_the_parents_async_embedded_store() -> None:
    store = AsyncStore.embedded()

    async def use(n: int) -> Any:
        await store.sessions.put(f"s{n}", {"n": n})
        return await store.sessions.get(f"s{n}")

    assert asyncio.run(use(0)) is not None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what happened through the pipe, then exit
        try:
            asyncio.run(use(1))
            outcome = b"written"
        except ForkedStore:
            outcome = b"refused"
        except BaseException as exc:
            outcome = repr(exc).encode()
        os.write(write, outcome)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        outcome = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert outcome == b"refused"
    assert asyncio.run(use(2)) is not None  # the parent's store still works
