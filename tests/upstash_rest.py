"""A local server speaking the part of Upstash's REST API that its SDKs use, in front of
a real Redis server: what the REST transport (redistate.core.rest) is tested against.

    with UpstashRest(server.port, token="t0ken") as rest:
        Store.from_url(f"upstash+http://127.0.0.1:{rest.port}", token="t0ken")

From Upstash's documentation of the REST API:

- ``POST /`` with a JSON array ``["CMD", "arg", ...]``; ``POST /pipeline`` and
  ``POST /multi-exec`` with an array of those. Numbers in a command are sent as text.
- ``Authorization: Bearer <token>``; a missing or wrong token is HTTP 401.
- Replies ``{"result": ...}`` or ``{"error": "..."}`` (HTTP 400); a pipeline's and a
  transaction's are an array of those, a transaction discarded as a whole is one
  ``{"error"}``.
- ``Upstash-Encoding: base64``: every string in a result is base64, except ``"OK"``.
- Blocking commands, WATCH/UNWATCH/DISCARD, MULTI/EXEC outside ``/multi-exec``, pub/sub
  but PUBLISH, and connection commands but PING and ECHO are refused; so are CONFIG,
  CLIENT and WAIT, which Upstash does not list.
- A request body over ``max_bytes`` (1 MB on the free tier) is refused.
- An error inside an array (a script's reply) is ``{"error": "..."}`` in its place
  (Upstash's documentation does not say; this is the emulator's assumption).
- Each reply carries an ``Upstash-Sync-Token`` header; the last one a request sent back
  is kept in :attr:`UpstashRest.sync_tokens`.

The REST semantics the server keeps but these tests cannot see (a global database's
replicas, daily request limits) are not emulated. Counters: ``requests`` by path,
``connections`` open now.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["UpstashRest"]

_BLOCKING = {"BLPOP", "BRPOP", "BRPOPLPUSH", "BLMOVE", "BLMPOP", "BZPOPMIN", "BZPOPMAX",
             "BZMPOP"}  # fmt: skip
_REFUSED = {"WATCH", "UNWATCH", "DISCARD", "MULTI", "EXEC", "SUBSCRIBE", "PSUBSCRIBE",
            "SSUBSCRIBE", "UNSUBSCRIBE", "MONITOR", "AUTH", "HELLO", "SELECT", "QUIT",
            "RESET", "CLIENT", "CONFIG", "WAIT", "WAITAOF", "DEBUG", "SHUTDOWN"}  # fmt: skip


class _Error(Exception):
    """A Redis error reply (the text after ``-``)."""


class _Resp:
    """A minimal RESP2 client that keeps what a reply was: a status, a bulk string..."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def send(self, *commands: list[bytes]) -> None:
        out = bytearray()
        for command in commands:
            out += b"*%d\r\n" % len(command)
            for arg in command:
                out += b"$%d\r\n%s\r\n" % (len(arg), arg)
        self.sock.sendall(out)

    def read(self) -> Any:
        """The next reply: ("status", bytes), bytes, int, None, a list, or an _Error."""
        line = self.file.readline()
        if not line:
            raise ConnectionError("the Redis server closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return ("status", rest)
        if kind == b"-":
            return _Error(rest.decode("utf-8", "replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            if size < 0:
                return None
            data = self.file.read(size + 2)
            return data[:-2]
        if kind == b"*":
            size = int(rest)
            return None if size < 0 else [self.read() for _ in range(size)]
        raise ConnectionError(f"not RESP2: {line!r}")


def _json(reply: Any, encode: bool) -> Any:
    """A RESP reply as the REST API writes its result."""
    if isinstance(reply, tuple):  # a status
        text = reply[1]
        if text == b"OK" or not encode:
            return text.decode("utf-8", "replace")
        return base64.b64encode(text).decode()
    if isinstance(reply, bytes):
        return base64.b64encode(reply).decode() if encode else reply.decode("utf-8", "replace")
    if isinstance(reply, list):
        return [_json(r, encode) for r in reply]
    if isinstance(reply, _Error):  # inside an array (a script's): its own object
        return {"error": str(reply)}
    return reply  # int or None


def _item(reply: Any, encode: bool) -> dict[str, Any]:
    if isinstance(reply, _Error):
        return {"error": str(reply)}
    return {"result": _json(reply, encode)}


def _command(value: Any) -> list[bytes]:
    if not isinstance(value, list) or not value:
        raise ValueError("ERR a command must be a non-empty JSON array")
    out = []
    for arg in value:
        if isinstance(arg, bool) or not isinstance(arg, str | int | float):
            raise ValueError(f"ERR unsupported argument {arg!r:.40}")
        out.append(str(arg).encode("utf-8"))
    name = out[0].decode("utf-8", "replace").upper()
    if (
        name in _BLOCKING
        or name in _REFUSED
        or (name in ("XREAD", "XREADGROUP") and any(a.upper() == b"BLOCK" for a in out))
    ):
        raise ValueError(f"ERR Command is not available: '{name}'")
    return out


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that drops its connection is not an error worth a traceback


class UpstashRest:
    """The REST server on a free loopback port, forwarding to Redis at ``port``."""

    def __init__(self, port: int, token: str = "test-token", max_bytes: int = 1_000_000) -> None:
        self.redis_port = port
        self.token = token
        self.max_bytes = max_bytes
        self.requests: Counter[str] = Counter()
        self.connections = 0
        self.sync_tokens: list[str] = []
        self._writes = 0
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)  # notified as connections change
        self._fail: list[int] = []  # statuses for the next requests, after running them
        self._local = threading.local()
        self._clients: list[_Resp] = []
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def fail_next(self, *statuses: int) -> None:
        """Answer the next requests with these HTTP statuses, after running them (the
        reply is lost, the command applied: what a gateway error can hide)."""
        with self._lock:
            self._fail.extend(statuses)

    def wait_connections(self, predicate: Any, timeout: float = 10.0) -> bool:
        """Wait until ``predicate(connections open)`` holds (False: it did not in time)."""
        with self.changed:
            return bool(self.changed.wait_for(lambda: predicate(self.connections), timeout))

    @property
    def url(self) -> str:
        return f"upstash+http://127.0.0.1:{self.port}"

    def __enter__(self) -> UpstashRest:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            for client in self._clients:
                client.close()
            self._clients.clear()

    def _redis(self) -> _Resp:
        client: _Resp | None = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = _Resp(self.redis_port)
            with self._lock:
                self._clients.append(client)
        return client

    def _run(self, path: str, body: Any, encode: bool) -> tuple[int, Any]:
        redis = self._redis()
        if path == "/":
            redis.send(_command(body))
            reply = redis.read()
            return (400 if isinstance(reply, _Error) else 200), _item(reply, encode)
        if not isinstance(body, list):
            raise ValueError("ERR a pipeline must be a JSON array of commands")
        if path == "/pipeline":  # a command refused alone gets its own error
            checked: list[list[bytes] | _Error] = []
            for value in body:
                try:
                    checked.append(_command(value))
                except ValueError as exc:
                    checked.append(_Error(str(exc)))
            redis.send(*(c for c in checked if not isinstance(c, _Error)))
            return 200, [
                _item(c if isinstance(c, _Error) else redis.read(), encode) for c in checked
            ]
        commands = [_command(c) for c in body]
        redis.send([b"MULTI"], *commands, [b"EXEC"])
        replies = [redis.read() for _ in range(len(commands) + 2)]
        done = replies[-1]
        if isinstance(done, _Error):  # discarded as a whole (EXECABORT)
            return 400, {"error": str(done)}
        return 200, [_item(r, encode) for r in done]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        rest = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as Upstash's endpoint
            # A reply goes out as two writes (headers, then body): with Nagle's algorithm
            # the body waits for the client's delayed ACK, 40 ms on every request.
            disable_nagle_algorithm = True

            def setup(self) -> None:
                super().setup()
                with rest.changed:
                    rest.connections += 1
                    rest.changed.notify_all()

            def finish(self) -> None:
                try:
                    super().finish()
                finally:
                    with rest.changed:
                        rest.connections -= 1
                        rest.changed.notify_all()

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _reply(self, status: int, payload: Any, token: str | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if token is not None:
                    self.send_header("Upstash-Sync-Token", token)
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size)
                path = self.path.split("?", 1)[0].rstrip("/") or "/"
                if self.headers.get("Authorization") != f"Bearer {rest.token}":
                    self._reply(401, {"error": "Unauthorized"})
                    return
                if path not in ("/", "/pipeline", "/multi-exec"):
                    self._reply(404, {"error": f"ERR no endpoint {path}"})
                    return
                with rest._lock:
                    rest.requests[path] += 1
                    sent = self.headers.get("Upstash-Sync-Token")
                    if sent:
                        rest.sync_tokens.append(sent)
                if size > rest.max_bytes:
                    self._reply(400, {"error": "ERR max request size exceeded"})
                    return
                encode = self.headers.get("Upstash-Encoding") == "base64"
                try:
                    status, payload = rest._run(path, json.loads(raw), encode)
                except (ValueError, json.JSONDecodeError) as exc:
                    status, payload = 400, {"error": str(exc)}
                with rest._lock:
                    rest._writes += 1
                    token = f"sync-{rest._writes}"
                    failed = rest._fail.pop(0) if rest._fail else None
                if failed is not None:
                    self._reply(failed, {"error": "gateway error (injected by the test)"})
                    return
                self._reply(status, payload, token)

        return Handler
