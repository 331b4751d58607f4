"""Fenced leases and guarded writes: every backend, both I/O flavours (generated sync twin)."""

from __future__ import annotations

import time
from itertools import pairwise
from typing import Any

import pytest

from redistate import AsyncStore, LockLost, LockTimeout, RedistateError
from redistate.core._io import async_join, async_spawn, async_wait
from redistate.core.scripts import script
from tests._async.test_records import ttl_left_after
from tests.conftest import Backend, ttl_left

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


async def test_acquire_and_release(store: AsyncStore, backend: Backend) -> None:
    raw = backend.raw()
    since = time.monotonic()
    async with store.lock("t1", ttl=30) as lease:
        first = lease.fence
        assert first is not None and first > 0
        assert raw.get(lease.key) == f"{lease.token},{first}".encode()
        ttl_left(raw, lease.key, 30_000, since)
        assert len(lease.token) == 32
    assert raw.exists(store.keys.lock("t1")) == 0
    async with store.lock("t1") as again:
        assert again.fence is not None and again.fence > first


async def test_a_released_lease_keeps_its_fence_and_says_it_is_not_held(
    store: AsyncStore, backend: Backend
) -> None:
    lease = store.lock("t1", ttl=30)
    assert (lease.fence, lease.held, lease.value) == (None, False, None)
    async with lease:
        held = lease.fence
        assert held is not None and lease.held and lease.value is not None
    assert lease.fence == held  # what it held, for a log line after the block
    after: tuple[Any, ...] = (lease.held, lease.value, lease.remaining)
    assert after == (False, None, 0.0)
    with pytest.raises(LockLost, match="not held"):
        await store.sessions.put("t1", {}, lease=lease)  # a released lease guards nothing
    with pytest.raises(LockLost, match="not held"):
        await lease.release()
    assert backend.raw().exists(lease.key) == 0
    async with lease:  # taken again: a new, larger fence
        assert lease.held and lease.fence is not None and lease.fence > held
    lost = await store.lock("t2", ttl=30, renew=False).acquire()
    backend.raw().delete(lost.key)
    with pytest.raises(LockLost):
        await store.sessions.put("t2", {}, lease=lost)
    assert not lost.held and lost.fence is not None


async def test_a_held_lease_times_out_other_acquirers(store: AsyncStore) -> None:
    async with store.lock("t", ttl=30):
        with pytest.raises(LockTimeout, match="'t'"):
            await store.lock("t", wait=0).acquire()
        with pytest.raises(LockTimeout):
            await store.lock("t", wait=0.05).acquire()


async def test_fences_grow_across_expiry_and_deletion(store: AsyncStore, backend: Backend) -> None:
    fences: list[int] = []
    for i in range(1000):
        # No release: each lease expires (1 ms), and the next acquirer waits it out,
        # blocked on the wake-up list for the holder's remaining TTL, not polling.
        lease = await store.lock("t", ttl=0.001, renew=False).acquire()
        assert lease.fence is not None
        fences.append(lease.fence)
        if i % 100 == 0:
            backend.raw().delete(store.keys.lock("t"))  # deleting the lock key resets nothing
    assert all(a < b for a, b in pairwise(fences)), fences


async def test_releasing_a_lost_lease_leaves_the_new_holder_alone(
    store: AsyncStore, backend: Backend
) -> None:
    first = await store.lock("t", ttl=30, renew=False).acquire()
    backend.raw().delete(first.key)  # as if it had expired
    second = await store.lock("t", ttl=30, renew=False).acquire()
    with pytest.raises(LockLost):
        await first.release()
    assert backend.raw().get(second.key) == second.value.encode()  # type: ignore[union-attr]
    with pytest.raises(LockLost):
        await first.extend()
    await second.release()


