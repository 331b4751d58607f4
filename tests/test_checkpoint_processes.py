"""Checkpoints under real concurrency and real crashes (processes, SIGKILL)."""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from redistate import Store
from tests import workers
from tests.conftest import Backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

ROOT = Path(__file__).parent.parent


@pytest.mark.slow
def test_concurrent_savers_get_strictly_increasing_seqs(
    server_backend: Backend, namespace: str
) -> None:
    savers, each = 8, 100
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(savers)
        with ProcessPoolExecutor(savers, mp_context=ctx) as pool:
            futures = [
                pool.submit(
                    workers.save_checkpoints, server_backend.url, namespace, "t", w, each, barrier
                )
                for w in range(savers)
            ]
            per_worker = [f.result(timeout=120) for f in futures]
    for seqs in per_worker:
        assert seqs == sorted(seqs)  # each saver sees its own saves in order
    every = sorted(s for seqs in per_worker for s in seqs)
    assert every == list(range(1, savers * each + 1))  # unique, no gaps
    store = Store(server_backend.sync_client(), namespace=namespace)
    history = store.checkpoints.history("t")
    assert [c.seq for c in history] == list(range(savers * each, 0, -1))
    for newer, older in itertools.pairwise(history):
        assert newer.parent_id == older.id
    store.close()


@pytest.mark.slow
def test_sigkill_never_leaves_a_half_written_checkpoint(
    server_backend: Backend, namespace: str
) -> None:
    store = Store(server_backend.sync_client(), namespace=namespace)
    rng = random.Random(20261129)
    last_seq, last_n, kills = 0, -1, 0
    code = (
        "import sys; from tests.workers import save_until_killed; "
        "save_until_killed(sys.argv[1], sys.argv[2], 't')"
    )
    for _ in range(20):
        child = subprocess.Popen(
            [sys.executable, "-c", code, server_backend.url, namespace],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"  # it restored and saved once
        # Let it run for a random while, then kill it mid-whatever it is doing.
        deadline_ms = rng.uniform(1, 60)
        try:
            child.wait(timeout=deadline_ms / 1000)
        except subprocess.TimeoutExpired:
            pass
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
        kills += 1
        restored = store.checkpoints.restore("t")
        assert restored is not None and restored.checkpoint is not None
        assert restored.complete, restored.skipped
        n = restored.checkpoint.state["n"]
        assert restored.checkpoint.state == workers.checkpoint_state(n)  # saved whole
        # Never goes back; each child saved at least once (it said "ready") before the kill.
        assert restored.checkpoint.seq > last_seq and n > last_n
        last_seq, last_n = restored.checkpoint.seq, n
    assert kills == 20
    assert last_n > 20  # the children made progress across the kills
    store.close()


def test_concurrent_coroutines_get_strictly_increasing_seqs(
    backend: Backend, namespace: str
) -> None:
    import asyncio

    from redistate import AsyncStore

    async def main() -> list[list[int]]:
        store = AsyncStore(backend.async_client(), namespace=namespace, checkpoint_keep=1000)

        async def saver(w: int) -> list[int]:
            return [(await store.checkpoints.save("t", {"w": w, "i": i})).seq for i in range(25)]

        seqs = await asyncio.gather(*(saver(w) for w in range(8)))
        await store.aclose()
        return list(seqs)

    per_saver = asyncio.run(main())
    assert all(seqs == sorted(seqs) for seqs in per_saver)
    assert sorted(s for seqs in per_saver for s in seqs) == list(range(1, 201))
