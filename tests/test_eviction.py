"""Eviction on real servers: ``--maxmemory 12mb`` with volatile-lru, allkeys-lru and
allkeys-random, memory filled until keys go (``evicted_keys`` > 0, no sleeps).

What a store does about it (server_check): one RedistateWarning per server naming the
policy, UnsafeServer before anything is written under "strict", no extra command under
"off", INFO where CONFIG is denied or renamed, "unknown" where both are. What eviction
does to the state is counted (acknowledged / found / applied twice) in the fault table
printed at the end of the run; a torn task is restored and repaired.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from redistate import AsyncStore, LockTimeout, RedistateWarning, Store, UnsafeServer
from tests import cli
from tests.faults import tally
from tests.servers import (
    Server,
    redis_binary,
    start_cluster,
    start_sentinel_setup,
    start_server,
    valkey_binary,
)

FLAVOURS = {"redis7": redis_binary, "valkey9": valkey_binary}
POLICIES = ("volatile-lru", "allkeys-lru", "allkeys-random")
FILLER = os.urandom(64 * 1024)  # random bytes: nothing shrinks them
MAX_FILLERS = 8000  # ~500 MB written: the bound of a fill that never evicts what it waits for


@pytest.fixture(params=sorted(FLAVOURS))
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def evicting(flavour: str, policy: str, *extra: str) -> Server:
    return start_server(
        FLAVOURS[flavour](), "--maxmemory", "12mb", "--maxmemory-policy", policy, *extra
    )


@pytest.fixture
def caught() -> Iterator[list[warnings.WarningMessage]]:
    """Every warning, none collapsed by the "once per location" default filter."""
    with warnings.catch_warnings(record=True) as found:
        warnings.simplefilter("always")
        yield found


def ours(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, RedistateWarning)]


class Filler:
    """Writes 64 KB keys (with a TTL: volatile-* evicts only those) until ``gone()``
    holds and the server has evicted keys; no sleeps, bounded by MAX_FILLERS."""

    def __init__(self, admin: redis.Redis) -> None:
        self.admin = admin
        self.written = 0

    def evicted(self) -> int:
        return int(self.admin.info("stats")["evicted_keys"])

    def until(self, gone: Callable[[], bool]) -> None:
        start = self.written
        while not (self.evicted() > 0 and gone()):
            if self.written - start > MAX_FILLERS:
                raise AssertionError(f"{MAX_FILLERS} fillers written and the keys are still there")
            with self.admin.pipeline(transaction=False) as pipe:
                for _ in range(16):
                    pipe.set(f"filler:{self.written}", FILLER, ex=3600)
                    self.written += 1
                pipe.execute()


class LoseNextReply:
    """The next FCALL runs on the server, then ``between()``, then its reply is lost
    (a ConnectionError): the store sends the very same call again."""

    def __init__(self, client: Any) -> None:
        self._execute = client.execute_command
        client.execute_command = self._call  # shadows the method
        self.between: Callable[[], None] | None = None

    def _call(self, *args: Any, **options: Any) -> Any:
        result = self._execute(*args, **options)
        if self.between is not None and str(args[0]).upper() == "FCALL":
            between, self.between = self.between, None
            between()
            raise redis.ConnectionError("reply lost on purpose by the test")
        return result


# What redis-py may send when it opens a connection (and the check's HELLO).
HANDSHAKE = {"hello", "client|setinfo", "client|setname"}


def commandstats(admin: redis.Redis) -> dict[str, int]:
    return {
        k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in admin.info("commandstats").items()
    }


# -- the warning, and what eviction did --------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_eviction_is_warned_once_per_server_and_what_it_breaks_is_counted(
    flavour: str,
    policy: str,
    namespace: str,
    caught: list[warnings.WarningMessage],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="redistate")
    server = evicting(flavour, policy)
    admin = server.client()
    a = Store.from_url(server.url, namespace=namespace, task_ttl=3600)
    b = Store.from_url(server.url, namespace=namespace, task_ttl=3600)
    keys = a.keys
    lost_reply = LoseNextReply(a.client)
    fill = Filler(admin)
    try:
        sessions = [a.sessions.put(f"s{i}", {"i": i}).id for i in range(50)]
        users = [a.users.put(f"u{i}", {"i": i}).id for i in range(50)]
        tasks = [f"t{i}" for i in range(20)]
        for t in tasks:
            a.checkpoints.save(t, {"t": t, "n": 0})
            a.checkpoints.save(t, {"t": t, "n": 1})
        leases = [a.lock(f"l{i}", ttl=600, renew=False).acquire() for i in range(10)]
        b.sessions.get("s0")  # a second store on the same server: no second warning
        # A put whose reply is lost; meanwhile another writer's put is acknowledged and
        # memory fills until the record's write-id memory is evicted; then the resend.
        acknowledged, found, twice, gone = 0, 0, 0, 0
        for r in range(3):
            record = f"r{r}"
            memory = keys.writes(keys.record("user", record))

            def between(record: str = record, memory: str = memory) -> None:
                nonlocal acknowledged
                b.users.put(record, {"by": "b"})
                acknowledged += 1
                fill.until(lambda: not admin.exists(memory))

            lost_reply.between = between
            a.users.put(record, {"by": "a"})
            final = b.users.get(record)
            found += final is not None and final.data == {"by": "b"}
            twice += final is not None and final.data == {"by": "a"}
            gone += final is None
        # Then until one of each kind with a TTL is gone.
        fill.until(lambda: not all(admin.exists(keys.record("session", s)) for s in sessions))
        sessions_left = sum(b.sessions.get(s) is not None for s in sessions)
        users_left = sum(b.users.get(u) is not None for u in users)
        taken = 0
        for lease in leases:
            try:
                second = b.lock(lease.name, ttl=600, renew=False, wait=0).acquire()
            except LockTimeout:
                continue
            taken += 1  # a second holder of a live lease
            assert lease.fence is not None and second.fence is not None
        torn = repaired = 0
        for t in tasks:
            restored = b.checkpoints.restore(t)
            if restored is not None and restored.torn:
                torn += 1
                assert not restored.complete and restored.skipped
                b.checkpoints.save(t, {"t": t, "n": 2})
                after = b.checkpoints.restore(t)
                repaired += after is not None and after.complete and after.state["n"] == 2
        assert repaired == torn
        # The warning: one for this server, naming the policy and what it breaks.
        messages = ours(caught)
        assert len(messages) == 1, messages
        assert f"maxmemory-policy is {policy}" in messages[0]
        assert "write-id memories" in messages[0] and "lock key" in messages[0]
        if policy.startswith("allkeys-"):
            assert "fences still grow" in messages[0] and "task's lists" in messages[0]
        logged = [r for r in caplog.records if r.name == "redistate"]
        events = [r.__dict__.get("redistate_event") for r in logged]
        assert [r.getMessage() for r in logged if r.__dict__.get("redistate_event") == (
            "server_warning")] == messages  # fmt: skip
        # Besides: a record of each restore that fell back past what eviction tore.
        assert set(events) <= {"server_warning", "integrity_fallback"}, events
        assert fill.evicted() > 0
        if policy == "volatile-lru":
            assert users_left == len(users)  # no TTL: volatile-* never evicts them
        note = (
            f"resend after its write memory was evicted: {twice} applied twice, {gone} lost; "
            f"sessions {sessions_left}/{len(sessions)}, users {users_left}/{len(users)}, "
            f"second lease holders {taken}/{len(leases)}, tasks torn {torn} repaired "
            f"{repaired}; {fill.evicted()} keys evicted; warned once"
        )
        tally(
            f"eviction, {policy}",
            flavour,
            [f"r{i}" for i in range(acknowledged)],
            [f"r{i}" for i in range(found)],
            note=note,
        )
        assert found + twice + gone == acknowledged == 3
    finally:
        a.close()
        b.close()
        admin.close()
        server.stop()


def test_a_restarted_server_is_a_new_server_and_warned_again(
    flavour: str, namespace: str, caught: list[warnings.WarningMessage]
) -> None:
    server = evicting(flavour, "allkeys-lru")
    try:
        for _ in range(2):
            with Store.from_url(server.url, namespace=namespace) as store:
                store.sessions.get("x")
        assert len(ours(caught)) == 1
        server.stop()
        server = evicting(flavour, "allkeys-lru")
        with Store.from_url(server.url, namespace=namespace) as store:
            store.sessions.get("x")
        assert len(ours(caught)) == 2  # another run_id
    finally:
        server.stop()


def test_noeviction_is_not_warned(flavour: str, namespace: str, caught: list[Any]) -> None:
    server = start_server(FLAVOURS[flavour](), "--maxmemory", "12mb")  # noeviction: default
    try:
        with Store.from_url(server.url, namespace=namespace, server_check="strict") as store:
            store.sessions.put("s", {"n": 1})
            assert [f.policy for f in store.server_facts()] == ["noeviction"]
        assert ours(caught) == []
    finally:
        server.stop()


# -- strict and off -----------------------------------------------------------------------


def dumps(admin: redis.Redis) -> dict[bytes, bytes | None]:
    return {key: admin.dump(key) for key in sorted(admin.scan_iter())}


@pytest.mark.parametrize("policy", POLICIES)
def test_strict_raises_unsafe_server_before_anything_is_written(
    flavour: str, policy: str, namespace: str, caught: list[Any]
) -> None:
    server = evicting(flavour, policy)
    admin = server.client()
    try:
        admin.set(f"{namespace}:before", b"x")
        before, size = dumps(admin), admin.dbsize()
        admin.config_resetstat()
        store = Store.from_url(server.url, namespace=namespace, server_check="strict")
        calls: list[Callable[[], Any]] = [
            lambda: store.sessions.put("s", {"n": 1}),
            lambda: store.users.merge("u", {"n": 1}),
            lambda: store.checkpoints.save("t", {"n": 1}),
            lambda: store.lock("l", ttl=5).acquire(),
            lambda: store.sessions.get("s"),
        ]
        for call in calls:
            with pytest.raises(UnsafeServer, match=f"maxmemory-policy is {policy}") as info:
                call()
            assert info.value.policy == policy
        store.close()
        sent = set(commandstats(admin)) - HANDSHAKE - {"config|resetstat"}
        assert sent == {"config|get", "info"}, sent  # nothing but the check
        assert admin.dbsize() == size and dumps(admin) == before
        assert ours(caught) == []  # strict raises, it does not warn
    finally:
        admin.close()
        server.stop()


def test_strict_async_raises_before_the_first_command(flavour: str, namespace: str) -> None:
    import asyncio

    server = evicting(flavour, "volatile-lru")
    admin = server.client()

    async def main() -> None:
        store = AsyncStore.from_url(server.url, namespace=namespace, server_check="strict")
        try:
            results = await asyncio.gather(
                *(store.sessions.put(f"s{i}", {"i": i}) for i in range(5)),
                return_exceptions=True,
            )
            assert all(isinstance(r, UnsafeServer) for r in results), results
        finally:
            await store.aclose()

    try:
        asyncio.run(main())
        assert admin.dbsize() == 0
    finally:
        admin.close()
        server.stop()


@pytest.mark.parametrize("policy", POLICIES)
def test_off_sends_no_check_and_warn_sends_it_once(
    flavour: str, policy: str, namespace: str, caught: list[Any]
) -> None:
    server = evicting(flavour, policy)
    admin = server.client()
    try:
        admin.config_resetstat()
        with Store.from_url(server.url, namespace=namespace, server_check="off") as store:
            for i in range(50):
                store.sessions.put(f"s{i}", {"i": i})
                store.sessions.get(f"s{i}")
        stats = commandstats(admin)
        assert not {"config|get", "info"} & set(stats), stats
        assert ours(caught) == []
        admin.config_resetstat()
        with Store.from_url(server.url, namespace=namespace) as store:
            for i in range(50):
                store.sessions.put(f"s{i}", {"i": i})
                store.sessions.get(f"s{i}")
        stats = commandstats(admin)
        # Once for the store's first command, then nothing: 6 CONFIG GETs, 4 INFOs.
        assert (stats["config|get"], stats["info"]) == (6, 4)
        assert len(ours(caught)) == 1
    finally:
        admin.close()
        server.stop()


def test_a_bad_server_check_is_refused(namespace: str) -> None:
    with pytest.raises(ValueError, match=r"server_check must be one of .* got 'loud'"):
        Store.from_url("redis://127.0.0.1:1/0", server_check="loud")  # type: ignore[arg-type]


# -- CONFIG denied or renamed -----------------------------------------------------------


def run(*args: str) -> Any:
    """``redistate ARGS`` in a subprocess, on a terminal wide enough for doctor's table."""
    return cli.run(*args, env={**os.environ, "COLUMNS": "250"})


