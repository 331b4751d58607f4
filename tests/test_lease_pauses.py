"""A paused owner calls no tool and writes nothing once its lease is gone.

A sync owner is SIGSTOPped (its renewal thread too) and an asyncio owner's event loop
is blocked, each past its lease, once in every case: at each step, between two steps
or inside its tool call, idempotent or not (20 runs, in a seeded random order).
Meanwhile this process takes the task over and finishes it, then the owner is resumed.
Every tool call is an RPUSH to one raw list, and the takeover pushes a marker first:
the server's own order of commands shows whether the stale owner started a tool call
after the takeover — no clock is compared between processes.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from itertools import pairwise, product
from pathlib import Path

import pytest

from redistate import StepInterrupted, Store
from tests.conftest import Backend
from tests.faults import LEASE_REPORTS, LeaseReport

ROOT = Path(__file__).parent.parent
STEPS = 6
# Every case once: the step paused at (0 to STEPS - 2, the range the random draw had),
# where, and whether the step is idempotent. The 50 random runs of each mode and backend
# this replaces drew 18 to 20 of these 20 cases.
CASES = list(product(range(STEPS - 1), ("between", "inside"), (False, True)))
RUNS = len(CASES)


class Owner:
    """The paused owner: tests/pause_worker.py in its own process."""

    def __init__(self, url: str, namespace: str, mode: str) -> None:
        self.mode = mode
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.pause_worker", url, namespace, mode],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def read(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode().strip()
        assert line, f"the owner exited (code {self.process.poll()})"
        return line

    def pause(self) -> None:
        if self.mode == "sync":  # an async owner's loop is blocked by its own read
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.mode == "sync":
            self.process.send_signal(signal.SIGCONT)

    def close(self) -> None:
        self.process.send_signal(signal.SIGCONT)
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_paused_owner_calls_no_tool_once_its_lease_is_gone(
    server_backend: Backend, namespace: str, mode: str
) -> None:
    cases = random.Random(f"{mode}/{server_backend.name}").sample(CASES, RUNS)  # same order
    owner = Owner(server_backend.url, namespace, mode)
    store = Store(server_backend.sync_client(), namespace=namespace)
    raw = server_backend.raw()
    repeated = twice = interrupted = paused = 0
    fences: list[int] = []
    try:
        for r, (k, where, idempotent) in enumerate(cases):
            task = f"job{r}"
            calls = f"{namespace}:calls:{{{task}}}"
            owner.send(f"{task} {STEPS} {k} {where} {int(idempotent)}")
            first = owner.read()
            assert first.startswith("owner "), first
            fences.append(int(first.split()[1]))
            stopped = owner.read()
            # "paused"; or, on a machine loaded enough to starve a renewal, the run
            # already ended with the lease lost: no tool ran after that either.
            assert stopped in ("paused", "LockLost"), stopped
            if stopped == "paused":
                paused += 1
                owner.pause()

            def tool(i: int, calls: str = calls) -> int:
                raw.rpush(calls, f"B:{i}")
                return i

            # Waits (blocked on the lease's wake list) until the owner's lease runs out.
            with store.task(task, ttl=30, wait=30) as run:
                assert run.fence is not None
                fences.append(run.fence)
                raw.rpush(calls, "takeover")
                for i in range(STEPS):
                    try:
                        run.step(f"s{i}", tool, i, idempotent=idempotent)
                    except StepInterrupted:  # the owner stopped inside this tool call
                        interrupted += 1
                        run.step(f"s{i}", lambda i=i: i)  # its effect happened: settle
            owner.resume()
            if stopped == "paused":
                owner.send("go")
                assert owner.read() == "LockLost"  # nothing more ran, nothing was written
            entries = [e.decode() for e in raw.lrange(calls, 0, -1)]
            after = entries[entries.index("takeover") + 1 :]
            repeated += sum(1 for e in after if e.startswith("A:"))
            done = {e.split(":")[1] for e in entries if ":" in e}
            assert done == {str(i) for i in range(STEPS)}, entries  # every effect happened
            ran = [e.split(":") for e in entries if ":" in e]
            twice += len({i for who, i in ran if who == "A"} & {i for who, i in ran if who == "B"})
            steps = store.checkpoints.steps(task)
            assert [s.status for s in steps] == ["done"] * STEPS
    finally:
        owner.close()
        store.close()
    fences_repeated = sum(1 for a, b in pairwise(fences) if b <= a)  # each must beat the last
    note = (
        f"{paused} paused; {twice} steps' effect twice (stopped inside an idempotent tool "
        f"call, which the successor ran again); {interrupted} StepInterrupted settled"
    )
    LEASE_REPORTS.append(
        LeaseReport(
            "SIGSTOP past the lease" if mode == "sync" else "event loop blocked past the lease",
            server_backend.name,
            RUNS,
            repeated,
            fences_repeated,
            note,
        )
    )
    assert repeated == 0 and fences_repeated == 0
    assert paused >= RUNS // 2  # the experiment ran (a loaded machine may lose a few)
