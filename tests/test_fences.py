"""Fences that never repeat, even after the server lost data: a restart without
persistence, an RDB restore, a lagging replica promoted, eviction. Real servers, each
started here for the test and stopped after it.

Fences are max(last fence + 1, server time in µs): every server here runs on this
machine's clock, which is the condition RELIABILITY.md states (clocks that agree to
within the time a failover or restore takes).
"""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import Any

import pytest
import redis

from redistate import IntegrityError, LockLost, NotReplicated, RedistateWarning, Store
from tests.conftest import Backend
from tests.faults import LEASE_REPORTS, LeaseReport
from tests.servers import Server, redis_binary, start_server, valkey_binary

BINARIES = {"redis7": redis_binary, "valkey9": valkey_binary}


@pytest.fixture(params=sorted(BINARIES))
def binary(request: pytest.FixtureRequest) -> str:
    return BINARIES[request.param]()


def _fences(store: Store, name: str, n: int) -> list[int]:
    """Take and give back the lease ``n`` times; the fences it got."""
    out = []
    for _ in range(n):
        lease = store.lock(name, ttl=30, renew=False).acquire()
        assert lease.fence is not None
        out.append(lease.fence)
        lease.release()
    return out


def _report(fault: str, backend: str, fences: list[int], note: str = "") -> int:
    repeated = sum(1 for a, b in pairwise(fences) if b <= a)
    LEASE_REPORTS.append(LeaseReport(fault, backend, len(fences), 0, repeated, note))
    return repeated


