"""A blocking call in async code starves the lease's renewal task: the LockLost that
follows says so (asyncio only: a sync owner's renewal thread is not blocked by it).

The loop is blocked with time.sleep past the lease's TTL on a real server: that is
the fault under test, not a synchronisation.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator

import pytest

from redistate import AsyncStore, LockLost
from redistate.core._io import async_wait
from tests.conftest import Backend

BLOCKED = re.compile(r"the event loop was blocked for (\d+\.\d) s.*asyncio\.to_thread")


@pytest.fixture
async def server_store(server_backend: Backend, namespace: str) -> AsyncIterator[AsyncStore]:
    store = AsyncStore(server_backend.async_client(), namespace=namespace)
    yield store
    await store.aclose()


def blocking_tool(seconds: float) -> None:
    """A tool that blocks its thread (a sync HTTP call, say), called from async code."""
    time.sleep(seconds)


async def test_a_blocked_loop_is_named_by_the_next_write(server_store: AsyncStore) -> None:
    store = server_store
    async with store.task("t", ttl=0.5) as run:
        await run.save({"n": 1})
        blocking_tool(0.8)  # called from async code: the loop stops, past the lease's TTL
        with pytest.raises(LockLost) as caught:
            await run.save({"n": 2})
    found = BLOCKED.search(str(caught.value))
    assert found is not None, str(caught.value)
    assert float(found.group(1)) > 0  # how long the renewal was held up past its time
    assert "ran past its deadline" in str(caught.value) and "'t'" in str(caught.value)
    latest = await store.checkpoints.latest("t")
    assert latest is not None and latest.state == {"n": 1}  # nothing was sent


async def test_a_renewal_task_that_wakes_late_names_the_blocked_loop(
    server_store: AsyncStore,
) -> None:
    store = server_store
    calls: list[str] = []
    lease = await store.lock("t", ttl=0.5).acquire()
    blocking_tool(0.8)
    # The renewal task runs first now: it finds itself past the deadline and says why.
    assert await async_wait(lease.lost, 30)
    with pytest.raises(LockLost) as caught:
        await store.sessions.put("t", {}, lease=lease)
    message = str(caught.value)
    assert "was lost: it ran past its deadline" in message and BLOCKED.search(message)
    async with store.task("t2", ttl=0.5) as run:
        blocking_tool(0.8)
        assert await async_wait(run.lease.lost, 30)
        with pytest.raises(LockLost, match="event loop was blocked") as caught:
            await run.step("pay", lambda: calls.append("pay"))
    assert calls == [] and "'pay' was not run" in str(caught.value)
    with pytest.raises(LockLost, match="could not be released: it ran past its deadline"):
        await lease.release()  # an explicit release of a lost lease still says so
