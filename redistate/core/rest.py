"""Redis over Upstash's REST API (extra ``redistate[upstash]``): a bridge per connection.

redis-py speaks RESP over one end of a socket pair; a thread on the other end reads the
commands, posts them to the REST API as JSON (one request for a single command, one
``/pipeline`` request for a pipeline, ``/multi-exec`` for MULTI ... EXEC) and writes the
replies back as RESP. So redis-py's own pipelines, transactions, timeouts, health checks
and parsers work unchanged, for the sync and the async client alike, and the HTTP side
exists once. Closing the connection's socket ends its thread.

What the REST API cannot do is answered here, before anything is sent:

- JSON carries text: an argument that is not UTF-8 is refused (``RSREFUSED`` reply,
  :class:`~redistate.core.errors.TransportRefused`), never sent garbled. Replies come
  base64-encoded (``Upstash-Encoding: base64``), so binary replies are read exactly.
- A request over ``max_request_bytes`` is refused the same way (a pipeline is split
  into several requests first; one command, or a transaction, cannot be).
- Blocking commands do not exist over REST: BLPOP and BRPOP are polled (LPOP/RPOP at
  growing intervals, at most ``poll_cap`` seconds apart) until their timeout.
- WAIT, WATCH and the connection commands do not exist either; CLIENT SETINFO/SETNAME
  and SELECT 0 (what redis-py may send on connect) are answered locally.

Nothing is retried here: the store retries, and its write ids make a resend safe.
"""

from __future__ import annotations

import base64
import logging
import re
import selectors
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from redis.asyncio.connection import Connection as AsyncPlainConnection
from redis.connection import Connection as PlainConnection

__all__ = [
    "MAX_REQUEST_BYTES",
    "AsyncRestConnection",
    "RestConnection",
    "RestSettings",
    "SyncToken",
    "take_commands",
    "to_resp",
]

logger = logging.getLogger("redistate")

MAX_REQUEST_BYTES: Final = 1_000_000
"""Upstash's documented cap on one request's body (the free tier's; paid plans allow
more: pass ``max_request_bytes``)."""
REFUSED: Final = "RSREFUSED"
"""The error code of a command refused before it was sent (translate raises
TransportRefused for it)."""

_NIL: Final = b"$-1\r\n"
_NIL_ARRAY: Final = b"*-1\r\n"
_OK: Final = b"+OK\r\n"
_QUEUED: Final = b"+QUEUED\r\n"
# Not over REST (Upstash's documentation), and not worth a request to hear it refused.
_ABSENT: Final = frozenset(
    {b"WATCH", b"UNWATCH", b"DISCARD", b"WAIT", b"WAITAOF", b"SUBSCRIBE", b"PSUBSCRIBE",
     b"SSUBSCRIBE", b"MONITOR", b"HELLO", b"AUTH", b"RESET"}
)  # fmt: skip
_POLLED: Final = {b"BLPOP": b"LPOP", b"BRPOP": b"RPOP"}
_TOKEN: Final = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what a header value carries
_PARALLEL: Final = 8  # transactions of one read sent at once (each is its own request)


class SyncToken:
    """The newest ``Upstash-Sync-Token`` a store's connections were given, sent with
    each request so a read replica answers only once it has this client's writes."""

    __slots__ = ("_lock", "value")

    def __init__(self) -> None:
        self.value = ""
        self._lock = threading.Lock()

    def update(self, value: str | None) -> None:
        if value:
            with self._lock:
                self.value = value


