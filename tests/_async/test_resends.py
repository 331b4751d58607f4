"""A write whose reply is lost is sent again, and is applied once, with its own result.

``LostReplies`` lets the next matching command run on the server and then raises a
ConnectionError in its place, as if the reply had been lost in the network; what
other clients do in that gap is ``between``. The store's retry layer then resends
the very same call. Every backend; the TCP-level version of these is
tests/test_faults.py.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, ClassVar, Final

import pytest
import redis

from redistate import AsyncStore, LockLost, RetryPolicy, SigningKeys, StoreUnavailable
from redistate.core._io import async_sleep
from redistate.core.scripts import script
from tests.conftest import Backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

# A script call, by whichever command the connection runs scripts with: FCALL, or
# EVALSHA where functions are unavailable (a REST API).
SCRIPT: Final = ("FCALL", "EVALSHA")


class LostReplies:
    """The next ``times`` commands named ``name`` (or any of several names) run, then
    fail as a lost reply."""

    made: ClassVar[list[LostReplies]] = []  # checked after each test of this module

    def __init__(
        self, client: Any, name: str | tuple[str, ...], between: Callable[[], Any] | None = None
    ) -> None:
        self.names = {name.upper()} if isinstance(name, str) else {n.upper() for n in name}
        self.between = between
        self.left = 0
        self.lost = 0
        self._execute = client.execute_command
        client.execute_command = self._execute_command  # shadows the method
        LostReplies.made.append(self)

    def arm(self, times: int = 1) -> LostReplies:
        self.left = times
        return self

    async def _execute_command(self, *args: Any, **options: Any) -> Any:
        result = await self._execute(*args, **options)
        if self.left > 0 and str(args[0]).upper() in self.names:
            self.left -= 1
            self.lost += 1
            if self.between is not None:
                await self.between()
            raise redis.ConnectionError("reply lost on purpose by the test")
        return result


@pytest.fixture(autouse=True)
def every_armed_reply_is_lost() -> Iterator[None]:
    """A scenario whose reply was never lost would pass without testing a resend (a
    command named wrongly for the backend, say): each armed loss must have happened."""
    LostReplies.made.clear()
    yield
    for lost in LostReplies.made:
        assert lost.left == 0, f"{lost.left} armed loss(es) of {sorted(lost.names)} never happened"


@pytest.fixture
async def other(backend: Backend, namespace: str) -> AsyncIterator[AsyncStore]:
    """A second client of the same namespace: what other agents do meanwhile."""
    s = AsyncStore(backend.async_client(), namespace=namespace)
    yield s
    await s.aclose()


async def test_a_lost_put_reply_returns_the_written_record(store: AsyncStore) -> None:
    lost = LostReplies(store.client, SCRIPT).arm()
    rec = await store.sessions.put("s", {"n": 1})
    assert lost.lost == 1 and store._conn.recovered == 1
    got = await store.sessions.get("s")
    assert got is not None and got.version == rec.version and got.data == {"n": 1}


async def test_a_resend_after_an_overwrite_is_not_applied_again(
    store: AsyncStore, other: AsyncStore
) -> None:
    async def overwrite() -> None:
        await other.sessions.put("s", {"by": "other"})

    LostReplies(store.client, SCRIPT, overwrite).arm()
    rec = await store.sessions.put("s", {"by": "me"})
    got = await other.sessions.get("s")
    assert got is not None and got.data == {"by": "other"}  # the later write stands
    assert rec.version < got.version  # ours was applied first, with its own version


async def test_a_conditional_resend_is_not_a_false_conflict(
    store: AsyncStore, other: AsyncStore
) -> None:
    first = await store.sessions.put("s", {"n": 0})

    async def overwrite() -> None:
        await other.sessions.put("s", {"n": 100})

    LostReplies(store.client, SCRIPT, overwrite).arm()
    rec = await store.sessions.put("s", {"n": 1}, if_version=first.version)
    assert first.version < rec.version


async def test_a_lost_merge_reply_is_not_merged_twice(store: AsyncStore, other: AsyncStore) -> None:
    await store.users.put("u", {"items": []})

    async def append_elsewhere() -> None:
        await other.users.update("u", lambda d: {"items": [*d["items"], "other"]})

    LostReplies(store.client, SCRIPT, append_elsewhere).arm()
    await store.users.update("u", lambda d: {"items": [*d["items"], "mine"]})
    got = await store.users.get("u")
    assert got is not None and got.data == {"items": ["mine", "other"]}


async def test_a_merge_resent_after_another_merge_is_not_applied_again(
    store: AsyncStore, other: AsyncStore
) -> None:
    await store.users.put("u", {"x": 0})

    async def merge_elsewhere() -> None:
        await other.users.merge("u", {"x": 2})

    lost = LostReplies(store.client, SCRIPT, merge_elsewhere).arm()
    rec = await store.users.merge("u", {"x": 1, "mine": True})
    assert lost.lost == 1 and store._conn.recovered == 1
    got = await store.users.get("u")
    # Ours was applied first; re-applied, its x would overwrite the later merge's.
    assert got is not None and got.data == {"x": 2, "mine": True}
    assert rec.data == got.data and rec.version == got.version  # the record as it is now


async def test_a_merge_resent_after_its_record_was_deleted_reports_its_own_version(
    store: AsyncStore, other: AsyncStore
) -> None:
    await store.users.put("u", {"name": "ann", "plan": "free"})
    later: list[int] = []

    async def merge_then_delete() -> None:
        later.append((await other.users.merge("u", {"seen": 1})).version)
        assert await other.users.delete("u")

    LostReplies(store.client, SCRIPT, merge_then_delete).arm()
    rec = await store.users.merge("u", {"plan": "pro"})
    assert await store.users.get("u") is None  # not brought back
    # Its own version (the delete remembers the header's id without overwriting it),
    # and no invented data: the record is gone.
    assert rec.data is None and rec.version < later[0]


async def test_a_put_resent_after_its_record_was_re_encoded_is_not_applied_again(
    store: AsyncStore, other: AsyncStore
) -> None:
    """rotate-keys re-encodes a plain record in place (record_compact): the put's id
    leaves the header, and must still be known to a resend of that put."""
    spec = other.sessions.spec
    key = spec.key("s")

    async def re_encode() -> None:
        raw = await other._conn.get(key)
        assert raw is not None
        args = spec.compact_args(key, spec.compaction(key, raw), "reencode1", other._conn.memory_ms)
        assert args is not None
        compact_keys = spec.compact_keys(key)
        assert await other._conn.script(script("record_compact"), compact_keys, args.argv())
        await other.sessions.put("s", {"by": "later"})

    LostReplies(store.client, SCRIPT, re_encode).arm()
    rec = await store.sessions.put("s", {"by": "me"})
    got = await other.sessions.get("s")
    assert got is not None and got.data == {"by": "later"}  # the later write stands
    assert rec.version < got.version


async def test_a_resent_event_append_is_appended_once(store: AsyncStore, other: AsyncStore) -> None:
    await store.events.append("t", "first", 0)

    async def append_elsewhere() -> None:
        await other.events.append("t", "other", 2)

    LostReplies(store.client, SCRIPT, append_elsewhere).arm()
    mine = await store.events.append("t", "mine", 1)
    events = await store.events.read("t")
    assert [e.type for e in events] == ["first", "mine", "other"]  # not twice
    assert mine == events[1] and store._conn.recovered == 1
    assert (await store.events.verify("t")).ok


async def test_a_put_resent_after_a_merge_patched_its_record_is_not_applied_again(
    store: AsyncStore, other: AsyncStore
) -> None:
    async def merge_elsewhere() -> None:
        await other.users.merge("u", {"by": "merge"})  # turns the plain record into M1

    LostReplies(store.client, SCRIPT, merge_elsewhere).arm()
    rec = await store.users.put("u", {"by": "put", "n": 1})
    got = await store.users.get("u")
    assert got is not None and got.data == {"by": "merge", "n": 1}
    assert rec.version < got.version  # the put reports its own, earlier version


async def test_a_put_resent_after_a_delete_does_not_bring_it_back(
    store: AsyncStore, other: AsyncStore
) -> None:
    async def delete() -> None:
        assert await other.sessions.delete("s") is True

    LostReplies(store.client, SCRIPT, delete).arm()
    await store.sessions.put("s", {"n": 1})
    assert await other.sessions.get("s") is None


async def test_a_resent_delete_reports_what_it_deleted(
    store: AsyncStore, other: AsyncStore
) -> None:
    await store.sessions.put("s", {"n": 1})

    async def recreate() -> None:
        await other.sessions.put("s", {"n": "new"})

    LostReplies(store.client, SCRIPT, recreate).arm()
    assert await store.sessions.delete("s") is True
    got = await other.sessions.get("s")
    assert got is not None and got.data == {"n": "new"}  # the resend did not delete it


async def test_a_resent_conditional_delete_is_not_a_false_conflict(store: AsyncStore) -> None:
    rec = await store.sessions.put("s", {"n": 1})
    LostReplies(store.client, SCRIPT).arm()
    assert await store.sessions.delete("s", if_version=rec.version) is True


async def test_a_guarded_write_resent_after_the_lease_was_lost_reports_it_was_made(
    store: AsyncStore, other: AsyncStore
) -> None:
    lease = await store.lock("t", ttl=30, renew=False).acquire()

    async def take_over() -> None:
        await other.client.delete(store.keys.lock("t"))  # the lease expires
        await other.lock("t", ttl=30, renew=False).acquire()

    LostReplies(store.client, SCRIPT, take_over).arm()
    cp = await store.checkpoints.save("t", {"step": 1}, lease=lease)
    latest = await other.checkpoints.latest("t")
    assert latest is not None and latest.id == cp.id and latest.fence == lease.fence
    with pytest.raises(LockLost):  # a new write is refused, as it must be
        await store.checkpoints.save("t", {"step": 2}, lease=lease)


async def test_a_resent_delta_is_logged_once_even_after_a_save(
    store: AsyncStore, other: AsyncStore
) -> None:
    await store.checkpoints.save("t", {"n": 0})

    async def save_with_it() -> None:
        restored = await other.checkpoints.restore("t")
        assert restored is not None
        await other.checkpoints.save("t", restored.state)

    LostReplies(store.client, SCRIPT, save_with_it).arm()
    await store.checkpoints.log("t", {"n": 1, "once": True})
    restored = await other.checkpoints.restore("t")
    assert restored is not None and restored.state == {"n": 1, "once": True}
    assert restored.deltas_applied == 0  # folded into the save, not appended again


async def test_a_resent_checkpoint_save_is_saved_once(store: AsyncStore) -> None:
    LostReplies(store.client, SCRIPT).arm()
    cp = await store.checkpoints.save("t", {"n": 1})
    history = await store.checkpoints.history("t")
    assert [c.id for c in history] == [cp.id]


async def test_a_resent_task_delete_reports_it_deleted(store: AsyncStore) -> None:
    await store.checkpoints.save("t", {"n": 1})
    LostReplies(store.client, SCRIPT).arm()
    assert await store.checkpoints.delete("t") is True


async def test_a_resent_acquire_reports_the_lease_taken(
    store: AsyncStore, other: AsyncStore
) -> None:
    LostReplies(store.client, SCRIPT).arm()
    lease = await store.lock("t", ttl=30, renew=False).acquire()
    assert lease.fence is not None and lease.remaining > 0
    with pytest.raises(Exception, match="still held"):
        await other.lock("t", ttl=30, wait=0).acquire()
    await lease.release()


async def test_a_resent_release_is_not_reported_as_lost(
    store: AsyncStore, other: AsyncStore
) -> None:
    lease = await store.lock("t", ttl=30, renew=False).acquire()
    held = lease.fence
    LostReplies(store.client, SCRIPT).arm()
    await lease.release()  # no LockLost: the first send released it
    taken = await other.lock("t", ttl=30, wait=0).acquire()
    assert taken.fence is not None and held is not None and taken.fence > held
    await taken.release()


async def test_a_resent_delete_of_an_old_record_is_still_recognised(
    store: AsyncStore, other: AsyncStore, backend: Backend
) -> None:
    await store.sessions.put("s", {"n": 1})
    key = store.keys.record("session", "s")
    # Written long ago: its version (a time in µs) is far older than the memory.
    backend.raw().setrange(key, 3, b"1000000000000000")

    async def recreate_and_rewrite() -> None:
        for i in range(30):  # overwrites trim the memory (one in eight at random)
            await other.sessions.put("s", {"n": "new", "i": i})

    LostReplies(store.client, SCRIPT, recreate_and_rewrite).arm()
    assert await store.sessions.delete("s") is True
    got = await other.sessions.get("s")
    assert got is not None and got.data == {"n": "new", "i": 29}


async def test_a_put_resent_after_its_record_expired_is_not_applied_again(
    store: AsyncStore, backend: Backend
) -> None:
    key = store.keys.record("session", "s")

    async def expire() -> None:
        backend.raw().delete(key)  # as if its 2 s TTL ran out before the resend

    LostReplies(store.client, SCRIPT, expire).arm()
    rec = await store.sessions.put("s", {"n": 1}, if_version=0, ttl=2)
    assert rec.version > 0 and await store.sessions.get("s") is None


async def test_a_resent_release_after_a_quick_hand_off_is_not_lost(
    store: AsyncStore, other: AsyncStore
) -> None:
    lease = await store.lock("t", ttl=30, renew=False).acquire()

    async def hand_off() -> None:
        taken = await other.lock("t", ttl=30, wait=0).acquire()
        await taken.release()

    LostReplies(store.client, SCRIPT, hand_off).arm()
    await lease.release()
    assert not lease.lost.is_set()


async def test_a_save_resent_after_the_task_was_deleted_does_not_bring_it_back(
    store: AsyncStore, other: AsyncStore
) -> None:
    async def delete() -> None:
        assert await other.checkpoints.delete("t") is True

    LostReplies(store.client, SCRIPT, delete).arm()
    cp = await store.checkpoints.save("t", {"n": 1}, phase="p")
    assert cp.seq == 0 and cp.state == {"n": 1} and cp.phase == "p"  # saved, now gone
    assert await other.checkpoints.restore("t") is None


async def test_a_first_try_that_fails_after_the_deadline_is_not_resent(
    backend: Backend, namespace: str
) -> None:
    # The deadline counts from when the first try was sent: a reply lost later than
    # that (a socket without a timeout can wait that long) is not resent, because the
    # write memory may no longer cover it.
    policy = RetryPolicy(deadline=0.2)
    store = AsyncStore(backend.async_client(), namespace=namespace, retry=policy)

    async def wait_past_the_deadline() -> None:
        await async_sleep(0.3)

    LostReplies(store.client, SCRIPT, wait_past_the_deadline).arm()
    with pytest.raises(StoreUnavailable, match="after 1 tries"):
        await store.sessions.put("s", {"n": 1})
    assert store._conn.resends == 0
    await store.aclose()


async def test_reads_are_retried(store: AsyncStore) -> None:
    await store.sessions.put("s", {"n": 1})
    LostReplies(store.client, "GET").arm(2)
    got = await store.sessions.get("s")
    assert got is not None and got.data == {"n": 1} and store._conn.resends == 2


async def test_without_retries_a_lost_reply_is_an_error(backend: Backend, namespace: str) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace, retry=RetryPolicy(attempts=1))
    LostReplies(store.client, SCRIPT).arm()
    with pytest.raises(StoreUnavailable, match="reply lost") as info:
        await store.sessions.put("s", {"n": 1})
    assert isinstance(info.value.__cause__, redis.ConnectionError)
    assert store._conn.resends == 0
    await store.aclose()


async def test_retries_stop_at_the_attempt_bound(backend: Backend, namespace: str) -> None:
    policy = RetryPolicy(attempts=3, base=0.001, cap=0.001)
    store = AsyncStore(backend.async_client(), namespace=namespace, retry=policy)
    lost = LostReplies(store.client, "GET").arm(3)  # a 4th try, were there one, would succeed
    with pytest.raises(StoreUnavailable, match="after 3 tries") as info:
        await store.sessions.get("s")
    assert lost.lost == 3 and isinstance(info.value.__cause__, redis.ConnectionError)
    await store.aclose()


async def test_errors_that_are_not_transient_are_not_retried(store: AsyncStore) -> None:
    await store.client.set(store.keys.record("session", "s"), b"not a record")
    with pytest.raises(Exception, match="RSINTEGRITY"):
        await store.sessions.put("s", {"n": 1})
    assert store._conn.resends == 0


async def test_the_write_memory_expires_with_the_retry_window(
    store: AsyncStore, backend: Backend, namespace: str
) -> None:
    other = AsyncStore(backend.async_client(), namespace=namespace)
    try:
        await other.sessions.put("s", {"n": 1})
        await store.sessions.put("s", {"n": 2})  # another client's write: remembered
    finally:
        await other.aclose()
    memory = store.keys.writes(store.keys.record("session", "s"))
    raw = backend.raw()
    assert raw.zcard(memory) == 1
    assert 0 < raw.pttl(memory) <= store._conn.memory_ms


async def test_the_write_memory_holds_a_few_entries_per_writer_at_any_write_rate(
    store: AsyncStore, backend: Backend, namespace: str
) -> None:
    raw = backend.raw()

    def memory(kind: str, id: str) -> int:
        return int(raw.zcard(store.keys.writes(store.keys.record(kind, id))))

    # One writer: each put replaces the writer's own previous one, whose call has
    # returned (so it is never sent again): nothing is kept.
    for n in range(50):
        await store.sessions.put("one", {"n": n})
    assert memory("session", "one") == 0
    # Two writers taking turns: a write keeps the other writer's, and acknowledges the
    # writer's own previous call, so its entry goes: at most one entry per writer.
    other = AsyncStore(backend.async_client(), namespace=namespace)
    sizes, merged = [], []
    try:
        for n in range(200):
            await (store if n % 2 else other).sessions.put("two", {"n": n})
            sizes.append(memory("session", "two"))
            # A merge keeps its own id (its record does not name it) and drops the
            # writer's previous merge.
            await (store if n % 2 else other).users.merge("u", {f"k{n}": n})
            merged.append(memory("user", "u"))
    finally:
        await other.aclose()
    assert max(sizes) <= 2, max(sizes)
    assert max(merged) <= 2, max(merged)
    user = await store.users.get("u")
    assert user is not None and len(user.data) == 200  # nothing lost on the way


async def test_a_first_send_does_not_look_itself_up(
    server_store: AsyncStore, server_backend: Backend
) -> None:
    store, raw = server_store, server_backend.raw()
    await store.sessions.put("s", {"n": 0})
    raw.config_resetstat()
    for n in range(20):
        await store.sessions.put("s", {"n": n})
        await store.users.merge("u", {"n": n})
        await store.checkpoints.save("t", {"n": n})
        await store.checkpoints.log("t", {"d": n})
        await store.events.append("e", "note", {"n": n})
    stats = raw.info("commandstats")
    assert "cmdstat_zscore" not in stats, stats.get("cmdstat_zscore")
    assert int(stats["cmdstat_fcall"]["calls"]) >= 100  # (and a compaction or two)


async def test_a_store_turns_its_clients_own_retries_off(backend: Backend) -> None:
    client = backend.async_client()
    store = AsyncStore(client)
    # A cluster client keeps its retry on itself; the others on their pool.
    retry = client.get_retry() if hasattr(client, "get_retry") else client.retry
    assert retry is not None and retry.get_retries() == 0
    await store.aclose()


async def test_the_write_memory_is_trimmed_to_its_window(
    store: AsyncStore, backend: Backend
) -> None:
    # 1,000 overwrites remembered for 5 ms each, spanning far more than 5 ms: trims
    # (one write in eight, at random) keep the memory near what 5 ms of writes leave.
    spec = store.sessions.spec
    key = spec.key("s")
    keys, _ = spec.guarded_keys("s", key, None)
    memory, raw = store.keys.writes(key), backend.raw()
    started, sizes = time.monotonic(), []
    for i in range(1000):
        args = spec.put_args(None, 60_000, f"w{i}", b"{}", memory_ms=5).argv()
        await store._conn.script(script("record_put"), keys, args)
        sizes.append(raw.zcard(memory))
    assert time.monotonic() - started > 0.05  # the writes spanned ten windows at least
    assert 0 < max(sizes) < 500, max(sizes)


async def test_a_resent_fold_named_like_the_value_it_read_does_not_fold_twice(
    store: AsyncStore, other: AsyncStore
) -> None:
    """A brief merge that made the record patched (its id is the header's) and then
    folds it back by chance (``_refold``) names the folded value by that same id. A
    merge lands between the read and the fold, the fold's reply is lost: the resend
    must find the value changed, not fold bytes that moved."""
    spec = store.users.spec
    key = spec.key("u")
    await store.users.merge("u", {"a": 1})  # creates it patched: its id is the header's
    raw = await store._conn.get(key)
    assert raw is not None and raw.startswith(b"M1,")
    wid = raw.split(b"\n", 1)[0].rsplit(b",", 1)[1].decode()
    compaction = spec.compaction(key, raw)  # what _refold reads
    await other.users.merge("u", {"b": "x" * 200})  # appended after the read
    lost = LostReplies(store.client, SCRIPT).arm()
    await store.users._compact(key, compaction, wid)  # as _refold does for that merge
    assert lost.lost == 1 and store._conn.recovered == 1
    got = await other.users.get("u")
    assert got is not None and got.data == {"a": 1, "b": "x" * 200}


async def test_a_resealed_delta_resent_after_a_save_is_not_logged_again(
    backend: Backend, namespace: str
) -> None:
    """With signing keys a delta sealed for a stale checkpoint is sent once more: that
    second call must not carry the id the first call's return acked, or a save made
    before the second call's resend drops it from the memory and the resend logs the
    delta again."""
    signing = SigningKeys({"s1": b"k" * 32}, "s1")
    store = AsyncStore(backend.async_client(), namespace=namespace, signing=signing)
    other = AsyncStore(backend.async_client(), namespace=namespace, signing=signing)
    try:
        await store.checkpoints.save("t", {"n": 0})
        await other.checkpoints.save("t", {"n": 1})  # store's snapshot is stale now

        async def save_meanwhile() -> None:
            await store.checkpoints.save("t", {"n": 2})

        lost = LostReplies(store.client, SCRIPT, save_meanwhile)
        log = script("checkpoint_log")
        execute, calls = lost._execute_command, {("FCALL", log.function), ("EVALSHA", log.sha)}
        armed = False

        async def second_lost(*args: Any, **options: Any) -> Any:
            nonlocal armed
            reply = await execute(*args, **options)
            if not armed and (str(args[0]).upper(), args[1]) in calls:
                armed = True  # the first send was refused (resealed): lose the next one's
                lost.arm()
            return reply

        client: Any = store.client
        client.execute_command = second_lost  # shadows LostReplies' own
        await store.checkpoints.log("t", {"d": 1})
        assert lost.lost == 1
        restored = await store.checkpoints.restore("t")
        assert restored is not None and restored.checkpoint is not None
        # The delta followed {"n": 1}, which the save compacted away; not logged again.
        assert restored.state == {"n": 2} and restored.deltas_applied == 0
    finally:
        await store.aclose()
        await other.aclose()
