"""What users would pick instead of redistate, doing the same jobs, for run.py.

- sessions: raw redis-py ``SET PX`` / ``GET`` with orjson, and the OpenAI Agents SDK's
  ``RedisSession`` (async only: ``add_items`` appends to a list under WATCH/MULTI,
  ``get_items`` reads the list);
- checkpoints: a raw ``LPUSH``+``LTRIM`` pipeline / ``LINDEX 0``, and LlamaIndex's
  ``RedisChatStore`` (``add_message`` = RPUSH, ``get_messages`` = LRANGE 0 -1 parsed by
  pydantic), the state carried in the message's ``additional_kwargs`` so it stays JSON;
- merges (``_procs.py``) and locks (``locks.py``) live next to the code that runs them.

Every peer gets a client with the store's options (5 s socket timeout, no retries) and
keys under the run's namespace, so that cleanup finds them.
"""

from __future__ import annotations

from typing import Any, cast

import orjson
import redis
import redis.asyncio as aredis
from agents.extensions.memory.redis_session import RedisSession
from llama_index.core.llms import ChatMessage
from llama_index.storage.chat_store.redis import RedisChatStore
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from redistate.records.mergepatch import merge_patch

TTL_S = 3600
KEEP = 10  # redistate's default history cap; the raw pipeline trims to it too

OPTIONS: dict[str, Any] = {"socket_timeout": 5.0, "socket_connect_timeout": 5.0}


def sync_client(url: str) -> redis.Redis:
    """A redis-py client like the store's: bounded timeouts, redis-py retries off."""
    return redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **OPTIONS)


def async_client(url: str) -> aredis.Redis:
    """The asyncio twin of :func:`sync_client`."""
    return aredis.Redis.from_url(url, retry=AsyncRetry(NoBackoff(), 0), **OPTIONS)


# --- sessions ------------------------------------------------------------------------


class RawSession:
    """Hand-written redis-py: one JSON string per session, TTL set with the write."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix

    def key(self, sid: str) -> str:
        return f"{self.prefix}:raw-session:{sid}"

    def put(self, sid: str, value: Any) -> None:
        self.client.set(self.key(sid), orjson.dumps(value), px=TTL_S * 1000)

    def get(self, sid: str) -> Any:
        blob = cast("bytes | None", self.client.get(self.key(sid)))
        return None if blob is None else orjson.loads(blob)

    def get_many(self, sids: list[str]) -> list[Any]:
        """One MGET (one server; a cluster would need one per slot)."""
        blobs = cast("list[bytes | None]", self.client.mget([self.key(s) for s in sids]))
        return [None if b is None else orjson.loads(b) for b in blobs]


class AgentsSessions:
    """OpenAI Agents SDK ``RedisSession`` objects sharing one asyncio client (as an app
    with many sessions would), TTL as redistate's sessions, keys under the namespace."""

    def __init__(self, client: aredis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = f"{prefix}:agents"
        self._sessions: dict[str, RedisSession] = {}

    def session(self, sid: str) -> RedisSession:
        if sid not in self._sessions:
            self._sessions[sid] = RedisSession(
                sid, redis_client=self.client, key_prefix=self.prefix, ttl=TTL_S
            )
        return self._sessions[sid]

    def keys(self, sid: str) -> list[str]:
        """The keys one session uses (metadata hash, item list; its counter is unused)."""
        base = f"{self.prefix}:{sid}"
        return [base, f"{base}:messages", f"{base}:counter"]

    async def add(self, sid: str, item: Any) -> None:
        await self.session(sid).add_items([item])

    async def get(self, sid: str) -> Any:
        return await self.session(sid).get_items()


# --- checkpoints -----------------------------------------------------------------------


class RawCheckpoints:
    """Hand-written redis-py: a capped list of orjson states, newest first."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix

    def key(self, task: str) -> str:
        return f"{self.prefix}:raw-task:{{{task}}}"

    def save(self, task: str, state: Any) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.lpush(self.key(task), orjson.dumps(state))
        pipe.ltrim(self.key(task), 0, KEEP - 1)
        pipe.execute()

    def latest(self, task: str) -> Any:
        blob = cast("bytes | None", self.client.lindex(self.key(task), 0))
        return None if blob is None else orjson.loads(blob)

    def latest_many(self, tasks: list[str]) -> list[Any]:
        """One pipeline of LINDEX 0 per task."""
        pipe = self.client.pipeline(transaction=False)
        for task in tasks:
            pipe.lindex(self.key(task), 0)
        return [None if b is None else orjson.loads(b) for b in pipe.execute()]

    def log_key(self, task: str) -> str:
        return f"{self.prefix}:raw-task:{{{task}}}:log"

    def log(self, task: str, delta: Any) -> None:
        self.client.rpush(self.log_key(task), orjson.dumps(delta))

    def restore(self, task: str) -> Any:
        """The newest state with the logged merge patches applied (one pipeline)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.lindex(self.key(task), 0)
        pipe.lrange(self.log_key(task), 0, -1)
        blob, deltas = pipe.execute()
        state = orjson.loads(blob)
        for delta in deltas:
            state = merge_patch(state, orjson.loads(delta))
        return state


class ChatCheckpoints:
    """LlamaIndex ``RedisChatStore``: each checkpoint a ChatMessage appended to the task's
    list; the newest is the last of ``get_messages`` (the store has no capped history
    and no way to read only the newest)."""

    def __init__(self, url: str, client: redis.Redis, aclient: aredis.Redis, prefix: str):
        # Both clients given: the store would otherwise connect to redis_url's default
        # (localhost:6379) to make its own and ask it INFO cluster.
        self.store = RedisChatStore(redis_url=url, redis_client=client, aredis_client=aclient)
        self.prefix = prefix

    def key(self, task: str) -> str:
        return f"{self.prefix}:chat:{{{task}}}"

    @staticmethod
    def message(state: Any) -> ChatMessage:
        return ChatMessage(role="assistant", additional_kwargs={"state": state})

    def save(self, task: str, state: Any) -> None:
        self.store.add_message(self.key(task), self.message(state))

    def latest(self, task: str) -> Any:
        messages = self.store.get_messages(self.key(task))
        return messages[-1].additional_kwargs["state"] if messages else None

    def encoded(self, state: Any) -> bytes:
        """One message as the store writes it (for bulk loading a long history)."""
        return self.message(state).model_dump_json().encode()
