"""AsyncStore: the entry point (async source of truth for Store)."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from .core._io import AsyncWithGuard
from .core._ttl import check_ttl
from .core.codec import Codec, JsonCodec
from .core.connect_async import client_for
from .core.connection_async import AsyncConnection
from .core.durability import DEFAULT as DEFAULT_DURABILITY
from .core.durability import Durability
from .core.errors import InvalidId
from .core.keys import RESERVED_KINDS, KeySpace, check_kind
from .core.kinds import SESSION, USER
from .core.limits import check_compress_above, check_keep, check_max_bytes
from .core.migrations import Migrations
from .core.retry import RetryPolicy, check_timeout
from .core.server import ServerCheck, ServerFacts
from .core.urls import shown_url
from .records.collection_async import AsyncCollection, AsyncUsers
from .records.spec import RecordSpec

if TYPE_CHECKING:  # imported where used: a store that never locks never loads leases
    from .adapters.adk.sessions_async import AsyncAdkSessions
    from .adapters.agents.items_async import AsyncAgentItems
    from .adapters.claude.transcripts_async import AsyncClaudeTranscripts
    from .adapters.langgraph.graph import GraphSpec
    from .adapters.langgraph.namespaces_async import AsyncNamespaces
    from .adapters.langgraph.threads_async import AsyncGraph
    from .adapters.pydantic_ai.conversations_async import AsyncConversations
    from .admin.admin_async import AsyncAdmin
    from .batch_async import AsyncBatch
    from .checkpoints.tasks_async import AsyncCheckpoints
    from .core.signing import SigningKeys
    from .events.stream_async import AsyncEvents
    from .leases.lease_async import AsyncLease
    from .steps.runner_async import AsyncTaskRun

__all__ = ["AsyncStore"]


def _signing_keys(value: object) -> bool:
    """Whether ``value`` is SigningKeys (its module loads only for a store given some)."""
    from .core.signing import SigningKeys

    return isinstance(value, SigningKeys)


MIB = 1024 * 1024


class AsyncStore(AsyncWithGuard):
    """Agent state in Redis: sessions, users, named record collections and task
    checkpoints.

    Args:
        client: a ``redis.asyncio`` Redis, Sentinel master or RedisCluster client with
            ``decode_responses=False``. The store owns it: ``aclose()`` closes it.
        namespace: first part of every key (letters, digits, ``_.-``).
        codec: how values become bytes; JSON (orjson) by default.
        session_ttl: seconds before an untouched session expires (None: never).
        max_bytes: largest encoded record, for sessions, users and collections
            that do not set their own.
        update_attempts: compare-and-set tries of ``update``/``merge`` before
            ConflictError.
        checkpoint_keep: checkpoints a task's history holds (``save(keep=)`` per call).
        task_ttl: seconds every key of a task lives after its last save or log
            (None: until deleted).
        checkpoint_max_bytes: largest checkpoint (state and metadata JSON, before
            compression).
        checkpoint_compress_above: states whose JSON is larger are zlib-compressed.
        checkpoint_max_deltas: deltas a task's log holds before ``log`` refuses more.
        retry: when a call that failed transiently is sent again (default
            ``RetryPolicy()``; ``RetryPolicy(attempts=1)`` never retries). The store
            turns the client's own redis-py retries off: one layer retries, and it
            knows that every write is safe to resend.
        durability: ``"replicated"``: writes (records, checkpoints) return only once a
            replica has them, else NotReplicated; the default is Redis's own (the
            primary's acknowledgement). Each write method takes ``durability=`` too.
        replica_timeout: seconds a replicated write waits for its replica.
        signing: HMAC keys (redistate.core.signing.SigningKeys) that seal events, trim
            anchors, checkpoints, deltas and records, checked on every read and verify;
            without them the digests catch accidental damage only.
        server_check: before its first command the store reads each server's eviction
            policy (a cluster: every primary). ``"warn"``: a policy other than
            ``noeviction`` (or one that cannot be read) gives one RedistateWarning per
            server and process, also logged on ``logging.getLogger("redistate")``;
            ``"strict"``: UnsafeServer instead, before anything is sent; ``"off"``:
            no check, no extra commands. The embedded server is never checked.
    """

    def __init__(
        self,
        client: Redis | RedisCluster,
        *,
        namespace: str = "redistate",
        codec: Codec | None = None,
        session_ttl: float | None = 3600,
        max_bytes: int = MIB,
        update_attempts: int = 100,
        checkpoint_keep: int = 10,
        task_ttl: float | None = None,
        checkpoint_max_bytes: int = 16 * MIB,
        checkpoint_compress_above: int = 16 * 1024,
        checkpoint_max_deltas: int = 1000,
        retry: RetryPolicy | None = None,
        durability: Durability = DEFAULT_DURABILITY,
        replica_timeout: float = 1.0,
        signing: SigningKeys | None = None,
        server_check: ServerCheck = "warn",
    ) -> None:
        if isinstance(client, str | bytes):
            name = type(self).__name__
            raise TypeError(
                f"{name}() takes a redis-py client, not a URL: for {shown_url(client)!r} "
                f"use {name}.from_url(url) (or {name}.embedded() for an in-process store)"
            )
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise TypeError(f"retry must be a RetryPolicy or None, got {retry!r}")
        if codec is not None and not isinstance(codec, Codec):
            raise TypeError(
                f"codec must have encode(value, context) and decode(data, context), "
                f"got {type(codec).__name__}: {codec!r:.80}"
            )
        if signing is not None and not _signing_keys(signing):
            raise TypeError(f"signing must be SigningKeys or None, got {type(signing).__name__}")
        self.signing = signing
        """The HMAC keys that seal what the store writes, or None."""
        self.keys = KeySpace(namespace)
        """Builds every key of the namespace."""
        self._conn = AsyncConnection(client, retry, durability, replica_timeout, server_check)
        chosen: Codec = codec if codec is not None else JsonCodec()
        as_text = getattr(chosen, "as_text", None)
        if self._conn.rest and callable(as_text):
            chosen = as_text()  # a REST API's JSON carries text: EncryptedCodec in base64
        self.codec: Codec = chosen
        """How values become bytes (JSON by default)."""
        self._others: list[Any] = []
        self._max_bytes = max_bytes
        self._attempts = update_attempts
        self.migrations = Migrations()
        """Schema upgrade steps, applied on read (``register(kind, from_version, fn)``)."""
        self.sessions = self._collection(SESSION.key, ttl=session_ttl, max_bytes=max_bytes)
        """Session records, expiring after ``session_ttl``."""
        users = RecordSpec(
            self.keys,
            USER.key,
            self.codec,
            ttl=None,
            max_bytes=max_bytes,
            migrations=self.migrations,
            signing=signing,
        )
        self.users = AsyncUsers(self._conn, users, attempts=update_attempts)
        """User records (no TTL), and ``erase(user)``."""
        # Checkpoints and events are made on first use (a serverless cold start that
        # only puts records loads neither); their settings are checked now.
        check_ttl(task_ttl, "task ttl")
        self._checkpoint_settings: dict[str, Any] = {
            "keep": check_keep(checkpoint_keep),
            "ttl": task_ttl,
            "max_bytes": check_max_bytes(checkpoint_max_bytes, "checkpoint max_bytes"),
            "compress_above": check_compress_above(checkpoint_compress_above),
            "max_deltas": check_keep(checkpoint_max_deltas, "max_deltas"),
        }
        self._checkpoints: AsyncCheckpoints | None = None
        self._events: AsyncEvents | None = None

    @property
    def checkpoints(self) -> AsyncCheckpoints:
        """Task checkpoints: capped histories, delta logs, restore."""
        found = self._checkpoints
        if found is None:
            from .checkpoints.spec import CheckpointSpec
            from .checkpoints.tasks_async import AsyncCheckpoints

            spec = CheckpointSpec(
                self.keys,
                self.codec,
                migrations=self.migrations,
                signing=self.signing,
                text=self._conn.rest,
                **self._checkpoint_settings,
            )
            found = self._checkpoints = AsyncCheckpoints(self._conn, spec)
        return found

    @property
    def events(self) -> AsyncEvents:
        """Hash-chained audit events per entity."""
        found = self._events
        if found is None:
            from .events.spec import EventSpec
            from .events.stream_async import AsyncEvents

            spec = EventSpec(
                self.codec,
                max_bytes=self._max_bytes,
                migrations=self.migrations,
                signing=self.signing,
            )
            found = self._events = AsyncEvents(self._conn, self.keys, spec, attempts=self._attempts)
        return found

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        namespace: str = "redistate",
        timeout: float = 5.0,
        codec: Codec | None = None,
        session_ttl: float | None = 3600,
        max_bytes: int = MIB,
        update_attempts: int = 100,
        checkpoint_keep: int = 10,
        task_ttl: float | None = None,
        checkpoint_max_bytes: int = 16 * MIB,
        checkpoint_compress_above: int = 16 * 1024,
        checkpoint_max_deltas: int = 1000,
        retry: RetryPolicy | None = None,
        durability: Durability = DEFAULT_DURABILITY,
        replica_timeout: float = 1.0,
        signing: SigningKeys | None = None,
        server_check: ServerCheck = "warn",
        **redis_options: Any,
    ) -> AsyncStore:
        """Connect to a URL: ``redis://host:port/db`` (``rediss://``, ``unix://``),
        ``redis+cluster://host:port[,host:port...]`` or
        ``redis+sentinel://host:port[,host:port...]/service[/db]`` (see redistate.core.urls).

        ``timeout`` bounds connecting and each reply; ``retry`` says how often and how
        long a call is tried before StoreUnavailable. redis-py's own retries are off:
        one layer owns resends. Other keyword arguments go to redis-py's client
        (``sentinel_kwargs=`` to the sentinels' connections).
        """
        client, others = client_for(url, check_timeout(timeout), dict(redis_options))
        store = cls(
            client,
            namespace=namespace,
            codec=codec,
            session_ttl=session_ttl,
            max_bytes=max_bytes,
            update_attempts=update_attempts,
            checkpoint_keep=checkpoint_keep,
            task_ttl=task_ttl,
            checkpoint_max_bytes=checkpoint_max_bytes,
            checkpoint_compress_above=checkpoint_compress_above,
            checkpoint_max_deltas=checkpoint_max_deltas,
            retry=retry,
            durability=durability,
            replica_timeout=replica_timeout,
            signing=signing,
            server_check=server_check,
        )
        store._others = others
        return store

    @classmethod
    def embedded(cls, *, namespace: str = "redistate", **options: Any) -> AsyncStore:
        """An in-process store (fakeredis with Lua); needs ``redistate[embedded]``.
        Keyword arguments are the constructor's."""
        from .core.embedded import async_client

        return cls(async_client(), namespace=namespace, **options)

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy in force."""
        return self._conn.policy

    async def server_facts(self) -> list[ServerFacts]:
        """Each server's eviction policy, persistence and replication, read now (a
        cluster: every primary); ``findings()`` of each says what it means."""
        return await self._conn.server_facts()

    @property
    def address(self) -> str:
        """The server (or cluster, or Sentinel service) the store talks to, as error
        messages name it."""
        return self._conn.address

    @property
    def client(self) -> Redis | RedisCluster:
        """The underlying redis-py client."""
        return self._conn.client

    def collection(
        self, name: str, *, ttl: float | None = None, max_bytes: int | None = None
    ) -> AsyncCollection:
        """Records under ``ns:<name>:{id}``; no TTL unless ``ttl`` (seconds) is given.

        Raises:
            InvalidId: a malformed name, or one reserved for redistate's own kinds.
        """
        if check_kind(name) in RESERVED_KINDS:
            raise InvalidId(f"collection name {name!r} is reserved ({sorted(RESERVED_KINDS)})")
        return self._collection(name, ttl=ttl, max_bytes=max_bytes)

    @property
    def admin(self) -> AsyncAdmin:
        """Maintenance of the namespace: export, import, rotate keys, migrate, stats
        (redistate.admin)."""
        from .admin.admin_async import AsyncAdmin

        return AsyncAdmin(self, self._conn)

    def agent_items(self) -> AsyncAgentItems:
        """The storage of Agents SDK sessions (redistate.agents builds on it)."""
        from .adapters.agents.items_async import AsyncAgentItems

        return AsyncAgentItems(self._conn, self.keys)

    def graph_threads(self, spec: GraphSpec) -> AsyncGraph:
        """The storage of LangGraph threads (redistate.langgraph builds on it)."""
        from .adapters.langgraph.threads_async import AsyncGraph

        return AsyncGraph(self._conn, spec)

    def adk_sessions(self) -> AsyncAdkSessions:
        """The storage of Google ADK sessions (redistate.adk builds on it)."""
        from .adapters.adk.sessions_async import AsyncAdkSessions

        return AsyncAdkSessions(self._conn, self.keys)

    def claude_transcripts(self) -> AsyncClaudeTranscripts:
        """The storage of Claude Agent SDK sessions (redistate.claude builds on it)."""
        from .adapters.claude.transcripts_async import AsyncClaudeTranscripts

        return AsyncClaudeTranscripts(self._conn, self.keys)

    def pydantic_conversations(self) -> AsyncConversations:
        """The storage of Pydantic AI conversations (redistate.pydantic_ai builds on it)."""
        from .adapters.pydantic_ai.conversations_async import AsyncConversations

        return AsyncConversations(self._conn, self.keys)

    def memory_namespaces(self) -> AsyncNamespaces:
        """The storage of the LangGraph store (redistate.langgraph.RedistateStore)."""
        from .adapters.langgraph.namespaces_async import AsyncNamespaces

        return AsyncNamespaces(self._conn, self.keys)

    def records_of(self, kind: str) -> AsyncCollection:
        """The collection holding records of key kind ``kind``: ``sessions``, ``users``,
        or ``collection(kind)`` (default TTL and size limit).

        Raises:
            InvalidId: a malformed name, or a reserved one other than those two.
        """
        if kind == SESSION.key:
            return self.sessions
        if kind == USER.key:
            return self.users
        return self.collection(kind)

    def _collection(
        self, kind: str, *, ttl: float | None, max_bytes: int | None
    ) -> AsyncCollection:
        limit = self._max_bytes if max_bytes is None else max_bytes
        spec = RecordSpec(
            self.keys,
            kind,
            self.codec,
            ttl=ttl,
            max_bytes=limit,
            migrations=self.migrations,
            signing=self.signing,
        )
        return AsyncCollection(self._conn, spec, attempts=self._attempts)

    def batch(self, *, durability: Durability | None = None) -> AsyncBatch:
        """Several writes in one round trip per node: ``async with store.batch() as b``,
        then ``b.sessions.put(...)``, ``b.checkpoints.save(...)``, ``b.events.append(...)``
        each return a Pending; leaving the block sends them all (see redistate.batch).
        Each write is atomic on its own, not together with the others.

        Raises:
            ValueError: a replicated batch and a replica_timeout the socket would not
                wait for.
        """
        from .batch_async import AsyncBatch

        return AsyncBatch(self, durability)

    def lock(
        self,
        name: str,
        ttl: float = 30,
        wait: float | None = None,
        renew: bool | str = True,
        on_lost: Callable[[AsyncLease], Any] | None = None,
    ) -> AsyncLease:
        """A fenced lease on ``name`` (not yet acquired): use ``async with``, or
        ``acquire()``/``release()``. It guards writes to entities whose id is ``name``.

        Where the store is asynchronous, renewal is a task on the event loop: a
        blocking call inside the block (a sync HTTP client, ``time.sleep``) stops it,
        and a lease blocked past its TTL is lost; the LockLost that follows says how
        long the loop was blocked. Run blocking code in a worker thread (``to_thread``).
        ``renew="inline"``: no renewer; each guarded write extends the lease to ``ttl``
        in its own script, so a holder keeps it by writing at least once a ``ttl``
        (a frozen serverless function, or a paused process, loses it)."""

        from .leases.lease_async import AsyncLease

        return AsyncLease(
            self._conn, self.keys, name, ttl=ttl, wait=wait, renew=renew, on_lost=on_lost
        )

    def task(
        self,
        task_id: str,
        ttl: float = 30,
        wait: float | None = None,
        renew: bool | str = True,
        save_every: int | None = None,
        save_every_seconds: float | None = None,
    ) -> AsyncTaskRun:
        """Run a task as its only owner: ``async with store.task("t1") as run``.
        Takes the lease, restores the state, guards every save (see AsyncTaskRun).

        Where the store is asynchronous, the lease is renewed by a task on the event
        loop: a blocking tool call in the block stops the renewal, and past ``ttl`` the
        lease is lost (the LockLost names the blocked loop). Run blocking tools in a
        worker thread (``to_thread``). ``renew="inline"``: each save and step record
        renews it instead, nothing in the background (serverless functions).
        ``save_every`` / ``save_every_seconds``: ``run.turn(state)`` saves every that
        many turns or seconds (periodic checkpoints of an agent loop)."""

        from .steps.runner_async import AsyncTaskRun

        return AsyncTaskRun(
            self,
            task_id,
            ttl=ttl,
            wait=wait,
            renew=renew,
            save_every=save_every,
            save_every_seconds=save_every_seconds,
        )

    async def aclose(self) -> None:
        """Close the client's connections (and a Sentinel URL's sentinel clients)."""
        await self._conn.aclose()
        for other in self._others:
            await other.aclose()

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
