"""Quickstart (asyncio): the same store, awaited; many coroutines, no lost updates.

python examples/quickstart_async.py                 # embedded, no server needed
"""

from __future__ import annotations

import asyncio
import os

from redistate import AsyncStore


async def main() -> None:
    url = os.environ.get("REDISTATE_URL")
    store = AsyncStore.from_url(url, namespace="qs-async") if url else AsyncStore.embedded()
    async with store:
        # 20 agents record a fact about the same user at once: every one survives.
        await asyncio.gather(*(store.users.merge("u1", {"facts": {f"f{i}": i}}) for i in range(20)))
        user = await store.users.get("u1")
        assert user is not None
        print("facts kept:", len(user.data["facts"]), "of 20; version", user.version)

        rec = await store.sessions.put("s1", {"turn": 1}, ttl=60)
        rec2 = await store.sessions.get("s1", touch=True)  # slides the TTL in the same call
        assert rec2 is not None
        print(
            "session slid from", f"{rec.expires_at:%H:%M:%S}", "to", f"{rec2.expires_at:%H:%M:%S}"
        )
        await store.users.delete("u1")
        await store.sessions.delete("s1")


if __name__ == "__main__":
    asyncio.run(main())