async def test_extend_never_brings_back_an_expired_lease(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    lease = await store.lock("t", ttl=30, renew=False).acquire()
    await ttl_left_after(raw, lease.key, lambda: lease.extend(60), 60_000)
    raw.delete(lease.key)
    raw.close()
    with pytest.raises(LockLost):
        await lease.extend()
    assert backend.raw().exists(lease.key) == 0
    assert lease.lost.is_set()


async def test_a_resent_acquire_reports_the_lease_held(store: AsyncStore) -> None:
    lease = store.lock("t", ttl=30, renew=False)
    keys = (store.keys.lock("t"), store.keys.fence("t"), store.keys.lock_wake("t"))
    first = await store.sessions._conn.script(script("lock_acquire"), keys, (lease.token, 30000))
    again = await store.sessions._conn.script(script("lock_acquire"), keys, (lease.token, 30000))
    assert int(first[0]) == int(again[0]) == 1 and int(again[1]) == int(first[1])
    other = await store.sessions._conn.script(script("lock_acquire"), keys, ("0" * 32, 30000))
    assert int(other[0]) == 0 and int(other[1]) > 0


async def test_an_acquire_that_reads_returns_the_reads_only_to_the_holder(
    store: AsyncStore, backend: Backend
) -> None:
    """lock_acquire_reading (a task run's entry): the reads come with the lease, again
    with a resend of it, never to a caller the lease refused; a malformed read is
    refused before the lock is taken."""
    raw = backend.raw()
    lease = store.lock("t", ttl=30, renew=False)
    keys = (store.keys.lock("t"), store.keys.fence("t"), store.keys.lock_wake("t"))
    listed, hashed = store.keys.task_log("t"), store.keys.task_steps("t")
    raw.rpush(listed, b"a", b"b", b"c")
    raw.hset(hashed, b"f", b"v")
    run = store.sessions._conn.script
    reading = script("lock_acquire_reading")
    with pytest.raises(RedistateError, match="RSARG"):
        await run(reading, (*keys, listed), (lease.token, 30000, "0:x"))
    assert raw.get(keys[0]) is None
    args = (lease.token, 30000, "1:-1", "h", "0:0")
    first = await run(reading, (*keys, listed, hashed, listed), args)
    assert int(first[0]) == 1 and first[3] == [[b"b", b"c"], [b"f", b"v"], [b"a"]]
    again = await run(reading, (*keys, listed, hashed, listed), args)
    assert int(again[1]) == int(first[1]) and again[3] == first[3]
    other = await run(reading, (*keys, listed), ("0" * 32, 30000, "0:-1"))
    assert int(other[0]) == 0 and len(other) == 2


async def test_the_wake_list_holds_one_token_however_often_the_lease_is_taken(
    store: AsyncStore, backend: Backend
) -> None:
    """A release pushes one token onto an empty list (the acquire cleared it), so a
    waiter arriving later is woken once, not once per release in the last minute."""
    raw = backend.raw()
    wake = store.keys.lock_wake("t")
    for _ in range(5):
        async with store.lock("t", ttl=30, renew=False):
            assert raw.llen(wake) == 0
            since = time.monotonic()  # the release sets the list's TTL
        assert raw.lrange(wake, 0, -1) == [b"1"]
        ttl_left(raw, wake, 60_000, since)


async def test_a_waiter_is_woken_by_the_release(store: AsyncStore) -> None:
    holder = await store.lock("t", ttl=30, renew=False).acquire()
    held = holder.fence
    got: dict[str, Any] = {}

    async def wait_for_it() -> None:
        lease = await store.lock("t", ttl=30, wait=20, renew=False).acquire()
        got["fence"] = lease.fence
        await lease.release()

    waiter = async_spawn(wait_for_it, "waiter")
    await holder.release()
    await async_join(waiter)
    # Woken by the release (its 20 s budget and the 30 s TTL are far off; a timeout
    # would raise LockTimeout), with a later fence.
    assert held is not None and got["fence"] > held


async def test_renewal_keeps_a_lease_through_a_long_section(
    store: AsyncStore, backend: Backend
) -> None:
    async with store.lock("t", ttl=0.3) as lease:
        # Hold it for 3x its TTL: renewal at ttl/3 must keep it.
        assert not await async_wait(lease.lost, 0.9)
        # Read through the store's own client: a new blocking client (on a cluster it
        # learns the topology and the command table first) would stall the event loop,
        # and the renewal task with it, for longer than the lease's 0.2 s of slack.
        held = await store.sessions._conn.get(lease.key)
        assert held == lease.value.encode()  # type: ignore[union-attr]
    assert not lease.lost.is_set()


async def test_renewal_notices_a_lost_lease(store: AsyncStore, backend: Backend) -> None:
    seen: list[int | None] = []
    lease = await store.lock("t", ttl=0.3, on_lost=lambda le: seen.append(le.fence)).acquire()
    backend.raw().delete(lease.key)
    assert await async_wait(lease.lost, 5)
    assert seen == [lease.fence]
    with pytest.raises(LockLost):
        await store.sessions.put("t", {"late": True}, lease=lease)
    with pytest.raises(LockLost):
        await lease.release()


async def test_a_refused_guarded_write_marks_the_lease_lost_at_once(
    store: AsyncStore, backend: Backend
) -> None:
    seen: list[str] = []
    lease = store.lock("t", ttl=30, renew=False, on_lost=lambda _: seen.append("on_lost"))
    await lease.acquire()
    backend.raw().delete(lease.key)  # evicted, or expired unnoticed
    taken = await store.lock("t", ttl=30, renew=False).acquire()
    try:
        await store.checkpoints.save("t", {"n": 1}, lease=lease)
    except LockLost:
        seen.append("LockLost")
    # on_lost ran before the caller heard of the refusal, and the lease stays lost.
    assert seen == ["on_lost", "LockLost"] and lease.lost.is_set() and lease.remaining == 0
    with pytest.raises(LockLost, match="was lost"):
        await store.sessions.put("t", {"n": 2}, lease=lease)
    assert seen == ["on_lost", "LockLost"]  # once
    await taken.release()


async def test_after_a_refused_save_the_next_step_calls_nothing(
    store: AsyncStore, backend: Backend
) -> None:
    calls: list[str] = []
    async with store.task("t", ttl=30) as run:  # LockLost caught inside: not raised again
        backend.raw().delete(run.lease.key)
        other = await store.lock("t", ttl=30, renew=False).acquire()
        with pytest.raises(LockLost):
            await run.save({"n": 1})
        with pytest.raises(LockLost, match="'pay' was not run"):
            await run.step("pay", lambda: calls.append("pay"))
        await other.release()
    assert calls == []


async def test_past_its_deadline_a_lease_sends_nothing(store: AsyncStore, backend: Backend) -> None:
    seen: list[int | None] = []
    lease = store.lock("t", ttl=30, renew=False, on_lost=lambda le: seen.append(le.fence))
    await lease.acquire()
    assert 29 < lease.remaining <= 30
    lease._valid_until = time.monotonic()  # as if paused for its whole TTL since acquire
    with pytest.raises(LockLost, match="past its deadline"):
        await store.sessions.put("t", {"late": True}, lease=lease)
    # The server would still have taken it: the lock key holds the lease's value.
    assert backend.raw().get(lease.key) == lease.value.encode()  # type: ignore[union-attr]
    assert await store.sessions.get("t") is None
    assert lease.lost.is_set() and seen == [lease.fence] and lease.remaining == 0
    with pytest.raises(LockLost):
        await lease.extend()  # never brought back
    await lease.release()  # gives the lock back all the same: it was still held


async def test_a_step_past_the_deadline_calls_nothing(store: AsyncStore) -> None:
    calls: list[str] = []
    async with store.task("t", ttl=30) as run:
        assert await run.step("one", lambda: len(calls.__iadd__(["one"]))) == 1
        run.lease._valid_until = time.monotonic()  # a blocked loop or a SIGSTOP
        with pytest.raises(LockLost, match="past its deadline"):
            await run.step("two", lambda: calls.append("two"))
    assert calls == ["one"]


# -- guarded writes ------------------------------------------------------------------


async def test_guarded_writes_go_through_while_held(store: AsyncStore) -> None:
    async with store.lock("t", ttl=30) as lease:
        await store.sessions.put("t", {"n": 1}, lease=lease)
        await store.sessions.merge("t", {"m": 2}, lease=lease)
        await store.sessions.update("t", lambda d: {**d, "n": 3}, lease=lease)
        assert await store.sessions.touch("t", ttl=60, lease=lease)
        got = await store.sessions.get("t", touch=True, lease=lease)
        assert got is not None and got.data == {"n": 3, "m": 2}
        saved = await store.checkpoints.save("t", {"step": 1}, lease=lease)
        assert saved.fence == lease.fence
        await store.checkpoints.log("t", {"step": 2}, lease=lease)
        assert await store.sessions.delete("t", lease=lease) is True
        assert await store.sessions.delete("t", lease=lease) is False
        assert await store.checkpoints.delete("t", lease=lease) is True


async def test_a_stale_lease_writes_nothing(store: AsyncStore, backend: Backend) -> None:
    old = await store.lock("t", ttl=30, renew=False).acquire()
    backend.raw().delete(old.key)  # it expired while its holder was paused
    new = await store.lock("t", ttl=30, renew=False).acquire()
    await store.users.put("t", {"owner": "new"}, lease=new)
    await store.checkpoints.save("t", {"owner": "new"}, lease=new)
    attempts: list[Any] = [
        lambda: store.users.put("t", {"owner": "old"}, lease=old),
        lambda: store.users.merge("t", {"owner": "old"}, lease=old),
        lambda: store.users.delete("t", lease=old),
        lambda: store.users.touch("t", ttl=5, lease=old),
        lambda: store.checkpoints.save("t", {"owner": "old"}, lease=old),
        lambda: store.checkpoints.log("t", {"owner": "old"}, lease=old),
        lambda: store.checkpoints.delete("t", lease=old),
    ]
    for attempt in attempts:
        with pytest.raises(LockLost):
            await attempt()
    user = await store.users.get("t")
    assert user is not None and user.data == {"owner": "new"}
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.state == {"owner": "new"}
    assert restored.deltas_applied == 0


async def test_a_lease_guards_only_its_own_name(store: AsyncStore) -> None:
    async with store.lock("t", ttl=30) as lease:
        with pytest.raises(ValueError, match="'t'"):
            await store.users.put("other", {}, lease=lease)
        with pytest.raises(ValueError, match="'t'"):
            await store.checkpoints.save("other", {}, lease=lease)
    assert await store.users.get("other") is None


@pytest.mark.parametrize("kwargs", [{"ttl": 0}, {"ttl": None}, {"wait": -1}, {"wait": "5"}])
async def test_bad_lease_arguments(store: AsyncStore, kwargs: dict[str, Any]) -> None:
    with pytest.raises((ValueError, TypeError)):
        store.lock("t", **kwargs)


async def test_a_lease_object_can_be_taken_again(store: AsyncStore, backend: Backend) -> None:
    # A TTL with slack for a loaded machine: the test watches for a renewal on the
    # server rather than outliving a short TTL by the clock.
    lease = store.lock("t", ttl=3)
    async with lease:
        first_token = lease.token
    async with lease:
        assert lease.token != first_token and not lease.lost.is_set()
        conn = store.sessions._conn
        last = await conn.pttl(lease.key)
        for _ in range(600):  # the second hold renews again: the key's TTL goes back up
            await async_wait(lease.lost, 0.05)
            now = await conn.pttl(lease.key)
            if now > last:
                break
            last = now
        else:
            pytest.fail("the lease taken again was never renewed")
        assert not lease.lost.is_set()
        await store.users.put("t", {"ok": True}, lease=lease)


async def test_a_lease_from_another_namespace_is_refused(
    store: AsyncStore, backend: Backend, namespace: str
) -> None:
    other = AsyncStore(backend.async_client(), namespace=namespace + "x")
    async with other.lock("t", ttl=30) as foreign:
        with pytest.raises(ValueError, match="namespace"):
            await store.users.put("t", {}, lease=foreign)
    await other.aclose()


async def test_a_failing_on_lost_callback_does_not_break_release(
    store: AsyncStore, backend: Backend
) -> None:
    def broken(lease: Any) -> None:
        raise RuntimeError("callback bug")

    lease = await store.lock("t", ttl=0.3, on_lost=broken).acquire()
    # Warnings caught from before the delete: a sync store's renewer is a thread, and
    # it may find the lease lost (and warn) before the next line here runs.
    with pytest.warns(UserWarning, match="callback bug"):
        backend.raw().delete(lease.key)
        assert await async_wait(lease.lost, 5)
        with pytest.raises(LockLost):
            await lease.release()


# -- what a LockLost says, and that it is said once -----------------------------------


async def test_lock_lost_says_what_happened_and_what_to_do(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    lease = await store.lock("t", ttl=30, renew=False).acquire()
    raw.delete(lease.key)  # as if it had expired
    taker = await store.lock("t", ttl=30, renew=False).acquire()
    with pytest.raises(LockLost) as caught:
        await store.sessions.put("t", {"n": 1}, lease=lease)
    message = str(caught.value)
    assert f"lease 't' (fence {lease.fence}) was taken over by fence {taker.fence}" in message
    assert "nothing was written" in message and "take the lease again" in message
    assert "RSLOCKLOST" not in message and lease.token not in message
    assert taker.token not in message
    with pytest.raises(LockLost, match=f"was lost: it was taken over by fence {taker.fence}"):
        await store.sessions.put("t", {"n": 2}, lease=lease)  # the same story later
    await taker.release()

    gone = await store.lock("g", ttl=30, renew=False).acquire()
    raw.delete(gone.key)  # expired, nobody took it
    with pytest.raises(LockLost, match=r"\(fence \d+\) expired before it was renewed"):
        await store.checkpoints.save("g", {}, lease=gone)
    renewed = await store.lock("r", ttl=30, renew=False).acquire()
    raw.delete(renewed.key)
    other = await store.lock("r", ttl=30, renew=False).acquire()
    with pytest.raises(LockLost, match=f"is no longer held: was taken over by fence {other.fence}"):
        await renewed.extend()
    await other.release()
    async with store.lock("x") as done:
        pass
    with pytest.raises(LockLost, match=r"'x' is not held \(released\)"):
        await store.sessions.put("x", {}, lease=done)
    assert await store.sessions.get("t") is None and await store.sessions.get("x") is None


async def test_a_renewal_that_finds_the_lease_taken_names_the_new_holder(
    store: AsyncStore, backend: Backend
) -> None:
    # Renewed every second: a loop held up by the sync client below (a cluster's is slow
    # to make on a loaded machine) must not pass the lease's deadline first.
    lease = await store.lock("t", ttl=3).acquire()
    backend.raw().delete(lease.key)
    taker = await store.lock("t", ttl=30, renew=False).acquire()
    assert await async_wait(lease.lost, 30)  # the renewal was refused
    with pytest.raises(LockLost, match=f"was lost: it was taken over by fence {taker.fence}"):
        await store.sessions.put("t", {}, lease=lease)
    with pytest.raises(LockLost, match="could not be released: it was taken over by fence"):
        await lease.release()
    await taker.release()


async def test_a_lease_released_inside_its_block_leaves_it_quietly(store: AsyncStore) -> None:
    """Giving the lease back early (to let the next owner in) is no loss: leaving the
    block raises nothing, and the lock is free for the next owner."""
    async with store.lock("early", ttl=30) as lease:
        await lease.release()
        assert not lease.held and lease.fence is not None
    async with store.lock("early", ttl=30, wait=0) as again:
        assert again.fence is not None and again.fence > lease.fence


async def test_a_lock_lost_is_raised_once(store: AsyncStore, backend: Backend) -> None:
    raw = backend.raw()
    # Caught inside the block: leaving it raises nothing more.
    async with store.lock("a", ttl=30, renew=False) as lease:
        raw.delete(lease.key)
        with pytest.raises(LockLost):
            await store.sessions.put("a", {}, lease=lease)
    # Not caught: the write's own LockLost leaves the block, not a second one.
    with pytest.raises(LockLost) as caught:
        async with store.lock("b", ttl=30, renew=False) as lease:
            raw.delete(lease.key)
            await store.sessions.put("b", {}, lease=lease)
    assert "nothing was written" in str(caught.value)  # the write's, not the exit's
    assert not isinstance(caught.value.__cause__, LockLost)
    # Lost without the block hearing of it: leaving the block says so, once.
    with pytest.raises(LockLost, match="could not be released: it expired") as caught:
        async with store.lock("c", ttl=30, renew=False) as lease:
            raw.delete(lease.key)
    assert caught.value.__context__ is None  # raised once, not while handling another
    # The same for a task run.
    async with store.task("d", ttl=30) as run:
        raw.delete(run.lease.key)
        with pytest.raises(LockLost):
            await run.save({"n": 1})
    with pytest.raises(LockLost, match="could not be released"):
        async with store.task("e", ttl=30) as run:
            raw.delete(run.lease.key)
