"""Fault injection against real servers: restarts, killed connections, pauses, script
flushes, replies lost in the network and a full memory. Each test reports how many
writes were acknowledged, found afterwards and duplicated (printed at the end of the
run); RELIABILITY.md points at these tests.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest
import redis

from redistate import (
    NotReplicated,
    RedistateError,
    RetryPolicy,
    Store,
    StoreFull,
    StoreUnavailable,
)
from redistate.core.durability import Durability
from tests import workers
from tests.conftest import Backend
from tests.faults import FaultReport, tally
from tests.proxy import FaultProxy, command
from tests.servers import Server, redis_binary, start_server, valkey_binary
from tests.workers import append_tag

FLAVOURS = {"redis7": redis_binary, "valkey9": valkey_binary}
PROCESSES = 4
PER_PROCESS = 500
RECORDS = 5


@pytest.fixture(params=sorted(FLAVOURS))
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def dedicated(flavour: str, *extra: str, persistence: bool = False) -> Server:
    """A server of this test's own: it is restarted, paused or filled up."""
    return start_server(FLAVOURS[flavour](), *extra, persistence=persistence)


def stored_tags(url: str, namespace: str) -> list[str]:
    with Store.from_url(url, namespace=namespace) as store:
        tags: list[str] = []
        for r in range(RECORDS):
            rec = store.users.get(f"r{r}")
            tags += [] if rec is None else rec.data["tags"]
        return tags


def run_writers(
    url: str,
    namespace: str,
    during: Callable[[], None],
    per_process: int = PER_PROCESS,
    durability: str = "async",
    until_felt: bool = False,
) -> list[dict[str, Any]]:
    """PROCESSES writer processes; ``during`` runs once they are a quarter through, and
    they go on until one of them has written 200 more after it (the fault lands
    mid-run, whatever the machine's speed) — and, with ``until_felt``, until some
    writer has resent a call."""
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager, ProcessPoolExecutor(PROCESSES, mp_context=ctx) as pool:
        progress, faulted, enough = manager.Event(), manager.Event(), manager.Event()
        felt = manager.Event() if until_felt else None
        futures = [
            pool.submit(
                workers.append_writes,
                url,
                namespace,
                w,
                per_process,
                RECORDS,
                progress,
                durability=durability,
                faulted=faulted,
                enough=enough,
                felt=felt,
            )
            for w in range(PROCESSES)
        ]
        assert progress.wait(120), "no writer got a quarter through"
        during()
        faulted.set()
        return [f.result(timeout=600) for f in futures]


def report(
    fault: str,
    flavour: str,
    url: str,
    namespace: str,
    results: list[dict[str, Any]],
    note: str = "",
) -> FaultReport:
    acknowledged = [t for r in results for t in r["acknowledged"]]
    counts = tally(
        fault,
        flavour,
        acknowledged,
        stored_tags(url, namespace),
        failed=sum(len(r["failed"]) for r in results),
        resends=sum(r["resends"] for r in results),
        note=note,
    )
    assert counts.lost == 0, counts
    assert counts.duplicated == 0, counts
    return counts


# -- a. restart (AOF, appendfsync always) in the middle of 2,000 writes --------------


@pytest.mark.slow
def test_a_server_killed_and_restarted_mid_run_keeps_every_acknowledged_write(
    flavour: str, namespace: str
) -> None:
    server = dedicated(
        flavour, "--appendonly", "yes", "--appendfsync", "always", "--save", "", persistence=True
    )
    try:

        def kill_and_restart() -> None:
            server.kill()  # SIGKILL: nothing is flushed on the way out
            server.restart()

        results = run_writers(server.url, namespace, kill_and_restart)
        counts = report("kill -9 + restart (AOF always)", flavour, server.url, namespace, results)
        assert counts.acknowledged + counts.failed >= PROCESSES * PER_PROCESS
        assert counts.resends > 0  # the restart was felt
    finally:
        server.stop()


# -- b. CLIENT KILL TYPE normal every 50 ms during a write loop ----------------------