def limited(server: Server, name: str, *rules: str) -> str:
    admin: Any = server.client()  # execute_command is untyped in redis-py
    try:
        admin.execute_command("ACL", "SETUSER", name, "on", ">pw", "~*", "&*", "+@all", *rules)
    finally:
        admin.close()
    return f"redis://{name}:pw@127.0.0.1:{server.port}/0"


def test_config_denied_falls_back_to_info(flavour: str, namespace: str, caught: list[Any]) -> None:
    server = evicting(flavour, "volatile-lru")
    try:
        url = limited(server, "agent", "-config")
        with Store.from_url(url, namespace=namespace) as store:
            store.sessions.put("s", {"n": 1})
            (facts,) = store.server_facts()
        assert facts.source == "info" and facts.policy == "volatile-lru"
        assert facts.maxmemory == 12 * 1024 * 1024 and facts.appendonly is False
        assert facts.save is None  # INFO does not report the RDB rules
        messages = ours(caught)
        assert len(messages) == 1 and "maxmemory-policy is volatile-lru" in messages[0]
    finally:
        server.stop()


def test_config_renamed_falls_back_to_info(flavour: str, namespace: str, caught: list[Any]) -> None:
    # As managed services do: the config line `rename-command CONFIG ""`.
    server = evicting(flavour, "allkeys-lru", "--rename-command", "CONFIG", "")
    admin = server.client()
    try:
        with pytest.raises(redis.ResponseError, match="unknown command"):
            admin.config_get("maxmemory-policy")
        with Store.from_url(server.url, namespace=namespace) as store:
            store.sessions.put("s", {"n": 1})
            (facts,) = store.server_facts()
        assert facts.source == "info" and facts.policy == "allkeys-lru"
        assert len(ours(caught)) == 1
    finally:
        admin.close()
        server.stop()


