"""A RedisCluster client works as a store's client (every slot on one node here).

Multi-node clusters run the whole contract suite (the `cluster` backend); failover is in
tests/test_failover.py.
"""

from __future__ import annotations

import pytest
from redis.asyncio.cluster import RedisCluster

from redistate import AsyncStore, ConflictError
from tests.servers import Server


async def test_a_cluster_client_runs_the_record_operations(
    cluster_node: Server, namespace: str
) -> None:
    client = RedisCluster(host="127.0.0.1", port=cluster_node.port)
    store = AsyncStore(client, namespace=namespace)
    assert "cluster" in store._conn.address
    rec = await store.sessions.put("s", {"turn": 1}, ttl=60)
    got = await store.sessions.get("s", touch=True)
    assert got is not None and got.data == {"turn": 1} and got.version == rec.version
    with pytest.raises(ConflictError):
        await store.sessions.put("s", {"turn": 9}, if_version=0)
    merged = await store.users.merge("u", {"a": {"b": 1}})
    merged = await store.users.merge("u", {"a": {"c": 2}})
    assert merged.data == {"a": {"b": 1, "c": 2}}
    updated = await store.users.update("u", lambda d: {**d, "n": 1})
    assert updated.version > merged.version
    assert await store.sessions.touch("s", ttl=30) is True
    left = await store.sessions.ttl("s")
    assert left is not None and 29 < left <= 30
    assert await store.users.delete("u", if_version=updated.version) is True
    assert await store.sessions.delete("s") is True
    await store.aclose()


async def test_a_cluster_client_runs_the_checkpoint_operations(
    cluster_node: Server, namespace: str
) -> None:
    client = RedisCluster(host="127.0.0.1", port=cluster_node.port)
    store = AsyncStore(client, namespace=namespace)
    saved = await store.checkpoints.save("t", {"step": 1}, phase="a")
    await store.checkpoints.log("t", {"step": 2})
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.state == {"step": 2}
    assert await store.checkpoints.latest("t") == saved
    assert await store.checkpoints.get("t", saved.id) == saved
    assert await store.checkpoints.delete("t") is True
    await store.aclose()