@pytest.mark.slow
def test_connections_killed_every_50_ms_neither_lose_nor_duplicate(
    flavour: str, namespace: str
) -> None:
    server = dedicated(flavour)
    done = threading.Event()
    kills = 0

    def killer() -> None:
        nonlocal kills
        admin = server.client()
        while not done.wait(0.05):  # the fault's period, not a synchronisation
            kills += int(admin.client_kill_filter(_type="normal", skipme=True))
        admin.close()

    thread = threading.Thread(target=killer)
    try:
        # A kill lands on a call in flight only when it falls between the send and the
        # server's read, so the writers go on until one has felt it.
        results = run_writers(server.url, namespace, thread.start, until_felt=True)
    finally:
        done.set()
        if thread.is_alive():
            thread.join()
    try:
        counts = report(
            "CLIENT KILL every 50 ms",
            flavour,
            server.url,
            namespace,
            results,
            note=f"{kills} connections killed",
        )
        assert kills > 0 and counts.resends > 0
        assert counts.failed == 0  # every killed call recovered within the bound
    finally:
        server.stop()


# -- c. CLIENT PAUSE longer than the socket timeout -----------------------------------


def test_a_pause_longer_than_the_timeout_fails_within_the_bound_then_recovers(
    flavour: str, namespace: str
) -> None:
    server = dedicated(flavour)
    timeout, policy = 0.3, RetryPolicy(deadline=1.0)
    bound = policy.deadline + timeout  # the last try starts by the deadline
    store = Store.from_url(server.url, namespace=namespace, timeout=timeout, retry=policy)
    admin = server.client()
    admin_command: Any = admin.execute_command
    acknowledged: list[str] = []
    failures: list[float] = []
    try:
        for i in range(20):
            tag = f"before:{i}"
            append_tag(store.users, "r0", tag)
            acknowledged.append(tag)
        # Under PAUSE ALL even UNPAUSE waits, so the pause runs its course.
        admin_command("CLIENT", "PAUSE", 5000, "ALL")
        for i in range(2):
            tag = f"paused:{i}"
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="gave up after"):
                append_tag(store.users, "r0", tag)
            failures.append(time.monotonic() - started)
        admin.ping()  # answered when the pause ends (the admin client has a 10 s timeout)
        for i in range(20):
            tag = f"after:{i}"
            append_tag(store.users, "r0", tag)
            acknowledged.append(tag)
        stored = stored_tags(server.url, namespace)
        counts = tally(
            "CLIENT PAUSE > timeout 0.3 s",
            flavour,
            acknowledged,
            stored,
            failed=len(failures),
            resends=store._conn.resends,
            note=f"failed after {max(failures):.2f} s (bound {bound:.1f} s)",
        )
        assert counts.lost == 0 and counts.duplicated == 0, counts
        # Each failure came within the bound (slack for a loaded machine).
        assert max(failures) < bound + 1.0, failures
    finally:
        admin.close()
        store.close()
        server.stop()


def test_a_stalled_server_costs_the_lease_before_it_can_expire(
    flavour: str, namespace: str
) -> None:
    # Renewal retries stop at a third of the lease: the holder learns it has lost the
    # lease while the lock key still holds, never after another owner could take it.
    server = dedicated(flavour)
    store = Store.from_url(server.url, namespace=namespace, timeout=0.3)
    admin = server.client()
    admin_command: Any = admin.execute_command
    try:
        lease = store.lock("t", ttl=1.5).acquire()
        paused_at = time.monotonic()
        admin_command("CLIENT", "PAUSE", 20_000, "WRITE")  # scripts wait; until UNPAUSE
        assert lease.lost.wait(5), "renewal never gave up"
        noticed = time.monotonic() - paused_at
        # The last renewal was before the pause, so the key expires 1.5 s after it at
        # the latest.
        assert noticed < 1.5, noticed
        assert admin.pttl(store.keys.lock("t")) > 0  # still held when loss was reported
        tally(
            "CLIENT PAUSE WRITE vs lease renewal",
            flavour,
            [],
            [],
            resends=store._conn.resends,
            note=f"loss reported {noticed:.2f} s into the pause, lease ttl 1.5 s",
        )
    finally:
        admin_command("CLIENT", "UNPAUSE")
        admin.close()
        store.close()
        server.stop()


