"""One renewer per store: many leases held at once are all kept alive by one thread
(one task for an AsyncStore), and taking leases in a row starts no thread per lease."""

from __future__ import annotations

import asyncio
import threading
import time

from redistate import AsyncStore, Store
from tests.conftest import Backend

RENEWER = "redistate lease renewals"
TTL = 0.5  # seconds: renewed every third of it
# For ten leases held through several TTLs: a renewal late by more than two thirds of
# it loses its lease, and a loaded machine (CI beside a CPU-bound job) made a 0.5 s
# lease's late by that much.
MANY_TTL = 1.5


def _renewer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == RENEWER]


def _held(backend: Backend, store: Store | AsyncStore, names: list[str]) -> list[bool]:
    raw = backend.raw()
    try:
        return [raw.get(store.keys.lock(n)) is not None for n in names]
    finally:
        raw.close()


def test_one_thread_renews_every_lease_of_a_store(server_backend: Backend, namespace: str) -> None:
    store = Store(server_backend.sync_client(), namespace=namespace)
    names = [f"l{i}" for i in range(10)]
    leases = [store.lock(n, ttl=MANY_TTL).acquire() for n in names]
    # This store's worker (other stores' workers come and go meanwhile).
    worker = store._conn.renewals._worker
    assert worker in _renewer_threads()
    try:
        # Held for three TTLs: every lease was renewed about nine times meanwhile.
        time.sleep(3 * MANY_TTL)
        assert all(lease.held for lease in leases)
        assert _held(server_backend, store, names) == [True] * len(names)
    finally:
        for lease in leases:
            lease.release()
    assert _held(server_backend, store, names) == [False] * len(names)
    # Leases taken and given back in a row reuse that thread.
    for _ in range(200):
        with store.lock("again", ttl=30):
            pass
    assert store._conn.renewals._worker is worker and worker.is_alive()
    store.close()


def test_a_lease_taken_again_is_renewed_once_per_turn(
    server_backend: Backend, namespace: str
) -> None:
    store = Store(server_backend.sync_client(), namespace=namespace)
    lease = store.lock("x", ttl=TTL)
    for _ in range(5):  # each acquisition adds a turn; a released one's never renews
        lease.acquire()
        lease.release()
    raw = server_backend.raw()
    raw.config_resetstat()
    with lease:
        time.sleep(4 * TTL)
        assert lease.held
    extends = raw.info("commandstats").get("cmdstat_fcall", {}).get("calls", 0)
    raw.close()
    store.close()
    # acquire + release + about 4 * 3 renewals of this turn; stale turns add none.
    assert 8 <= int(extends) <= 16, extends


def test_one_task_renews_every_lease_of_an_async_store(
    server_backend: Backend, namespace: str
) -> None:
    async def main() -> None:
        store = AsyncStore(server_backend.async_client(), namespace=namespace)
        names = [f"a{i}" for i in range(10)]
        leases = [await store.lock(n, ttl=MANY_TTL).acquire() for n in names]
        renewers = [t for t in asyncio.all_tasks() if t.get_name() == RENEWER]
        assert len(renewers) == 1
        await asyncio.sleep(3 * MANY_TTL)
        assert all(lease.held for lease in leases)
        assert _held(server_backend, store, names) == [True] * len(names)
        for lease in leases:
            await lease.release()
        await store.aclose()

    asyncio.run(main())
