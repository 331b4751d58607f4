"""Checkpoint contract suite: every backend, both I/O flavours (has a generated sync twin)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from redistate import (
    AsyncStore,
    CodecError,
    IntegrityError,
    InvalidId,
    RedistateError,
    StateTooLarge,
    Verification,
)
from tests.conftest import Backend, ttl_left
from tests.roundtrips import RoundTrips, server_reads

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


async def test_save_then_latest(store: AsyncStore) -> None:
    saved = await store.checkpoints.save(
        "t1", {"step": 1}, phase="search", progress=0.2, metadata={"next": "write"}
    )
    assert (saved.task_id, saved.seq, saved.parent_id, saved.fence) == ("t1", 1, None, None)
    assert (saved.phase, saved.progress, saved.metadata) == ("search", 0.2, {"next": "write"})
    assert len(saved.digest) == 64
    assert await store.checkpoints.latest("t1") == saved


async def test_unknown_task(store: AsyncStore) -> None:
    assert await store.checkpoints.latest("nope") is None
    assert await store.checkpoints.history("nope") == []
    assert await store.checkpoints.restore("nope") is None
    assert await store.checkpoints.get("nope", "x") is None
    assert await store.checkpoints.delete("nope") is False


async def test_history_is_newest_first_and_capped(store: AsyncStore, backend: Backend) -> None:
    saved = [await store.checkpoints.save("t", {"i": i}) for i in range(14)]
    history = await store.checkpoints.history("t")
    assert [c.state["i"] for c in history] == list(range(13, 3, -1))  # keep=10
    assert [c.seq for c in history] == list(range(14, 4, -1))
    assert [c.parent_id for c in history] == [c.id for c in saved[12:2:-1]]
    assert [c.state["i"] for c in await store.checkpoints.history("t", limit=3)] == [13, 12, 11]
    key, ids_key, _ = store.keys.task_keys("t")
    assert backend.raw().llen(key) == backend.raw().llen(ids_key) == 10


async def test_keep_per_store_and_per_call(backend: Backend, namespace: str) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace, checkpoint_keep=3)
    for i in range(5):
        await store.checkpoints.save("t", {"i": i})
    assert len(await store.checkpoints.history("t")) == 3
    await store.checkpoints.save("t", {"i": 5}, keep=2)
    assert [c.state["i"] for c in await store.checkpoints.history("t")] == [5, 4]
    await store.aclose()


async def test_a_resent_save_is_not_a_duplicate(store: AsyncStore) -> None:
    first = await store.checkpoints.save("t", {"a": 1}, checkpoint_id="cp-1")
    await store.checkpoints.save("t", {"a": 2}, checkpoint_id="cp-2")
    again = await store.checkpoints.save("t", {"a": "changed"}, checkpoint_id="cp-1")
    assert again == first  # the stored checkpoint, unchanged
    history = await store.checkpoints.history("t")
    assert [c.id for c in history] == ["cp-2", "cp-1"]


async def test_get_by_id(store: AsyncStore) -> None:
    one = await store.checkpoints.save("t", {"a": 1})
    await store.checkpoints.save("t", {"a": 2})
    assert await store.checkpoints.get("t", one.id) == one
    assert await store.checkpoints.get("t", "missing") is None


async def test_ids_are_time_ordered_by_default(store: AsyncStore) -> None:
    ids = [(await store.checkpoints.save("t", {"i": i})).id for i in range(5)]
    assert ids == sorted(ids) and len(set(ids)) == 5


async def test_corrupt_latest_raises_and_restore_falls_back(
    store: AsyncStore, backend: Backend
) -> None:
    good = await store.checkpoints.save("t", {"step": 1})
    bad = await store.checkpoints.save("t", {"step": 2})
    key = store.keys.task("t")
    raw = backend.raw()
    blob = raw.lindex(key, 0)
    raw.lset(key, 0, blob[:-2] + b"9}")  # flip the payload: the digest no longer matches
    with pytest.raises(IntegrityError, match="digest"):
        await store.checkpoints.latest("t")
    restored = await store.checkpoints.restore("t")
    assert restored is not None
    assert restored.checkpoint == good and restored.state == {"step": 1}
    assert restored.skipped == (bad.id,) and restored.complete is False


async def test_every_kind_of_damage_is_detected(store: AsyncStore, backend: Backend) -> None:
    await store.checkpoints.save("t", {"step": 1, "text": "x" * 20000})  # compressed
    key = store.keys.task("t")
    raw = backend.raw()
    original = raw.lindex(key, 0)
    for damaged in (b"", b"garbage", original[:-10], original[:80] + b"X" + original[81:]):
        raw.lset(key, 0, damaged)
        with pytest.raises(IntegrityError):
            await store.checkpoints.latest("t")
        restored = await store.checkpoints.restore("t")
        assert restored is not None and restored.checkpoint is None
        assert restored.complete is False
    raw.lset(key, 0, original)
    latest = await store.checkpoints.latest("t")
    assert latest is not None and latest.state["text"] == "x" * 20000


async def test_verify_lists_every_damaged_checkpoint_and_delta(
    store: AsyncStore, backend: Backend
) -> None:
    assert await store.checkpoints.verify("none") == Verification(True, 0, None)
    first = await store.checkpoints.save("t", {"step": 1})
    second = await store.checkpoints.save("t", {"step": 2, "text": "y" * 20000})  # zlib
    await store.checkpoints.save("t", {"step": 3})
    await store.checkpoints.log("t", {"step": 4})
    assert await store.checkpoints.verify("t") == Verification(True, 4, None)
    key, log_key = store.keys.task("t"), store.keys.task_log("t")
    raw = backend.raw()
    raw.lset(key, 1, raw.lindex(key, 1)[:-10])  # the second checkpoint: truncated
    raw.lset(key, 2, raw.lindex(key, 2)[:-2] + b"9}")  # the first: digest mismatch
    raw.lset(log_key, 0, raw.lindex(log_key, 0)[:-2] + b"7}")
    found = await store.checkpoints.verify("t")
    assert (found.ok, found.count, found.first_bad) == (False, 4, second.id)
    assert len(found.problems) == 3
    assert second.id in found.problems[0] and first.id in found.problems[1]
    assert "delta" in found.problems[2]
    restored = await store.checkpoints.restore("t")  # the newest is intact; its delta not
    assert restored is not None and restored.state == {"step": 3} and not restored.complete


async def test_deltas_replay_after_the_snapshot(store: AsyncStore) -> None:
    await store.checkpoints.save("t", {"step": 1, "notes": {"a": 1}})
    assert await store.checkpoints.log("t", {"step": 2}) == 1
    assert await store.checkpoints.log("t", {"notes": {"b": 2, "a": None}}) == 2
    restored = await store.checkpoints.restore("t")
    assert restored is not None
    assert restored.state == {"step": 2, "notes": {"b": 2}}
    assert (restored.deltas_applied, restored.complete) == (2, True)


async def test_a_save_compacts_the_deltas(store: AsyncStore, backend: Backend) -> None:
    await store.checkpoints.save("t", {"n": 0})
    await store.checkpoints.log("t", {"n": 1})
    await store.checkpoints.save("t", {"n": 5})
    assert backend.raw().exists(store.keys.task_log("t")) == 0
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.state == {"n": 5} and restored.deltas_applied == 0


async def test_a_resent_delta_is_applied_once(store: AsyncStore) -> None:
    await store.checkpoints.save("t", {"items": []})
    await store.checkpoints.log("t", {"items": ["a"]}, delta_id="d1")
    assert await store.checkpoints.log("t", {"items": ["a"]}, delta_id="d1") == 1
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.deltas_applied == 1


async def test_deltas_without_a_snapshot(store: AsyncStore) -> None:
    await store.checkpoints.log("t", {"a": 1})
    restored = await store.checkpoints.restore("t")
    assert restored is not None
    assert (restored.state, restored.checkpoint, restored.complete) == ({"a": 1}, None, True)


async def test_a_damaged_delta_is_skipped(store: AsyncStore, backend: Backend) -> None:
    await store.checkpoints.save("t", {"n": 0})
    await store.checkpoints.log("t", {"n": 1}, delta_id="d1")
    await store.checkpoints.log("t", {"m": 2}, delta_id="d2")
    raw = backend.raw()
    log_key = store.keys.task_log("t")
    raw.lset(log_key, 0, raw.lindex(log_key, 0)[:-2] + b"7}")
    restored = await store.checkpoints.restore("t")
    assert restored is not None
    assert restored.state == {"n": 0, "m": 2} and restored.skipped == ("d1",)
    assert restored.complete is False


async def test_deltas_of_a_damaged_snapshot_are_not_applied_to_an_older_one(
    store: AsyncStore, backend: Backend
) -> None:
    await store.checkpoints.save("t", {"v": 1})
    newest = await store.checkpoints.save("t", {"v": 2})
    await store.checkpoints.log("t", {"w": 3}, delta_id="d1")
    backend.raw().lset(store.keys.task("t"), 0, b"garbage")
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.state == {"v": 1}
    assert restored.skipped == (newest.id, "d1") and restored.deltas_applied == 0


async def test_the_delta_log_is_capped(backend: Backend, namespace: str) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace, checkpoint_max_deltas=3)
    for i in range(3):
        await store.checkpoints.log("t", {"i": i})
    with pytest.raises(RedistateError, match="RSFULL"):
        await store.checkpoints.log("t", {"i": 3})
    await store.checkpoints.save("t", {"i": 2})
    assert await store.checkpoints.log("t", {"i": 3}) == 1
    await store.aclose()


async def test_task_ttl_covers_every_key(backend: Backend, namespace: str) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace, task_ttl=60)
    raw = backend.raw()
    since = time.monotonic()
    await store.checkpoints.save("t", {"a": 1})
    await store.checkpoints.log("t", {"b": 2})
    for key in store.keys.task_keys("t"):
        ttl_left(raw, key, 60_000, since)
    await store.checkpoints.save("t", {"a": 2}, ttl=None)
    for key in store.keys.task_keys("t")[:2]:
        assert raw.pttl(key) == -1
    await store.aclose()


async def test_no_ttl_by_default(store: AsyncStore, backend: Backend) -> None:
    await store.checkpoints.save("t", {"a": 1})
    await store.checkpoints.log("t", {"b": 2})
    for key in store.keys.task_keys("t"):
        assert backend.raw().pttl(key) == -1


async def test_delete_removes_every_key(
    store: AsyncStore, backend: Backend, namespace: str
) -> None:
    await store.checkpoints.save("t", {"a": 1})
    await store.checkpoints.log("t", {"b": 2})
    assert await store.checkpoints.delete("t") is True
    # Only the write memory is left (a resent log or delete is still recognised).
    memory = store.keys.writes(store.keys.task("t"))
    assert list(backend.raw().scan_iter(match=f"{namespace}:*")) == [memory.encode()]
    assert 0 < backend.raw().pttl(memory) <= store.retry.memory_ms(store._conn.timeout)
    again = await store.checkpoints.save("t", {"a": 1})
    assert again.seq == 1


def _compressed(backend: Backend) -> bytes:
    """A compressed blob's flag: "b" (base64 too) over a REST API, whose JSON is text."""
    return b"b\n" if backend.rest else b"z\n"


