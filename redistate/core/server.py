"""Server facts, the pure half: what a server's configuration means for the guarantees.

On first contact with each server (every primary of a cluster) a store reads the
eviction policy, persistence and replication settings (``CONFIG GET``, or ``INFO`` where
CONFIG is renamed or denied) and judges them here: a policy other than ``noeviction``
breaks guarantees, so ``server_check="warn"`` warns once per server and process,
``"strict"`` raises :class:`UnsafeServer`. ``redistate doctor`` prints the same facts.
The I/O is :meth:`AsyncConnection.server_facts` (``_async/_client.py``).
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

from . import telemetry
from .errors import RedistateWarning, UnsafeServer

__all__ = [
    "CONFIG_FIELDS",
    "INFO_SECTIONS",
    "Finding",
    "ServerCheck",
    "ServerFacts",
    "check_server_check",
    "embedded_facts",
    "judge",
    "parse_facts",
    "policy_meaning",
]

ServerCheck = Literal["warn", "strict", "off"]
CHECKS: Final = ("warn", "strict", "off")

# What one round trip asks each server: CONFIG GET of these, then INFO of these
# sections (one command each: a denied or renamed one fails alone).
CONFIG_FIELDS: Final = (
    "maxmemory-policy",
    "maxmemory",
    "appendonly",
    "appendfsync",
    "save",
    "min-replicas-to-write",
)
INFO_SECTIONS: Final = ("server", "memory", "persistence", "replication")

UNKNOWN: Final = "unknown"
SAFE_POLICY: Final = "noeviction"

_VOLATILE: Final = (
    "keys with a TTL can be evicted before they expire: a lease's lock key (a second "
    "owner acquires a live lease; the first learns it only at its next renewal or "
    "guarded write), write-id memories (a "
    "resent write is applied twice, over a newer acknowledged one), sessions, and "
    "records and tasks with a TTL (a task's list evicted: a torn task)"
)
_ALLKEYS: Final = (
    "any key can be evicted: everything volatile-* breaks (lock keys, write-id "
    "memories, sessions, keys with a TTL), and also a task's lists (a torn task: "
    "restore skips what is lost until the next save), users, records and event "
    "streams without a TTL (fences still grow: they come from the server's clock)"
)

logger = logging.getLogger("redistate")


def policy_meaning(policy: str) -> str:
    """What ``policy`` (a maxmemory-policy, or "unknown") means for redistate."""
    if policy == SAFE_POLICY:
        return (
            "nothing is evicted: a full server refuses writes (StoreFull, nothing "
            "written) and every guarantee holds"
        )
    if policy == UNKNOWN:
        return (
            "the eviction policy could not be read (CONFIG and INFO denied or renamed): "
            "redistate cannot tell whether keys are evicted, so it cannot promise that a "
            "resend is applied once or that a lease has one owner"
        )
    if policy.startswith("volatile-"):
        return _VOLATILE
    if policy.startswith("allkeys-"):
        return _ALLKEYS
    return f"{policy!r} is not a policy redistate knows; if it evicts keys, {_ALLKEYS}"


def check_server_check(value: object) -> ServerCheck:
    """``value`` if it is "warn", "strict" or "off"; else ValueError naming it."""
    if value not in CHECKS:
        raise ValueError(f"server_check must be one of {CHECKS}, got {value!r:.80}")
    return value


@dataclass(frozen=True)
class Finding:
    """One fact of a server, what it means, and whether the guarantees hold under it.

    ``status`` is "ok", "fail" (a guarantee does not hold: doctor exits 1) or "warn"
    (data can be lost in a crash or failover, which redistate reports but does not
    promise against by itself)."""

    name: str
    value: str
    status: Literal["ok", "warn", "fail"]
    meaning: str


@dataclass(frozen=True)
class ServerFacts:
    """What one server says about itself. None: not readable (denied, or not reported
    by the source used). ``source`` is "config" (CONFIG GET), "info" (INFO only),
    "none" (both denied) or "embedded" (fakeredis, which never evicts)."""

    address: str
    source: str
    policy: str
    maxmemory: int | None = None
    run_id: str | None = None
    version: str | None = None
    appendonly: bool | None = None
    appendfsync: str | None = None
    save: str | None = None  # RDB snapshot rules; "" = none
    role: str | None = None
    replicas: int | None = None
    min_replicas: int | None = None

    @property
    def identity(self) -> str:
        """The server process: its run_id (a restart is a new one), else its address."""
        return self.run_id or self.address

    @property
    def safe(self) -> bool:
        """True when the eviction policy keeps every guarantee."""
        return self.policy == SAFE_POLICY

    def findings(self) -> list[Finding]:
        """Every fact with its meaning: eviction first (the only one that fails)."""
        memory = "no limit" if not self.maxmemory else f"{self.maxmemory} bytes"
        out = [
            Finding(
                "maxmemory-policy",
                self.policy,
                "ok" if self.safe else "fail",
                policy_meaning(self.policy)
                + ("" if self.maxmemory is None else f" (maxmemory: {memory})"),
            )
        ]
        if self.source == "embedded":
            out.append(
                Finding("persistence", "none", "ok", "embedded: the state lives in this process")
            )
            return out
        out.append(self._persistence())
        if self.appendonly and self.appendfsync is not None:
            fsync = {
                "always": ("ok", "every acknowledged write is on disk"),
                "everysec": ("warn", "a crash of the machine loses up to ~1 s of writes"),
                "no": ("warn", "a crash of the machine loses what the OS had not flushed"),
            }.get(self.appendfsync, ("warn", "unknown fsync policy"))
            status: Any = fsync[0]
            out.append(Finding("appendfsync", self.appendfsync, status, fsync[1]))
        out.extend(self._replication())
        return out

    def _persistence(self) -> Finding:
        if self.appendonly is None:
            return Finding(
                "persistence", UNKNOWN, "warn", "not readable: a restart may lose every key"
            )
        rdb = self.save  # None: INFO does not report the save rules
        value = ", ".join(
            part
            for part in (
                "aof" if self.appendonly else "",
                f"rdb ({rdb})" if rdb else "",
                "rdb rules unknown" if rdb is None and not self.appendonly else "",
            )
            if part
        )
        if self.appendonly:
            return Finding(
                "persistence", value, "ok", "append-only file: a restart keeps acknowledged writes"
            )
        if rdb:
            return Finding(
                "persistence",
                value,
                "warn",
                "RDB snapshots only: a restart loses the writes since the last snapshot "
                "(records, checkpoints; write-id memories and leases go back in time)",
            )
        return Finding(
            "persistence",
            value or "none",
            "warn",
            "no AOF and no RDB snapshot rules: a restart loses every key (state, "
            "write-id memories, leases)",
        )

    def _replication(self) -> list[Finding]:
        role = self.role or UNKNOWN
        if role in ("slave", "replica"):
            return [
                Finding(
                    "role",
                    "replica",
                    "fail",
                    "this is a replica: it refuses writes (READONLY); connect to the primary",
                )
            ]
        replicas = UNKNOWN if self.replicas is None else str(self.replicas)
        out = [
            Finding(
                "replicas",
                UNKNOWN if self.role is None else f"{role}, {replicas} connected",
                "ok",
                'durability="replicated" needs a connected replica; without one a '
                "failover has nothing to promote"
                if self.replicas == 0
                else 'writes are copied asynchronously unless durability="replicated" WAITs',
            )
        ]
        if self.replicas:
            n = self.min_replicas
            out.append(
                Finding(
                    "min-replicas-to-write",
                    UNKNOWN if n is None else str(n),
                    "ok" if n else "warn",
                    "a primary cut off from its replicas refuses writes"
                    if n
                    else "a primary cut off from its replicas keeps accepting writes that "
                    'a failover then loses (durability="replicated" detects it per write)',
                )
            )
        return out

    def row(self) -> dict[str, Any]:
        """The facts and findings as JSON-ready data (``redistate doctor --json``)."""
        return {
            **asdict(self),
            "ok": all(f.status != "fail" for f in self.findings()),
            "findings": [asdict(f) for f in self.findings()],
        }


def embedded_facts(address: str) -> ServerFacts:
    """The embedded (fakeredis) server: in this process, never evicts."""
    return ServerFacts(address, "embedded", SAFE_POLICY)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _config(reply: Any, name: str) -> str | None:
    """The value of ``name`` in a CONFIG GET reply (a dict or a flat list), if any."""
    if isinstance(reply, Mapping):
        pairs = {_text(k): v for k, v in reply.items()}
    elif isinstance(reply, Sequence) and not isinstance(reply, str | bytes):
        pairs = {_text(reply[i]): reply[i + 1] for i in range(0, len(reply) - 1, 2)}
    else:
        return None
    return None if name not in pairs else _text(pairs[name])


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def parse_facts(address: str, replies: Sequence[Any]) -> ServerFacts:
    """The facts from the replies to CONFIG GET of each of :data:`CONFIG_FIELDS`, then
    INFO of each of :data:`INFO_SECTIONS`, in that order. A reply that is an exception
    (NOPERM, or an unknown command when CONFIG is renamed) counts as not readable."""
    n = len(CONFIG_FIELDS)
    config = {
        name: _config(r, name)
        for name, r in zip(CONFIG_FIELDS, replies[:n], strict=True)
        if not isinstance(r, BaseException)
    }
    info: dict[str, Any] = {}
    for r in replies[n : n + len(INFO_SECTIONS)]:
        if isinstance(r, Mapping):
            info.update({_text(k): v for k, v in r.items()})
    policy = config.get("maxmemory-policy")
    source = "config"
    if policy is None:
        policy = None if "maxmemory_policy" not in info else _text(info["maxmemory_policy"])
        source = "info" if policy is not None else "none"
    appendonly = config.get("appendonly")
    aof = info.get("aof_enabled")
    replicas = info.get("connected_slaves")
    min_replicas = _int(config.get("min-replicas-to-write"))
    if min_replicas is None and "role" in info:
        # INFO reports min_slaves_good_slaves only while min-replicas-to-write is set.
        min_replicas = 0 if "min_slaves_good_slaves" not in info else None
    version = info.get("valkey_version") or info.get("redis_version")
    name = _text(info.get("server_name") or ("redis" if version else ""))
    return ServerFacts(
        address=address,
        source=source,
        policy=policy or UNKNOWN,
        maxmemory=_int(config.get("maxmemory", info.get("maxmemory"))),
        run_id=None if "run_id" not in info else _text(info["run_id"]),
        version=None if version is None else f"{name} {_text(version)}",
        appendonly=(appendonly == "yes")
        if appendonly is not None
        else (None if aof is None else bool(_int(aof))),
        appendfsync=config.get("appendfsync"),
        save=config.get("save"),
        role=None if "role" not in info else _text(info["role"]),
        replicas=_int(replicas),
        min_replicas=min_replicas,
    )


# Servers warned about in this process, by run_id (or address): a process that makes
# many stores (one per request, say) warns once per server, not once per store.
_warned: set[str] = set()
_warned_lock = threading.Lock()


def warning_text(facts: ServerFacts) -> str:
    """The message of the warning (and of UnsafeServer) about ``facts``' policy."""
    how = "could not be read" if facts.policy == UNKNOWN else f"is {facts.policy}"
    return (
        f"redis at {facts.address}: maxmemory-policy {how}: {policy_meaning(facts.policy)}. "
        f'Set maxmemory-policy noeviction (server_check="strict" refuses such a '
        f'server, "off" skips this check; `redistate doctor` lists every fact)'
    )


def judge(facts: Sequence[ServerFacts], check: ServerCheck) -> None:
    """Act on the facts: nothing for "off" or safe servers; "strict" raises
    UnsafeServer for the first unsafe one; "warn" warns (and logs) once per server and
    process.

    Raises:
        UnsafeServer: ``check`` is "strict" and a server's policy is not noeviction.
    """
    if check == "off":
        return
    for server in facts:
        if server.safe:
            continue
        message = warning_text(server)
        if check == "strict":
            raise UnsafeServer(server.policy, message)
        with _warned_lock:
            first = server.identity not in _warned
            _warned.add(server.identity)
        if first:
            telemetry.event("redistate.server_warnings", policy=server.policy)
            # A record for the application's handlers (the package's NullHandler keeps
            # it off stderr, where the warning below already goes).
            logger.warning(
                message,
                extra={
                    "redistate_event": "server_warning",
                    "redistate_server": server.address,
                    "redistate_policy": server.policy,
                },
            )
            warnings.warn(message, RedistateWarning, stacklevel=4)
