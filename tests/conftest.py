"""Backends for the contract suite: embedded (fakeredis), Redis 7 and Valkey 9.

Real servers are started once per session on free loopback ports and stopped at
the end. Every test gets its own namespace; keys of that namespace are removed
with SCAN + DEL afterwards (never FLUSHALL).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from redistate.core import embedded
from tests.roundtrips import RoundTrips
from tests.servers import (
    Cluster,
    SentinelSetup,
    Server,
    redis_binary,
    start_cluster,
    start_cluster_node,
    start_sentinel_setup,
    start_server,
    valkey_binary,
)
from tests.upstash_rest import UpstashRest

BACKENDS = ["embedded", "redis7", "valkey9", "cluster", "sentinel"]
# Upstash's REST API (the emulator in front of Redis 7): the contract modules marked
# ``over_rest`` run on it too (see pytest_generate_tests).
REST_BACKENDS = [*BACKENDS, "upstash"]
SERVER_BACKENDS = ["redis7", "valkey9"]


@dataclass
class Backend:
    """How a test reaches one backend: fresh clients that share its data."""

    name: str
    server: Server | None
    fake: Any = None
    cluster: Cluster | None = None
    sentinel: SentinelSetup | None = None
    rest: UpstashRest | None = None

    @property
    def remote(self) -> bool:
        """A real server (or several), as opposed to the embedded fakeredis."""
        return self.fake is None

    @property
    def url(self) -> str:
        if self.rest is not None:
            return self.rest.url
        if self.cluster is not None:
            return self.cluster.url
        if self.sentinel is not None:
            return self.sentinel.url
        if self.server is None:
            raise ValueError("the embedded backend has no URL")
        return self.server.url

    def _sentinel_primary(self, flavour: Any) -> Any:
        assert self.sentinel is not None
        hosts = [("127.0.0.1", s.port) for s in self.sentinel.sentinels]
        sentinel = flavour(hosts, socket_timeout=10)
        return sentinel.master_for(self.sentinel.service, socket_timeout=10)

    def sync_client(self) -> Any:
        if self.rest is not None:
            from redistate.core.connect import client_for

            return client_for(self.rest.url, 10, {"token": self.rest.token})[0]
        if self.sentinel is not None:
            from redis.sentinel import Sentinel

            return self._sentinel_primary(Sentinel)
        if self.cluster is not None:
            from redis.cluster import RedisCluster

            return RedisCluster(
                host="127.0.0.1", port=self.cluster.primaries[0].port, socket_timeout=10
            )
        if self.server is None:
            return embedded.sync_client(self.fake)
        return redis.Redis.from_url(self.url, socket_timeout=10)

    def async_client(self) -> Any:
        if self.rest is not None:
            from redistate.core.connect_async import client_for as async_client_for

            return async_client_for(self.rest.url, 10, {"token": self.rest.token})[0]
        if self.sentinel is not None:
            from redis.asyncio.sentinel import Sentinel as AsyncSentinel

            return self._sentinel_primary(AsyncSentinel)
        if self.cluster is not None:
            from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

            port = self.cluster.primaries[0].port
            return AsyncRedisCluster(host="127.0.0.1", port=port, socket_timeout=10)
        if self.server is None:
            return embedded.async_client(self.fake)
        import redis.asyncio

        return redis.asyncio.Redis.from_url(self.url, socket_timeout=10)

    def raw(self) -> Any:
        """A sync client for assertions (PTTL, raw bytes), never used by the store (of
        the server itself behind a REST API)."""
        if self.rest is not None and self.server is not None:
            return redis.Redis.from_url(self.server.url, socket_timeout=10)
        return self.sync_client()


@pytest.fixture(scope="session", autouse=True)
def _children_keep_bytecode() -> Iterator[None]:
    """Child processes (the CLI, workers, examples: several hundred) write bytecode
    beside the sources, as Python does by default (``__pycache__`` is ignored by git),
    and the next ones read it. Where the environment sets PYTHONDONTWRITEBYTECODE, each
    compiled the redistate modules it imports from source again (~70 ms of a ~0.4 s
    CLI start). Not PYTHONPYCACHEPREFIX: with it the children would compile the
    standard library and site-packages anew too, whose bytecode is installed."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
        yield


