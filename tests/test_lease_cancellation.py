"""An acquire cancelled while its script is in flight must not leave the lock held."""

from __future__ import annotations

import asyncio

from redistate import AsyncStore
from tests.conftest import Backend


def test_a_cancelled_acquire_gives_the_lock_back(server_backend: Backend, namespace: str) -> None:
    async def main() -> tuple[bool, int | None]:
        store = AsyncStore(server_backend.async_client(), namespace=namespace)
        warm = await store.lock("warm", ttl=30, wait=0).acquire()  # connect, load scripts
        await warm.release()
        lease = store.lock("t", ttl=30, renew=False)
        # Hold every client command for 300 ms: the acquire is sent, then cancelled
        # before its reply, while the server will still run it.
        server_backend.raw().execute_command("CLIENT", "PAUSE", 300, "ALL")
        try:
            await asyncio.wait_for(lease.acquire(), 0.05)
        except asyncio.TimeoutError:
            pass
        other = await store.lock("t", ttl=30, wait=5, renew=False).acquire()
        held = lease.fence is not None
        await store.aclose()
        return held, other.fence

    held, fence = asyncio.run(main())
    assert held is False
    # Acquired within 5 s: the cancelled acquire, which the server still ran, gave the
    # lock back at once instead of holding it for its 30 s.
    assert fence is not None
