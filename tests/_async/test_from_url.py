"""from_url reaches a standalone server, a cluster and a Sentinel service alike."""

from __future__ import annotations

from typing import Any

import pytest

from redistate import AsyncStore
from tests.conftest import Backend, _backend


@pytest.mark.parametrize("name", ["redis7", "cluster", "sentinel"])
async def test_from_url_reaches_every_kind_of_deployment(
    name: str, namespace: str, request: pytest.FixtureRequest
) -> None:
    backend: Backend = _backend(name, request)
    store = AsyncStore.from_url(backend.url, namespace=namespace, timeout=2)
    for i in range(50):
        await store.sessions.put(f"s{i}", {"i": i})
    assert {sid async for sid in store.sessions.ids()} == {f"s{i}" for i in range(50)}
    got = await store.sessions.get("s7")
    assert got is not None and got.data == {"i": 7}
    assert name[:5] in store._conn.address or name == "redis7"
    await store.aclose()
    # The namespace fixture cleans only the `backend` fixture's keys: delete ours.
    store = AsyncStore.from_url(backend.url, namespace=namespace)
    for i in range(50):
        await store.sessions.delete(f"s{i}")
    await store.aclose()


@pytest.mark.parametrize("name", ["redis7", "valkey9", "cluster", "sentinel"])
async def test_from_url_refuses_an_unknown_option_before_connecting(
    name: str, namespace: str, request: pytest.FixtureRequest
) -> None:
    """``lease=`` is no client option: refused by name at once, not inside the pool at
    the first command; real options of the same client go through."""
    backend: Backend = _backend(name, request)
    raw = backend.raw()
    clients = _connected(raw)
    for bad, needle in (({"lease": 30}, "'lease'"), ({"socket_timout": 1}, "'socket_timeout'")):
        with pytest.raises(TypeError, match="unexpected keyword argument") as caught:
            AsyncStore.from_url(backend.url, namespace=namespace, **bad)  # type: ignore[arg-type]
        assert needle in str(caught.value)
    assert _connected(raw) == clients  # refused before any connection was made
    raw.close()
    options: dict[str, Any] = {"client_name": "redistate-test"}
    if name != "cluster":
        options["health_check_interval"] = 30  # RedisCluster's nodes do not take it
    store = AsyncStore.from_url(backend.url, namespace=namespace, socket_keepalive=True, **options)
    await store.sessions.put("s", {"ok": True})
    got = await store.sessions.get("s")
    assert got is not None and got.data == {"ok": True}
    await store.sessions.delete("s")
    await store.aclose()


def _connected(raw: Any) -> int:
    """Connections the data nodes have accepted so far (read on ``raw``'s own,
    already open connections)."""
    info = raw.info("stats")
    if "total_connections_received" in info:
        return int(info["total_connections_received"])
    return sum(int(node["total_connections_received"]) for node in info.values())


async def test_a_url_given_to_the_constructor_names_from_url() -> None:
    with pytest.raises(TypeError, match=r"AsyncStore\.from_url\(url\)") as caught:
        AsyncStore("redis://user:secret@127.0.0.1:6390/0")  # type: ignore[arg-type]
    assert "secret" not in str(caught.value) and "user:***@" in str(caught.value)


async def test_from_url_takes_what_redis_py_takes_out_of_its_kwargs(
    namespace: str, request: pytest.FixtureRequest
) -> None:
    """``single_connection_client`` is no connection argument: the sync Redis.from_url
    pops it before the pool sees the rest. It is a real option, so it goes through."""
    backend: Backend = _backend("redis7", request)
    store = AsyncStore.from_url(backend.url, namespace=namespace, single_connection_client=True)
    await store.sessions.put("s", {"ok": True})
    got = await store.sessions.get("s")
    assert got is not None and got.data == {"ok": True}
    await store.sessions.delete("s")
    await store.aclose()
