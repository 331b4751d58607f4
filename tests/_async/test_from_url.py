"""from_url reaches a standalone server, a cluster and a Sentinel service alike."""

from __future__ import annotations

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
