"""A task owner that stops at a point the parent chooses, for the lease pause experiments
(tests/test_lease_pauses.py). Run as ``python -m tests.pause_worker URL NS sync|async``.

It reads one command per run from stdin, ``<task> <steps> <k> <where> <idempotent>``,
owns ``<task>`` with a short lease and runs its steps; each step's tool RPUSHes
``A:<i>`` to the raw list ``<NS>:calls:{<task>}`` first (its effect). At step ``k`` it
prints ``paused`` and blocks on stdin — ``between`` steps or ``inside`` the tool — until
the parent writes a line. Blocking stdin is the pause: the parent SIGSTOPs a sync owner
there (renewal thread and all); an async owner's event loop is blocked by the read
itself, so its renewal task cannot run. Then it prints how the run ended: ``done``,
``LockLost`` or ``StepInterrupted``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import redis

from redistate import AsyncStore, LockLost, StepInterrupted, Store

TTL = 0.5  # the owner's lease: short, so that the experiment does not wait long


def _command() -> tuple[str, int, int, str, bool] | None:
    line = sys.stdin.readline()
    if not line.strip():
        return None
    task, steps, k, where, idempotent = line.split()
    return task, int(steps), int(k), where, idempotent == "1"


def _pause() -> None:
    print("paused", flush=True)
    sys.stdin.readline()


def _tool(raw: redis.Redis, namespace: str, task: str, k: int, where: str) -> Any:
    """The run's tool: its effect is an RPUSH; at step ``k`` it may pause inside."""
    calls = f"{namespace}:calls:{{{task}}}"

    def tool(i: int) -> int:  # blocking: in the async owner it blocks the event loop
        raw.rpush(calls, f"A:{i}")
        if where == "inside" and i == k:
            _pause()
        return i

    return tool


def run_sync(url: str, namespace: str) -> None:
    store = Store.from_url(url, namespace=namespace)
    raw = redis.Redis.from_url(url)
    while (command := _command()) is not None:
        task, steps, k, where, idempotent = command
        tool, outcome = _tool(raw, namespace, task, k, where), "done"
        try:
            with store.task(task, ttl=TTL, wait=30) as run:
                print("owner", run.fence, flush=True)
                for i in range(steps):
                    if where == "between" and i == k:
                        _pause()
                    run.step(f"s{i}", tool, i, idempotent=idempotent)
        except (LockLost, StepInterrupted) as exc:
            outcome = type(exc).__name__
        print(outcome, flush=True)


async def run_async(url: str, namespace: str) -> None:
    store = AsyncStore.from_url(url, namespace=namespace)
    raw = redis.Redis.from_url(url)
    while (command := _command()) is not None:
        task, steps, k, where, idempotent = command
        tool, outcome = _tool(raw, namespace, task, k, where), "done"
        try:
            async with store.task(task, ttl=TTL, wait=30) as run:
                print("owner", run.fence, flush=True)
                for i in range(steps):
                    if where == "between" and i == k:
                        _pause()  # blocks the loop: the renewal task cannot run
                    await run.step(f"s{i}", tool, i, idempotent=idempotent)
        except (LockLost, StepInterrupted) as exc:
            outcome = type(exc).__name__
        print(outcome, flush=True)
    await store.aclose()


def main(argv: list[str]) -> None:
    url, namespace, mode = argv
    if mode == "sync":
        run_sync(url, namespace)
    else:
        asyncio.run(run_async(url, namespace))


if __name__ == "__main__":
    main(sys.argv[1:])
