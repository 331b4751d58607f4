"""A child process for tests/test_step_processes.py: a 20-step task, each step a tool
call with a side effect (RPUSH to a raw Redis list), through run.step.

    python -m tests.step_worker URL NAMESPACE sync|async idempotent|not [PHASE:STEP]

Prints ``calling <i>`` as step i's tool starts, ``effect <i>`` right after its side
effect (before its result is recorded) and ``recorded <i>`` after run.step returned.
With PHASE:STEP it then blocks on stdin at that point of that step — ``before`` the
effect, ``after`` it, or once it is ``recorded`` — to be killed or stopped there. A
step that is not idempotent and was interrupted is settled the way an agent would: the
side effect is looked up, and the step re-run idempotently with a function that does it
only if it is missing.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import redis

from redistate import AsyncStore, LockLost, StepInterrupted, Store

STEPS = 20
TASK = "job"
# The lease's TTL: short enough that a SIGSTOPped owner's expires soon, long enough that
# a loaded machine never starves its renewal (every ttl/3) into losing it.
LEASE_TTL = float(os.environ.get("STEP_LEASE_TTL", "2"))


def effects_key(namespace: str) -> str:
    return f"{namespace}-effects"  # outside redistate's keys: the world the tools act on


def _world(url: str) -> Any:
    if url.startswith("redis+cluster://"):
        host, _, port = url.removeprefix("redis+cluster://").split(",")[0].partition(":")
        return redis.RedisCluster(host=host, port=int(port))
    if url.startswith("redis+sentinel://"):
        return Store.from_url(url)._conn.client  # the primary, through the sentinels
    return redis.Redis.from_url(url)


def main(url: str, namespace: str, flavour: str, idempotent: bool, hang: str) -> int:
    world = _world(url)
    key = effects_key(namespace)

    def wait_if(phase: str, i: int) -> None:
        if hang == f"{phase}:{i}":
            sys.stdin.readline()  # killed or stopped here; a SIGCONTed one goes on

    def tool(i: int) -> int:
        print(f"calling {i}", flush=True)
        wait_if("before", i)
        world.rpush(key, i)
        print(f"effect {i}", flush=True)
        wait_if("after", i)
        return i * 10

    def settle(i: int) -> int:
        """After StepInterrupted: do the effect only if the interrupted call did not."""
        if str(i).encode() not in world.lrange(key, 0, -1):
            return tool(i)
        return i * 10

    try:
        if flavour == "sync":
            return _sync(url, namespace, idempotent, tool, settle, wait_if)
        return asyncio.run(_async(url, namespace, idempotent, tool, settle, wait_if))
    except LockLost as exc:
        print(f"lost: {exc}", flush=True)
        return 4


def _sync(url: str, namespace: str, idempotent: bool, tool: Any, settle: Any, wait_if: Any) -> int:
    with (
        Store.from_url(url, namespace=namespace) as store,
        store.task(TASK, ttl=LEASE_TTL, wait=30) as run,
    ):
        for i in range(STEPS):
            try:
                run.step(f"step-{i}", tool, i, idempotent=idempotent)
            except StepInterrupted as exc:
                print(f"interrupted {exc.name} fence {exc.fence}", flush=True)
                run.step(exc.name, settle, i)
            print(f"recorded {i}", flush=True)
            wait_if("recorded", i)
    print("finished", flush=True)
    return 0


async def _async(
    url: str, namespace: str, idempotent: bool, tool: Any, settle: Any, wait_if: Any
) -> int:
    async def atool(i: int) -> int:
        return int(await asyncio.to_thread(tool, i))  # a coroutine function as the tool

    async with (
        AsyncStore.from_url(url, namespace=namespace) as store,
        store.task(TASK, ttl=LEASE_TTL, wait=30) as run,
    ):
        for i in range(STEPS):
            try:
                await run.step(f"step-{i}", atool, i, idempotent=idempotent)
            except StepInterrupted as exc:
                print(f"interrupted {exc.name} fence {exc.fence}", flush=True)
                await run.step(exc.name, settle, i)
            print(f"recorded {i}", flush=True)
            await asyncio.to_thread(wait_if, "recorded", i)
    print("finished", flush=True)
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    hang = args[4] if len(args) > 4 else ""
    sys.exit(main(args[0], args[1], args[2], args[3] == "idempotent", hang))