@dataclass(frozen=True)
class RestSettings:
    """Where and how to reach a REST API. ``verify``: True (the system's CAs), a CA
    file's path, or False (only for a local test server)."""

    url: str
    token: str = field(repr=False)
    timeout: float = 5.0
    max_request_bytes: int = MAX_REQUEST_BYTES
    verify: bool | str = True
    poll_first: float = 0.02
    poll_cap: float = 0.5
    sync_token: SyncToken = field(default_factory=SyncToken, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.url.startswith(("https://", "http://")):
            raise ValueError(f"url must be https:// (or http://), got {self.url!r:.80}")
        if not isinstance(self.token, str) or not self.token:
            raise ValueError(
                "an Upstash REST token is needed: pass token=..., or set UPSTASH_REDIS_REST_TOKEN"
            )
        if not _TOKEN.fullmatch(self.token):  # never echoed: it is a secret
            raise ValueError(
                f"the REST token ({len(self.token)} characters) holds a space, a newline, "
                f"a control or a non-ASCII character, which an HTTP header cannot carry "
                f"(a token read from a file keeps its newline: strip it)"
            )
        limit = self.max_request_bytes
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1024:
            raise ValueError(f"max_request_bytes must be an int of at least 1024, got {limit!r}")


# -- RESP in, RESP out (pure) ---------------------------------------------------------


def take_commands(buffer: bytearray) -> list[list[bytes]]:
    """The complete RESP commands (arrays of bulk strings, what redis-py sends) at the
    start of ``buffer``, removed from it; an incomplete one stays for the next read.

    Raises:
        ValueError: bytes that are not a RESP array of bulk strings.
    """
    commands: list[list[bytes]] = []
    at = 0
    end = len(buffer)
    while at < end:
        if buffer[at] != 0x2A:  # "*"
            raise ValueError(f"not a RESP array at byte {at}: {bytes(buffer[at : at + 20])!r}")
        line = buffer.find(b"\r\n", at)
        if line < 0:
            break
        count = int(buffer[at + 1 : line])
        pos = line + 2
        args: list[bytes] = []
        for _ in range(count):
            head = buffer.find(b"\r\n", pos)
            if head < 0 or buffer[pos] != 0x24:  # "$"
                if head >= 0:
                    raise ValueError(f"not a RESP bulk string at byte {pos}")
                break
            size = int(buffer[pos + 1 : head])
            start = head + 2
            if start + size + 2 > end:
                break
            args.append(bytes(buffer[start : start + size]))
            pos = start + size + 2
        if len(args) < count:
            break
        commands.append(args)
        at = pos
    del buffer[:at]
    return commands


def _error(message: str) -> bytes:
    return b"-%s\r\n" % message.replace("\r", " ").replace("\n", " ").encode("utf-8", "replace")


def to_resp(result: Any) -> bytes:
    """One REST result (base64-encoded strings, "OK" as it is) as a RESP2 reply."""
    if result is None:
        return _NIL
    if isinstance(result, bool):  # JSON has no bool reply; never expected
        return b":%d\r\n" % int(result)
    if isinstance(result, int):
        return b":%d\r\n" % result
    if isinstance(result, str):
        if result == "OK":
            return _OK
        data = base64.b64decode(result, validate=True)
        return b"$%d\r\n%s\r\n" % (len(data), data)
    if isinstance(result, float):
        text = repr(result).encode()
        return b"$%d\r\n%s\r\n" % (len(text), text)
    if isinstance(result, list):
        return b"*%d\r\n" % len(result) + b"".join(to_resp(r) for r in result)
    if isinstance(result, dict) and "error" in result:  # an error inside an array
        return _error(str(result["error"]))
    raise ValueError(f"a REST result of type {type(result).__name__}: {result!r:.80}")


def _answer(item: Any) -> bytes:
    """One ``{"result": ...}`` or ``{"error": ...}`` as a RESP2 reply."""
    if not isinstance(item, dict):
        raise ValueError(f"a REST reply that is not an object: {item!r:.80}")
    if "error" in item:
        return _error(str(item["error"]))
    try:
        return to_resp(item.get("result"))
    except (ValueError, TypeError) as exc:  # not base64, an unknown type: not retried
        logger.warning("redistate: a REST reply could not be read: %s", exc)
        return _error(f"ERR the REST API's reply could not be read: {exc}")


def _name(command: Sequence[bytes]) -> str:
    return command[0].decode("ascii", "replace").upper() if command else "?"


def _texts(command: Sequence[bytes]) -> list[str]:
    """The command's arguments as JSON strings.

    Raises:
        _Refused: an argument that is not UTF-8 text.
    """
    out = []
    for i, arg in enumerate(command):
        try:
            out.append(arg.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise _Refused(
                f"argument {i} of {_name(command)} ({len(arg)} bytes, starting "
                f"{arg[:16]!r}) is not UTF-8 text, which a REST API's JSON cannot carry "
                f"(byte {exc.start} is not UTF-8); nothing was sent. Use a codec whose "
                f"output is text (EncryptedCodec writes base64 over REST), or connect "
                f"over rediss://"
            ) from None
    return out


class _Refused(Exception):
    """A command this bridge will not send (its message becomes an RSREFUSED reply)."""


# -- the bridge -----------------------------------------------------------------------


class _Link:
    """One HTTP keep-alive connection's worth of the REST API (an httpx client)."""

    def __init__(self, settings: RestSettings, sock: socket.socket) -> None:
        import httpx  # the extra redistate[upstash]; imported by the first connection

        self.settings = settings
        self._sock = sock  # the bridge's end: a poll stops when the client end closes
        self._httpx = httpx
        self._client = httpx.Client(
            base_url=settings.url,
            headers={
                "Authorization": f"Bearer {settings.token}",
                "Upstash-Encoding": "base64",
            },
            timeout=settings.timeout,
            verify=settings.verify,
            # One keep-alive connection, more while a read's transactions go at once.
            limits=httpx.Limits(max_connections=_PARALLEL, max_keepalive_connections=1),
        )
        # When the read being answered must be answered by: redis-py gives up _MARGIN
        # after the request timeout, and its failure would hide the bridge's.
        self.deadline = 0.0

    def close(self) -> None:
        self._client.close()

    def post(self, path: str, body: bytes) -> Any:
        """POST ``body`` to ``path``; the decoded JSON reply.

        Raises:
            _Unavailable: no reply, or one that is not the API's JSON (retried by the
                store, like a dropped connection).
        """
        headers = {"Content-Type": "application/json"}
        token = self.settings.sync_token.value
        if token:
            headers["Upstash-Sync-Token"] = token
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _Unavailable(f"no reply within the timeout of {self.settings.timeout:g} s")
        content = bytearray()
        try:
            # Streamed, so that a reply trickling in slower than httpx's per-read
            # timeout still ends at the deadline.
            limit = min(left, self.settings.timeout)
            with self._client.stream(
                "POST", path, content=body, headers=headers, timeout=limit
            ) as response:
                for chunk in response.iter_bytes():
                    content += chunk
                    if time.monotonic() > self.deadline:
                        raise _Unavailable(
                            f"the reply took longer than the timeout of {self.settings.timeout:g} s"
                        )
        except self._httpx.HTTPError as exc:
            raise _Unavailable(_scrubbed(f"{type(exc).__name__}: {exc}", self.settings)) from exc
        self.settings.sync_token.update(response.headers.get("Upstash-Sync-Token"))
        status = response.status_code
        text = bytes(content[:200]).decode("utf-8", "replace")
        if status in (401, 403):
            raise _Denied(status, text)
        if status not in (200, 400):
            raise _Unavailable(f"HTTP {status}: {text}")
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            what = f"HTTP {status} with a body that is not JSON: {text[:80]!r}"
            raise _Unavailable(what) from exc

    # -- what one read of commands becomes --------------------------------------------

    def answer(self, commands: Sequence[list[bytes]]) -> bytes:
        """The RESP replies to ``commands``, in order: all of them by the deadline."""
        self.deadline = time.monotonic() + self.settings.timeout + _MARGIN / 2
        out: list[bytes] = []
        batch: list[list[bytes]] = []
        i = 0
        while i < len(commands):
            command = commands[i]
            name = command[0].upper() if command else b""
            if name == b"MULTI":
                out += self._pipeline(batch)
                batch = []
                # This transaction and those right after it: each one request, sent
                # at once (a batch's consistent reads, one transaction per entity).
                runs: list[tuple[list[list[bytes]], bool]] = []
                while i < len(commands) and _is(commands[i], b"MULTI"):
                    end = _transaction_end(commands, i)
                    runs.append((list(commands[i + 1 : end]), _is(commands[end], b"EXEC")))
                    i = end + 1
                out += self._transactions(runs)
                continue
            local = _local(name, command)
            if local is not None or name in _POLLED:
                out += self._pipeline(batch)
                batch = []
                out.append(local if local is not None else self._poll(command))
            else:
                batch.append(command)
            i += 1
        out += self._pipeline(batch)
        return b"".join(out)

    def _pipeline(self, commands: list[list[bytes]]) -> list[bytes]:
        """Replies to plain commands: one request for each run of them that fits the
        size cap; a command refused alone is answered without one."""
        out: list[bytes] = []
        run: list[list[bytes]] = []
        texts: list[bytes] = []
        used = 1  # the JSON array's brackets, and a comma before each but the first
        for command in commands:
            try:
                text = orjson.dumps(_texts(command))
                self._fits(text, command)
            except _Refused as refused:
                out += self._send(run, texts)
                run, texts, used = [], [], 1
                out.append(_error(f"{REFUSED} {refused}"))
                continue
            if run and used + 1 + len(text) > self.settings.max_request_bytes:
                out += self._send(run, texts)
                run, texts, used = [], [], 1
            run.append(command)
            texts.append(text)
            used += 1 + len(text)
        out += self._send(run, texts)
        return out

    def _send(self, run: list[list[bytes]], texts: list[bytes]) -> list[bytes]:
        if not run:
            return []
        if len(run) == 1:
            return [self._one(texts[0])]
        return self._many(run, b"[%s]" % b",".join(texts))

    def _one(self, body: bytes) -> bytes:
        reply = self.post("/", body)
        if isinstance(reply, dict):
            return _answer(reply)
        raise _Unavailable(f"a reply to one command that is not an object: {reply!r:.80}")

    def _many(self, run: list[list[bytes]], body: bytes) -> list[bytes]:
        reply = self.post("/pipeline", body)
        if isinstance(reply, dict) and "error" in reply:  # refused as a whole
            return [_error(str(reply["error"]))] * len(run)
        if not isinstance(reply, list) or len(reply) != len(run):
            raise _Unavailable(f"a pipeline reply that does not match its {len(run)} commands")
        return [_answer(item) for item in reply]

    def _transactions(self, runs: list[tuple[list[list[bytes]], bool]]) -> list[bytes]:
        """The replies to consecutive transactions (their commands, and whether they end
        with EXEC: else DISCARD, which sends nothing)."""
        if len(runs) == 1:
            return self._transaction(*runs[0])
        from concurrent.futures import ThreadPoolExecutor  # only where it is used

        with ThreadPoolExecutor(min(len(runs), _PARALLEL)) as pool:
            answered = list(pool.map(lambda run: self._transaction(*run), runs))
        return [reply for replies in answered for reply in replies]

    def _transaction(self, commands: Sequence[list[bytes]], execute: bool = True) -> list[bytes]:
        """MULTI's, each QUEUED and EXEC's replies: one ``/multi-exec`` request."""
        if not execute:  # MULTI ... DISCARD
            return [_OK] + [_QUEUED] * len(commands) + [_OK]
        try:
            body = orjson.dumps([_texts(c) for c in commands])
            self._fits(body, [b"MULTI"])
        except _Refused as refused:
            return (
                [_error(f"{REFUSED} {refused}")]
                + [_QUEUED] * len(commands)
                + [_error(f"EXECABORT {REFUSED} {refused}")]
            )
        reply = self.post("/multi-exec", body)
        if isinstance(reply, dict) and "error" in reply:  # discarded as a whole
            return [_OK] + [_QUEUED] * len(commands) + [_error(f"EXECABORT {reply['error']}")]
        if not isinstance(reply, list) or len(reply) != len(commands):
            raise _Unavailable("a transaction reply that does not match its commands")
        return (
            [_OK]
            + [_QUEUED] * len(commands)
            + [b"*%d\r\n" % len(reply) + b"".join(_answer(item) for item in reply)]
        )

    def _fits(self, body: bytes, command: Sequence[bytes]) -> None:
        limit = self.settings.max_request_bytes
        if len(body) > limit:
            raise _Refused(
                f"{_name(command)} would be a request of {len(body)} bytes, over the REST "
                f"API's limit of {limit} bytes (max_request_bytes); nothing was sent"
            )

    def _poll(self, command: list[bytes]) -> bytes:
        """BLPOP/BRPOP, which REST does not have: LPOP/RPOP each key at growing
        intervals until one answers or the timeout passes."""
        pop = _POLLED[command[0].upper()]
        keys, timeout = command[1:-1], float(command[-1])
        deadline = None if timeout == 0 else time.monotonic() + timeout
        delay = self.settings.poll_first
        while True:
            for key in keys:
                try:
                    body = orjson.dumps([pop.decode(), *_texts([key])])
                except _Refused as refused:
                    return _error(f"{REFUSED} {refused}")
                reply = self.post("/", body)
                if not isinstance(reply, dict):
                    raise _Unavailable(f"a reply that is not an object: {reply!r:.80}")
                if "error" in reply or reply.get("result") is not None:
                    if "error" in reply:
                        return _answer(reply)
                    value = to_resp(reply["result"])
                    return b"*2\r\n$%d\r\n%s\r\n%s" % (len(key), key, value)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return _NIL_ARRAY
            pause = delay if left is None else min(delay, left)
            if _closed_within(self._sock, pause):
                raise _Gone
            delay = min(delay * 2, self.settings.poll_cap)
            # The wait is the caller's; each poll is a request with a timeout of its own.
            self.deadline = max(self.deadline, time.monotonic() + self.settings.timeout)


def _is(command: Sequence[bytes], name: bytes) -> bool:
    return bool(command) and command[0].upper() == name


def _local(name: bytes, command: Sequence[bytes]) -> bytes | None:
    """The reply to a command answered without a request, or None to send it."""
    if name == b"CLIENT" and len(command) > 1 and command[1].upper() in (b"SETINFO", b"SETNAME"):
        return _OK
    if name == b"SELECT":
        if command[1:] == [b"0"]:
            return _OK
        return _error("ERR a REST API has one database: use no /db in the URL")
    if name in _ABSENT or name in (b"CLIENT", b"EXEC"):
        return _error(
            f"ERR {_name(command)} is not available over Upstash's REST API"
            + (" (durability='replicated' needs a redis:// connection)" if name == b"WAIT" else "")
        )
    return None


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Wait up to ``seconds``; True if the client end closed meanwhile. (A selector,
    not select(): that refuses descriptors past 1023, which a busy process has.)"""
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        if not selector.select(max(seconds, 0.0)):
            return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _scrubbed(text: str, settings: RestSettings) -> str:
    """``text`` without the token (an httpx error may quote the header)."""
    return text.replace(settings.token, "***")


def _transaction_end(commands: Sequence[list[bytes]], start: int) -> int:
    """The index of the EXEC or DISCARD that ends the transaction at ``start``."""
    for j in range(start + 1, len(commands)):
        if _is(commands[j], b"EXEC") or _is(commands[j], b"DISCARD"):
            return j
    raise ValueError("a MULTI without EXEC")  # _serve answers those before


class _Unavailable(Exception):
    """No usable reply: the connection ends, and the store retries."""


class _Denied(Exception):
    """HTTP 401/403: the token is wrong or lacks a permission."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text}")
        self.status = status


class _Gone(Exception):
    """The client end closed while a poll waited."""


def _serve(sock: socket.socket, settings: RestSettings) -> None:
    """The bridge thread: commands in, replies out, until either end fails."""
    link: _Link | None = None
    buffer = bytearray()
    try:
        link = _Link(settings, sock)
        while True:
            if not buffer and not _read(sock, buffer, block=True):
                return
            if not _read(sock, buffer, block=False):  # a pipeline's chunks: one request
                return
            commands = take_commands(buffer)
            waited = time.monotonic() + settings.timeout
            while _open_transaction(commands) and time.monotonic() < waited:
                # MULTI sent, EXEC not yet: the rest of the pipeline is on its way.
                if _closed_within(sock, waited - time.monotonic()):
                    return
                if not _read(sock, buffer, block=False):
                    return
                commands += take_commands(buffer)
            if not commands:
                continue
            if _open_transaction(commands):  # a MULTI alone: not waited for longer
                replies = _error(
                    "ERR a transaction over a REST API is sent whole (MULTI ... EXEC in "
                    "one pipeline)"
                ) * len(commands)
            else:
                try:
                    replies = link.answer(commands)
                except _Denied as denied:
                    message = (
                        f"WRONGPASS the REST API refused the token ({denied}); check "
                        f"token= or UPSTASH_REDIS_REST_TOKEN"
                    )
                    replies = _error(message) * len(commands)  # one reply each
            _write(sock, replies, buffer)
    except _Gone:
        return
    except _Unavailable as exc:
        logger.warning(
            "redistate: the REST API at %s gave no usable reply (%s); the connection is "
            "closed and the store retries",
            settings.url,
            exc,
            extra={"redistate_event": "rest_unavailable"},
        )
    except Exception as exc:  # the thread must close its socket, whatever happened
        logger.warning(
            "redistate: the REST bridge to %s ended: %s",
            settings.url,
            _scrubbed(f"{type(exc).__name__}: {exc}", settings),
        )
    finally:
        if link is not None:
            link.close()
        try:
            sock.close()
        except OSError:
            pass


def _read(sock: socket.socket, buffer: bytearray, block: bool) -> bool:
    """Read into ``buffer``: one read, waiting for it (``block``), or all that is there
    now. False if the client end closed."""
    sock.setblocking(block)
    try:
        while True:
            data = sock.recv(1 << 16)
            if not data:
                return False
            buffer += data
            if block:
                return True
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)


