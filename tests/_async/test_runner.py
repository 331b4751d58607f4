"""The task runner: every backend, both I/O flavours (has a generated sync twin)."""

from __future__ import annotations

import pytest

from redistate import AsyncStore, LockLost, LockTimeout
from tests.conftest import Backend
from tests.roundtrips import server_reads

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


async def test_a_first_run_starts_empty_and_a_second_resumes(store: AsyncStore) -> None:
    async with store.task("t1") as run:
        assert (run.state, run.resumed, run.checkpoint) == ({}, False, None)
        first_fence = run.fence
        await run.save({"done": ["search"]}, phase="search", progress=0.5)
        await run.log({"notes": "found 3 papers"})
        assert run.state == {"done": ["search"], "notes": "found 3 papers"}
    async with store.task("t1") as again:
        assert again.resumed is True
        assert again.state == {"done": ["search"], "notes": "found 3 papers"}
        assert again.checkpoint is not None and again.checkpoint.phase == "search"
        assert again.fence is not None and first_fence is not None
        assert again.fence > first_fence


async def test_a_task_with_only_step_records_resumes(store: AsyncStore) -> None:
    """No checkpoint, but a recorded tool call: the next owner is resuming, and keeps
    the fence of its run readable after the block."""
    async with store.task("t1") as run:
        assert run.resumed is False
        assert await run.step("search", lambda: ["a", "b"]) == ["a", "b"]
        fence = run.fence
    assert run.fence == fence and fence is not None and not run.lease.held
    assert await store.checkpoints.latest("t1") is None
    async with store.task("t1") as again:
        assert again.resumed is True and again.checkpoint is None and again.state == {}
        assert await again.step("search", lambda: pytest.fail("called again")) == ["a", "b"]


async def test_a_task_has_one_owner_at_a_time(store: AsyncStore) -> None:
    async with store.task("t1"):
        with pytest.raises(LockTimeout):
            async with store.task("t1", wait=0):
                pass  # never reached


async def test_a_failure_is_checkpointed_and_reraised(store: AsyncStore, backend: Backend) -> None:
    with pytest.raises(ZeroDivisionError):
        async with store.task("t1") as run:
            await run.save({"step": 2}, phase="impl")
            await run.log({"step": 3})
            _ = 1 / 0
    latest = await store.checkpoints.latest("t1")
    assert latest is not None and latest.phase == "failed"
    assert latest.state == {"step": 3}
    assert "ZeroDivisionError" in latest.metadata["error"]
    assert backend.raw().exists(store.keys.lock("t1")) == 0  # released


async def test_a_run_that_lost_its_lease_cannot_write(store: AsyncStore, backend: Backend) -> None:
    with pytest.raises(LockLost):
        async with store.task("t1", ttl=30) as run:
            await run.save({"mine": True})
            backend.raw().delete(run.lease.key)  # it expired while the run was paused
            async with store.task("t1") as successor:
                await successor.save({"successor": True})
            await run.save({"mine": "late"})
    latest = await store.checkpoints.latest("t1")
    assert latest is not None and latest.state == {"successor": True}


async def test_a_failure_after_losing_the_lease_does_not_overwrite_the_successor(
    store: AsyncStore, backend: Backend
) -> None:
    with pytest.raises(ValueError, match="boom"):
        async with store.task("t1", ttl=30) as run:
            await run.save({"mine": True})
            backend.raw().delete(run.lease.key)
            async with store.task("t1") as successor:
                await successor.save({"successor": True})
            raise ValueError("boom")  # the failed-checkpoint save is refused, quietly
    latest = await store.checkpoints.latest("t1")
    assert latest is not None and latest.state == {"successor": True}