async def test_large_states_are_compressed_and_limited(
    store: AsyncStore, backend: Backend, namespace: str
) -> None:
    state = {"text": "agent " * 10_000}
    saved = await store.checkpoints.save("t", state)
    stored = backend.raw().lindex(store.keys.task("t"), 0)
    assert len(stored) < 10_000 < len(str(state))  # zlib
    assert stored.startswith(b"K1,") and stored[68:70] == _compressed(backend)
    assert (await store.checkpoints.latest("t")) == saved
    small = AsyncStore(backend.async_client(), namespace=namespace, checkpoint_max_bytes=1000)
    with pytest.raises(StateTooLarge) as info:
        await small.checkpoints.save("u", {"x": "y" * 1000})
    assert info.value.limit == 1000
    assert await small.checkpoints.latest("u") is None
    await small.aclose()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"checkpoint_id": "bad id"},
        {"checkpoint_id": ""},
        {"phase": 3},
        {"progress": 1.5},
        {"progress": "half"},
        {"metadata": ["not", "a", "dict"]},
        {"keep": 0},
    ],
)
async def test_bad_arguments_change_nothing(
    store: AsyncStore, backend: Backend, namespace: str, kwargs: dict[str, Any]
) -> None:
    with pytest.raises((ValueError, TypeError, InvalidId)):
        await store.checkpoints.save("t", {"a": 1}, **kwargs)
    with pytest.raises(CodecError):
        await store.checkpoints.save("t", {"a": object()})
    with pytest.raises(InvalidId):
        await store.checkpoints.save("", {"a": 1})
    assert list(backend.raw().scan_iter(match=f"{namespace}:*")) == []


