"""Entity keys spread evenly over a cluster's primaries: the hash tag is the whole id."""

from __future__ import annotations

from typing import Any

from redistate import KeySpace
from tests.conftest import Backend

TASKS = 100_000


def test_100k_task_ids_spread_evenly_over_three_primaries(namespace: str, cluster3: Any) -> None:
    backend = Backend("cluster", None, cluster=cluster3)
    client: Any = backend.sync_client()  # a RedisCluster, partly untyped
    keys = KeySpace(namespace)
    try:
        for start in range(0, TASKS, 10_000):
            pipe = client.pipeline(transaction=False)
            for i in range(start, start + 10_000):
                pipe.set(keys.task(f"task-{i}"), b"", px=600_000)
            pipe.execute()
        counts = {}
        for node in client.get_primaries():
            found = 0
            for _ in client.scan_iter(match=f"{namespace}:*", count=5000, target_nodes=node):
                found += 1
            counts[node.name] = found
        assert sum(counts.values()) == TASKS
        spread = max(counts.values()) / min(counts.values())
        print(f"\n{TASKS} task keys per primary: {counts}; max/min = {spread:.3f}")
        assert len(counts) == 3 and spread <= 1.10, counts
    finally:
        for start in range(0, TASKS, 10_000):
            pipe = client.pipeline(transaction=False)
            for i in range(start, start + 10_000):
                pipe.delete(keys.task(f"task-{i}"))
            pipe.execute()
        client.close()