def test_config_and_info_denied_is_unknown(flavour: str, namespace: str, caught: list[Any]) -> None:
    server = evicting(flavour, "noeviction")  # safe, but the store cannot tell
    try:
        url = limited(server, "blind", "-config", "-info")
        with Store.from_url(url, namespace=namespace) as store:
            store.sessions.put("s", {"n": 1})
            (facts,) = store.server_facts()
        assert facts.source == "none" and facts.policy == "unknown"
        messages = ours(caught)
        assert len(messages) == 1 and "maxmemory-policy could not be read" in messages[0]
        strict = Store.from_url(url, namespace=namespace, server_check="strict")
        with pytest.raises(UnsafeServer) as info:
            strict.sessions.put("t", {"n": 1})
        assert info.value.policy == "unknown"
        strict.close()
        result = run("--url", url, "doctor", "--json")
        assert result.returncode == 1, result.stderr
        (row,) = [json.loads(line) for line in result.stdout.splitlines()]
        assert row["policy"] == "unknown" and row["ok"] is False
    finally:
        server.stop()


# -- every primary of a cluster, the Sentinel's primary -----------------------------------


def test_every_primary_of_a_cluster_is_checked(
    flavour: str, namespace: str, caught: list[Any]
) -> None:
    cluster = start_cluster(
        FLAVOURS[flavour](), 3, "--maxmemory", "12mb", "--maxmemory-policy", "volatile-lru"
    )
    try:
        primaries = {f"127.0.0.1:{s.port}" for s in cluster.primaries}
        with Store.from_url(cluster.url, namespace=namespace) as store:
            for i in range(30):
                store.sessions.put(f"s{i}", {"i": i})
            facts = store.server_facts()
        assert {f.address for f in facts} == primaries
        assert {f.policy for f in facts} == {"volatile-lru"}
        messages = ours(caught)
        assert len(messages) == 3  # one per primary, each naming it
        assert {m.split(":")[0] + ":" + m.split(":")[1] for m in messages} == {
            f"redis at {p}" for p in primaries
        }
        # One primary fixed: strict still refuses the cluster, for the other two.
        fixed = cluster.primaries[0].client()
        fixed.config_set("maxmemory-policy", "noeviction")
        fixed.close()
        strict = Store.from_url(cluster.url, namespace=namespace, server_check="strict")
        with pytest.raises(UnsafeServer, match="volatile-lru"):
            strict.sessions.put("x", {"n": 1})
        strict.close()
        result = run("--url", cluster.url, "doctor", "--json")
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        assert result.returncode == 1 and sorted(r["ok"] for r in rows) == [False, False, True]
    finally:
        cluster.stop()


