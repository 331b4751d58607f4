"""Leases under real processes and real signals (SIGSTOP, SIGCONT, SIGKILL)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from redistate import Store
from tests import workers
from tests.conftest import Backend

ROOT = Path(__file__).parent.parent
HOLDER = (
    "import sys; from tests.workers import hold_then_write; "
    "hold_then_write(sys.argv[1], sys.argv[2])"
)


def _holder(url: str, namespace: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, namespace],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.slow
def test_the_lease_excludes_other_processes(server_backend: Backend, namespace: str) -> None:
    processes, each = 8, 250
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(processes)
        with ProcessPoolExecutor(processes, mp_context=ctx) as pool:
            futures = [
                pool.submit(
                    workers.locked_increments, server_backend.url, namespace, w, each, barrier
                )
                for w in range(processes)
            ]
            assert sum(f.result(timeout=240) for f in futures) == processes * each
    raw = server_backend.raw()
    assert int(raw.get(f"{namespace}:plain-counter")) == processes * each  # not one lost


@pytest.mark.slow
def test_a_paused_holder_cannot_overwrite_its_successor(
    server_backend: Backend, namespace: str
) -> None:
    first = _holder(server_backend.url, namespace)
    assert first.stdout is not None and first.stdin is not None
    assert first.stdout.readline().startswith(b"held ")
    first.send_signal(signal.SIGSTOP)  # a GC pause, a long LLM call, a partition...
    try:
        store = Store(server_backend.sync_client(), namespace=namespace)
        # Blocks until the paused holder's 1 s lease runs out.
        with store.lock("t", ttl=30) as second:
            fence = second.fence
            store.checkpoints.save("t", {"owner": "second"}, lease=second)
            first.send_signal(signal.SIGCONT)
            first.stdin.write(b"go\n")
            first.stdin.flush()
            # Refused: before sending (its local deadline has passed), and the script
            # would refuse it too (the lock key holds the second owner's value).
            assert first.stdout.readline() == b"LockLost\n"
        restored = store.checkpoints.restore("t")
        assert restored is not None and restored.state == {"owner": "second"}
        assert restored.checkpoint is not None and restored.checkpoint.fence == fence
    finally:
        first.send_signal(signal.SIGCONT)
        first.kill()
        first.wait()


@pytest.mark.slow
def test_a_killed_holders_lease_is_free_within_ttl_plus_a_second(
    server_backend: Backend, namespace: str
) -> None:
    holder = _holder(server_backend.url, namespace)
    assert holder.stdout is not None
    held = holder.stdout.readline()
    assert held.startswith(b"held ")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    store = Store(server_backend.sync_client(), namespace=namespace)
    raw = server_backend.raw()
    before = raw.info("commandstats")
    with store.lock("t", ttl=30, wait=10) as lease:
        after = raw.info("commandstats")
        assert lease.fence is not None and lease.fence > int(held.split()[1])
    # Taken once the dead holder's 1 s ran out, by blocking for that long on the wake
    # list (never polling): a few tries, whatever the machine's load.
    tries = after["cmdstat_fcall"]["calls"] - before["cmdstat_fcall"]["calls"]
    blocks = (
        after.get("cmdstat_blpop", {"calls": 0})["calls"]
        - before.get("cmdstat_blpop", {"calls": 0})["calls"]
    )
    assert tries <= 4 and blocks <= 3, (tries, blocks)
