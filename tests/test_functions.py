"""Scripts as functions on real servers (Redis 7, Valkey 9, a cluster, fakeredis): FCALL
is what runs them, the library is loaded again after a restart without persistence,
another redistate version's library on the same server does not clash, and a server
without FCALL makes the store run its scripts by EVALSHA.

A flush between calls and between a load and its resend: tests/_async/test_records.py
and tests/test_faults.py; a user who may not load the library: tests/test_acl.py."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from redistate import Store
from redistate.core.scripts import library, names, script
from tests.conftest import Backend
from tests.servers import Server, redis_binary, start_server, valkey_binary

FLAVOURS = {"redis7": redis_binary, "valkey9": valkey_binary}


@pytest.fixture(params=sorted(FLAVOURS))
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A server of this test's own, persistence off: it is restarted or configured."""
    started = start_server(FLAVOURS[str(request.param)]())
    yield started
    started.stop()


def _calls(raw: Any) -> dict[str, int]:
    return {k: int(v["calls"]) for k, v in raw.info("commandstats").items()}


def _servers(backend: Backend) -> list[Any]:
    """A plain client of each data server of ``backend`` (a cluster: each primary)."""
    if backend.cluster is not None:
        return [node.client() for node in backend.cluster.primaries]
    return [backend.raw()]


def _workload(store: Store) -> None:
    store.sessions.put("s", {"n": 1}, ttl=60)
    store.users.merge("u", {"a": 1})
    store.checkpoints.save("t", {"n": 1})
    store.checkpoints.log("t", {"m": 2})
    store.events.append("e", "happened", {"i": 1})
    with store.lock("L", ttl=5) as lease:
        lease.extend(10)
    assert store.sessions.delete("s") is True


def test_scripts_run_as_functions_of_one_library(backend: Backend, namespace: str) -> None:
    """Every backend the tests have supports functions: scripts go by FCALL, none by
    EVALSHA; the library is loaded at most once per server (a cluster: per primary)."""
    servers = [] if backend.name == "embedded" else _servers(backend)  # fakeredis: no stats
    for raw in servers:
        raw.execute_command("FUNCTION", "FLUSH")
        raw.config_resetstat()
    with Store(backend.sync_client(), namespace=namespace) as store:
        _workload(store)
        assert store._conn._fcall
    if servers:
        calls = [_calls(raw) for raw in servers]
        assert sum(c.get("cmdstat_fcall", 0) for c in calls) >= 8, calls
        for c in calls:
            assert "cmdstat_evalsha" not in c and "cmdstat_script|load" not in c, c
            assert c.get("cmdstat_function|load", 0) <= 1, c
        assert sum(c.get("cmdstat_function|load", 0) for c in calls) >= 1, calls
    for raw in servers:
        raw.close()


def test_a_restart_without_persistence_loads_the_library_again(
    server: Server, namespace: str
) -> None:
    with Store.from_url(server.url, namespace=namespace) as store:
        store.sessions.put("s", {"n": 1})
        server.kill()
        server.restart()  # no persistence: no keys, no functions
        admin: Any = server.client()
        assert admin.execute_command("FUNCTION", "LIST") == []
        store.sessions.put("s", {"n": 2})  # a lost connection, then "Function not found"
        got = store.sessions.get("s")
        assert got is not None and got.data == {"n": 2}
        loads = _calls(admin).get("cmdstat_function|load", 0)
        assert loads == 1 and store._conn._fcall
        admin.close()


def test_another_versions_library_on_the_server_does_not_clash(
    server: Server, namespace: str
) -> None:
    """A rolling upgrade: an older redistate's library (another hash, functions named
    after it) stays loaded and callable beside this one's; neither replaces the other."""
    name = library()[0]
    old = "redistate_" + "0" * 16
    assert old != name
    older = f"#!lua name={old}\n" + "".join(
        f"redis.register_function('{old}_{n}', function(KEYS, ARGV) return 'old {n}' end)\n"
        for n in names()
    )
    admin: Any = server.client()
    admin.execute_command("FUNCTION", "LOAD", older)
    with Store.from_url(server.url, namespace=namespace) as store:
        _workload(store)
        got = store.users.get("u")
        assert got is not None and got.data == {"a": 1}
    listed = {row[b"library_name"] for row in admin.execute_command("FUNCTION", "LIST")}
    assert listed == {old.encode(), name.encode()}
    # The older client's functions still answer as they did.
    assert admin.execute_command("FCALL", f"{old}_record_put", 0) == b"old record_put"
    # A load that lost a race to another client's ("already exists") counts as loaded.
    with Store.from_url(server.url, namespace=namespace) as other:
        other._conn._load(other._conn.client)
        assert other._conn._fcall
    admin.close()


def test_a_server_without_fcall_runs_the_scripts_by_evalsha(namespace: str) -> None:
    """As on Redis 6 (no FUNCTION, no FCALL): the first call meets "unknown command",
    the store runs its scripts by EVALSHA from then on, without a warning."""
    server = start_server(redis_binary(), "--rename-command", "FCALL", '""')
    try:
        admin: Any = server.client()
        with pytest.raises(redis.ResponseError, match="unknown command"):
            admin.execute_command("FCALL", script("read_lists").function, 0)
        with Store.from_url(server.url, namespace=namespace) as store:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                _workload(store)
            assert not store._conn._fcall
        calls = _calls(admin)
        assert calls.get("cmdstat_evalsha", 0) >= 8, calls
        admin.close()
    finally:
        server.stop()


def test_a_pipeline_of_scripts_loads_the_library_once_per_server(
    backend: Backend, namespace: str
) -> None:
    """``scripts`` (imports, recodes) after a FUNCTION FLUSH: each server (a cluster:
    each primary the calls reach) loads the library once and every call answers
    (fakeredis keeps no commandstats: there, only the answers are checked)."""
    servers = [] if backend.name == "embedded" else _servers(backend)
    with Store(backend.sync_client(), namespace=namespace) as store:
        keys = [store.keys.task(f"t{i}") for i in range(12)]  # spread over the slots
        for key in keys:
            store._conn.idempotent("RPUSH", key, key)
        for raw in servers or [backend.raw()]:
            raw.execute_command("FUNCTION", "FLUSH")
        for raw in servers:
            raw.config_resetstat()
        run = script("read_lists")
        replies = store._conn.scripts([(run, [key], [0, -1]) for key in keys])
        assert replies == [[[key.encode()]] for key in keys]
        assert store._conn._fcall
    if not servers:
        return
    calls = [_calls(raw) for raw in servers]
    reached = [c for c in calls if c.get("cmdstat_fcall")]
    assert reached and all(c.get("cmdstat_function|load") == 1 for c in reached), calls
    assert all("cmdstat_evalsha" not in c for c in calls), calls
    for raw in servers:
        raw.close()
