"""The checkpoint id index (``ns:task:{t}:index``): a caller-chosen id, a resend and
``get(task, id)`` find a checkpoint without scanning the history, on every backend,
after trims, deletes, imports and data written before the index existed; a wrong or
stale index is never trusted (has a generated sync twin)."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from redistate import AsyncStore
from redistate.core import kinds
from redistate.core.scripts import script
from tests._async.test_resends import SCRIPT
from tests.conftest import Backend, ttl_left

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

_HEAD = b":head"


def _index(store: AsyncStore, backend: Backend, task: str) -> dict[bytes, bytes]:
    found: dict[bytes, bytes] = backend.raw().hgetall(store.keys.task_index(task))
    return found


def _assert_matches_list(store: AsyncStore, backend: Backend, task: str) -> None:
    """The index maps every id of the list to where it is, and holds nothing else."""
    raw = backend.raw()
    entries = raw.lrange(store.keys.task_ids(task), 0, -1)
    index = _index(store, backend, task)
    head = int(index.pop(_HEAD).split(b",", 1)[0])
    ids = [e.split(b",")[3] for e in entries]
    assert {i: head - int(p) for i, p in index.items()} == {i: n for n, i in enumerate(ids)}


async def test_get_and_chosen_ids_at_many_checkpoints_and_after_trims(
    store: AsyncStore, backend: Backend
) -> None:
    for i in range(300):
        await store.checkpoints.save("t", {"i": i}, checkpoint_id=f"c{i}", keep=250)
    _assert_matches_list(store, backend, "t")
    assert len(_index(store, backend, "t")) == 251  # trimmed ids left it
    for i in (0, 49, 50, 51, 150, 298, 299):
        found = await store.checkpoints.get("t", f"c{i}")
        assert (found is None) if i < 50 else (found is not None and found.state == {"i": i})
    # Saved again: the stored one comes back, nothing is pushed.
    again = await store.checkpoints.save("t", {"i": -1}, checkpoint_id="c120", keep=250)
    assert (again.seq, again.state) == (121, {"i": 120})
    # Trimmed away within the write memory: reported as saved earlier, not pushed.
    gone = await store.checkpoints.save("t", {"i": -2}, checkpoint_id="c10", keep=250)
    assert gone.seq == 0 and await store.checkpoints.get("t", "c10") is None
    fresh = await store.checkpoints.save("t", {"i": -3}, checkpoint_id="fresh", keep=250)
    assert fresh.seq == 301 and (await store.checkpoints.get("t", "fresh")) == fresh
    # A smaller keep drops many at once; the index follows.
    await store.checkpoints.save("t", {"i": 400}, keep=20)
    _assert_matches_list(store, backend, "t")
    assert len(_index(store, backend, "t")) == 21
    assert await store.checkpoints.get("t", "c279") is None
    assert (await store.checkpoints.get("t", "c299")) is not None


async def test_the_index_expires_and_is_deleted_with_its_task(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    index = store.keys.task_index("t")
    since = time.monotonic()
    await store.checkpoints.save("t", {"n": 1}, checkpoint_id="a", ttl=60)
    ttl_left(raw, index, 60_000, since)
    await store.checkpoints.log("t", {"n": 2}, ttl=None)
    assert raw.pttl(index) == -1
    since = time.monotonic()
    await store.checkpoints.save("t", {"n": 3}, ttl=30)
    ttl_left(raw, index, 30_000, since)
    assert await store.checkpoints.delete("t") is True
    assert raw.exists(index) == 0
    again = await store.checkpoints.save("t", {"n": 4}, checkpoint_id="b")
    assert again.seq == 1 and await store.checkpoints.get("t", "b") == again
    _assert_matches_list(store, backend, "t")


async def test_a_task_written_before_the_index_is_indexed_by_its_first_lookup(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    for i in range(40):
        await store.checkpoints.save("t", {"i": i}, checkpoint_id=f"c{i}", keep=100)
    raw.delete(store.keys.task_index("t"))  # as code before the index left it
    await store.checkpoints.save("t", {"i": 40}, keep=100)  # a generated id: no scan
    assert raw.exists(store.keys.task_index("t")) == 0
    found = await store.checkpoints.get("t", "c3")
    assert found is not None and found.state == {"i": 3}
    _assert_matches_list(store, backend, "t")
    assert (await store.checkpoints.save("t", {}, checkpoint_id="c7", keep=100)).seq == 8


async def test_an_index_left_by_a_delete_without_it_is_dropped(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    for i in range(5):
        await store.checkpoints.save("t", {"i": i}, checkpoint_id=f"c{i}")
    raw.delete(*store.keys.task_keys("t"))  # as a delete by code before the index
    assert await store.checkpoints.get("t", "c1") is None
    await store.checkpoints.save("t", {"i": 9})  # a generated id: the index starts anew
    _assert_matches_list(store, backend, "t")
    assert len(_index(store, backend, "t")) == 2


async def test_a_wrong_position_is_checked_never_trusted(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    index = store.keys.task_index("t")
    for i in range(30):
        await store.checkpoints.save("t", {"i": i}, checkpoint_id=f"c{i}")
    for wrong in (raw.hget(index, "c25"), b"0", b"999999"):
        raw.hset(index, "c24", wrong)
        found = await store.checkpoints.get("t", "c24")
        assert found is not None and found.state == {"i": 24}
        _assert_matches_list(store, backend, "t")  # repaired by the scan
    # An index naming a trimmed-away id there (a stale field): not found, repaired.
    raw.hset(index, "c3", raw.hget(index, "c29"))
    assert await store.checkpoints.get("t", "c3") is None
    _assert_matches_list(store, backend, "t")


async def test_an_id_twice_in_the_list_keeps_its_newest_when_the_oldest_is_trimmed(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    for i in range(5):
        await store.checkpoints.save("t", {"i": i}, checkpoint_id=f"c{i}", keep=5)
    # As an imported file may hold it: the oldest entry names c3 too.
    ids_key = store.keys.task_ids("t")
    oldest = raw.lindex(ids_key, 4).split(b",")
    raw.lset(ids_key, 4, b",".join([*oldest[:3], b"c3", oldest[4]]))
    raw.delete(store.keys.task_index("t"))
    found = await store.checkpoints.get("t", "c3")
    assert found is not None and found.state == {"i": 3}  # the newest, as a scan finds
    await store.checkpoints.save("t", {"i": 5}, keep=5)  # trims the older c3
    found = await store.checkpoints.get("t", "c3")
    assert found is not None and found.state == {"i": 3}
    _assert_matches_list(store, backend, "t")


async def test_a_save_by_code_without_the_index_is_seen_as_a_mismatch(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    for i in range(12):
        await store.checkpoints.save("t", {"i": i}, checkpoint_id=f"c{i}")
    # Older code pushes both lists and trims them, leaving the index as it was.
    blobs_key, ids_key, _ = store.keys.task_keys("t")
    await store.checkpoints.save("u", {"i": 99}, checkpoint_id="old")
    raw.lpush(blobs_key, raw.lindex(store.keys.task("u"), 0))
    head = raw.lindex(ids_key, 0).split(b",")
    seq = int(head[0]) + 1
    raw.lpush(ids_key, b"%016d,%s,0,old,%s" % (seq, head[1], head[3]))
    for key in (blobs_key, ids_key):
        raw.ltrim(key, 0, 9)
    found = await store.checkpoints.get("t", "old")
    assert found is not None and found.state == {"i": 99} and found.seq == 13
    assert await store.checkpoints.get("t", "c2") is None  # trimmed by that code
    assert (await store.checkpoints.get("t", "c5")) is not None
    _assert_matches_list(store, backend, "t")


async def test_rewriting_blobs_in_place_leaves_the_index_as_it_is(
    store: AsyncStore, backend: Backend
) -> None:
    """rotate-keys and migrate LSET blobs where they are (checkpoint_recode,
    checkpoint_migrate): no entry moves, so the index stays as it is and is used."""
    raw = backend.raw()
    for i in range(15):
        await store.checkpoints.save("t", {"i": i}, checkpoint_id=f"c{i}")
    key, _, log_key = store.keys.task_keys("t")
    before = _index(store, backend, "t")
    blobs = raw.lrange(key, 0, -1)
    pairs = [x for blob in blobs[3:6] for x in (blob.split(b"\n", 1)[0], blob)]
    assert await store._conn.script(script("checkpoint_recode"), (key,), pairs) == 3
    triples = [x for blob, n in ((blobs[2], 12), (blobs[7], 7)) for x in (
        blob.split(b"\n", 1)[0], f"c{n}", blob)]  # fmt: skip
    await store._conn.script(script("checkpoint_migrate"), (key, log_key), (1, *triples))
    assert _index(store, backend, "t") == before
    for n in (5, 7, 11, 14):
        found = await store.checkpoints.get("t", f"c{n}")
        assert found is not None and found.state == {"i": n}
    assert _index(store, backend, "t") == before  # found through it: nothing rebuilt


async def test_import_rebuilds_the_index_a_backup_does_not_hold(
    store: AsyncStore, backend: Backend, namespace: str, tmp_path: Path
) -> None:
    raw = backend.raw()
    for i in range(60):
        await store.checkpoints.save("t", {"i": i}, checkpoint_id=f"c{i}", keep=50)
    sink = io.BytesIO()
    await store.admin.export(sink)
    assert b'"index"' not in sink.getvalue() and b":index" not in sink.getvalue()
    (tmp_path / "f.jsonl").write_bytes(sink.getvalue())
    # The task goes on, then the backup is put back over it with --force.
    for i in range(60, 70):
        await store.checkpoints.save("t", {"i": i}, checkpoint_id=f"c{i}", keep=50)
    await store.admin.import_file(tmp_path / "f.jsonl", force=True)
    _assert_matches_list(store, backend, "t")
    assert await store.checkpoints.get("t", "c65") is None
    found = await store.checkpoints.get("t", "c15")
    assert found is not None and found.state == {"i": 15}
    # Into another namespace: no index there before.
    target = f"{namespace}x"
    copy = AsyncStore(backend.async_client(), namespace=target)
    try:
        await copy.admin.import_file(tmp_path / "f.jsonl", namespace=target)
        _assert_matches_list(copy, backend, "t")
        assert (await copy.checkpoints.save("t", {}, checkpoint_id="c59")).state == {"i": 59}
    finally:
        for key in (*kinds.TASK.keys_of(copy.keys, "t"), copy.keys.task_steps("t")):
            raw.delete(key)
        await copy.aclose()


def _calls(raw: Any) -> dict[str, int]:
    stats = raw.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in stats.items()}


# What a lookup can cost by the history's length: list and hash commands (the write
# memory's sorted set is pruned by time, so its commands vary from call to call).
_LISTS_AND_HASHES = frozenset(
    {"lrange", "lindex", "llen", "lpush", "ltrim", "lset", "hget", "hset", "hdel", "hlen",
     "hgetall", "del"}
)  # fmt: skip


async def _counted(raw: Any, call: Any, *args: Any, **kwargs: Any) -> dict[str, int]:
    """The list and hash commands (scripts' included) the server ran for ``call``."""
    before = _calls(raw)
    await call(*args, **kwargs)
    after = _calls(raw)
    return {
        k: v - before.get(k, 0)
        for k, v in after.items()
        if v != before.get(k, 0) and k in _LISTS_AND_HASHES
    }


async def test_a_lookup_runs_the_same_commands_at_10_and_3000_checkpoints(
    server_store: AsyncStore, server_backend: Backend
) -> None:
    """Not O(n), shown without timing: the server runs exactly the same commands for a
    lookup (and a chosen-id save) in a history of 10 as in one of 3,000, and never
    LRANGE (a scan) nor any HSET but the new id's."""
    store, raw = server_store, server_backend.raw()
    for n, task in ((10, "small"), (3000, "big")):
        for i in range(n):
            await store.checkpoints.save(task, {"i": i}, checkpoint_id=f"c{i}", keep=100_000)
    counted: dict[str, list[dict[str, int]]] = {"small": [], "big": []}
    for task, n in (("small", 10), ("big", 3000)):
        await store.checkpoints.get(task, "c1")  # scripts loaded, index checked
        counts = counted[task]
        get, save = store.checkpoints.get, store.checkpoints.save
        counts.append(await _counted(raw, get, task, f"c{n // 2}"))
        counts.append(await _counted(raw, get, task, "c0"))
        counts.append(await _counted(raw, get, task, "nope"))
        counts.append(await _counted(raw, save, task, {}, checkpoint_id=f"c{n // 3}", keep=10**5))
        counts.append(await _counted(raw, save, task, {}, checkpoint_id="new", keep=10**5))
    assert counted["small"] == counted["big"]
    found, oldest, missing, resent, new_id = counted["big"]
    for lookup in (found, oldest, missing, resent):
        assert "lrange" not in lookup and "hset" not in lookup
    assert found["lindex"] == oldest["lindex"] == 3  # head check, the entry, its blob
    assert missing["lindex"] == 1  # the head check only
    assert new_id.get("lrange", 0) == 1  # the head batch the seq is read from
    assert new_id["hset"] == 1


async def test_a_resent_save_of_a_chosen_id_is_found_by_the_index(
    store: AsyncStore, backend: Backend
) -> None:
    for i in range(200):
        await store.checkpoints.save("t", {"i": i}, checkpoint_id=f"c{i}", keep=1000)
    client: Any = store.client
    execute = client.execute_command
    lost = {"left": 1}

    async def losing(*args: Any, **options: Any) -> Any:
        result = await execute(*args, **options)
        if lost["left"] and str(args[0]).upper() in SCRIPT:
            lost["left"] -= 1
            raise redis.ConnectionError("reply lost on purpose by the test")
        return result

    client.execute_command = losing
    cp = await store.checkpoints.save("t", {"i": "x"}, checkpoint_id="x", keep=1000)
    assert lost["left"] == 0  # its reply was lost, and the resend recognised
    gen = await store.checkpoints.save("t", {"i": "y"}, keep=1000)
    lost["left"] = 1
    gen2 = await store.checkpoints.save("t", {"i": "z"}, keep=1000)
    assert lost["left"] == 0
    client.execute_command = execute
    assert (cp.seq, gen.seq, gen2.seq) == (201, 202, 203)
    history = await store.checkpoints.history("t")
    assert [c.seq for c in history[:3]] == [203, 202, 201] and len(history) == 203
    _assert_matches_list(store, backend, "t")
