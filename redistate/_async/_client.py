"""The only place that talks to redis-py: commands, scripts, error translation."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

from redis import exceptions as rex
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from .._translate import ERRORS, describe, translate
from ..scripts import Script

__all__ = ["AsyncConnection"]

# try/except rather than a context manager: free on the happy path, which is every call.


class AsyncConnection:
    """A redis-py client (standalone, Sentinel master or Cluster) and the scripts it
    runs. One per store; the store owns and closes the client."""

    __slots__ = ("address", "client", "timeout")

    def __init__(self, client: Redis | RedisCluster) -> None:
        if not isinstance(client, Redis | RedisCluster):
            raise TypeError(
                f"AsyncConnection needs a redis.asyncio.Redis or RedisCluster client, "
                f"got {type(client).__module__}.{type(client).__qualname__}"
            )
        if client.get_encoder().decode_responses:
            raise ValueError(
                "redistate needs a client with decode_responses=False: stored values are bytes"
            )
        self.client = client
        self.address = describe(client)
        # Blocking waits must end before the socket read times out. The options live
        # on the pool, on a cluster client itself, or on a cluster's node manager.
        holders = (
            getattr(client, "connection_pool", None),
            client,
            getattr(client, "nodes_manager", None),
        )
        kwargs: dict[str, Any] = next(
            (k for h in holders if isinstance(k := getattr(h, "connection_kwargs", None), dict)),
            {},
        )
        self.timeout: float | None = kwargs.get("socket_timeout")

    async def script(self, script: Script, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """EVALSHA ``script``; on NOSCRIPT (first use, restart, failover, SCRIPT FLUSH)
        load it and send it again: two extra round trips, once per server."""
        # execute_command directly: the same wire call as evalsha(), fewer Python frames.
        execute: Any = self.client.execute_command
        try:
            try:
                return await execute("EVALSHA", script.sha, len(keys), *keys, *args)
            except rex.NoScriptError:
                await self.client.script_load(script.source)
                return await execute("EVALSHA", script.sha, len(keys), *keys, *args)
        except ERRORS as exc:
            raise translate(exc, self.address) from exc

    async def get(self, key: str) -> bytes | None:
        try:
            # decode_responses is refused in __init__, so replies are bytes.
            return cast("bytes | None", await self.client.get(key))
        except ERRORS as exc:
            raise translate(exc, self.address) from exc

    async def pttl(self, key: str) -> int:
        try:
            return int(await self.client.pttl(key))
        except ERRORS as exc:
            raise translate(exc, self.address) from exc

    async def delete(self, *keys: str) -> int:
        """DEL; every key given must share one hash slot (cluster-safe)."""
        try:
            return int(await self.client.delete(*keys))
        except ERRORS as exc:
            raise translate(exc, self.address) from exc

    async def blpop(self, key: str, timeout: float) -> Any:
        """BLPOP with a timeout in seconds (fractions allowed since Redis 6)."""
        try:
            return await self.client.blpop([key], timeout=max(timeout, 0.001))
        except ERRORS as exc:
            raise translate(exc, self.address) from exc

    async def transaction(self, *commands: tuple[Any, ...]) -> list[Any]:
        """Send ``commands`` as one MULTI/EXEC: one round trip, applied atomically.
        Every key must share one hash slot."""
        try:
            async with self.client.pipeline(transaction=True) as pipe:
                for command in commands:
                    pipe.execute_command(*command)
                return list(await pipe.execute())
        except ERRORS as exc:
            raise translate(exc, self.address) from exc

    async def scan(self, pattern: str, count: int = 1000) -> AsyncIterator[bytes]:
        """Every key matching ``pattern`` (SCAN; never KEYS). On a cluster client this
        covers one node only so far: scanning every primary is issue 6."""
        cursor: int = 0
        while True:
            try:
                cursor, batch = await self.client.scan(cursor, match=pattern, count=count)
            except ERRORS as exc:
                raise translate(exc, self.address) from exc
            for key in batch:
                yield cast(bytes, key)
            if not cursor:
                return

    async def aclose(self) -> None:
        try:
            await self.client.aclose()
        except ERRORS as exc:
            raise translate(exc, self.address) from exc