async def test_handoff(store: AsyncStore) -> None:
    empty = (await store.checkpoints.handoff("t")).splitlines()
    assert 5 <= len(empty) <= 15 and "- Checkpoint: none saved yet" in empty
    await store.checkpoints.save(
        "t",
        {"files": 3},
        phase="impl",
        progress=0.45,
        metadata={"next": "write the tests", "decision": "use Redis streams"},
        checkpoint_id="cp-7",
    )
    await store.checkpoints.log("t", {"files": 4})
    text = await store.checkpoints.handoff("t")
    lines = text.splitlines()
    assert 5 <= len(lines) <= 15
    assert lines[0] == "# Task t"
    assert "- Phase: impl" in lines and "- Progress: 45%" in lines
    assert any(line.startswith("- Checkpoint: `cp-7` (seq 1), saved ") for line in lines)
    assert "- Deltas since: 1" in lines and "- Next step: write the tests" in lines
    assert "- decision: use Redis streams" in lines


async def test_a_lease_records_its_fence(store: AsyncStore) -> None:
    async with store.lock("t", ttl=30) as lease:
        saved = await store.checkpoints.save("t", {"a": 1}, lease=lease)
        assert saved.fence == lease.fence is not None
    latest = await store.checkpoints.latest("t")
    assert latest is not None and latest.fence == saved.fence


