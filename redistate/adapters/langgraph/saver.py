"""A LangGraph checkpointer on plain Redis: ``RedisStateSaver`` (``redistate[langgraph]``).

No modules (RedisJSON, RediSearch): it runs on Redis OSS 7+, Valkey, ElastiCache and
Redis Cluster. Every key of a thread shares the thread's hash slot, so each operation
is one script on one slot: a put stores the checkpoint, its new channel values and the
history cap in one step; channel values are stored once per version and counted, so
pruning and the cap free what no checkpoint uses. A saver made ``with_lease(lease)``
writes the lease's thread only while the lease holds it (``LockLost`` otherwise,
checked inside the write script), so a paused or partitioned graph run can never
overwrite the state its successor wrote.

Values go through LangGraph's serializer (``serde=``; its EncryptedSerializer works),
never pickle unless you configure a serializer that pickles.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import secrets
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ...core import telemetry
from ...core._ttl import check_ttl
from ...core.errors import InvalidId, RedistateError
from ...core.kinds import GRAPH
from ...leases.guard import guard_args
from ...store import Store
from ...store_async import AsyncStore
from .graph import GraphHistoryReply, GraphSpec, Stored, check_name, pack, unpack_parts
from .threads import Graph
from .threads_async import AsyncGraph

if TYPE_CHECKING:  # not in every langgraph-checkpoint 4.x; only an annotation here
    from langgraph.checkpoint.base import DeltaChannelHistory

__all__ = ["RedisStateSaver"]

try:  # what marks a DeltaChannel's snapshot (a private type of LangGraph's)
    from langgraph.checkpoint.serde.types import _DeltaSnapshot
except ImportError:  # pragma: no cover - an older LangGraph has no DeltaChannel
    _DeltaSnapshot = ()  # type: ignore[assignment,misc]

# What a DeltaChannel leaves in checkpoint metadata (LangGraph's savers look for them).
_T = TypeVar("_T")

_DELTA_METADATA = ("counters_since_delta_snapshot", "delta_writes_versioned")


class RedisStateSaver(BaseCheckpointSaver[str]):
    """LangGraph ``BaseCheckpointSaver`` over a redistate store.

    ``RedisStateSaver(store)`` takes a ``Store`` (sync methods native, async ones in a
    worker thread; with ``async_store=``, an AsyncStore of the same namespace, native
    too) or an ``AsyncStore`` (async methods native; the sync ones, from another thread
    than the loop's, run on the loop the async ones used);
    ``from_url`` opens both. ``ttl`` (seconds) expires a thread's keys together, from
    its last write (with ``refresh_on_read=True``, from its last read too: get_tuple and
    list restart it in the same script); ``keep`` caps each namespace of a thread at
    that many checkpoints.

    ``user_key`` names the ``configurable`` key that carries the user id, to register
    threads to users for ``store.users.erase(user)``::

        saver = RedisStateSaver(store, user_key="user_id")
        graph = builder.compile(checkpointer=saver)
        graph.invoke(inputs, {"configurable": {"thread_id": "t1", "user_id": "alice"}})

    The thread is added to the user's index before this saver's first put (or
    put_writes) of it for that user, so erase deletes every key of the thread. A config
    without the key registers nothing; a user id that is not a valid id (a str of 1-512
    UTF-8 bytes) raises InvalidId before anything is written. ``copy_thread`` does not
    register the target thread: a put on it with the key does.
    """

    def __init__(
        self,
        store: Store | AsyncStore,
        *,
        serde: SerializerProtocol | None = None,
        ttl: float | None = None,
        keep: int | None = None,
        async_store: AsyncStore | None = None,
        user_key: str | None = None,
        refresh_on_read: bool = False,
    ) -> None:
        super().__init__(serde=serde)
        if not isinstance(refresh_on_read, bool):
            raise TypeError(f"refresh_on_read must be a bool, got {refresh_on_read!r:.80}")
        if refresh_on_read and ttl is None:
            raise ValueError("refresh_on_read=True needs a ttl to restart")
        if user_key is not None and (not isinstance(user_key, str) or not user_key):
            raise ValueError(f"user_key must be a non-empty str or None, got {user_key!r:.80}")
        self.user_key = user_key
        # (user, thread) pairs registered by this process; shared by with_lease clones.
        self._registered: set[tuple[str, str]] = set()
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
            raise ValueError(f"keep must be an int >= 1 or None, got {keep!r}")
        ttl_ms = check_ttl(ttl) if ttl is not None else 0
        self._lease: Any = None
        self._sync: Graph | None = None
        self._async: AsyncGraph | None = None
        # The event loop the async methods ran on: sync calls from other threads (a
        # sync node of an async graph) are run there (_bridge).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stores: list[Store | AsyncStore] = []
        if isinstance(store, AsyncStore):
            async_store = store
        elif async_store is not None and async_store.keys.namespace != store.keys.namespace:
            raise ValueError(
                f"async_store's namespace {async_store.keys.namespace!r} is not the "
                f"store's {store.keys.namespace!r}"
            )
        if isinstance(store, Store):
            spec = GraphSpec(store.keys, ttl_ms=ttl_ms, keep=keep or 0, refresh=refresh_on_read)
            self._sync = store.graph_threads(spec)
        elif not isinstance(store, AsyncStore):
            raise TypeError(f"store must be a Store or an AsyncStore, got {type(store).__name__}")
        if async_store is not None:
            spec = GraphSpec(
                async_store.keys, ttl_ms=ttl_ms, keep=keep or 0, refresh=refresh_on_read
            )
            self._async = async_store.graph_threads(spec)
        self.spec = (self._sync or self._async).spec  # type: ignore[union-attr]
        # Over a REST API, whose JSON carries text only, serialized values (msgpack) are
        # stored in base64, their kind marked "b64:" (a kind the serde never writes).
        self._text = any(s._conn.rest for s in (store, async_store) if s is not None)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        namespace: str = "redistate",
        serde: SerializerProtocol | None = None,
        ttl: float | None = None,
        keep: int | None = None,
        user_key: str | None = None,
        refresh_on_read: bool = False,
        **options: Any,
    ) -> RedisStateSaver:
        """A saver with a sync and an async connection to ``url`` (``Store.from_url``'s
        URLs and options: cluster, sentinel, TLS, timeouts)."""
        store = Store.from_url(url, namespace=namespace, **options)
        async_store = AsyncStore.from_url(url, namespace=namespace, **options)
        saver = cls(
            store,
            serde=serde,
            ttl=ttl,
            keep=keep,
            async_store=async_store,
            user_key=user_key,
            refresh_on_read=refresh_on_read,
        )
        saver._stores = [store, async_store]
        return saver

    def with_lease(self, lease: Any) -> RedisStateSaver:
        """This saver, writing the thread ``lease.name`` only while ``lease`` holds it:
        every put and put_writes for that thread is checked inside its script and
        raises ``LockLost`` once a newer owner took the lease."""
        guard_args(lease, lease.name, self.spec.keys.lock(lease.name))  # refuse bad ones now
        clone = copy.copy(self)
        clone._lease = lease
        return clone

    def close(self) -> None:
        for store in self._stores:
            if isinstance(store, Store):
                store.close()

    async def aclose(self) -> None:
        for store in self._stores:
            if isinstance(store, AsyncStore):
                await store.aclose()
            else:
                store.close()

    @property
    def _ns(self) -> str:
        return self.spec.keys.namespace

    def get_next_version(self, current: str | int | float | None, channel: None) -> str:
        """``<n+1, 32 digits>.<random>``: ordered like integers, and unique, so that a
        fork (time travel, ``update_state`` on an old checkpoint) never reuses a
        version the other branch stored a value under."""
        if current is None:
            number = 0
        elif isinstance(current, str):
            number = int(current.split(".")[0])
        else:
            number = int(current)
        return f"{number + 1:032}.{secrets.randbelow(10**16):016}"

    # -- building blocks ---------------------------------------------------------------

    def _typed(self, value: Any) -> tuple[bytes, bytes]:
        kind, data = self.serde.dumps_typed(value)
        if self._text:
            return b"b64:" + kind.encode(), base64.b64encode(data)
        return kind.encode(), data

    def _loads(self, kind: bytes, data: bytes) -> Any:
        if kind.startswith(b"b64:"):
            kind, data = kind[4:], base64.b64decode(data)
        return self.serde.loads_typed((kind.decode(), data))

    def _user(self, config: RunnableConfig, thread_id: str) -> str | None:
        """The user to register the thread to before a write, if not done yet.

        Raises:
            InvalidId: the config's user id is not a valid id.
        """
        if self.user_key is None:
            return None
        user = (config.get("configurable") or {}).get(self.user_key)
        if user is None:
            return None
        try:
            self.spec.keys.user_index(user)  # validates it before anything is written
        except InvalidId as exc:
            raise InvalidId(f"configurable[{self.user_key!r}] (the user): {exc}") from None
        return None if (user, thread_id) in self._registered else cast(str, user)

    def _remember(self, user: str, thread_id: str) -> None:
        if len(self._registered) >= _REMEMBERED:
            self._registered.clear()  # forgetting costs one more SADD, never an entry
        self._registered.add((user, thread_id))

    def _guard(self, thread_id: str) -> tuple[str, Any]:
        """(the lease value the script checks, the lease) for a write to the thread."""
        if self._lease is None or self._lease.name != thread_id:
            return "", None
        return guard_args(self._lease, thread_id, self.spec.keys.lock(thread_id))[1], self._lease

    def _put_args(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[tuple[Any, ...], RunnableConfig]:
        thread_id, ns = _thread(config)
        parent = config["configurable"].get("checkpoint_id") or ""
        stored: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = stored.pop("channel_values", None) or {}
        spec = self.spec
        refs = [spec.blob_field(ns, ch, v) for ch, v in checkpoint["channel_versions"].items()]
        used = set(refs)
        blobs = []
        for channel, version in new_versions.items():
            field = spec.blob_field(ns, channel, version)
            if field in used:  # a value no checkpoint uses would never be freed
                value = self._typed(values[channel]) if channel in values else (b"empty", b"")
                blobs.append((field, pack(*value)))
        md = get_serializable_checkpoint_metadata(config, metadata)
        run_id = md.get("run_id")
        run = check_name(run_id, "metadata run_id") if isinstance(run_id, str) else b""
        delta = any(k in md for k in _DELTA_METADATA) or any(
            isinstance(v, _DeltaSnapshot) for v in values.values()
        )
        packed = pack(*self._typed(stored), *self._typed(md), str(parent).encode())
        member = spec.member(ns, checkpoint["id"])
        args = (thread_id, member, packed, run, refs, blobs, delta)
        saved: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                             "checkpoint_id": checkpoint["id"]}
        }  # fmt: skip
        return (*args, *self._guard(thread_id)), saved

    def _writes_args(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> tuple[Any, ...]:
        thread_id, ns = _thread(config)
        checkpoint_id = config["configurable"].get("checkpoint_id")
        if not checkpoint_id:
            raise ValueError("put_writes needs config['configurable']['checkpoint_id']")
        items = []
        for idx, (channel, value) in enumerate(writes):
            index = WRITES_IDX_MAP.get(channel, idx)
            suffix = self.spec.write_suffix(task_path, task_id, index)
            items.append((suffix, index < 0, pack(channel.encode(), *self._typed(value))))
        member = self.spec.member(ns, checkpoint_id)
        return thread_id, member, items, *self._guard(thread_id)

    def _range(self, config: RunnableConfig) -> tuple[str, bytes, bytes]:
        thread_id, ns = _thread(config)
        checkpoint_id = get_checkpoint_id(config)
        upper, lower = (
            self.spec.exactly(ns, checkpoint_id) if checkpoint_id else self.spec.latest(ns)
        )
        return thread_id, upper, lower

    def _tuple(self, thread_id: str, stored: Stored) -> CheckpointTuple:
        where = f"checkpoint {stored.checkpoint_id} of thread {thread_id!r}"
        cp_kind, cp_data, md_kind, md_data, parent = unpack_parts(stored.packed, where)
        checkpoint = cast(Checkpoint, self._loads(cp_kind, cp_data))
        values = {}
        for channel, version in checkpoint["channel_versions"].items():
            blob = stored.blobs.get((channel, str(version)))
            if blob is not None:
                kind, data = unpack_parts(blob, where)
                if kind != b"empty":
                    values[channel] = self._loads(kind, data)
        writes = [self._write(task_id, packed, where) for task_id, _, packed in stored.writes]
        ns = stored.ns
        parent_id = parent.decode()
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                     "checkpoint_id": stored.checkpoint_id}},
            checkpoint={**checkpoint, "channel_values": values},
            metadata=cast(CheckpointMetadata, self._loads(md_kind, md_data)),
            parent_config={"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                            "checkpoint_id": parent_id}} if parent_id else None,
            pending_writes=writes,
        )  # fmt: skip

    def _write(self, task_id: str, packed: bytes, where: str) -> PendingWrite:
        name, kind, data = unpack_parts(packed, where)
        return task_id, name.decode(), self._loads(kind, data)

    def _history(
        self, thread_id: str, names: list[str], found: GraphHistoryReply
    ) -> dict[str, DeltaChannelHistory]:
        """The base class's result from a graph_history reply: every channel asked
        for, in order, with its writes and (if the walk found one) its seed."""
        where = f"the delta channel history of thread {thread_id!r}"
        writes: dict[str, list[PendingWrite]] = {name: [] for name in names}
        for task_id, packed in found.writes:
            write = self._write(task_id, packed, where)
            writes[write[1]].append(write)
        seeds = {}
        for number, blob in found.seeds:
            kind, data = unpack_parts(blob, where)
            seeds[names[number - 1]] = self._loads(kind, data)
        result: dict[str, DeltaChannelHistory] = {}
        for name in names:
            entry: DeltaChannelHistory = {"writes": writes[name]}
            if name in seeds:
                entry["seed"] = seeds[name]
            result[name] = entry
        return result

    def _selection(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> _Selection:
        """What a list() reads (the range, page size) and keeps (id, before, filter,
        limit): one place for list and alist."""
        config = config or _ALL
        before_id = get_checkpoint_id(before) if before else None
        upper, lower = self.spec.listing(config["configurable"].get("checkpoint_ns"), before_id)
        return _Selection(get_checkpoint_id(config), before_id, filter or {}, limit, upper, lower)

    def _sync_register(self, config: RunnableConfig, thread_id: str) -> None:
        user = self._user(config, thread_id)
        if user is not None:
            self._sync_graph().register(user, thread_id)
            self._remember(user, thread_id)

    async def _async_register(self, config: RunnableConfig, thread_id: str) -> None:
        user = self._user(config, thread_id)
        if user is not None:
            assert self._async is not None
            await self._async.register(user, thread_id)
            self._remember(user, thread_id)

    def _sync_graph(self) -> Graph:
        assert self._sync is not None  # the sync methods bridge onto the loop otherwise
        return self._sync

    def _bridge(self, call: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        """A sync call of a saver over an AsyncStore, run on the event loop its async
        methods use, as LangGraph's async savers do: a sync node of an async graph runs
        in a worker thread and may call a subgraph's invoke, which calls these."""
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            raise RedistateError(
                "this saver has only an async connection and no running event loop has"
                " used it yet: use the a* methods, or RedisStateSaver.from_url /"
                " RedisStateSaver(Store(...)) for sync ones"
            )
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise RedistateError(
                "a sync method of this saver was called on its event loop's thread (it"
                " would wait for itself): use the a* methods there"
            )
        return asyncio.run_coroutine_threadsafe(call(), loop).result()

    # -- sync ----------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint: graph_put, one script on the thread's slot.

        Raises:
            LockLost: a saver ``with_lease`` whose lease no longer holds the thread.
        """
        if self._sync is None:
            return self._bridge(lambda: self.aput(config, checkpoint, metadata, new_versions))
        with telemetry.operation("put", GRAPH.name, self._ns, _tid(config)):
            args, saved = self._put_args(config, checkpoint, metadata, new_versions)
            self._sync_register(config, args[0])
            self._sync_graph().put(*args)
            return saved

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes for a checkpoint: graph_writes, one script."""
        if self._sync is None:
            return self._bridge(lambda: self.aput_writes(config, writes, task_id, task_path))
        with telemetry.operation("put_writes", GRAPH.name, self._ns, _tid(config)):
            args = self._writes_args(config, writes, task_id, task_path)
            self._sync_register(config, args[0])
            self._sync_graph().put_writes(*args)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, else the thread's latest: one script."""
        if self._sync is None:
            return self._bridge(lambda: self.aget_tuple(config))
        with telemetry.operation("get_tuple", GRAPH.name, self._ns, _tid(config)):
            thread_id, upper, lower = self._range(config)
            found = self._sync_graph().read(thread_id, upper, lower, 1)
            return self._tuple(thread_id, found[0][1]) if found else None

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> dict[str, DeltaChannelHistory]:
        """For each channel, the writes along the parent chain of the checkpoint
        ``config`` names (else the latest), oldest first, and the value stored at the
        nearest ancestor that has one (``seed``): the base class's result, in one
        script (graph_history) however long the chain, where the base class reads
        each ancestor with its own get_tuple.

        Raises:
            TypeError: one str instead of a sequence of channels, or a channel that is
                not a str.
            ValueError: a channel holding NUL or \\x01.
        """
        names = _channels(channels)
        if not names:
            return {}
        if self._sync is None:
            return self._bridge(
                lambda: self.aget_delta_channel_history(config=config, channels=names)
            )
        with telemetry.operation("get_delta_channel_history", GRAPH.name, self._ns, _tid(config)):
            thread_id, upper, lower = self._range(config)
            found = self._sync_graph().history(thread_id, upper, lower, _encoded(names))
            return self._history(thread_id, names, found)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of one thread (and namespace, if the config names
        one), or of every thread when ``config`` is None (SCAN)."""
        if self._sync is None:
            yield from self._bridge(
                lambda: _collect(self.alist(config, filter=filter, before=before, limit=limit))
            )
            return
        graph = self._sync_graph()
        threads = [_thread(config)[0]] if config else list(graph.threads())
        chosen = self._selection(config, filter, before, limit)
        for thread_id in threads:
            if chosen.done:
                return
            for _, stored in graph.pages(thread_id, chosen.upper, chosen.lower, chosen.size):
                kept = chosen.take(self._tuple(thread_id, stored))
                if kept is not None:
                    yield kept
                if chosen.done:
                    return  # before the pages ask the server for more

    def delete_thread(self, thread_id: str) -> None:
        """Every checkpoint, value and write of the thread: one DEL."""
        if self._sync is None:
            return self._bridge(lambda: self.adelete_thread(thread_id))
        with telemetry.operation("delete_thread", GRAPH.name, self._ns, thread_id):
            self._sync_graph().delete(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """The checkpoints (and their writes) of these runs, in every thread: one
        script per thread of the namespace (SCAN), the runs being indexed per thread.

        Raises:
            TypeError: a single str instead of a sequence of ids.
        """
        if self._sync is None:
            return self._bridge(lambda: self.adelete_for_runs(run_ids))
        with telemetry.operation("delete_for_runs", GRAPH.name, self._ns):
            runs = _ids(run_ids, "run_ids")
            if runs:
                self._sync_graph().delete_runs(runs)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Add the source's checkpoints and writes to the target (those it lacks)."""
        if self._sync is None:
            return self._bridge(lambda: self.acopy_thread(source_thread_id, target_thread_id))
        with telemetry.operation("copy_thread", GRAPH.name, self._ns, source_thread_id):
            self._sync_graph().copy(source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: only the newest checkpoint of each namespace stays;
        ``delete``: nothing stays.

        Raises:
            TypeError: a single str instead of a sequence of ids.
            ValueError: an unknown strategy.
            NotImplementedError: ``keep_latest`` on threads that use a DeltaChannel
                (their values are rebuilt from older checkpoints); the others are
                pruned.
        """
        if self._sync is None:
            return self._bridge(lambda: self.aprune(thread_ids, strategy=strategy))
        with telemetry.operation("prune", GRAPH.name, self._ns):
            graph = self._sync_graph()
            _ids(thread_ids, "thread_ids")
            _check_strategy(strategy)
            refused = []
            for thread_id in thread_ids:
                if strategy == "delete":
                    graph.delete(thread_id)
                elif not graph.keep_latest(thread_id):
                    refused.append(thread_id)
            _refuse(refused)

    # -- async ---------------------------------------------------------------------------

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`."""
        if self._async is None:
            return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)
        with telemetry.operation("put", GRAPH.name, self._ns, _tid(config)):
            self._loop = asyncio.get_running_loop()
            args, saved = self._put_args(config, checkpoint, metadata, new_versions)
            await self._async_register(config, args[0])
            await self._async.put(*args)
            return saved

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes`."""
        if self._async is None:
            return await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)
        with telemetry.operation("put_writes", GRAPH.name, self._ns, _tid(config)):
            self._loop = asyncio.get_running_loop()
            args = self._writes_args(config, writes, task_id, task_path)
            await self._async_register(config, args[0])
            await self._async.put_writes(*args)
            return None

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple`."""
        if self._async is None:
            return await asyncio.to_thread(self.get_tuple, config)
        with telemetry.operation("get_tuple", GRAPH.name, self._ns, _tid(config)):
            self._loop = asyncio.get_running_loop()
            thread_id, upper, lower = self._range(config)
            found = await self._async.read(thread_id, upper, lower, 1)
            return self._tuple(thread_id, found[0][1]) if found else None

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> dict[str, DeltaChannelHistory]:
        """Async :meth:`get_delta_channel_history`."""
        names = _channels(channels)
        if not names:
            return {}
        if self._async is None:
            return await asyncio.to_thread(
                lambda: self.get_delta_channel_history(config=config, channels=names)
            )
        with telemetry.operation("get_delta_channel_history", GRAPH.name, self._ns, _tid(config)):
            self._loop = asyncio.get_running_loop()
            thread_id, upper, lower = self._range(config)
            found = await self._async.history(thread_id, upper, lower, _encoded(names))
            return self._history(thread_id, names, found)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`."""
        graph = self._async
        if graph is None:
            found = await asyncio.to_thread(
                lambda: [*self.list(config, filter=filter, before=before, limit=limit)]
            )
            for item in found:
                yield item
            return
        self._loop = asyncio.get_running_loop()
        threads = [_thread(config)[0]] if config else [t async for t in graph.threads()]
        chosen = self._selection(config, filter, before, limit)
        for thread_id in threads:
            if chosen.done:
                return
            async for _, stored in graph.pages(thread_id, chosen.upper, chosen.lower, chosen.size):
                kept = chosen.take(self._tuple(thread_id, stored))
                if kept is not None:
                    yield kept
                if chosen.done:
                    return  # before the pages ask the server for more

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        if self._async is None:
            return await asyncio.to_thread(self.delete_thread, thread_id)
        with telemetry.operation("delete_thread", GRAPH.name, self._ns, thread_id):
            self._loop = asyncio.get_running_loop()
            await self._async.delete(thread_id)
            return None

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        graph = self._async
        if graph is None:
            return await asyncio.to_thread(self.delete_for_runs, run_ids)
        with telemetry.operation("delete_for_runs", GRAPH.name, self._ns):
            self._loop = asyncio.get_running_loop()
            runs = _ids(run_ids, "run_ids")
            if runs:
                await graph.delete_runs(runs)
            return None

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        if self._async is None:
            return await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)
        with telemetry.operation("copy_thread", GRAPH.name, self._ns, source_thread_id):
            self._loop = asyncio.get_running_loop()
            await self._async.copy(source_thread_id, target_thread_id)
            return None

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async :meth:`prune`."""
        graph = self._async
        if graph is None:
            return await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)
        with telemetry.operation("prune", GRAPH.name, self._ns):
            self._loop = asyncio.get_running_loop()
            _ids(thread_ids, "thread_ids")
            _check_strategy(strategy)
            refused = []
            for thread_id in thread_ids:
                if strategy == "delete":
                    await graph.delete(thread_id)
                elif not await graph.keep_latest(thread_id):
                    refused.append(thread_id)
            _refuse(refused)
            return None


_ALL: RunnableConfig = {"configurable": {}}
# (user, thread) pairs a saver remembers as registered before it starts over.
_REMEMBERED = 100_000


async def _collect(items: AsyncIterator[_T]) -> list[_T]:
    return [item async for item in items]


def _tid(config: object) -> object:
    """The thread id a config names, for a span (set only with ``record_ids``)."""
    found = config.get("configurable") if isinstance(config, dict) else None
    return found.get("thread_id") if isinstance(found, dict) else None


def _thread(config: RunnableConfig) -> tuple[str, str]:
    """(thread id, checkpoint namespace) of a config.

    Raises:
        ValueError: no thread_id in ``config["configurable"]``.
    """
    configurable = config.get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None:
        raise ValueError("the config needs configurable.thread_id")
    return str(thread_id), configurable.get("checkpoint_ns", "") or ""


@dataclass
class _Selection:
    """One list() call: the range it reads, and which checkpoints it keeps."""

    wanted: str | None  # config's checkpoint_id
    before: str | None  # before's checkpoint_id (also filtered when listing every ns)
    filter: dict[str, Any]
    left: int | None  # the limit, counted down
    upper: bytes
    lower: bytes

    @property
    def size(self) -> int:
        """Checkpoints per read: the limit itself when every one read is returned (no
        filter to apply client-side), else pages of 100."""
        if self.left is None or self.filter or self.wanted or self.before:
            return 100
        return max(1, min(self.left, 100))

    @property
    def done(self) -> bool:
        return self.left is not None and self.left <= 0

    def take(self, item: CheckpointTuple) -> CheckpointTuple | None:
        """``item`` if the list returns it (counted against the limit), else None."""
        checkpoint_id = item.config["configurable"]["checkpoint_id"]
        if self.wanted and checkpoint_id != self.wanted:
            return None
        if self.before and checkpoint_id >= self.before:
            return None
        if not all(item.metadata.get(k) == v for k, v in self.filter.items()):
            return None
        if self.left is not None:
            self.left -= 1
        return item


def _ids(values: Sequence[str], what: str) -> list[bytes]:
    if isinstance(values, str | bytes):
        raise TypeError(f"{what} must be a sequence of ids, not one {type(values).__name__}")
    return [check_name(v, what) for v in values]


def _channels(channels: Sequence[str]) -> list[str]:
    """The channels of a history call, each once, in the order first named.

    Raises:
        TypeError: one str (or bytes) instead of a sequence, or a channel not a str.
        ValueError: a channel holding NUL or \\x01.
    """
    if isinstance(channels, str | bytes):
        raise TypeError(
            f"channels must be a sequence of channel names, not one "
            f"{type(channels).__name__}: {channels!r:.80}"
        )
    names = list(channels)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"a channel must be a str, got {type(name).__name__}: {name!r:.80}")
        check_name(name, "channel")
    return list(dict.fromkeys(names))


def _encoded(names: list[str]) -> list[bytes]:
    return [check_name(name, "channel") for name in names]


def _refuse(threads: list[str]) -> None:
    if threads:
        raise NotImplementedError(
            f"keep_latest can't prune threads that use a DeltaChannel (their values are "
            f"rebuilt from older checkpoints): {', '.join(threads)}"
        )


def _check_strategy(strategy: str) -> None:
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"prune strategy must be 'keep_latest' or 'delete', got {strategy!r}")