def _wait_until(what: str, check: Callable[[], object], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen in {seconds} s"
        time.sleep(0.01)  # polls a server's state, bounded by the deadline


def _stop(server: Server) -> None:
    """SIGSTOP, and wait until the kernel has stopped it (state T in /proc)."""
    server.process.send_signal(signal.SIGSTOP)
    stat = f"/proc/{server.process.pid}/stat"

    def stopped() -> bool:
        with open(stat) as f:
            return f.read().rpartition(")")[2].split()[0] == "T"

    _wait_until("SIGSTOP", stopped)


def _name(binary: str) -> str:
    return "valkey9" if "valkey" in binary else "redis7"


def test_fences_grow_across_a_restart_without_persistence(binary: str) -> None:
    server = start_server(binary)  # --save "" --appendonly no: a restart loses everything
    try:
        store = Store(server.client(), namespace="f")
        before = _fences(store, "job", 21)
        store.close()
        server.kill()
        server.restart()
        store = Store(server.client(), namespace="f")
        assert store.client.dbsize() == 0  # the fence key is gone with the rest
        after = _fences(store, "job", 3)
        store.close()
    finally:
        server.stop()
    fences = before + after
    assert _report("SIGKILL, restart without persistence", _name(binary), fences) == 0


def test_fences_grow_across_an_rdb_restore(binary: str) -> None:
    server = start_server(binary, persistence=True)
    try:
        store = Store(server.client(), namespace="f")
        before = _fences(store, "job", 5)
        store.client.save()
        shutil.copy(server.workdir / "dump.rdb", server.workdir / "older.rdb")
        later = _fences(store, "job", 16)  # issued after the snapshot
        store.close()
        server.kill()
        shutil.copy(server.workdir / "older.rdb", server.workdir / "dump.rdb")
        server.restart()
        store = Store(server.client(), namespace="f")
        restored = store.client.get(store.keys.fence("job"))
        assert restored is not None and int(restored) == before[-1]  # the old snapshot
        after = _fences(store, "job", 3)
        store.close()
    finally:
        server.stop()
    fences = before + later + after
    assert _report("RDB restore of an older snapshot", _name(binary), fences) == 0


@pytest.fixture
def primary_and_replica(binary: str) -> Iterator[tuple[Server, Server]]:
    # The first sync at once, not after the default 5 s wait for more replicas to join.
    primary = start_server(binary, "--repl-diskless-sync-delay", "0")
    replica = start_server(
        binary, "--replicaof", "127.0.0.1", str(primary.port), "--repl-diskless-sync-delay", "0"
    )
    raw = primary.client()

    def confirmed() -> bool:
        # A write the replica acknowledged: the link is up and acks flow. (Link up alone
        # came before the first ack could, right after a sync that did not wait.)
        raw.set("probe", 1)
        command: Any = raw.execute_command
        return int(command("WAIT", 1, 100)) == 1

    try:
        _wait_until("replica in sync", confirmed)
        raw.delete("probe")
        yield primary, replica
    finally:
        raw.close()
        replica.process.send_signal(signal.SIGCONT)
        replica.stop()
        primary.stop()


def test_a_lagging_replica_promoted_issues_higher_fences(
    primary_and_replica: tuple[Server, Server], binary: str
) -> None:
    primary, replica = primary_and_replica
    store = Store(primary.client(), namespace="f")
    before = _fences(store, "job", 4)
    follower = replica.client()
    _wait_until("replica caught up", lambda: follower.get(store.keys.fence("job")))
    follower.close()
    # A partition: the replica stops, and its primary drops the link to it, so nothing
    # written from here on reaches it (not even bytes left in a socket buffer).
    _stop(replica)
    store.client.client_kill_filter(_type="replica")
    behind = _fences(store, "job", 8)
    held = store.lock("job", ttl=60, renew=False).acquire()  # an owner the failover forgets
    assert held.fence is not None
    store.close()
    primary.kill()
    replica.process.send_signal(signal.SIGCONT)
    promoted = replica.client()
    promoted.replicaof("NO", "ONE")
    seen = promoted.get("f:fence:{job}")
    assert seen is not None and int(seen) < behind[0]  # it never saw the later fences
    assert promoted.get("f:lock:{job}") is None  # nor the held lease: a second owner can come
    store = Store(promoted, namespace="f")
    after = _fences(store, "job", 3)
    store.close()
    fences = [*before, *behind, held.fence, *after]
    assert len(set(fences)) == len(fences)  # no two owners ever held the same fence
    assert _report("lagging replica promoted", _name(binary), fences) == 0


def test_a_replicated_acquire_is_refused_while_no_replica_confirms(
    primary_and_replica: tuple[Server, Server],
) -> None:
    primary, replica = primary_and_replica
    store = Store(primary.client(), namespace="f", durability="replicated", replica_timeout=0.2)
    lease = store.lock("job", ttl=30, renew=False).acquire()  # the replica confirms
    assert lease.remaining > 0
    _stop(replica)
    try:
        with pytest.raises(NotReplicated):
            lease.extend()
        with pytest.raises(NotReplicated):
            store.lock("other", ttl=30, renew=False).acquire()
        # The unconfirmed acquire gave the lock back: a failover could have lost it.
        assert store.client.get(store.keys.lock("other")) is None
    finally:
        replica.process.send_signal(signal.SIGCONT)
    again = store.lock("other", ttl=30, renew=False).acquire()
    assert again.fence is not None
    store.close()


def test_a_fence_is_exact_past_ten_to_the_fourteen(server_backend: Backend, namespace: str) -> None:
    store = Store(server_backend.sync_client(), namespace=namespace)
    raw = server_backend.raw()
    try:
        # Fences from a server whose clock ran far ahead (or an imported one): a Lua
        # number would be written "5e+15" and no later lease could be taken.
        raw.set(store.keys.fence("job"), "5000000000000000")
        lease = store.lock("job", ttl=30, renew=False).acquire()
        assert lease.fence == 5_000_000_000_000_001
        assert raw.get(lease.key) == f"{lease.token},5000000000000001".encode()
        saved = store.checkpoints.save("job", {"n": 1}, lease=lease)
        assert saved.fence == 5_000_000_000_000_001
        lease.release()
        assert store.lock("job", ttl=30, renew=False).acquire().fence == 5_000_000_000_000_002
        raw.set(store.keys.fence("bad"), "9007199254740991")  # no room left below 2^53
        with pytest.raises(IntegrityError, match="fence"):
            store.lock("bad", ttl=30, renew=False).acquire()
        raw.set(store.keys.fence("junk"), "1e+14")
        with pytest.raises(IntegrityError, match="fence"):
            store.lock("junk", ttl=30, renew=False).acquire()
        assert raw.get(store.keys.lock("bad")) is None and raw.get(store.keys.lock("junk")) is None
    finally:
        store.close()


def test_a_fence_key_lives_as_long_as_its_lease(server_backend: Backend, namespace: str) -> None:
    store = Store(server_backend.sync_client(), namespace=namespace)
    raw = server_backend.raw()
    try:
        lease = store.lock("job", ttl=5, renew=False).acquire()
        fence_key = store.keys.fence("job")
        assert 0 < raw.pttl(fence_key) <= 5_000
        lease.extend(60)
        assert 5_000 < raw.pttl(fence_key) <= 60_000
        lease.release()
        # Not kept forever: 2,000 finished tasks do not leave 2,000 counters behind.
        assert 0 < raw.pttl(fence_key) <= 60_000
    finally:
        store.close()


EVICTING = ["volatile-lru", "allkeys-lru", "allkeys-random"]


def _fill_until_gone(raw: redis.Redis, *keys: str, volatile: bool) -> int:
    """Write 10 KB values (with a TTL when ``volatile``: volatile-* policies evict only
    those) until every one of ``keys`` has been evicted; how many were written."""
    for n in range(200_000):
        raw.set(f"filler:{n}", b"x" * 10_000, px=600_000 if volatile else None)
        if n % 50 == 0 and not raw.exists(*keys):
            return n
    raise AssertionError(f"{keys} were never evicted")


@pytest.mark.parametrize("policy", EVICTING)
def test_an_evicted_lease_is_noticed_and_fences_still_grow(binary: str, policy: str) -> None:
    server = start_server(binary, "--maxmemory", "12mb", "--maxmemory-policy", policy)
    raw = server.client()
    store = Store(server.client(), namespace="f")
    try:
        with pytest.warns(RedistateWarning, match=policy):  # said before the first write
            first = _fences(store, "job", 5)
        lease = store.lock("job", ttl=60, renew=False).acquire()
        assert lease.fence is not None
        volatile = policy.startswith("volatile")
        _fill_until_gone(raw, lease.key, store.keys.fence("job"), volatile=volatile)
        evicted = raw.info("stats")["evicted_keys"]
        assert evicted > 0
        second = store.lock("job", ttl=60, renew=False).acquire()  # the lock key is gone
        assert second.fence is not None and second.fence > lease.fence
        # The first owner's next guarded write is refused, and the lease is known lost.
        with pytest.raises(LockLost):
            store.sessions.put("job", {"owner": "first"}, lease=lease)
        assert lease.lost.is_set()
        fences = [*first, lease.fence, second.fence]
    finally:
        store.close()
        raw.close()
        server.stop()
    note = f"lock and fence keys evicted ({evicted} keys evicted)"
    assert _report(f"eviction, {policy}", _name(binary), fences, note) == 0