# -- d. FUNCTION FLUSH / SCRIPT FLUSH mid-run ----------------------------------------

# How scripts run: as functions of redistate's library (FCALL, the library loaded by
# FUNCTION LOAD), or by EVALSHA (a server without functions, a user who may not load
# them), each script loaded by SCRIPT LOAD. What flushes each, and its load's counter.
MODES = {
    "function": ("FUNCTION", "cmdstat_function|load"),
    "script": ("SCRIPT", "cmdstat_script|load"),
}


def _by_mode(store: Store, mode: str) -> Store:
    store._conn._fcall = mode == "function"
    return store


def loads_of(raw: Any, mode: str) -> int:
    return int(raw.info("commandstats").get(MODES[mode][1], {}).get("calls", 0))


@pytest.mark.parametrize("mode", MODES)
def test_scripts_reload_transparently_when_flushed_mid_run(
    server_backend: Backend, namespace: str, mode: str
) -> None:
    done = threading.Event()
    flushes = 0

    def flusher() -> None:
        nonlocal flushes
        admin = server_backend.raw()
        while not done.wait(0.02):  # the fault's period
            admin.execute_command(MODES[mode][0], "FLUSH")
            flushes += 1
        admin.close()

    def writer(worker: int, acked: list[str]) -> None:
        with _by_mode(Store(server_backend.sync_client(), namespace=namespace), mode) as store:
            for i in range(150):
                tag = f"{worker}:{i}"
                append_tag(store.users, f"r{i % RECORDS}", tag)
                acked.append(tag)
                store.checkpoints.log(f"t{worker}", {"i": i})

    raw = server_backend.raw()
    loads_before = loads_of(raw, mode)
    acked: list[list[str]] = [[] for _ in range(4)]
    threads = [threading.Thread(target=writer, args=(w, acked[w])) for w in range(4)]
    background = threading.Thread(target=flusher)
    background.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    background.join()
    loads = loads_of(raw, mode) - loads_before
    counts = tally(
        f"{MODES[mode][0]} FLUSH every 20 ms",
        server_backend.name,
        [t for a in acked for t in a],
        stored_tags(server_backend.url, namespace),
        note=f"{flushes} flushes, {loads} {mode} loads",
    )
    assert counts.acknowledged == 600 and counts.lost == 0 and counts.duplicated == 0
    assert flushes > 0 and loads > 1
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        for w in range(4):
            restored = store.checkpoints.restore(f"t{w}")
            assert restored is not None and restored.deltas_applied == 150
    raw.close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("durability", ["async", "replicated"])
def test_a_flush_between_the_load_and_the_resend_loads_again(
    server_backend: Backend, namespace: str, durability: Durability, mode: str
) -> None:
    """The proxy runs FUNCTION FLUSH (SCRIPT FLUSH) after each FUNCTION LOAD (SCRIPT
    LOAD) has run and before its reply reaches the client, so every resend meets
    "Function not found" (NOSCRIPT) again: loaded again, up to 5 loads per call (the
    flaky run above hit one such flush in ~600 calls). Replicated writes (the script
    and WAIT pipelined) reload the same way."""
    assert server_backend.server is not None
    admin = server_backend.raw()
    kind = MODES[mode][0].encode()

    def flush() -> None:
        admin.execute_command(MODES[mode][0], "FLUSH")

    expected: type[Exception] | None = NotReplicated if durability == "replicated" else None
    with FaultProxy("127.0.0.1", server_backend.server.port) as proxy:
        client = redis.Redis(host=proxy.host, port=proxy.port, socket_timeout=10)
        with Store(
            client, namespace=namespace, durability=durability, replica_timeout=0.05
        ) as store:
            _by_mode(store, mode)
            for flushes, loads in ((0, 1), (1, 2), (4, 5)):
                flush()
                before = loads_of(admin, mode)
                if flushes:
                    proxy.stall_reply(command(kind, b"LOAD"), 0, times=flushes, then=flush)
                # No replica here: a replicated write is applied, then reported unconfirmed.
                with pytest.raises(expected) if expected else contextlib.nullcontext():
                    store.users.put(f"u{flushes}", {"flushes": flushes})
                assert proxy.armed == 0 and loads_of(admin, mode) - before == loads
                assert store.users.get(f"u{flushes}").data == {"flushes": flushes}  # type: ignore[union-attr]
            # Flushed after every one of its 5 loads: an error, nothing written.
            flush()
            before = loads_of(admin, mode)
            proxy.stall_reply(command(kind, b"LOAD"), 0, times=5, then=flush)
            missing = "Function not found" if mode == "function" else "No matching script"
            with pytest.raises(RedistateError, match=missing):
                store.users.put("u5", {"flushes": 5})
            assert loads_of(admin, mode) - before == 5 and store.users.get("u5") is None
    admin.close()


