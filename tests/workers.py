"""Worker processes for the concurrency tests (importable under the spawn start method)."""

from __future__ import annotations

import asyncio
from typing import Any

from redistate import AsyncStore, Store


def _ops(op: str, worker: int, i: int) -> tuple[str, Any]:
    if op == "merge":
        return "merge", {f"w{worker}-{i}": i}
    return "update", lambda d: {**d, "n": d.get("n", 0) + 1, f"last{worker}": i}


def run_sync(
    url: str, namespace: str, op: str, entity: str, worker: int, n: int, barrier: Any
) -> int:
    store = Store.from_url(url, namespace=namespace)
    coll = store.users if op == "merge" else store.sessions
    barrier.wait()
    for i in range(n):
        kind, arg = _ops(op, worker, i)
        if kind == "merge":
            coll.merge(entity, arg)
        else:
            coll.update(entity, arg)
    store.close()
    return n


def run_async(
    url: str,
    namespace: str,
    op: str,
    entity: str,
    worker: int,
    n: int,
    barrier: Any,
    tasks: int = 4,
) -> int:
    async def main() -> None:
        store = AsyncStore.from_url(url, namespace=namespace)
        coll = store.users if op == "merge" else store.sessions

        async def one(task: int) -> None:
            for i in range(task, n, tasks):
                kind, arg = _ops(op, worker, i)
                if kind == "merge":
                    await coll.merge(entity, arg)
                else:
                    await coll.update(entity, arg)

        await asyncio.gather(*(one(t) for t in range(tasks)))
        await store.aclose()

    barrier.wait()
    asyncio.run(main())
    return n
