"""An ``AsyncStore`` made once, outside any event loop, and used by one ``asyncio.run``
after another: the serverless handler pattern (a module-level store, a fresh loop per
invocation). Each invocation works, the previous loop's connections are dropped and
never reused, and the server's client count stays bounded. The Agents SDK session and
the LangGraph saver built on the store too."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from redistate import AsyncStore
from redistate.agents import RedistateSession
from redistate.langgraph import RedisStateSaver
from tests.conftest import Backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

INVOCATIONS = 100


def _clients(backend: Backend, name: str) -> int:
    """Connections the server side counts with this client name (every node of a
    cluster; a Sentinel setup's primary)."""
    raw = backend.raw()
    try:
        found = raw.client_list()
        if isinstance(found, dict):  # a cluster client: {node: [clients]}
            found = [c for clients in found.values() for c in clients]
        return sum(1 for c in found if c.get("name") == name)
    finally:
        raw.close()


def _named(backend: Backend, name: str) -> Any:
    """backend's async client, its connections named ``name`` (CLIENT SETNAME on
    connect) so that the test counts its own among the suite's."""
    client = backend.async_client()
    holders = (
        getattr(client, "connection_pool", None),
        client,
        getattr(client, "nodes_manager", None),
    )
    for holder in holders:
        kwargs = getattr(holder, "connection_kwargs", None)
        if isinstance(kwargs, dict):
            kwargs["client_name"] = name
    nodes = getattr(getattr(client, "nodes_manager", None), "startup_nodes", {})
    for node in nodes.values():
        node.connection_kwargs["client_name"] = name
    return client


def test_a_store_made_once_serves_a_hundred_event_loops(backend: Backend, namespace: str) -> None:
    name = f"loops-{namespace}"
    store = AsyncStore(_named(backend, name), namespace=namespace)  # no loop runs here
    session = RedistateSession("a1", store=store)
    saver = RedisStateSaver(store)
    config: Any = {"configurable": {"thread_id": "g1", "checkpoint_ns": ""}}
    counts = []

    async def invocation(n: int) -> None:
        await store.sessions.put("s1", {"n": n})
        assert (await store.sessions.get("s1")).data == {"n": n}  # type: ignore[union-attr]
        async with store.batch() as batch:
            batch.users.merge("u1", {f"k{n % 3}": n})
        lease = await store.lock("job", ttl=30, renew=False).acquire()
        await store.checkpoints.save("job", {"n": n}, lease=lease)
        await lease.release()
        await session.add_items([{"role": "user", "content": str(n)}])
        await saver.aput(config, empty_checkpoint(), {}, {})

    for n in range(INVOCATIONS):
        asyncio.run(invocation(n))
        if not backend.fake and n % 10 == 9:
            counts.append(_clients(backend, name))
    assert (asyncio.run(store.sessions.get("s1"))).data == {"n": INVOCATIONS - 1}  # type: ignore[union-attr]
    assert len(asyncio.run(session.get_items())) == INVOCATIONS
    asyncio.run(store.aclose())
    if not backend.fake:
        # Each invocation's connections are gone by the next one's end: at most one
        # invocation's worth is ever open (a cluster: per node), never a growing count.
        assert max(counts) <= counts[0] and max(counts) <= 12, counts
        assert _clients(backend, name) == 0


def test_a_loop_still_running_elsewhere_is_not_robbed_of_its_connections(
    server_backend: Backend, namespace: str
) -> None:
    """A store whose loop runs in another thread is refused in a second loop with a
    message saying what to do; the first loop's calls go on."""
    store = AsyncStore(server_backend.async_client(), namespace=namespace)
    ready, done = threading.Event(), threading.Event()
    loop = asyncio.new_event_loop()

    async def hold() -> None:
        await store.sessions.put("s1", {"n": 1})
        ready.set()  # from inside the loop: it runs until done is set
        await asyncio.to_thread(done.wait)
        await store.sessions.put("s1", {"n": 2})
        await store.aclose()

    def run() -> None:
        loop.run_until_complete(hold())
        loop.close()

    worker = threading.Thread(target=run)
    worker.start()
    try:
        assert ready.wait(60)
        with pytest.raises(RuntimeError, match="one AsyncStore per event loop"):
            asyncio.run(store.sessions.get("s1"))
    finally:
        done.set()
        worker.join()
    check = AsyncStore(server_backend.async_client(), namespace=namespace)
    assert asyncio.run(check.sessions.get("s1")).data == {"n": 2}  # type: ignore[union-attr]


def test_a_lease_left_held_by_an_ended_loop_is_renewed_no_more(
    server_backend: Backend, namespace: str
) -> None:
    """An invocation that took a renewing lease and never released it: the next
    invocation's renewer does not adopt it, so it expires (1.5 s) and another owner
    takes it within a wait (30 s) that a lease renewed forever would exhaust."""
    store = AsyncStore(server_backend.async_client(), namespace=namespace)

    async def abandon() -> None:
        await store.lock("job", ttl=1.5).acquire()  # renew=True; never released

    async def take_over() -> int:
        other = await store.lock("other", ttl=30).acquire()  # starts this loop's renewer
        job = await store.lock("job", ttl=30, wait=30).acquire()
        await job.release()
        await other.release()
        return job.fence or 0

    asyncio.run(abandon())
    assert asyncio.run(take_over()) > 0
    asyncio.run(store.aclose())


def test_server_facts_in_a_later_loop(server_backend: Backend, namespace: str) -> None:
    store = AsyncStore(server_backend.async_client(), namespace=namespace)
    asyncio.run(store.sessions.put("s1", {"n": 1}))
    facts = asyncio.run(store.server_facts())
    assert facts and facts[0].policy
    asyncio.run(store.aclose())