# -- e. a proxy that drops the connection after the command, before the reply ----------


@pytest.fixture
def proxied(server_backend: Backend, namespace: str) -> Iterator[tuple[FaultProxy, Store, Store]]:
    """(proxy, a store behind it, a direct store) on one namespace."""
    assert server_backend.server is not None
    with FaultProxy("127.0.0.1", server_backend.server.port) as proxy:
        behind = Store.from_url(f"redis://127.0.0.1:{proxy.port}/0", namespace=namespace)
        direct = Store(server_backend.sync_client(), namespace=namespace)
        behind.sessions.get("warm-up")  # connects (the handshake is not a fault target)
        yield proxy, behind, direct
        behind.close()
        direct.close()


FCALL = command(b"FCALL")


def test_every_write_whose_reply_is_lost_is_applied_once_with_its_result(
    proxied: tuple[FaultProxy, Store, Store],
) -> None:
    proxy, store, direct = proxied
    dropped = 0

    def lose_next() -> None:
        nonlocal dropped
        proxy.drop_reply(FCALL)
        dropped += 1

    lose_next()
    rec = store.sessions.put("s", {"n": 1})
    assert direct.sessions.get("s") == rec
    lose_next()
    rec = store.sessions.put("s", {"n": 2}, if_version=rec.version)  # no false conflict
    assert direct.sessions.get("s") == rec
    lose_next()
    merged = store.users.merge("u", {"a": 1})
    lose_next()
    rec = store.users.update("u", lambda d: {**d, "n": d.get("n", 0) + 1})
    assert rec.data == {"a": 1, "n": 1} and rec.version > merged.version
    assert direct.users.get("u") == rec
    lose_next()
    assert store.sessions.touch("s", ttl=600) is True
    lose_next()
    assert store.sessions.delete("s") is True
    lose_next()
    cp = store.checkpoints.save("t", {"n": 1})
    lose_next()
    assert store.checkpoints.log("t", {"m": 2}) == 1
    restored = direct.checkpoints.restore("t")
    assert restored is not None and restored.state == {"n": 1, "m": 2}
    assert restored.checkpoint is not None and restored.checkpoint.id == cp.id
    assert [c.id for c in direct.checkpoints.history("t")] == [cp.id]
    lose_next()
    lease = store.lock("t", ttl=30, renew=False).acquire()
    assert lease.fence is not None
    lose_next()
    lease.release()  # no LockLost
    lose_next()
    assert store.checkpoints.delete("t") is True
    assert proxy.dropped == dropped == 11