async def test_save_returns_what_latest_reads(store: AsyncStore) -> None:
    import datetime as dt

    saved = await store.checkpoints.save(
        "t", {"when": "x", "n": 2**60}, phase="p", progress=1, metadata={"at": dt.date(2026, 1, 2)}
    )
    assert saved.metadata == {"at": "2026-01-02"}  # metadata as stored (plain JSON)
    assert await store.checkpoints.latest("t") == saved


async def test_the_compression_threshold_is_a_store_option(
    backend: Backend, namespace: str
) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace, checkpoint_compress_above=100)
    await store.checkpoints.save("t", {"text": "a" * 200})
    assert backend.raw().lindex(store.keys.task("t"), 0)[68:70] == _compressed(backend)
    never = AsyncStore(backend.async_client(), namespace=namespace, checkpoint_compress_above=10**9)
    await never.checkpoints.save("u", {"text": "a" * 20_000})
    assert backend.raw().lindex(store.keys.task("u"), 0)[68:70] == b"-\n"
    await store.aclose()
    await never.aclose()


async def test_restore_reads_only_the_newest_unless_it_is_damaged(
    server_store: AsyncStore, roundtrips: RoundTrips, server_backend: Backend
) -> None:
    cps = server_store.checkpoints
    for i in range(5):
        await cps.save("t", {"i": i})
    await cps.restore("t")  # warm up the connection and load the scripts
    await cps.log("warm", {"x": 1})
    roundtrips.start()
    await cps.restore("t")
    await cps.latest("t")
    await cps.save("t", {"i": 5})
    await cps.log("t", {"j": 1})
    sent = roundtrips.stop()
    # one round trip each: MULTI ... EXEC arrive together, scripts are one FCALL
    assert [c[0].upper() for c in sent] == [
        "MULTI", "LRANGE", "LRANGE", "LRANGE", "EXEC",
        "MULTI", "LRANGE", "LRANGE", "EXEC",
        "FCALL", "FCALL",
    ]  # fmt: skip
    server_backend.raw().lset(server_store.keys.task("t"), 0, b"damaged")
    roundtrips.start()
    restored = await cps.restore("t")
    fallback = roundtrips.stop()
    assert [c[0].upper() for c in fallback].count("EXEC") == 2  # a second read, to fall back
    assert restored is not None and restored.state == {"i": 4}
    assert restored.complete is False and len(restored.skipped) == 2  # newest + its delta