@pytest.fixture(scope="session")
def redis7_server() -> Iterator[Server]:
    # DEBUG SLEEP stalls the server on purpose in a few tests (local connections only).
    server = start_server(redis_binary(), "--enable-debug-command", "local")
    assert server.version.startswith("7."), server.version
    yield server
    server.stop()


@pytest.fixture(scope="session")
def valkey9_server() -> Iterator[Server]:
    server = start_server(valkey_binary(), "--enable-debug-command", "local")
    assert server.version.startswith("9."), server.version
    yield server
    server.stop()


@pytest.fixture(scope="session")
def upstash_rest(redis7_server: Server) -> Iterator[UpstashRest]:
    """The REST API emulator (tests/upstash_rest.py) in front of the Redis 7 server;
    UPSTASH_REDIS_REST_TOKEN holds its token, as on a function configured for Upstash."""
    with (
        UpstashRest(redis7_server.port, token="test-rest-token") as rest,
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setenv("UPSTASH_REDIS_REST_TOKEN", rest.token)
        yield rest


@pytest.fixture(scope="session")
def cluster3() -> Iterator[Cluster]:
    """A Redis 7 cluster of 3 primaries and 3 replicas, shared by the contract suite."""
    cluster = start_cluster(redis_binary())
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def sentinel_setup() -> Iterator[SentinelSetup]:
    """A Redis 7 primary, a replica and three sentinels, shared by the contract suite."""
    setup = start_sentinel_setup(redis_binary())
    yield setup
    setup.stop()


@pytest.fixture(scope="session")
def cluster_node() -> Iterator[Server]:
    """A one-node Redis 7 cluster (all slots on one primary)."""
    server = start_cluster_node(redis_binary())
    yield server
    server.stop()


def _backend(name: str, request: pytest.FixtureRequest) -> Backend:
    if name == "embedded":
        import fakeredis

        return Backend(name, None, fakeredis.FakeServer())
    if name == "cluster":
        cluster: Cluster = request.getfixturevalue("cluster3")
        return Backend(name, None, cluster=cluster)
    if name == "sentinel":
        setup: SentinelSetup = request.getfixturevalue("sentinel_setup")
        return Backend(name, None, sentinel=setup)
    if name == "upstash":
        rest: UpstashRest = request.getfixturevalue("upstash_rest")
        return Backend(name, request.getfixturevalue("redis7_server"), rest=rest)
    server: Server = request.getfixturevalue(f"{name}_server")
    return Backend(name, server)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "over_rest: the module's contract runs over REST too")


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test of a module marked ``over_rest`` that takes ``backend`` (and chooses none
    itself) runs on REST_BACKENDS: a parametrize mark, which the fixture's own params
    then give way to."""
    definition = metafunc.definition
    # REDISTATE_TESTS_OVER_REST=all: every contract module (to find what else holds).
    every = os.environ.get("REDISTATE_TESTS_OVER_REST") == "all"
    marked = every or definition.get_closest_marker("over_rest") is not None
    if "backend" not in metafunc.fixturenames or not marked:
        return
    for mark in definition.iter_markers("parametrize"):
        if "backend" in str(mark.args[0]):
            return
    definition.add_marker(pytest.mark.parametrize("backend", REST_BACKENDS, indirect=True))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each contract test runs once per backend."""
    return _backend(str(request.param), request)


@pytest.fixture(params=SERVER_BACKENDS)
def server_backend(request: pytest.FixtureRequest) -> Backend:
    """Real servers only: for what fakeredis cannot show (MONITOR, processes)."""
    return _backend(str(request.param), request)