async def test_entering_a_task_is_one_round_trip(
    server_store: AsyncStore, server_backend: Backend
) -> None:
    """The lease's acquire and every read of the restore go in one request when the
    lease is free: state, checkpoint and step records as a separate read gives them."""
    store = server_store
    async with store.task("warm"):  # first contact made, the scripts loaded
        pass
    async with store.task("t1") as run:
        await run.save({"n": 1}, phase="one")
        await run.log({"m": 2})
        assert await run.step("tool", lambda: [3]) == [3]
    raw = server_backend.raw()
    try:
        before = server_reads(raw)
        async with store.task("t1") as again:
            reads = server_reads(raw) - before - 1  # minus the second INFO
            assert again.resumed is True
            assert again.state == {"n": 1, "m": 2}
            assert again.checkpoint is not None and again.checkpoint.phase == "one"
            assert await again.step("tool", lambda: pytest.fail("called again")) == [3]
            assert again.fence is not None and run.fence is not None
            assert again.fence > run.fence
    finally:
        raw.close()
    assert reads == 1


async def test_a_task_entered_after_waiting_restores_what_the_holder_left(
    store: AsyncStore,
) -> None:
    """The first try finds the lease held, so its reads are not used: what the holder
    saved before its lease ran out is read once the lease is taken."""
    holder = store.lock("t1", ttl=0.3, renew=False)
    await holder.acquire()
    await store.checkpoints.save("t1", {"by": "holder"}, lease=holder)
    async with store.task("t1", wait=30) as run:
        assert run.state == {"by": "holder"} and run.resumed is True
        assert run.fence is not None and holder.fence is not None
        assert run.fence > holder.fence
        await run.save({"by": "run"})
    with pytest.raises(LockLost):
        await store.checkpoints.save("t1", {"by": "late"}, lease=holder)
    restored = await store.checkpoints.restore("t1")
    assert restored is not None and restored.state == {"by": "run"}


async def test_a_task_entered_past_a_damaged_checkpoint_falls_back(
    store: AsyncStore, backend: Backend
) -> None:
    good = await store.checkpoints.save("t1", {"step": 1})
    bad = await store.checkpoints.save("t1", {"step": 2})
    raw = backend.raw()
    key = store.keys.task("t1")
    raw.lset(key, 0, raw.lindex(key, 0)[:-2] + b"9}")  # the digest no longer matches
    async with store.task("t1") as run:
        assert run.state == {"step": 1} and run.checkpoint == good
        assert run.skipped == (bad.id,) and run.resumed is True


async def test_turns_save_every_n_turns_and_the_newest_state_is_run_state(
    store: AsyncStore,
) -> None:
    async with store.task("t1", save_every=3) as run:
        saved = [await run.turn({"turn": n}) for n in range(1, 8)]
        assert run.state == {"turn": 7}
    assert saved == [False, False, True, False, False, True, False]
    # The last save was turn 6; the exit saved nothing more (no failure, no stop).
    latest = await store.checkpoints.latest("t1")
    assert latest is not None and latest.state == {"turn": 6}


async def test_turns_save_once_the_time_has_passed(store: AsyncStore) -> None:
    async with store.task("t1", save_every_seconds=1e-6) as run:
        assert await run.turn({"turn": 1}, phase="thinking") is True
    latest = await store.checkpoints.latest("t1")
    assert latest is not None and latest.state == {"turn": 1} and latest.phase == "thinking"
    async with store.task("t2", save_every_seconds=3600) as run:
        assert [await run.turn({"turn": n}) for n in range(5)] == [False] * 5
    assert await store.checkpoints.latest("t2") is None


@pytest.mark.parametrize(
    ("option", "value"),
    [("save_every", 0), ("save_every", 1.5), ("save_every", True), ("save_every_seconds", 0)],
)
async def test_bad_save_every_values_are_refused_naming_them(
    store: AsyncStore, option: str, value: object
) -> None:
    with pytest.raises(ValueError, match=rf"{option} must be .*got {value!r}"):
        store.task("t1", **{option: value})  # type: ignore[arg-type]
    assert await store.checkpoints.latest("t1") is None