async def test_handoff_has_a_stable_format(store: AsyncStore) -> None:
    saved = await store.checkpoints.save(
        "report",
        {},
        phase="write\nup",  # newlines never break the format
        progress=0.5,
        metadata={"next_step": "review", "next": "ignored", "risk": "low\nish", "n": 3},
        checkpoint_id="cp-1",
    )
    when = saved.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert await store.checkpoints.handoff("report") == (
        "# Task report\n"
        "\n"
        "- Phase: write up\n"
        "- Progress: 50%\n"
        f"- Checkpoint: `cp-1` (seq 1), saved {when}\n"
        "- Deltas since: 0\n"
        "- Next step: review\n"
        "\n"
        "## Decisions and notes\n"
        "- n: 3\n"  # metadata is stored with sorted keys
        "- risk: low ish\n"
    )
    many = {f"k{i}": "v" for i in range(40)}
    await store.checkpoints.save("big", {}, metadata=many)
    assert len((await store.checkpoints.handoff("big")).splitlines()) == 15


async def test_the_log_follows_the_tasks_expiry(backend: Backend, namespace: str) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace, task_ttl=60)
    raw = backend.raw()
    since = time.monotonic()
    await store.checkpoints.save("a", {"x": 1}, ttl=30)
    await store.checkpoints.log("a", {"x": 2})
    for key in store.keys.task_keys("a"):
        ttl_left(raw, key, 30_000, since)
    await store.checkpoints.save("b", {"x": 1}, ttl=None)
    await store.checkpoints.log("b", {"x": 2})
    assert [raw.pttl(k) for k in store.keys.task_keys("b")] == [-1, -1, -1]
    since = time.monotonic()
    await store.checkpoints.log("c", {"x": 1})  # no checkpoint yet: the store's task TTL
    ttl_left(raw, store.keys.task_log("c"), 60_000, since)
    since = time.monotonic()
    await store.checkpoints.log("a", {"x": 3}, ttl=90)  # explicit: every key of the task
    for key in store.keys.task_keys("a"):
        ttl_left(raw, key, 90_000, since)
    await store.aclose()


async def test_a_damaged_id_entry_does_not_block_the_task(
    store: AsyncStore, backend: Backend
) -> None:
    await store.checkpoints.save("t", {"i": 0})
    first = await store.checkpoints.save("t", {"i": 1})
    backend.raw().lset(store.keys.task_ids("t"), 0, b"garbage")
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.state == {"i": 0} and not restored.complete
    assert restored.skipped == ("?",)
    after = await store.checkpoints.save("t", {"i": 2})
    assert after.seq == first.seq  # the damaged newest entry is skipped, the rest go on
    latest = await store.checkpoints.latest("t")
    assert latest is not None and latest.state == {"i": 2}


async def test_a_resent_delta_after_another_is_applied_once(store: AsyncStore) -> None:
    await store.checkpoints.save("t", {"x": 0})
    await store.checkpoints.log("t", {"x": 1}, delta_id="d1")
    await store.checkpoints.log("t", {"x": 2}, delta_id="d2")
    await store.checkpoints.log("t", {"x": 1}, delta_id="d1")  # late resend
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.state == {"x": 2}
    assert restored.deltas_applied == 2 and restored.complete


async def test_the_compression_threshold_edge(store: AsyncStore, backend: Backend) -> None:
    await store.checkpoints.save("at", "a" * 16_382)  # JSON: exactly 16 KiB
    await store.checkpoints.save("over", "a" * 16_383)
    raw = backend.raw()
    assert raw.lindex(store.keys.task("at"), 0)[68:70] == b"-\n"
    assert raw.lindex(store.keys.task("over"), 0)[68:70] == _compressed(backend)
    for task in ("at", "over"):
        latest = await store.checkpoints.latest(task)
        assert latest is not None and len(latest.state) > 16_000


