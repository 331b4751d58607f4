"""Backups where the data or the server is not as it should be: a torn task, a file
older than a rotate-keys, a full server, a cluster slot that moved, and stats of
threads (found by a review; each failed before its fix)."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from redis.crc import key_slot

from redistate import EncryptedCodec, Store
from redistate.langgraph import RedisStateSaver
from tests.conftest import Backend
from tests.servers import redis_binary, start_cluster, start_server

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


def export(store: Store, path: Path) -> Any:
    with open(path, "wb") as sink:
        return store.admin.export(sink)


def test_a_torn_task_exports_its_pairs_and_the_file_imports(
    backend: Backend, namespace: str, tmp_path: Path
) -> None:
    with Store(backend.sync_client(), namespace=namespace) as store:
        store.users.put("u1", {"a": 1})
        for n in range(3):
            store.checkpoints.save("t1", {"n": n})
        raw = backend.raw()
        raw.lpop(store.keys.task("t1"))  # the newest checkpoint lost, its id kept
        raw.close()
        report = export(store, tmp_path / "f.jsonl")
        assert report.damaged_count == 0 and report.entities["task"] == 1
        target = f"{namespace}-copy"
        imported = store.admin.import_file(tmp_path / "f.jsonl", namespace=target)
        assert imported.failed_count == imported.refused_count == 0
    with Store(backend.sync_client(), namespace=target) as copy:
        try:
            assert copy.users.get("u1").data == {"a": 1}  # type: ignore[union-attr]
            history = copy.checkpoints.history("t1")
            assert [c.state for c in history] == [{"n": 1}, {"n": 0}]  # the two pairs
        finally:
            raw = backend.raw()
            for key in raw.scan_iter(match=f"{target}:*"):
                raw.delete(key)
            raw.close()


def test_an_old_file_imported_after_rotate_keys_leaves_the_rotated_values(
    backend: Backend, namespace: str, tmp_path: Path
) -> None:
    old, new = os.urandom(32), os.urandom(32)
    with Store(
        backend.sync_client(), namespace=namespace, codec=EncryptedCodec({"a": old}, "a")
    ) as first:
        first.users.put("u1", {"a": 1})
        first.checkpoints.save("t1", {"n": 1})
        export(first, tmp_path / "f.jsonl")
    both = EncryptedCodec({"b": new, "a": old}, "b")
    with Store(backend.sync_client(), namespace=namespace, codec=both) as rotating:
        assert rotating.admin.rotate_keys().records == 1
        report = rotating.admin.import_file(tmp_path / "f.jsonl")
        assert report.imported["record"] == 1 and report.imported["task"] == 1  # the same
    only_new = EncryptedCodec({"b": new}, "b")
    with Store(backend.sync_client(), namespace=namespace, codec=only_new) as after:
        assert after.users.get("u1").data == {"a": 1}  # type: ignore[union-attr]
        assert after.checkpoints.latest("t1").state == {"n": 1}  # type: ignore[union-attr]


def test_an_export_from_a_full_server_reads_without_multi(namespace: str) -> None:
    server = start_server(redis_binary())
    try:
        with Store.from_url(server.url, namespace=namespace, server_check="off") as store:
            store.users.put("u1", {"a": 1})
            with store.task("t1") as run:
                run.step("charge", lambda: {"x": 1})
            raw = redis.Redis.from_url(server.url)
            used = int(raw.info("memory")["used_memory"])
            raw.config_set("maxmemory", used + 200_000)
            filler = 0
            try:
                while True:  # fill it: no write is accepted, reads still are
                    raw.set(f"filler{filler}", b"x" * 10_000)
                    filler += 1
            except redis.exceptions.OutOfMemoryError:
                pass
            raw.close()
            report = store.admin.export(io.BytesIO())
            assert dict(report.entities) == {"record": 1, "task": 1, "fence": 1}
            assert report.steps == 1
    finally:
        server.stop()


def test_a_batch_follows_a_slot_that_moved_inside_multi(namespace: str) -> None:
    cluster = start_cluster(redis_binary(), 3)
    try:
        with Store.from_url(cluster.url, namespace=namespace) as store:
            store.users.put("u1", {"a": 1})
            assert store.admin.export(io.BytesIO()).entities["record"] == 1  # learnt the map
            key = store.keys.record("user", "u1")
            slot = key_slot(key.encode())
            nodes: list[Any] = [redis.Redis(port=p.port) for p in cluster.primaries]
            ids = [n.execute_command("CLUSTER MYID").decode() for n in nodes]
            owner = next(
                i for i, n in enumerate(nodes) if n.execute_command("CLUSTER COUNTKEYSINSLOT", slot)
            )
            target = (owner + 1) % len(nodes)
            nodes[target].execute_command("CLUSTER SETSLOT", slot, "IMPORTING", ids[owner])
            nodes[owner].execute_command("CLUSTER SETSLOT", slot, "MIGRATING", ids[target])
            for moving in nodes[owner].execute_command("CLUSTER GETKEYSINSLOT", slot, 100):
                port = cluster.primaries[target].port
                nodes[owner].execute_command("MIGRATE", "127.0.0.1", port, moving, 0, 5000)
            for node in nodes:
                node.execute_command("CLUSTER SETSLOT", slot, "NODE", ids[target])
                node.close()
            # The store still sends the slot to its old owner: MOVED inside MULTI.
            report = store.admin.export(io.BytesIO())
            assert report.entities["record"] == 1 and report.damaged_count == 0
    finally:
        cluster.stop()


def test_stats_counts_langgraph_threads_as_entities(backend: Backend, namespace: str) -> None:
    with Store(backend.sync_client(), namespace=namespace) as store:
        saver = RedisStateSaver(store)
        for thread in ("t1", "t2"):
            config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            meta: Any = {"source": "input", "step": 0, "parents": {}}
            saver.put(config, empty_checkpoint(), meta, {})
        graph = {s.kind: s for s in store.admin.stats()}["graph"]
        assert graph.entities == 2 and graph.keys >= 4
