"""The only place that talks to redis-py: commands, scripts, retries, error translation."""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import threading
import time
import warnings
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Final, TypeVar, cast, overload

from redis import exceptions as rex
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from . import telemetry
from ._io import (
    async_confirm,
    async_initialize,
    async_lock,
    async_loop,
    async_lost,
    async_offload,
)
from ._translate import (
    ERRORS,
    describe,
    first_contact,
    refused_certificate,
    translate,
    unavailable,
)
from .batching import Call
from .durability import DEFAULT as DEFAULT_DURABILITY
from .durability import Durability, check_durability, check_replica_timeout
from .errors import ForkedStore, LockLost, NotReplicated, RedistateError, RedistateWarning
from .loops import drop_connections, unusable
from .retry import RetryPolicy, is_transient, refused
from .scripts import Parsed, Reply, Script, library, script
from .server import (
    CONFIG_FIELDS,
    INFO_SECTIONS,
    ServerCheck,
    ServerFacts,
    check_server_check,
    embedded_facts,
    judge,
    parse_facts,
)

__all__ = ["AsyncConnection"]


def _node_options(cluster: Any) -> dict[str, Any]:
    """The cluster's connection options (credentials, timeouts, TLS…) for a plain client
    of one of its nodes: every option the plain client takes, TLS included."""
    kwargs: dict[str, Any] = dict(cluster.nodes_manager.connection_kwargs)
    accepted = inspect.signature(Redis.__init__).parameters
    options = {k: v for k, v in kwargs.items() if k in accepted and k not in ("host", "port")}
    connection_class = kwargs.get("connection_class")
    if connection_class is not None and "SSL" in connection_class.__name__:
        options["ssl"] = True  # some cluster clients keep TLS as their connection class
    options["retry"] = Retry(NoBackoff(), 0)
    options["decode_responses"] = False
    return options


_READ_LISTS = script("read_lists")
R = TypeVar("R", bound=Reply)
# Loads of a script per call after NOSCRIPT, at most. A SCRIPT FLUSH (or a restart)
# can land between a load and the resend: each costs one more load; this many in a row
# means something flushes faster than we load (an error then, not a loop).
_RELOADS = 5
# Write-memory keys whose latest returned call is kept (the oldest go first); a key
# left out only keeps its entries until they expire with the memory.
_ACKS = 4096
_NO_REPLY: Final = object()  # script() raised before a reply came back
_UNTRACED: Final = contextlib.nullcontext()  # a scan page of no operation's
logger = logging.getLogger("redistate")
# Servers this process warned about running scripts by EVALSHA (a denied FUNCTION LOAD
# or FCALL): once per server and process, as the server check warns.
_warned: set[str] = set()
_warned_lock = threading.Lock()


def _absent(reply: object) -> bool:
    """Whether a call's error says the server lacks what it called: NOSCRIPT, a function
    library not loaded (a first use, a restart without persistence, FUNCTION FLUSH, a
    failover to a replica that was behind), or no FCALL at all (Redis 6)."""
    if isinstance(reply, rex.NoScriptError):
        return True
    if not isinstance(reply, rex.ResponseError):
        return False
    text = str(reply)
    return text.startswith("Function not found") or _no_fcall(text)


def _no_fcall(text: str) -> bool:
    """An FCALL the server does not have, or that this user may not run."""
    lowered = text.lower()
    return ("unknown command" in lowered and "fcall" in lowered) or (
        "permissions to run the 'fcall' command" in lowered
    )


# try/except rather than a context manager: free on the happy path, which is every call.

# Embedded (fakeredis) connections of this process. Their data live in this process's
# memory: a forked child writing to its copy loses every write without a word. After a
# fork the child's copies are marked unready, so their next call goes to _ready (the
# hot path pays nothing more), which refuses it.
_EMBEDDED: weakref.WeakSet[AsyncConnection] = weakref.WeakSet()