async def test_metadata_counts_toward_the_size_limit(backend: Backend, namespace: str) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace, checkpoint_max_bytes=1000)
    await store.checkpoints.save("t", {"a": 1}, metadata={"note": "n" * 500})
    with pytest.raises(StateTooLarge):
        await store.checkpoints.save("t", {"a": "s" * 500}, metadata={"note": "n" * 500})
    await store.aclose()


async def test_deltas_must_be_patches_and_fences_numbers(store: AsyncStore) -> None:
    for bad in (None, [1, 2], "replace everything", 3):
        with pytest.raises(TypeError, match="dict"):
            await store.checkpoints.log("t", bad)

    for fence in (-1, "7", 7.0, True):
        with pytest.raises(ValueError, match="fence"):
            store.checkpoints.spec.save_args("cp", b"blob", None, 0, fence, "", 0)
    assert await store.checkpoints.restore("t") is None


async def test_folding_deltas_leaves_the_checkpoint_as_saved_without_a_copy(
    store: AsyncStore,
) -> None:
    await store.checkpoints.save("t", {"a": {"b": 1}, "big": {"rows": [1, 2, 3]}})
    await store.checkpoints.log("t", {"a": {"b": 2, "c": 3}})
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.checkpoint is not None
    assert restored.state == {"a": {"b": 2, "c": 3}, "big": {"rows": [1, 2, 3]}}
    assert restored.checkpoint.state == {"a": {"b": 1}, "big": {"rows": [1, 2, 3]}}
    # What no delta changed is shared, not copied (a large restore paid 40% for it).
    assert restored.state["big"] is restored.checkpoint.state["big"]


async def test_padding_after_compressed_state_is_damage(
    store: AsyncStore, backend: Backend
) -> None:
    await store.checkpoints.save("t", {"text": "z" * 30_000})
    key = store.keys.task("t")
    raw = backend.raw()
    raw.lset(key, 0, raw.lindex(key, 0) + b"junk")
    with pytest.raises(IntegrityError, match="padded"):
        await store.checkpoints.latest("t")


async def test_a_resent_save_changes_nothing(store: AsyncStore, backend: Backend) -> None:
    await store.checkpoints.save("t", {"a": 1}, checkpoint_id="cp-1", ttl=60)
    await store.checkpoints.log("t", {"b": 2})
    raw = backend.raw()
    before = [raw.lrange(k, 0, -1) for k in store.keys.task_keys("t")]
    again = await store.checkpoints.save("t", {"a": 1}, checkpoint_id="cp-1", ttl=600)
    assert again.seq == 1
    assert [raw.lrange(k, 0, -1) for k in store.keys.task_keys("t")] == before
    assert raw.pttl(store.keys.task("t")) <= 60_000  # the resend did not touch the TTL


async def test_latest_many_reads_each_task_in_the_order_asked(store: AsyncStore) -> None:
    await store.checkpoints.save("t1", {"n": 1})
    second = await store.checkpoints.save("t1", {"n": 2})
    other = await store.checkpoints.save("t{2}", {"m": 1})
    await store.checkpoints.log("only-log", {"x": 1})
    found = await store.checkpoints.latest_many(["t{2}", "none", "t1", "only-log"])
    assert found == {"t{2}": other, "none": None, "t1": second, "only-log": None}
    assert list(found) == ["t{2}", "none", "t1", "only-log"]
    assert await store.checkpoints.latest_many([]) == {}
    with pytest.raises(InvalidId):
        await store.checkpoints.latest_many(["t1", "x" * 600])
    with pytest.raises(TypeError, match="not one str"):
        await store.checkpoints.latest_many("t1")


async def test_latest_many_is_one_round_trip_on_a_server(
    server_store: AsyncStore, server_backend: Backend
) -> None:
    tasks = [f"t{n}" for n in range(10)]
    for task in tasks:
        await server_store.checkpoints.save(task, {"task": task})
    await server_store.checkpoints.latest_many(tasks)  # warm
    raw = server_backend.raw()
    before = server_reads(raw)
    found = await server_store.checkpoints.latest_many(tasks)
    after = server_reads(raw)
    assert [c.state["task"] for c in found.values() if c is not None] == tasks
    assert after - before - 1 == 1  # the second INFO is a read too