def test_the_sentinel_primary_is_checked(flavour: str, namespace: str, caught: list[Any]) -> None:
    setup = start_sentinel_setup(FLAVOURS[flavour]())
    try:
        primary = setup.primary.client()
        primary.config_set("maxmemory-policy", "allkeys-random")
        primary.close()
        with Store.from_url(setup.url, namespace=namespace) as store:
            store.sessions.put("s", {"n": 1})
            (facts,) = store.server_facts()
        assert facts.policy == "allkeys-random" and facts.role == "master"
        assert facts.replicas == 1 and facts.address.endswith(f"127.0.0.1:{setup.primary.port})")
        messages = ours(caught)
        assert len(messages) == 1 and f"127.0.0.1:{setup.primary.port}" in messages[0]
    finally:
        setup.stop()


# -- doctor --------------------------------------------------------------------------------


def test_doctor_prints_the_facts_and_fails_on_eviction(flavour: str) -> None:
    safe = start_server(FLAVOURS[flavour](), "--appendonly", "yes", "--appendfsync", "always")
    bad = evicting(flavour, "allkeys-lru")
    try:
        ok = run("--url", safe.url, "doctor")
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert "noeviction" in ok.stdout and "every guarantee holds" in ok.stdout
        assert "RedistateWarning" not in ok.stderr
        (row,) = [
            json.loads(line)
            for line in run("--url", safe.url, "doctor", "--json").stdout.splitlines()
        ]
        assert row["ok"] and row["appendonly"] and row["appendfsync"] == "always"
        assert {f["name"]: f["status"] for f in row["findings"]} == {
            "maxmemory-policy": "ok",
            "persistence": "ok",
            "appendfsync": "ok",
            "replicas": "ok",
        }
        failed = run("--url", bad.url, "doctor")
        assert failed.returncode == 1
        assert "allkeys-lru" in failed.stdout and "task's lists" in failed.stdout
        assert "RedistateWarning" not in failed.stderr  # doctor reports, it does not warn
        (row,) = [
            json.loads(line)
            for line in run("--url", bad.url, "doctor", "--json").stdout.splitlines()
        ]
        assert row["policy"] == "allkeys-lru" and row["maxmemory"] == 12 * 1024 * 1024
        assert {f["name"]: f["status"] for f in row["findings"]}["persistence"] == "warn"
        # Persistence gaps are warnings: exit 0, unless --strict.
        warn_only = start_server(FLAVOURS[flavour]())
        try:
            assert run("--url", warn_only.url, "doctor").returncode == 0
            assert run("--url", warn_only.url, "doctor", "--strict").returncode == 1
        finally:
            warn_only.stop()
    finally:
        safe.stop()
        bad.stop()


def test_other_commands_warn_on_an_evicting_server(flavour: str) -> None:
    server = evicting(flavour, "volatile-lru")
    try:
        result = run("--url", server.url, "checkpoints", "t1")
        # No such task (exit 1, as every command's missing entity), warned once before.
        assert result.returncode == 1 and "no task 't1'" in result.stderr, result.stderr
        assert result.stderr.count("RedistateWarning") == 1
        assert "maxmemory-policy is volatile-lru" in result.stderr
    finally:
        server.stop()


def test_the_cli_restore_names_a_torn_task(flavour: str, namespace: str) -> None:
    server = start_server(FLAVOURS[flavour]())
    admin = server.client()
    try:
        with Store.from_url(server.url, namespace=namespace) as store:
            first = store.checkpoints.save("t", {"n": 1})
            admin.delete(store.keys.task("t"))  # as eviction would
        result = run("--url", server.url, "--namespace", namespace, "restore", "t")
        assert result.returncode == 0, result.stderr
        shown = json.loads(result.stdout)
        assert shown["torn"] is True and shown["complete"] is False
        assert shown["skipped"] == [first.id]
    finally:
        admin.close()
        server.stop()