def _forked() -> None:
    for conn in list(_EMBEDDED):
        conn._unready = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class AsyncConnection:
    """A redis-py client (standalone, Sentinel master or Cluster), the scripts it runs
    and the store's retry policy. One per store; the store owns and closes the client.

    Every call is tried once; a transient failure hands it to :meth:`_recover`, which
    sends it again under the policy. Scripts are safe to send again: each write
    carries an id the server remembers for ``memory_ms`` (0 when never retrying).
    """

    __slots__ = (
        "__weakref__",
        "_acks",
        "_check",
        "_check_lock",
        "_checked",
        "_cluster",
        "_embedded",
        "_fcall",
        "_loaded",
        "_lock",
        "_loop",
        "_nodes",
        "_pid",
        "_probed",
        "_replicas",
        "_too_long",
        "_unready",
        "address",
        "client",
        "durability",
        "memory_ms",
        "policy",
        "recovered",
        "renewals",
        "resends",
        "rest",
        "timeout",
        "wait_ms",
    )

    def __init__(
        self,
        client: Redis | RedisCluster,
        policy: RetryPolicy | None = None,
        durability: Durability = DEFAULT_DURABILITY,
        replica_timeout: float = 1.0,
        server_check: ServerCheck = "warn",
    ) -> None:
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
        # Asked on every call: RedisCluster's isinstance goes through a Protocol (~1 µs).
        self._cluster = isinstance(client, RedisCluster)
        self.address = describe(client)
        # One layer of retries: redis-py's would resend a script behind our back and
        # multiply with ours.
        client.set_retry(Retry(NoBackoff(), 0))
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
        self.policy = RetryPolicy() if policy is None else policy
        self.memory_ms = self.policy.memory_ms(self.timeout)
        self.resends = 0  # tries after a transient failure, for tests and metrics
        self.recovered = 0  # calls that succeeded only on a later try
        # The server check runs before the first command (a constructor cannot do
        # I/O); the embedded fakeredis never evicts, so it is not asked.
        self._embedded = type(client).__module__.startswith("fakeredis")
        self._check: ServerCheck = check_server_check(server_check)
        if self._embedded:
            self._check = "off"
        self._checked = False
        # Until the first contact succeeds (see _ready) every call goes there first.
        self._unready = not self._embedded
        self._pid = os.getpid()  # the process the embedded data belong to
        if self._embedded:
            _EMBEDDED.add(self)
        self._probed = False  # see _diagnose
        self._lock = async_lock()
        self._check_lock = async_lock()
        self._nodes: dict[str, Redis] = {}
        # The event loop its connections belong to (None: none yet, or a sync one).
        self._loop: object = None
        # Scripts run as functions (FCALL of redistate's library, loaded on a server when
        # it answers "Function not found") until a server has no FUNCTION or this user
        # may not load the library: then by EVALSHA, for the rest of this connection.
        self._fcall = True
        # Over a REST API (redistate.core.rest), by EVALSHA from the start: FUNCTION is
        # newer there than EVALSHA, and there is no WAIT for replicated writes.
        self.rest = "rest" in kwargs
        if self.rest:
            self._fcall = False
        # By EVALSHA, the SHAs a batch found loaded, per server client: a batch loads
        # the others first, in its own pipeline (see _writes_to).
        self._loaded: dict[int, set[str]] = {}
        # Per write-memory key, the id of this client's latest call on it that has
        # returned: sent with the next call there, so the server drops its entry.
        self._acks: dict[str, str] = {}
        self.renewals: Any = None  # the leases' renewer (redistate.leases.renewals)
        self.durability = durability
        self._replicas = check_durability(durability)
        self.wait_ms = check_replica_timeout(replica_timeout)
        # The socket must outlast WAIT, or it would time out first and the write be
        # resent blind: refused for replicated writes (at once if they are the default).
        self._too_long: str | None = None
        if self.timeout and self.wait_ms >= self.timeout * 1000:
            self._too_long = (
                f"replica_timeout {replica_timeout!r} s must be below the client's socket "
                f"timeout of {self.timeout:g} s"
            )
        self.replicas(None)

    def replicas(self, durability: str | None) -> int:
        """Replicas a write must reach: the store's default, or ``durability``'s.

        Raises:
            ValueError: a replicated write, and a replica_timeout the socket would not
                wait for.
        """
        replicas = self._replicas if durability is None else check_durability(durability)
        if replicas and self.rest:
            raise ValueError(
                f"durability='replicated' needs WAIT, which the REST API at "
                f"{self.address} does not have; nothing was sent. Use durability='primary', "
                f"or connect over rediss:// to wait for replicas"
            )
        if replicas and self._too_long:
            raise ValueError(self._too_long)
        return replicas

    async def _ready(self) -> None:
        """The store's first contact, before its first command: a cluster learns its
        topology, and the servers are checked (``server_check``), or with the check off
        one server is sent TIME (which the namespace's ACL allows: the scripts call it).
        A failure no retry cures is raised at once (a refused connection: nothing
        listens at the address; a TLS certificate failure; no startup node answers):
        while ``_unready``, _recover asks first_contact. Until it succeeds every command
        comes here first; after, a refused connection is transient (a restarting
        server), and the hot path pays one attribute test. An embedded store gets here
        only in a process forked after it was made (see _forked), and is refused.

        In an event loop other than the last one's (a loop per invocation, the
        serverless pattern), the connections of that one are dropped first: they
        belong to its loop (see redistate.core.loops)."""
        loop = async_loop()
        if self._loop is not loop:
            self._rebind(loop)
            if not self._unready:
                return
        if self._embedded:
            raise ForkedStore(
                f"this embedded store (in-process fakeredis) was made in process "
                f"{self._pid} and used in its forked child {os.getpid()}: its data "
                f"live in the parent's memory, so a write here would be lost without a "
                f"word; nothing was sent. Make the store in the child, or share state "
                f"through a server: Store.from_url('redis://host:port/0')"
            )
        try:
            if self._cluster:
                await async_initialize(self.client, self._lock)
            elif self._check == "off":
                await self._contact()
        except (*ERRORS, rex.RedisClusterException) as exc:
            raise first_contact(exc, self.address) or translate(exc, self.address) from exc
        if self._check != "off":
            async with self._check_lock:
                if not self._checked:
                    judge(await self.server_facts(), self._check)  # UnsafeServer if strict
                    self._checked = True
        self._unready = False

    def _rebind(self, loop: object) -> None:
        """Make this connection the caller's loop's: drop the connections of the loop
        it last ran in, which has ended (a loop still running elsewhere is refused:
        its calls may be using them), and make new locks (a lock of an event loop binds to
        the loop that first waited on it)."""
        if self._loop is not None:
            if not unusable(self._loop):
                raise RuntimeError(
                    "this store's connection is in use by another running event loop: "
                    "make one AsyncStore per event loop (per thread that runs one)"
                )
            drop_connections(self.client, *self._nodes.values())
            self._nodes.clear()
            self._lock, self._check_lock = async_lock(), async_lock()
            # Its renewer ran in that loop: the leases it kept (an invocation's that
            # never released) are renewed no more, and expire for their next owner.
            self.renewals = None
        self._loop = loop

    async def _contact(self) -> None:
        call = functools.partial(self.client.execute_command, "TIME")
        started = time.monotonic()
        try:
            await call()
        except ERRORS as exc:
            await self._recover(exc, call, started)

    async def server_facts(self) -> list[ServerFacts]:
        """Each server's eviction, persistence and replication facts, read now (a
        cluster: every primary): one pipeline per server, retried like a read."""
        if self._embedded:
            return [embedded_facts(self.address)]
        if self._loop is not async_loop():  # _ready asks it too: no _ready here
            self._rebind(async_loop())
        targets: list[tuple[str, Redis]] = []
        if self._cluster:
            await async_initialize(self.client, self._lock)
            cluster: Any = self.client  # partly untyped in redis-py's sync flavour
            for node in cluster.get_primaries():
                targets.append((f"{node.host}:{node.port}", self._primary_client(node)))
        else:
            targets.append((await self._primary_address(), cast(Redis, self.client)))
        found = []
        for address, client in targets:
            call = functools.partial(self._facts_of, client, address)
            started = time.monotonic()
            try:
                found.append(await call())
            except ERRORS as exc:
                found.append(await self._recover(exc, call, started))
        return found

    async def _primary_address(self) -> str:
        """The address, and for a Sentinel service the primary it names now."""
        pool: Any = getattr(self.client, "connection_pool", None)
        if not hasattr(pool, "get_master_address"):
            return self.address
        try:
            host, port = await pool.get_master_address()
        except ERRORS:
            return self.address  # the facts' own call reports what is wrong
        return f"{self.address} (primary {host}:{port})"

    @staticmethod
    async def _facts_of(client: Redis, address: str) -> ServerFacts:
        # raise_on_error=False: a denied (NOPERM) or renamed (unknown command) CONFIG or
        # INFO is a fact, not a failure; only a transient error is retried.
        async with client.pipeline(transaction=False) as pipe:
            queue: Any = pipe.execute_command  # untyped in redis-py's sync flavour
            for name in CONFIG_FIELDS:
                queue("CONFIG", "GET", name)
            for section in INFO_SECTIONS:
                queue("INFO", section)
            replies = await pipe.execute(raise_on_error=False)
        for reply in replies:
            if isinstance(reply, Exception) and is_transient(reply):
                raise reply
        return parse_facts(address, replies)

    async def _recover(
        self,
        first: BaseException,
        call: Callable[[], Any],
        started: float,
        budget: float | None = None,
        command: str = "",
    ) -> Any:
        """Try ``call`` again after its first try (sent at ``started``, monotonic) failed
        with ``first``; translate what finally fails. No try starts later than the
        policy's deadline, or ``budget``, after the first was sent: that bounds how
        late a resend can come, which the write memory must cover. ``command`` names
        the call in an ACL denial whose message names none (a denied key)."""
        policy = self.policy
        if self._unready:  # first contact: a wrong address or CA is not retried
            fatal = first_contact(first, self.address) or await self._diagnose(first)
            if fatal is not None:
                raise fatal from first
        if not (policy.retries and is_transient(first)):
            raise translate(first, self.address, command) from first
        deadline = policy.deadline if budget is None else min(policy.deadline, budget)
        remaining = deadline - (time.monotonic() - started)
        if remaining <= 0:
            raise unavailable(first, self.address, 1, time.monotonic() - started) from first
        tries = 1
        # Imported on the first failure: a process whose calls all succeed never loads it.
        from tenacity import (
            AsyncRetrying,
            retry_if_exception,
            stop_after_attempt,
            stop_before_delay,
            wait_random_exponential,
        )

        retrying = AsyncRetrying(
            stop=stop_after_attempt(policy.attempts - 1) | stop_before_delay(remaining),
            wait=wait_random_exponential(multiplier=policy.base, max=policy.cap),
            retry=retry_if_exception(is_transient),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    tries += 1
                    self.resends += 1
                    telemetry.note(telemetry.RETRIES)
                    result = await call()
            self.recovered += 1
            return result
        except ERRORS as exc:
            if is_transient(exc):
                raise unavailable(exc, self.address, tries, time.monotonic() - started) from exc
            raise translate(exc, self.address, command) from exc

    async def _diagnose(self, first: BaseException) -> RedistateError | None:
        """The error behind a TLS connection dropped on first contact, or None: a server
        refusing the client certificate often resets the connection before its alert is
        read (see tls_probe). Probed once per store, off the event loop."""
        from .tls_probe import certificate_alert, probe_target  # only on a failure

        target = probe_target(self.client)
        if self._probed or target is None or not isinstance(first, rex.ConnectionError):
            return None
        if isinstance(first, rex.TimeoutError) or refused(first):
            return None
        self._probed = True
        alert = await async_offload(certificate_alert, target)
        return None if alert is None else refused_certificate(alert, self.address)

    @overload
    async def script(
        self,
        script: Parsed[R],
        keys: Sequence[str],
        args: Sequence[Any],
        budget: float | None = None,
        replicas: int = 0,
        lease: Any = None,
        wid: str | None = None,
    ) -> R: ...

    @overload
    async def script(
        self,
        script: Script,
        keys: Sequence[str],
        args: Sequence[Any],
        budget: float | None = None,
        replicas: int = 0,
        lease: Any = None,
        wid: str | None = None,
    ) -> Any: ...

    async def script(
        self,
        script: Script,
        keys: Sequence[str],
        args: Sequence[Any],
        budget: float | None = None,
        replicas: int = 0,
        lease: Any = None,
        wid: str | None = None,
    ) -> Any:
        """EVALSHA ``script``; on NOSCRIPT (first use, restart, failover, SCRIPT FLUSH)
        load it and send it again: two extra round trips, once per server, and two more
        for each flush between the load and the resend (_RELOADS loads at most). ``budget``
        (seconds) shortens the retry deadline for this call. With ``replicas``, WAIT for
        that many replicas (at most the store's replica_timeout) in the same round trip.
        ``lease``: the lease guarding the write. Nothing is sent past its local
        deadline, and a LockLost reply marks it lost at once. ``wid``: the id the
        call's write memory keeps for it (a script with ``memory``), acknowledged to
        the server with the next call there once this one failed or its reply says it
        wrote (a conflict leaves the previous ack standing). Returns the reply as
        ``script.read`` makes it (parsed, for a script made with ``replying``); only one
        that ``script.wrote`` is waited for.

        Raises:
            NotReplicated: fewer replicas confirmed the write in time.
            LockLost: ``lease`` is lost, past its deadline, or the script refused it.
        """
        if lease is not None:
            await async_confirm(lease)
        if self._unready or self._loop is not async_loop():
            await self._ready()
        telemetry.trip(script.name, self.address)
        first, again = self._memory_args(script, keys, args)
        send = (
            functools.partial(self._evalsha_wait, replicas=replicas) if replicas else self._evalsha
        )
        started = time.monotonic()
        reply: Any = _NO_REPLY
        try:
            reply = await send(script, keys, first)
            if lease is not None and script.guarded(reply):
                lease._written(started, args)  # the fence check renewed an inline lease
            return reply
        except ERRORS as exc:
            try:
                retry = functools.partial(send, script, keys, again)
                reply = await self._recover(exc, retry, started, budget, self._verb)
                if lease is not None and script.guarded(reply):
                    lease._written(started, args)
                return reply
            except LockLost as refused:
                if lease is None:
                    raise
                # The first to learn it: guarded writes stop now, and the message says
                # what happened to the lease (the reply names the holder's fence).
                explain = getattr(lease, "_refused", None)
                message = explain(str(refused)) if callable(explain) else str(refused)
                await async_lost(lease)
                raise LockLost(message) from refused.__cause__  # the server's reply
        finally:
            # Done with: it failed (the caller does not send it again) or its reply
            # wrote. A reply that wrote nothing (a chain end moved, a reseal) may be
            # followed by the same id sent again: not acked.
            done = reply is _NO_REPLY or script.wrote(reply)
            if wid is not None and script.memory is not None and done:
                self._acked(keys[script.memory[0]], wid)

    @property
    def _verb(self) -> str:
        """The command scripts are sent with (names it in an ACL denial)."""
        return "fcall" if self._fcall else "evalsha"

    def _call(self, script: Script, keys: Sequence[str], args: Sequence[Any]) -> tuple[Any, ...]:
        """The command that runs ``script``: FCALL of its function, else EVALSHA."""
        if self._fcall:
            return ("FCALL", script.function, len(keys), *keys, *args)
        return ("EVALSHA", script.sha, len(keys), *keys, *args)

    async def _supply(
        self, client: Redis | RedisCluster, scripts: Sequence[Script], error: object
    ) -> None:
        """Give ``client``'s server what ``error`` (an _absent reply) said it lacks: the
        function library (FUNCTION LOAD, once for every script), or each script (SCRIPT
        LOAD) once this connection runs them by EVALSHA."""
        text = str(error)
        if self._fcall and "unknown command" in text.lower():
            self._fcall = False  # Redis 6, or FCALL renamed: EVALSHA, silently
        elif self._fcall and _no_fcall(text):
            self._by_evalsha(text, "fcall")
        elif self._fcall:
            await self._load(client)
        if not self._fcall:
            for source in dict.fromkeys(s.source for s in scripts):
                await client.script_load(source)

    async def _load(self, client: Redis | RedisCluster) -> None:
        """FUNCTION LOAD redistate's library on ``client``'s server (no REPLACE: the
        library's name is its version, so one already there is this very one). A server
        without FUNCTION, or a user who may not run it, makes scripts go by EVALSHA."""
        load: Any = client.execute_command  # untyped in redis-py's sync flavour
        try:
            await load("FUNCTION", "LOAD", library()[1])
        except rex.ResponseError as exc:
            text = str(exc)
            if "already exists" in text:
                return  # loaded by another client meanwhile
            if "unknown command" in text.lower() or "unknown subcommand" in text.lower():
                self._fcall = False  # Redis 6, or FUNCTION renamed: EVALSHA, silently
            elif isinstance(exc, rex.NoPermissionError) or "permissions to run" in text:
                self._by_evalsha(text, "function|load")
            else:
                raise

    def _by_evalsha(self, text: str, denied: str) -> None:
        """Run scripts by EVALSHA from now on, as this user may not run ``denied``; warn
        once per server and process, naming the permission."""
        self._fcall = False
        message = (
            f"redis at {self.address} refused {denied!r} to this user (ACL: {text}): "
            f"redistate runs its scripts by EVALSHA instead of FCALL, which costs the "
            f"server more per call (each call defines the scripts' libraries again). "
            f"Allow +fcall +function|load (`redistate acl` prints the ACL)"
        )
        with _warned_lock:
            first = self.address not in _warned
            _warned.add(self.address)
        if first:
            logger.warning(message, extra={"redistate_event": "evalsha_fallback"})
            warnings.warn(message, RedistateWarning, stacklevel=2)

    def _memory_args(
        self, script: Script, keys: Sequence[str], args: Sequence[Any]
    ) -> tuple[Sequence[Any], Sequence[Any]]:
        """The arguments of a first send and of a resend: a write memory's argument
        gains "r" on a resend (only a resend looks itself up) and the ack of this
        client's latest returned call on that memory (see rs_memory)."""
        if script.memory is None:
            return args, args
        key_at, arg_at = script.memory
        base = str(args[arg_at])
        if base == "0":  # nothing is remembered: never retried either
            return args, args
        ack = self._acks.get(keys[key_at])
        tail = "" if ack is None else f":{ack}"
        first, again = list(args), list(args)
        first[arg_at] = base + tail
        again[arg_at] = base + ("" if base.endswith("r") else "r") + tail
        return first, again

    def _acked(self, memory_key: str, wid: str) -> None:
        acks = self._acks
        acks.pop(memory_key, None)  # re-inserted last: the oldest keys go first
        acks[memory_key] = wid
        if len(acks) > _ACKS:
            try:
                del acks[next(iter(acks))]
            except (RuntimeError, KeyError, StopIteration):
                pass  # another thread changed it meanwhile: trimmed next time

    async def _evalsha_wait(
        self, script: Script, keys: Sequence[str], args: Sequence[Any], replicas: int
    ) -> Any:
        # WAIT counts the writes of its own connection: it must follow the script on the
        # same one, so a pipeline (on a cluster: to the node that owns the keys).
        wait_ms = self.wait_ms
        client = await self._node_client(keys[0])
        try:
            for loads in range(_RELOADS + 1):
                async with client.pipeline(transaction=False) as pipe:
                    queue: Any = pipe.execute_command  # untyped in redis-py's sync flavour
                    queue(*self._call(script, keys, args))
                    queue("WAIT", replicas, wait_ms)
                    reply, acked = await pipe.execute(raise_on_error=False)
                if not _absent(reply) or loads == _RELOADS:
                    break
                await self._supply(client, (script,), reply)
        except ERRORS:
            await self._relearn(keys[0])  # the node may be gone: a failover
            raise
        if isinstance(reply, Exception) and is_transient(reply):
            await self._relearn(keys[0])  # MOVED, READONLY...: the slot has a new owner
        if isinstance(reply, Exception):
            raise reply
        if isinstance(acked, Exception):
            raise acked
        parsed = script.read(reply)
        if int(acked) < replicas and script.wrote(parsed):
            raise NotReplicated(
                f"{keys[0]!r} was written on the primary at {self.address} but "
                f"{int(acked)} of {replicas} replica(s) confirmed it within {wait_ms} ms: "
                f"the write may still exist, and a failover may lose it"
            )
        return parsed

    async def _relearn(self, key: str) -> None:
        """After a replicated write met a dead node or a redirection: forget the plain
        client and let the cluster client find the key's owner again (its own command
        follows MOVED or re-reads the topology after a connection error), so the retry
        goes to the new primary."""
        if not self._cluster:
            return
        cluster: Any = self.client
        stale = self._nodes.pop(cluster.get_node_from_key(key).name, None)
        try:
            if stale is not None:
                await stale.aclose()
            await cluster.execute_command("EXISTS", key)
        except ERRORS:
            pass  # the retry that follows reports what is still wrong

    async def _node_client(self, key: str) -> Redis:
        """The client itself, or on a cluster a plain client of the key's primary."""
        if not self._cluster:
            return cast(Redis, self.client)
        cluster: Any = self.client
        return self._primary_client(cluster.get_node_from_key(key))

    def _primary_client(self, node: Any) -> Redis:
        """A plain client of one cluster node, kept until it fails (see _relearn)."""
        found = self._nodes.get(node.name)
        if found is None:
            found = self._nodes[node.name] = Redis(
                host=node.host, port=node.port, **_node_options(self.client)
            )
        return found

    async def _evalsha(self, script: Script, keys: Sequence[str], args: Sequence[Any]) -> Any:
        # execute_command directly: the same wire call as evalsha(), fewer Python frames.
        execute: Any = self.client.execute_command
        options: dict[str, Any] = {}
        if self._fcall:
            if self._cluster:
                # To the key's primary: without a target the cluster client would ask a
                # server for FCALL's keys first (COMMAND GETKEYS), a round trip per call.
                # It still follows MOVED and ASK itself.
                cluster: Any = self.client
                options["target_nodes"] = cluster.get_node_from_key(keys[0])
            try:
                reply = await execute("FCALL", script.function, len(keys), *keys, *args, **options)
            except rex.ResponseError as exc:
                reply = await self._reloaded(exc, script, keys, args, options)
            except ERRORS:
                if options:
                    await self._relearn(keys[0])  # a failover: the retry finds the new owner
                raise
            return script.read(reply)
        try:
            reply = await execute("EVALSHA", script.sha, len(keys), *keys, *args)
        except rex.NoScriptError as exc:
            reply = await self._reloaded(exc, script, keys, args, options)
        return script.read(reply)

    async def _reloaded(
        self,
        error: rex.ResponseError,
        script: Script,
        keys: Sequence[str],
        args: Sequence[Any],
        options: dict[str, Any],
    ) -> Any:
        """The call again after ``error``, once its server has what it lacked (an
        _absent error; any other is raised): the library, or the script. Again if it
        was flushed in between, at most _RELOADS loads."""
        execute: Any = self.client.execute_command
        for loads in range(1, _RELOADS + 1):
            if not _absent(error):
                raise error
            if self._fcall:  # the library goes to the server of the key (a primary)
                await self._supply(await self._node_client(keys[0]), (script,), error)
            else:  # a cluster client's SCRIPT LOAD goes to every primary
                await self._supply(self.client, (script,), error)
            if not self._fcall:
                options = {}
            elif options:  # a cluster: the key's primary now (a MOVED may have taught it)
                cluster: Any = self.client
                options["target_nodes"] = cluster.get_node_from_key(keys[0])
            try:
                return await execute(*self._call(script, keys, args), **options)
            except rex.ResponseError as exc:
                if loads == _RELOADS or not _absent(exc):  # flushed after every load
                    raise
                error = exc
        raise error  # not reached: the loop returns or raises

    async def get(self, key: str) -> bytes | None:
        if self._unready or self._loop is not async_loop():
            await self._ready()
        telemetry.trip(None, self.address)
        started = time.monotonic()
        try:
            # decode_responses is refused in __init__, so replies are bytes.
            return cast("bytes | None", await self.client.get(key))
        except ERRORS as exc:
            reply = await self._recover(exc, lambda: self.client.get(key), started, None, "get")
            return cast("bytes | None", reply)

    async def gets(self, keys: Sequence[str]) -> list[bytes | None]:
        """The value of each key in one round trip: one MGET on a single server; on a
        cluster one MGET per hash slot, pipelined (one batch per node). Not a
        transaction, so the keys may live in any slots. A read, so a resend is safe."""
        if not keys:
            return []
        if self._unready or self._loop is not async_loop():
            await self._ready()
        telemetry.trip(None, self.address)
        started = time.monotonic()
        try:
            return await self._gets(keys)
        except ERRORS as exc:
            retry = functools.partial(self._gets, keys)
            return cast("list[bytes | None]", await self._recover(exc, retry, started, None, "get"))

    async def _gets(self, keys: Sequence[str]) -> list[bytes | None]:
        if not self._cluster:
            # One command, not a pipeline of GETs: 1.7x faster for ten keys.
            return cast("list[bytes | None]", await self.client.mget(keys))
        cluster: Any = self.client  # the sync flavour's pipeline() is untyped
        slot_of = cluster.keyslot
        by_slot: dict[int, list[int]] = {}
        for at, key in enumerate(keys):
            by_slot.setdefault(slot_of(key), []).append(at)
        out: list[bytes | None] = [None] * len(keys)
        async with cluster.pipeline(transaction=False) as pipe:
            for members in by_slot.values():
                pipe.execute_command("MGET", *(keys[at] for at in members))
            replies = await pipe.execute()
        for members, values in zip(by_slot.values(), replies, strict=True):
            for at, value in zip(members, values, strict=True):
                out[at] = value
        return out

    async def batch(
        self, groups: Sequence[tuple[str, Sequence[tuple[Any, ...]]]], atomic: bool = True
    ) -> list[list[Any]]:
        """Many groups of commands in one round trip per server (a cluster: per primary);
        each group's keys share the hash slot of the key it is named by, and with
        ``atomic`` each group runs in its own MULTI/EXEC (one consistent view). Returns
        each group's replies in order, an error in place of a command that failed.
        Reads and resend-safe writes only: on a transient failure (a dropped
        connection, MOVED, a failover) the whole batch is sent again, as the retry
        policy allows. Over maxmemory (which refuses MULTI) the groups are read without
        it: each group's replies are then not one point-in-time view."""
        if not groups:
            return []
        if self._unready or self._loop is not async_loop():
            await self._ready()
        telemetry.trip(None, self.address)
        call = functools.partial(self._batch, groups, atomic)
        started = time.monotonic()
        try:
            return await call()
        except ERRORS as exc:
            return cast("list[list[Any]]", await self._recover(exc, call, started, None, "multi"))

    async def batch_checked(
        self, groups: Sequence[tuple[str, Sequence[tuple[Any, ...]]]], atomic: bool = True
    ) -> list[list[Any]]:
        """:meth:`batch`, its first failed command raised as a redistate error (an ACL
        denial as PermissionDenied naming the command), for callers that need every
        reply."""
        try:
            replies = await self.batch(groups, atomic=atomic)
        except rex.ResponseError as exc:  # refused inside a MULTI
            raise translate(exc, self.address, "multi") from exc
        for (_, commands), reply in zip(groups, replies, strict=True):
            for command, result in zip(commands, reply, strict=True):
                if isinstance(result, Exception):
                    raise translate(result, self.address, str(command[0]).lower()) from result
        return replies

    async def _batch(
        self, groups: Sequence[tuple[str, Sequence[tuple[Any, ...]]]], atomic: bool
    ) -> list[list[Any]]:
        out: list[list[Any]] = [[] for _ in groups]
        by_server: dict[int, tuple[Redis, list[int]]] = {}
        for at, (key, _) in enumerate(groups):
            client = await self._node_client(key)
            by_server.setdefault(id(client), (client, []))[1].append(at)
        for client, members in by_server.values():
            async with client.pipeline(transaction=False) as pipe:
                queue: Any = pipe.execute_command  # untyped in redis-py's sync flavour
                for at in members:
                    if atomic:
                        queue("MULTI")
                    for command in groups[at][1]:
                        queue(*command)
                    if atomic:
                        queue("EXEC")
                try:
                    replies = await pipe.execute(raise_on_error=False)
                except ERRORS:
                    await self._relearn(groups[members[0]][0])
                    raise
            cursor = 0
            for at in members:
                count = len(groups[at][1])
                if atomic:
                    cursor += count + 2  # MULTI, the QUEUED replies, then EXEC's
                    # A command refused while queued (MOVED, TRYAGAIN, OOM) aborts the
                    # EXEC (EXECABORT): its own error says what happened.
                    for queued in replies[cursor - count - 1 : cursor - 1]:
                        if isinstance(queued, rex.OutOfMemoryError):
                            # Over maxmemory the server refuses whatever is queued in
                            # MULTI, reads too: the batch is read without it.
                            return await self._batch(groups, atomic=False)
                        if isinstance(queued, Exception):  # an ACL denial, WRONGTYPE...
                            if is_transient(queued):
                                await self._relearn(groups[at][0])
                            raise queued
                    reply = replies[cursor - 1]
                    if isinstance(reply, Exception):  # the whole EXEC failed
                        if is_transient(reply):
                            await self._relearn(groups[at][0])
                        raise reply
                    out[at] = list(reply)
                else:
                    out[at] = list(replies[cursor : cursor + count])
                    cursor += count
                for reply in out[at]:
                    if isinstance(reply, Exception) and is_transient(reply):
                        await self._relearn(groups[at][0])
                        raise reply
        return out

    async def scripts(
        self, calls: Sequence[tuple[Script, Sequence[str], Sequence[Any]]]
    ) -> list[Any]:
        """Many scripts in one round trip per server (a cluster: per primary), each
        atomic on its own; each call's keys share one hash slot. Returns each reply as
        its script reads it (:meth:`Script.read`: parsed, for a bound reply type), or
        the translated error of a call that failed. Resend-safe scripts only (imports,
        recodes): on a transient failure the whole batch is sent again."""
        if not calls:
            return []
        if self._unready or self._loop is not async_loop():
            await self._ready()
        telemetry.trip(calls[0][0].name, self.address)
        sends = [(run, keys, self._memory_args(run, keys, args)) for run, keys, args in calls]
        started = time.monotonic()
        try:
            replies = await self._scripts([(run, keys, a[0]) for run, keys, a in sends])
        except ERRORS as exc:
            retry = functools.partial(self._scripts, [(run, keys, a[1]) for run, keys, a in sends])
            replies = await self._recover(exc, retry, started, None, self._verb)
        return [
            translate(r, self.address, self._verb) if isinstance(r, Exception) else run.read(r)
            for (run, _, _), r in zip(calls, replies, strict=True)
        ]

    async def _scripts(
        self, calls: Sequence[tuple[Script, Sequence[str], Sequence[Any]]]
    ) -> list[Any]:
        out: list[Any] = [None] * len(calls)
        by_server: dict[int, tuple[Redis, list[int]]] = {}
        for at, (_, keys, _) in enumerate(calls):
            client = await self._node_client(keys[0])
            by_server.setdefault(id(client), (client, []))[1].append(at)
        for client, members in by_server.values():
            todo = members
            for loads in range(_RELOADS + 1):
                async with client.pipeline(transaction=False) as pipe:
                    queue: Any = pipe.execute_command
                    for at in todo:
                        queue(*self._call(*calls[at]))
                    try:
                        replies = await pipe.execute(raise_on_error=False)
                    except ERRORS:
                        await self._relearn(calls[todo[0]][1][0])
                        raise
                missing: list[int] = []
                error: object = None
                for at, reply in zip(todo, replies, strict=True):
                    if _absent(reply) and loads < _RELOADS:
                        missing.append(at)
                        error = reply
                    elif isinstance(reply, Exception) and is_transient(reply):
                        await self._relearn(calls[at][1][0])
                        raise reply
                    else:
                        out[at] = reply
                if not missing:
                    break
                # Loaded once (the library, or each script), then only the calls that
                # met NOSCRIPT or "Function not found" again.
                await self._supply(client, [calls[at][0] for at in missing], error)
                todo = missing
        return out

    async def writes(self, calls: Sequence[Call], replicas: int = 0) -> list[Any]:
        """Many writes in one round trip per server (a cluster: per primary), each
        script atomic on its own, each server's in the order given. Returns each call's
        reply as its script reads it, or the error of a call that failed (translated;
        a lease past its deadline or refused is marked lost, as :meth:`script` does).
        With ``replicas``, one WAIT ends each server's pipeline and a write that server
        made and fewer replicas confirmed gets NotReplicated. On a transient failure
        only the calls without a reply are sent again, marked as resends: the write
        memory recognises each one that was applied. Calls acknowledged like
        :meth:`script`'s once answered."""
        out: list[Any] = [_NO_REPLY] * len(calls)
        if not calls:
            return out
        early: set[int] = set()  # refused before sending: already marked lost
        for at, call in enumerate(calls):
            if call.lease is not None:
                try:
                    await async_confirm(call.lease)
                except LockLost as lost:
                    out[at] = lost
                    early.add(at)
        if self._unready or self._loop is not async_loop():
            await self._ready()
        telemetry.trip(calls[-1].script.name, self.address)
        sends = [self._memory_args(c.script, c.keys, c.args) for c in calls]
        started = time.monotonic()
        first = [s[0] for s in sends]
        try:
            await self._writes(calls, first, out, replicas)
        except ERRORS as exc:
            again = [s[1] for s in sends]
            retry = functools.partial(self._writes, calls, again, out, replicas)
            try:
                await self._recover(exc, retry, started, None, self._verb)
            except RedistateError as failed:  # unavailable: whatever has no reply failed
                for at, reply in enumerate(out):
                    if reply is _NO_REPLY:
                        out[at] = failed
        for at, (call, reply) in enumerate(zip(calls, out, strict=True)):
            run = call.script
            if not isinstance(reply, Exception):  # the usual case first
                if call.wid is not None and run.memory is not None and run.wrote(reply):
                    self._acked(call.keys[run.memory[0]], call.wid)
                if call.lease is not None and run.guarded(reply):
                    call.lease._written(started, call.args)  # renewed an inline lease
                continue
            if not isinstance(reply, RedistateError):
                reply = out[at] = translate(reply, self.address, self._verb)
            if isinstance(reply, LockLost) and call.lease is not None and at not in early:
                explain = getattr(call.lease, "_refused", None)
                message = explain(str(reply)) if callable(explain) else str(reply)
                await async_lost(call.lease)
                refusal = LockLost(message)
                refusal.__cause__ = reply.__cause__  # the server's reply
                out[at] = refusal
            if call.wid is not None and run.memory is not None:  # failed: done with
                self._acked(call.keys[run.memory[0]], call.wid)
        return out

    async def _writes(
        self,
        calls: Sequence[Call],
        args: Sequence[Sequence[Any]],
        out: list[Any],
        replicas: int,
    ) -> None:
        """Send every call of ``calls`` without a reply in ``out`` yet; fill ``out``.
        A failure is raised once every server was tried and the replies that did
        come are kept: a retry sends only what is still unanswered."""
        by_server: dict[int, tuple[Redis, list[int]]] = {}
        for at, call in enumerate(calls):
            if out[at] is _NO_REPLY:
                client = await self._node_client(call.keys[0])
                by_server.setdefault(id(client), (client, []))[1].append(at)
        transient: BaseException | None = None
        for client, members in by_server.values():
            try:
                await self._writes_to(client, members, calls, args, out, replicas)
            except ERRORS as exc:  # this server's: the others are still sent
                transient = transient or exc
        if transient is not None:
            raise transient

    async def _writes_to(
        self,
        client: Redis,
        members: list[int],
        calls: Sequence[Call],
        args: Sequence[Sequence[Any]],
        out: list[Any],
        replicas: int,
    ) -> None:
        """One server's calls of :meth:`_writes`, in one pipeline (and one more per
        reload after NOSCRIPT)."""
        todo, wrote, acked = members, [], replicas
        transient: BaseException | None = None
        # By EVALSHA, scripts this server may never have seen are loaded ahead of the
        # calls: were one of them answered NOSCRIPT and sent again after a reload, the
        # calls behind it would have run first (a log before the save it follows). A
        # flush or a restart loses every script, so later NOSCRIPTs come in order.
        seen = self._loaded.setdefault(id(client), set())
        unseen = (calls[at].script for at in todo if calls[at].script.sha not in seen)
        preload = [] if self._fcall else list(dict.fromkeys(run.source for run in unseen))
        for loads in range(_RELOADS + 1):
            async with client.pipeline(transaction=False) as pipe:
                queue: Any = pipe.execute_command  # untyped in redis-py's sync flavour
                for source in preload:
                    queue("SCRIPT", "LOAD", source)
                for at in todo:
                    call = calls[at]
                    queue(*self._call(call.script, call.keys, args[at]))
                if replicas:
                    queue("WAIT", replicas, self.wait_ms)
                try:
                    replies = await pipe.execute(raise_on_error=False)
                except ERRORS:
                    await self._relearn(calls[todo[0]].keys[0])
                    raise
            waited = replies.pop() if replicas else replicas
            for sha in replies[: len(preload)]:
                if isinstance(sha, (bytes, str)):
                    seen.add(sha.decode() if isinstance(sha, bytes) else sha)
            replies, preload = replies[len(preload) :], []
            missing: list[int] = []
            error: object = None
            for at, reply in zip(todo, replies, strict=True):
                if not isinstance(reply, Exception):  # the usual case first
                    run = calls[at].script
                    if not self._fcall:
                        seen.add(run.sha)
                    out[at] = parsed = run.read(reply)
                    if replicas and run.wrote(parsed):
                        wrote.append(at)
                elif _absent(reply) and loads < _RELOADS:
                    missing.append(at)
                    error = reply
                elif isinstance(reply, Exception) and is_transient(reply):
                    await self._relearn(calls[at].keys[0])
                    transient = reply
                else:
                    out[at] = reply
            # A refused WAIT confirmed nothing.
            acked = 0 if isinstance(waited, Exception) else min(acked, int(waited))
            if not missing:
                break
            # The library (or each script) once, then only the calls that lacked it.
            await self._supply(client, [calls[at].script for at in missing], error)
            todo = missing
        if replicas and acked < replicas:
            for at in wrote:
                out[at] = NotReplicated(
                    f"{calls[at].keys[0]!r} was written on the primary at "
                    f"{self.address} but {acked} of {replicas} replica(s) confirmed "
                    f"the batch within {self.wait_ms} ms: the write may still "
                    f"exist, and a failover may lose it"
                )
        if transient is not None:
            raise transient

    async def xrange(
        self, key: str, start: str, end: str, count: int
    ) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """Up to ``count`` stream entries from ``start`` to ``end`` (ids; "-"/"+" the
        ends, "(" excludes). A read, so a resend is safe."""
        reply = await self.idempotent("XRANGE", key, start, end, "COUNT", count)
        return cast("list[tuple[bytes, dict[bytes, bytes]]]", reply)

    async def hgetall(self, key: str) -> dict[bytes, bytes]:
        return cast("dict[bytes, bytes]", await self.idempotent("HGETALL", key))

    async def idempotent(self, *args: Any) -> Any:
        """One command that may safely run twice (SADD, SREM, SMEMBERS, DEL...),
        retried like a read."""
        if self._unready or self._loop is not async_loop():
            await self._ready()
        telemetry.trip(None, self.address)
        started = time.monotonic()
        call = functools.partial(self.client.execute_command, *args)
        try:
            return await call()
        except ERRORS as exc:
            return await self._recover(exc, call, started, None, str(args[0]).lower())

    async def pttl(self, key: str) -> int:
        if self._unready or self._loop is not async_loop():
            await self._ready()
        telemetry.trip(None, self.address)
        started = time.monotonic()
        try:
            return int(await self.client.pttl(key))
        except ERRORS as exc:
            return int(
                await self._recover(exc, lambda: self.client.pttl(key), started, None, "pttl")
            )

    async def blpop(self, key: str, timeout: float, budget: float | None = None) -> Any:
        """BLPOP with a timeout in seconds (fractions allowed since Redis 6); ``budget``
        shortens the retry deadline."""
        if self._unready or self._loop is not async_loop():
            await self._ready()
        telemetry.trip(None, self.address)
        seconds = max(timeout, 0.001)
        started = time.monotonic()
        try:
            return await self.client.blpop([key], timeout=seconds)
        except ERRORS as exc:
            retry = functools.partial(self.client.blpop, [key], timeout=seconds)
            return await self._recover(exc, retry, started, budget, "blpop")

    async def lranges(self, *ranges: tuple[str, int, int]) -> list[list[bytes]]:
        """LRANGE each ``(key, start, stop)`` in one MULTI/EXEC: one round trip, one
        consistent view, and list elements never pass through Lua. Every key must share
        one hash slot. A read, so a resend is safe."""
        if self._unready or self._loop is not async_loop():
            await self._ready()
        telemetry.trip(None, self.address)
        started = time.monotonic()
        try:
            return await self._lranges(ranges)
        except rex.OutOfMemoryError:
            # Over maxmemory the server refuses whatever is queued in MULTI, reads too;
            # a script that only reads still runs.
            keys = [r[0] for r in ranges]
            args = [bound for r in ranges for bound in r[1:]]
            return cast("list[list[bytes]]", await self.script(_READ_LISTS, keys, args))
        except ERRORS as exc:
            retry = functools.partial(self._lranges, ranges)
            return cast(
                "list[list[bytes]]", await self._recover(exc, retry, started, None, "lrange")
            )

    @property
    def one_server(self) -> bool:
        """True unless a cluster: then one MULTI/EXEC may span any keys."""
        return not self._cluster

    async def _lranges(self, ranges: Sequence[tuple[str, int, int]]) -> list[list[bytes]]:
        async with self.client.pipeline(transaction=True) as pipe:
            for key, start, stop in ranges:
                pipe.lrange(key, start, stop)
            return list(await pipe.execute())

    async def scan(
        self, pattern: str, count: int = 1000, traced: tuple[str, str, str] | None = None
    ) -> AsyncIterator[bytes]:
        """Every key matching ``pattern``: SCAN (never KEYS) on the server, or on each
        primary of a cluster in turn. ``traced``: (name, kind, namespace) of a span per
        page (a span around a generator would stay open while its caller works)."""
        if self._unready or self._loop is not async_loop():
            await self._ready()
        for node in await self._scan_targets():
            cursor: int = 0
            while True:
                started = time.monotonic()
                with telemetry.operation(*traced) if traced else _UNTRACED:
                    try:
                        cursor, batch = await self._scan(cursor, pattern, count, node)
                    except ERRORS as exc:
                        # The same cursor again: SCAN is a read, resending it is harmless.
                        retry = functools.partial(self._scan, cursor, pattern, count, node)
                        cursor, batch = await self._recover(exc, retry, started, None, "scan")
                for key in batch:
                    yield cast(bytes, key)
                if not cursor:
                    break

    async def _scan_targets(self) -> list[Any]:
        """[None] for one server; a cluster's primaries (a replica holds the same keys)."""
        if not self._cluster:
            return [None]
        # _ready() has made the client learn the topology (a sync one did when built).
        cluster: Any = self.client  # partly untyped in redis-py's sync flavour
        return list(cluster.get_primaries())

    async def _scan(
        self, cursor: int, pattern: str, count: int, node: Any
    ) -> tuple[int, list[Any]]:
        telemetry.trip(None, self.address)
        if node is None:
            reply = await self.client.scan(cursor, match=pattern, count=count)
            return cast("tuple[int, list[Any]]", reply)
        # A cluster client answers {node name: cursor} for the nodes it asked.
        client: Any = self.client
        cursors, batch = await client.scan(cursor, match=pattern, count=count, target_nodes=node)
        return int(next(iter(cursors.values()))), batch

    async def aclose(self) -> None:
        if self._loop is not async_loop():  # its connections' loop has ended: drop them
            self._rebind(async_loop())
        try:
            for node in self._nodes.values():
                await node.aclose()
            await self.client.aclose()
        except ERRORS as exc:
            raise translate(exc, self.address) from exc
