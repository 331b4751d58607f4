"""Processes appending to one event chain at once (spawn, real servers): it never forks."""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor

from redistate import Store
from tests import workers
from tests.conftest import Backend

PROCESSES = 6
PER_PROCESS = 60


def test_processes_appending_at_once_never_fork_the_chain(
    server_backend: Backend, namespace: str
) -> None:
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(PROCESSES)
        with ProcessPoolExecutor(PROCESSES, mp_context=ctx) as pool:
            futures = [
                pool.submit(
                    workers.append_events,
                    server_backend.url,
                    namespace,
                    "shared",
                    w,
                    PER_PROCESS,
                    barrier,
                )
                for w in range(PROCESSES)
            ]
            seqs = [seq for f in futures for seq in f.result(timeout=240)]
    total = PROCESSES * PER_PROCESS
    assert sorted(seqs) == list(range(1, total + 1))  # each position given out once
    store = Store(server_backend.sync_client(), namespace=namespace)
    try:
        check = store.events.verify("shared")
        assert check.ok and check.count == total
        folded = store.events.fold("shared")
        assert folded == {f"w{w}-{i}": i for w in range(PROCESSES) for i in range(PER_PROCESS)}
    finally:
        store.close()
