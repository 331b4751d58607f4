"""AsyncStore: the entry point (async source of truth for Store)."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ..codec import Codec, JsonCodec
from ..keys import RESERVED_KINDS, KeySpace, check_kind
from ..records import RecordSpec
from ._client import AsyncConnection
from .records import AsyncCollection

__all__ = ["AsyncStore"]


class AsyncStore:
    """Agent state in Redis: records (sessions, users, named collections)."""

    def __init__(
        self,
        client: Redis,
        *,
        namespace: str = "redistate",
        codec: Codec | None = None,
        session_ttl: float | None = 3600,
        max_bytes: int = 1024 * 1024,
        update_attempts: int = 100,
    ) -> None:
        self.keys = KeySpace(namespace)
        self.codec: Codec = codec if codec is not None else JsonCodec()
        self._conn = AsyncConnection(client)
        self._max_bytes = max_bytes
        self._attempts = update_attempts
        self.sessions = self._collection("session", ttl=session_ttl, max_bytes=max_bytes)
        self.users = self._collection("user", ttl=None, max_bytes=max_bytes)

    @classmethod
    def from_url(
        cls, url: str, *, namespace: str = "redistate", timeout: float = 5.0, **options: Any
    ) -> AsyncStore:
        """Connect to ``redis://`` / ``rediss://`` / ``unix://`` URLs.

        ``timeout`` bounds connecting and each reply (StoreUnavailable after it).
        redis-py's own retries are switched off so one retry layer owns resends.
        """
        client = Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
        )
        return cls(client, namespace=namespace, **options)

    @classmethod
    def embedded(cls, *, namespace: str = "redistate", **options: Any) -> AsyncStore:
        """An in-process store (fakeredis with Lua); needs ``redistate[embedded]``."""
        from ..embedded import async_client

        return cls(async_client(), namespace=namespace, **options)

    @property
    def client(self) -> Redis:
        """The underlying redis-py client."""
        return self._conn.client

    def collection(
        self, name: str, *, ttl: float | None = None, max_bytes: int | None = None
    ) -> AsyncCollection:
        """A named record collection (``ns:<name>:{id}`` keys). Default: no TTL."""
        if check_kind(name) in RESERVED_KINDS:
            raise ValueError(f"collection name {name!r} is reserved ({sorted(RESERVED_KINDS)})")
        return self._collection(name, ttl=ttl, max_bytes=max_bytes)

    def _collection(
        self, kind: str, *, ttl: float | None, max_bytes: int | None
    ) -> AsyncCollection:
        limit = self._max_bytes if max_bytes is None else max_bytes
        spec = RecordSpec(self.keys, kind, self.codec, ttl=ttl, max_bytes=limit)
        return AsyncCollection(self._conn, spec, attempts=self._attempts)

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._conn.aclose()

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