# One client per server (or cluster, or Sentinel setup) for the clean-up below, kept for
# the session: a cluster client costs ~15-20 ms to make (CLUSTER SLOTS, COMMAND), and it
# was made again after each of ~1,600 cluster tests.
_CLEANERS: dict[str, Any] = {}


def _cleaner(b: Backend) -> Any:
    client = _CLEANERS.get(b.url)
    if client is None:
        client = _CLEANERS[b.url] = b.raw()
    return client


def pytest_sessionfinish(session: pytest.Session) -> None:
    for client in _CLEANERS.values():
        client.close()
    _CLEANERS.clear()
    output = getattr(session.config, "workeroutput", None)
    if output is not None:  # a pytest-xdist worker: its fault reports go to the controller
        from tests.faults import LEASE_REPORTS, REPORTS

        output["fault_reports"] = [dataclasses.asdict(r) for r in REPORTS]
        output["lease_reports"] = [dataclasses.asdict(r) for r in LEASE_REPORTS]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """Gather each pytest-xdist worker's fault reports for the summary tables."""
    from tests.faults import LEASE_REPORTS, REPORTS, FaultReport, LeaseReport

    output = getattr(node, "workeroutput", {})
    REPORTS.extend(FaultReport(**r) for r in output.get("fault_reports", ()))
    LEASE_REPORTS.extend(LeaseReport(**r) for r in output.get("lease_reports", ()))


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of this test's own; its keys are deleted afterwards."""
    ns = f"t{uuid.uuid4().hex[:12]}"
    yield ns
    for name in ("backend", "server_backend"):
        if name in request.fixturenames:
            b: Backend = request.getfixturevalue(name)
            if b.remote:
                client = _cleaner(b)
                keys = list(client.scan_iter(match=f"{ns}:*", count=1000))
                if keys:
                    client.delete(*keys)


@pytest.fixture
def stores(backend: Backend, namespace: str) -> Iterator[tuple[Any, Any]]:
    """A sync Store and an AsyncStore on this test's backend and namespace (the
    adapters' tests use both flavours side by side)."""
    from redistate import AsyncStore, Store

    sync, asyn = (
        Store(backend.sync_client(), namespace=namespace),
        AsyncStore(backend.async_client(), namespace=namespace),
    )
    yield sync, asyn
    sync.close()


def raw_keys(backend: Backend, namespace: str) -> list[bytes]:
    """Every key of ``namespace``, sorted, read by a client of its own."""
    raw = backend.raw()
    try:
        return sorted(raw.scan_iter(match=f"{namespace}:*", count=1000))
    finally:
        raw.close()


def ttl_left(raw: Any, key: str, ttl_ms: int, since: float) -> int:
    """``key``'s time to live in ms, checked: at most ``ttl_ms``, and no less than what
    the time since ``since`` (``time.monotonic()`` before the write that set it) can
    have taken off it. No fixed margin: a loaded machine may take seconds."""
    left = int(raw.pttl(key))
    took = math.ceil((time.monotonic() - since) * 1000)
    assert ttl_ms - took - 1 <= left <= ttl_ms, (key, left, ttl_ms, took)
    return left


@pytest.fixture
def roundtrips(server_backend: Backend) -> Iterator[RoundTrips]:
    """Counts the commands clients send to the server, read from MONITOR."""
    counter = RoundTrips(server_backend.raw())
    yield counter
    counter.close()


@pytest.fixture
def seen() -> Iterator[Any]:
    """Telemetry on for the test, read in memory (tests/telemetry.py's Seen)."""
    from tests.telemetry import watch

    with watch() as found:
        yield found


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The fault-injection counts (tests/test_faults.py), one row per fault and backend."""
    from tests.faults import LEASE_REPORTS, REPORTS, lease_table, table

    if REPORTS:
        terminalreporter.section("fault injection: acknowledged / found / duplicated")
        for line in table():
            terminalreporter.write_line(line)
    if LEASE_REPORTS:
        terminalreporter.section("lease faults: tool calls and fences repeated")
        for line in lease_table():
            terminalreporter.write_line(line)