def test_lost_replies_under_contention_neither_lose_nor_duplicate(
    proxied: tuple[FaultProxy, Store, Store], server_backend: Backend, namespace: str
) -> None:
    proxy, store, direct = proxied
    acknowledged: list[str] = []
    for i in range(300):
        record, other = f"r{i % RECORDS}", f"d:{i}"

        def elsewhere(record: str = record, other: str = other) -> None:
            # Another agent writes the same record after ours was applied and before
            # our resend: only the write memory tells the resend it was applied.
            append_tag(direct.users, record, other)

        if i % 3 == 0:
            proxy.drop_reply(FCALL, then=elsewhere)
        elif i % 3 == 1:
            proxy.drop_request(FCALL)
        tag = f"p:{i}"
        append_tag(store.users, record, tag)
        acknowledged.append(tag)
        if i % 3:
            elsewhere()
        acknowledged.append(other)
    counts = tally(
        "proxy drops reply / request",
        server_backend.name,
        acknowledged,
        stored_tags(server_backend.url, namespace),
        resends=store._conn.resends,
        note=f"{proxy.dropped} connections dropped, 100 with a write in the gap",
    )
    assert counts.acknowledged == 600 and counts.lost == 0 and counts.duplicated == 0
    assert proxy.dropped == 200 and store._conn.resends >= 200


# -- f. maxmemory reached with noeviction ----------------------------------------------


def snapshot(client: redis.Redis, namespace: str) -> dict[bytes, tuple[bytes | None, bool]]:
    """Every key of the namespace: its DUMP and whether it has a TTL."""
    return {
        key: (client.dump(key), client.pttl(key) > 0)
        for key in sorted(client.scan_iter(match=f"{namespace}:*"))
    }


def test_a_full_memory_is_a_clear_error_and_nothing_is_half_written(
    flavour: str, namespace: str
) -> None:
    server = dedicated(flavour, "--maxmemory-policy", "noeviction")
    admin = server.client()
    store = Store.from_url(server.url, namespace=namespace)
    try:
        store.checkpoints.save("t", {"n": 0})
        store.checkpoints.log("t", {"d": 0})
        lease = store.lock("t", ttl=60, renew=False).acquire()
        used = int(admin.info("memory")["used_memory"])
        admin.config_set("maxmemory", used + 2 * 1024 * 1024)
        blob = secrets.token_urlsafe(75_000)  # 100 KB that compression cannot shrink
        written = 0
        with pytest.raises(StoreFull, match="maxmemory") as info:
            while True:
                before = snapshot(admin, namespace)
                store.sessions.put(f"s{written}", {"blob": blob})
                written += 1
        assert snapshot(admin, namespace) == before  # the refused put wrote nothing
        assert isinstance(info.value.__cause__, redis.exceptions.OutOfMemoryError)
        # Now far over the limit (as after a replica with more data took over): every
        # write is refused, the smallest ones too, and each changes nothing.
        admin.config_set("maxmemory", int(admin.info("memory")["used_memory"]) // 2)
        refused: list[str] = ["put"]
        calls: list[tuple[str, Callable[[], Any]]] = [
            ("put", lambda: store.sessions.put("small", {"n": 1})),
            ("save", lambda: store.checkpoints.save("t", {"n": 1}, lease=lease)),
            ("log", lambda: store.checkpoints.log("t", {"n": 1})),
            ("merge", lambda: store.users.merge("u", {"n": 1})),
            ("lock", lambda: store.lock("other", ttl=5, wait=0).acquire()),
        ]
        for name, call in calls:
            before = snapshot(admin, namespace)
            with pytest.raises(StoreFull):
                call()
            assert snapshot(admin, namespace) == before, name
            refused.append(name)
        restored = store.checkpoints.restore("t")
        assert restored is not None and restored.complete and restored.state == {"n": 0, "d": 0}
        # Deleting still works over the limit; with room again, writes go on.
        for i in range(written):
            assert store.sessions.delete(f"s{i}") is True
        admin.config_set("maxmemory", 0)
        store.sessions.put("after", {"blob": blob})
        tally(
            "maxmemory, noeviction",
            flavour,
            [f"s{i}" for i in range(written)],
            [f"s{i}" for i in range(written)],
            note=f"refused with nothing written: {', '.join(refused)}",
        )
    finally:
        store.close()
        admin.close()
        server.stop()