def _write(sock: socket.socket, data: bytes, buffer: bytearray) -> None:
    """Send ``data``, reading what the client sends meanwhile into ``buffer``: a client
    still writing a large pipeline reads nothing until it is done, so a bridge that
    only wrote would wait for it while it waits for the bridge."""
    view = memoryview(data)
    sock.setblocking(False)
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
            while view:
                for _, events in selector.select():
                    if events & selectors.EVENT_READ:
                        try:
                            more = sock.recv(1 << 16)
                        except BlockingIOError:
                            more = None
                        if more == b"":
                            raise _Gone
                        if more:
                            buffer += more
                    if events & selectors.EVENT_WRITE:
                        try:
                            view = view[sock.send(view[: 1 << 16]) :]
                        except BlockingIOError:
                            pass
    finally:
        sock.setblocking(True)


def _open_transaction(commands: list[list[bytes]]) -> bool:
    """Whether the last MULTI in ``commands`` has no EXEC or DISCARD after it yet."""
    for command in reversed(commands):
        if _is(command, b"EXEC") or _is(command, b"DISCARD"):
            return False
        if _is(command, b"MULTI"):
            return True
    return False


def bridged(settings: RestSettings) -> socket.socket:
    """One end of a new socket pair; a daemon thread serves the other over REST."""
    ours, theirs = socket.socketpair()
    thread = threading.Thread(
        target=_serve, args=(theirs, settings), name="redistate-rest", daemon=True
    )
    thread.start()
    return ours


