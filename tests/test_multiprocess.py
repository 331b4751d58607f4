"""Many processes writing one record: the final state shows every write.

Real processes (spawn) against real servers; half of them use the sync Store, half
the AsyncStore with several coroutines each. A barrier makes them start together.
"""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor

import pytest

from redistate import Store
from tests import workers
from tests.conftest import Backend

PROCESSES = 8
PER_PROCESS = 500


def _run_all(backend: Backend, namespace: str, op: str, entity: str) -> None:
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(PROCESSES)
        with ProcessPoolExecutor(PROCESSES, mp_context=ctx) as pool:
            futures = [
                pool.submit(
                    workers.run_sync if w % 2 == 0 else workers.run_async,
                    backend.url,
                    namespace,
                    op,
                    entity,
                    w,
                    PER_PROCESS,
                    barrier,
                )
                for w in range(PROCESSES)
            ]
            assert sum(f.result(timeout=240) for f in futures) == PROCESSES * PER_PROCESS


@pytest.mark.slow
def test_concurrent_merges_lose_nothing(server_backend: Backend, namespace: str) -> None:
    _run_all(server_backend, namespace, "merge", "u1")
    store = Store(server_backend.sync_client(), namespace=namespace)
    rec = store.users.get("u1")
    assert rec is not None
    expected = {f"w{w}-{i}": i for w in range(PROCESSES) for i in range(PER_PROCESS)}
    assert len(rec.data) == PROCESSES * PER_PROCESS
    assert rec.data == expected
    store.close()


@pytest.mark.slow
def test_concurrent_updates_lose_nothing(server_backend: Backend, namespace: str) -> None:
    _run_all(server_backend, namespace, "update", "s1")
    store = Store(server_backend.sync_client(), namespace=namespace)
    rec = store.sessions.get("s1")
    assert rec is not None
    assert rec.data["n"] == PROCESSES * PER_PROCESS
    assert all(rec.data[f"last{w}"] in range(PER_PROCESS) for w in range(PROCESSES))
    store.close()
