"""Store fixtures for the contract suite (this file has a generated sync twin)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from redistate import AsyncStore
from tests.conftest import Backend


@pytest.fixture
async def store(backend: Backend, namespace: str) -> AsyncIterator[AsyncStore]:
    s = AsyncStore(backend.async_client(), namespace=namespace)
    yield s
    await s.aclose()


@pytest.fixture
async def server_store(server_backend: Backend, namespace: str) -> AsyncIterator[AsyncStore]:
    s = AsyncStore(server_backend.async_client(), namespace=namespace)
    yield s
    await s.aclose()