# -- redis-py connections ---------------------------------------------------------------

OPTIONS: Final = (
    "token",
    "max_connections",
    "max_request_bytes",
    "ssl_ca_certs",
    "health_check_interval",
)
"""What ``from_url`` takes for an ``upstash+https://`` URL."""
_MARGIN: Final = 1.0  # redis-py waits this much longer than a request may take


def pool_options(
    url: str, password: str | None, timeout: float, options: dict[str, Any]
) -> dict[str, Any]:
    """The connection pool's keyword arguments (``rest=`` among them) for a REST API at
    ``url`` (https://), given ``from_url``'s ``options``.

    Raises:
        TypeError: an option a REST API has no use for, named. ValueError: no token.
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(
            f"from_url got {', '.join(unknown)} for an upstash URL, which takes only "
            f"{', '.join(OPTIONS)}"
        )
    import os

    token = options.get("token") or password or os.environ.get("UPSTASH_REDIS_REST_TOKEN", "")
    settings = RestSettings(
        url=url,
        token=token,
        timeout=timeout,
        max_request_bytes=options.get("max_request_bytes", MAX_REQUEST_BYTES),
        verify=options.get("ssl_ca_certs") or True,
    )
    pool: dict[str, Any] = {
        "rest": settings,
        "protocol": 2,  # the client's reply callbacks must be RESP2's too
        "socket_timeout": timeout + _MARGIN,
        "socket_connect_timeout": timeout,
    }
    for name in ("max_connections", "health_check_interval"):
        if name in options:
            pool[name] = options[name]
    return pool


def _kwargs(settings: RestSettings, kwargs: dict[str, Any]) -> dict[str, Any]:
    # CLIENT SETINFO, which redis-py sends on connect, is answered by the bridge.
    kwargs.setdefault("host", settings.url)
    kwargs["protocol"] = 2  # the replies are made as RESP2; no HELLO is sent
    return kwargs


class _Named:
    """How a bridged connection names itself in redis-py's messages: by its URL."""

    rest: RestSettings

    def repr_pieces(self) -> list[tuple[str, Any]]:
        return [("url", self.rest.url)]

    def _host_error(self) -> str:
        return self.rest.url


class RestConnection(_Named, PlainConnection):
    """A redis-py connection whose socket is a bridge to a REST API."""

    def __init__(self, *, rest: RestSettings, **kwargs: Any) -> None:
        self.rest = rest
        init: Any = super().__init__  # untyped in redis-py's sync flavour
        init(**_kwargs(rest, kwargs))

    def _connect(self) -> socket.socket:
        sock = bridged(self.rest)
        sock.settimeout(self.socket_timeout)
        return sock


class AsyncRestConnection(_Named, AsyncPlainConnection):
    """The async twin of :class:`RestConnection` (its bridge is the same thread)."""

    def __init__(self, *, rest: RestSettings, **kwargs: Any) -> None:
        self.rest = rest
        super().__init__(**_kwargs(rest, kwargs))

    async def _connect(self) -> None:
        import asyncio

        sock = bridged(self.rest)
        sock.setblocking(False)
        self._reader, self._writer = await asyncio.open_connection(sock=sock)
