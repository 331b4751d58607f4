"""A threaded TCP proxy in front of a Redis server that injects faults on cue.

    with FaultProxy("127.0.0.1", server.port) as proxy:
        client = redis.Redis(host="127.0.0.1", port=proxy.port)
        proxy.drop_reply(b"EVALSHA")   # applied by the server, the client sees a lost connection
        proxy.drop_request(b"SET k")   # never reaches the server, the connection is lost
        proxy.stall_reply(b"GET", 0.5) # the reply is held back for half a second

The proxy splits the client stream into commands (RESP arrays of bulk strings, or
inline commands) and the server stream into complete RESP2/RESP3 replies, so it knows
which reply answers which command even when commands are pipelined, split over TCP
segments or packed into one. An armed fault fires on the next matching command of any
connection, ``times`` times, and is then spent.

Semantics of a drop, on the connection where the command matched:

* ``drop_reply``: every command up to and including the matched one is forwarded, the
  commands after it (already sent by a pipelining client) are discarded. Replies to the
  earlier commands are relayed; when the matched command's reply has fully arrived it is
  swallowed and both sockets are shut down. The command was applied; the client sees a
  closed connection.
* ``drop_request``: commands before the matched one are forwarded and their replies
  relayed; then both sockets are shut down. The matched command and those after it never
  reach the server.

Limitations: replies are paired with commands by counting, so commands that get no
reply (``CLIENT REPLY OFF/SKIP``) or many (``SUBSCRIBE`` and pub/sub mode, ``MONITOR``)
put the counting out of step; top-level RESP3 push frames (``>``) are relayed but not
counted as replies. RESP3 streamed strings and aggregates (``$?``, ``*?``) are not parsed;
a stream the proxy cannot parse ends that connection.
"""

from __future__ import annotations

import contextlib
import enum
import selectors
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TypeAlias

__all__ = [
    "FaultProxy",
    "Matcher",
    "ProtocolError",
    "ReplyScanner",
    "RequestReader",
    "command",
]

#: What a fault matches: bytes found in the command's words joined by single spaces
#: (``b"EVALSHA"``, ``b"SET mykey"``; case-sensitive), or a predicate on the words.
Matcher: TypeAlias = "bytes | Callable[[Sequence[bytes]], bool]"

_RECV = 256 * 1024


class ProtocolError(ValueError):
    """The bytes on a connection are not RESP the proxy understands."""


def command(name: bytes, *args: bytes) -> Callable[[Sequence[bytes]], bool]:
    """A matcher for the command ``name`` (any case) whose first arguments are ``args``.

    ``command(b"SET")`` matches ``SET k v`` but not ``HSET``, ``GETSET`` nor
    ``CLIENT SETINFO`` (which redis-py sends on connect, and ``b"SET"`` would match).
    """
    upper = name.upper()

    def match(words: Sequence[bytes]) -> bool:
        return (
            len(words) > len(args)
            and words[0].upper() == upper
            and tuple(words[1 : 1 + len(args)]) == args
        )

    return match


def _matches(matcher: Matcher, words: Sequence[bytes]) -> bool:
    if isinstance(matcher, bytes):
        return matcher in b" ".join(words)
    return matcher(words)


# -- the client stream: commands ------------------------------------------------------


@dataclass(frozen=True)
class Command:
    raw: bytes  # exactly the bytes the client sent for this command
    words: tuple[bytes, ...]  # name and arguments; empty for a no-op (``*0``, blank line)


class RequestReader:
    """Splits a client byte stream into commands, however it is chunked.

    A partially received bulk string is not re-scanned: only its header is looked at
    again when more bytes arrive, so a 5 MB value costs no quadratic work.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._start = 0  # where the current command begins in _buf
        self._scan = 0  # how far the current command is parsed
        self._want: int | None = None  # words the current array command has
        self._words: list[bytes] = []

    def feed(self, data: bytes) -> list[Command]:
        self._buf += data
        commands: list[Command] = []
        while (cmd := self._next()) is not None:
            commands.append(cmd)
        if self._start:
            del self._buf[: self._start]
            self._scan -= self._start
            self._start = 0
        return commands

    def _next(self) -> Command | None:
        buf = self._buf
        if self._want is None:
            if self._scan >= len(buf):
                return None
            nl = buf.find(b"\n", self._scan)
            if nl < 0:
                return None
            if buf[self._scan] != ord("*"):  # an inline command: words split by blanks
                self._scan = nl + 1
                return self._emit(tuple(bytes(buf[self._start : self._scan]).split()))
            if buf[nl - 1] != ord("\r"):
                raise ProtocolError("array header not ended by CRLF")
            self._want = _int(buf[self._scan + 1 : nl - 1])
            self._scan = nl + 1
            self._words = []
        while len(self._words) < self._want:
            if self._scan >= len(buf):
                return None
            if buf[self._scan] != ord("$"):
                raise ProtocolError(
                    f"expected a bulk string, got {bytes(buf[self._scan :][:20])!r}"
                )
            nl = buf.find(b"\r\n", self._scan)
            if nl < 0:
                return None
            size = _int(buf[self._scan + 1 : nl])
            begin = nl + 2
            end = begin + size
            if end + 2 > len(buf):
                return None  # the header is parsed again when the rest arrives
            if size < 0 or buf[end : end + 2] != b"\r\n":
                raise ProtocolError("bad bulk string in a command")
            self._words.append(bytes(buf[begin:end]))
            self._scan = end + 2
        return self._emit(tuple(self._words))

    def _emit(self, words: tuple[bytes, ...]) -> Command:
        cmd = Command(bytes(self._buf[self._start : self._scan]), words)
        self._start = self._scan
        self._want = None
        self._words = []
        return cmd


def _int(text: bytes | bytearray) -> int:
    try:
        return int(text)
    except ValueError:
        raise ProtocolError(f"not an integer: {bytes(text)!r}") from None


# -- the server stream: replies ---------------------------------------------------------

_LINE_TYPES = frozenset(b"+-:_#,(")  # simple, error, integer, null, boolean, double, big num
_BLOB_TYPES = frozenset(b"$=!")  # bulk string, verbatim string, blob error
_AGGREGATE_TYPES = frozenset(b"*~>")  # array, set, push
_PAIR_TYPES = frozenset(b"%|")  # map, attribute


@dataclass
class _Frame:
    remaining: int  # values still to come in this aggregate
    attribute: bool  # an attribute annotates the value after it: it is not a value itself
    push: bool  # a top-level push is out-of-band data, not a reply


class ReplyScanner:
    """Finds where complete RESP2/RESP3 replies end in a server byte stream.

    :meth:`feed` returns, for each top-level value that ends in the chunk, its end offset
    in the chunk and whether it counts as a reply (top-level pushes do not). Bulk payloads
    are skipped by length without buffering, so big values cost nothing.
    """

    def __init__(self) -> None:
        self._line = bytearray()  # a header line split over chunks
        self._skip = 0  # payload bytes (CRLF included) of a blob still to come
        self._stack: list[_Frame] = []

    def feed(self, data: bytes) -> list[tuple[int, bool]]:
        ends: list[tuple[int, bool]] = []
        pos = 0
        size = len(data)
        while pos < size:
            if self._skip:
                step = min(self._skip, size - pos)
                pos += step
                self._skip -= step
                if not self._skip:
                    self._value_done(pos, ends)
                continue
            nl = data.find(b"\n", pos)
            if nl < 0:
                self._line += data[pos:]
                break
            line = bytes(self._line) + data[pos : nl + 1] if self._line else data[pos : nl + 1]
            self._line.clear()
            pos = nl + 1
            self._header(line, pos, ends)
        return ends

    def _header(self, line: bytes, pos: int, ends: list[tuple[int, bool]]) -> None:
        if len(line) < 3 or line[-2:] != b"\r\n":
            raise ProtocolError(f"bad reply line {line[:40]!r}")
        kind = line[0]
        if kind in _LINE_TYPES:
            self._value_done(pos, ends)
            return
        if line[1:2] == b"?":
            raise ProtocolError("RESP3 streamed types are not supported")
        count = _int(line[1:-2])
        if kind in _BLOB_TYPES:
            if count < 0:
                self._value_done(pos, ends)  # $-1: null bulk string
            else:
                self._skip = count + 2
            return
        if kind in _PAIR_TYPES:
            count *= 2
        elif kind not in _AGGREGATE_TYPES:
            raise ProtocolError(f"unknown reply type {line[:40]!r}")
        attribute = kind == ord("|")
        push = kind == ord(">") and not self._stack
        if count > 0:
            self._stack.append(_Frame(count, attribute, push))
        elif push:
            ends.append((pos, False))  # an empty top-level push
        elif not attribute:
            self._value_done(pos, ends)  # *0, *-1, empty map/set/push

    def _value_done(self, pos: int, ends: list[tuple[int, bool]]) -> None:
        push = False
        while self._stack:
            frame = self._stack[-1]
            frame.remaining -= 1
            if frame.remaining:
                return
            self._stack.pop()
            if frame.attribute:
                return  # the annotated value follows
            push = frame.push
        ends.append((pos, not push))


# -- the proxy ---------------------------------------------------------------------------


class _Kind(enum.Enum):
    DROP_REPLY = "drop_reply"
    DROP_REQUEST = "drop_request"
    STALL_REPLY = "stall_reply"


@dataclass
class _Arm:
    kind: _Kind
    matcher: Matcher
    remaining: int
    seconds: float = 0.0
    then: Callable[[], object] | None = None


@dataclass(eq=False)  # hashed by identity: kept in a set
class _Conn:
    client: socket.socket
    server: socket.socket
    # Written by the client-to-server thread before it sends the command concerned,
    # read by the server-to-client thread (all under the proxy's lock):
    relay_limit: int | None = None  # relay only replies with an index below this
    close_at: int | None = None  # sever once this many replies have arrived
    # reply index -> (seconds, what runs once they are over, before the reply is relayed)
    stalls: dict[int, tuple[float, Callable[[], object] | None]] = field(default_factory=dict)
    then: Callable[[], object] | None = None  # runs after a dropped reply, before severing
    # Written by the server-to-client thread:
    replies: int = 0  # complete replies received (and relayed unless held back)
    severed: bool = False
    ended: threading.Event = field(default_factory=threading.Event)


class FaultProxy:
    """Relays ``listen host:port`` <-> ``host:port`` and injects armed faults.

    Thread-safe; one thread per direction of each connection. Use as a context manager
    or call :meth:`close`, which stops the listener, ends every connection and joins all
    threads.
    """

    def __init__(self, host: str, port: int, *, listen_host: str = "127.0.0.1") -> None:
        self.upstream = (host, port)
        self._cond = threading.Condition()
        self._arms: list[_Arm] = []
        self._conns: set[_Conn] = set()
        self._threads: list[threading.Thread] = []
        self._dropped = 0
        self._connections = 0
        self._closing = False
        self._listener = socket.create_server((listen_host, 0))
        self._listener.setblocking(False)
        self.host: str = listen_host
        self.port: int = int(self._listener.getsockname()[1])
        self._wake_r, self._wake_w = socket.socketpair()
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"FaultProxy-accept-{self.port}", daemon=True
        )
        self._acceptor.start()

    # -- arming --------------------------------------------------------------------------

    def drop_reply(
        self, matcher: Matcher, *, times: int = 1, then: Callable[[], object] | None = None
    ) -> None:
        """Forward the next matching command, swallow its reply, close the connection.
        ``then`` runs (on a proxy thread) once the reply has arrived and before the
        connection is closed: what other clients do while the reply is lost."""
        self._arm(_Arm(_Kind.DROP_REPLY, matcher, times, then=then))

    def drop_request(self, matcher: Matcher, *, times: int = 1) -> None:
        """Do not forward the next matching command; close the connection instead."""
        self._arm(_Arm(_Kind.DROP_REQUEST, matcher, times))

    def stall_reply(
        self,
        matcher: Matcher,
        seconds: float,
        *,
        times: int = 1,
        then: Callable[[], object] | None = None,
    ) -> None:
        """Hold the reply to the next matching command back for ``seconds``. ``then``
        runs (on a proxy thread) once they are over, before the reply is relayed: the
        server has run the command, the client does not know yet."""
        if seconds < 0:
            raise ValueError("seconds must be >= 0")
        self._arm(_Arm(_Kind.STALL_REPLY, matcher, times, seconds, then))

    def disarm(self) -> int:
        """Forget every fault that has not fired yet; returns how many were armed."""
        with self._cond:
            count = sum(arm.remaining for arm in self._arms)
            self._arms.clear()
            return count

    @property
    def armed(self) -> int:
        """Faults still to fire (an arm with ``times=3`` counts 3 until it fires)."""
        with self._cond:
            return sum(arm.remaining for arm in self._arms)

    def _arm(self, arm: _Arm) -> None:
        if arm.remaining < 1:
            raise ValueError("times must be >= 1")
        if not isinstance(arm.matcher, bytes) and not callable(arm.matcher):
            raise TypeError("a matcher is bytes or a callable on the command's words")
        with self._cond:
            if self._closing:
                raise RuntimeError("the proxy is closed")
            self._arms.append(arm)

    def _take(self, words: Sequence[bytes]) -> _Arm | None:
        """The first armed fault matching ``words``, spent by one (under the lock)."""
        for i, arm in enumerate(self._arms):
            if _matches(arm.matcher, words):
                arm.remaining -= 1
                if not arm.remaining:
                    del self._arms[i]
                return arm
        return None

    # -- counters ------------------------------------------------------------------------

    @property
    def dropped(self) -> int:
        """Connections severed by a fault (or :meth:`drop_all`) so far."""
        with self._cond:
            return self._dropped

    @property
    def connections(self) -> int:
        """Client connections accepted so far."""
        with self._cond:
            return self._connections

    def wait_dropped(self, n: int, timeout: float | None = None) -> bool:
        """Block until at least ``n`` drops happened; False if ``timeout`` passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: self._dropped >= n, timeout)

    def drop_all(self) -> int:
        """Sever every open connection now (each counts as a drop); returns how many."""
        with self._cond:
            conns = list(self._conns)
        return sum(self._sever(conn, counted=True) for conn in conns)

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        """Stop listening, end every connection and join every thread. Idempotent."""
        with self._cond:
            if self._closing and not self._acceptor.is_alive() and not self._threads:
                return
            self._closing = True
            self._arms.clear()
            conns = list(self._conns)
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._acceptor.join(timeout=10)
        for conn in conns:
            self._sever(conn, counted=False)
        with self._cond:
            threads = list(self._threads)
            self._threads.clear()
        for thread in threads:
            thread.join(timeout=10)
        stuck = [t.name for t in [self._acceptor, *threads] if t.is_alive()]
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()
        if stuck:
            raise RuntimeError(f"FaultProxy threads did not stop: {stuck}")

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- threads -------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    if key.fileobj is self._wake_r:
                        return
                    try:
                        client, _addr = self._listener.accept()
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        return
                    client.setblocking(True)
                    thread = threading.Thread(
                        target=self._handle,
                        args=(client,),
                        name=f"FaultProxy-conn-{self.port}",
                        daemon=True,
                    )
                    with self._cond:
                        self._connections += 1
                        self._threads.append(thread)
                    thread.start()

    def _handle(self, client: socket.socket) -> None:
        """Connect upstream, then pump client -> server on this thread."""
        try:
            server = socket.create_connection(self.upstream, timeout=10)
            server.settimeout(None)
        except OSError:
            client.close()
            return
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Conn(client, server)
        with self._cond:
            if self._closing:
                client.close()
                server.close()
                return
            self._conns.add(conn)
        pump = threading.Thread(
            target=self._server_to_client, args=(conn,), name=f"FaultProxy-s2c-{self.port}"
        )
        pump.daemon = True
        pump.start()
        try:
            self._client_to_server(conn)
        finally:
            pump.join()
            with self._cond:
                self._conns.discard(conn)
            conn.ended.set()
            client.close()
            server.close()

    def _client_to_server(self, conn: _Conn) -> None:
        reader = RequestReader()
        sent = 0  # commands forwarded that expect a reply
        try:
            while True:
                data = conn.client.recv(_RECV)
                if not data:
                    # Half-close: the server answers what it got, then closes too.
                    with contextlib.suppress(OSError):
                        conn.server.shutdown(socket.SHUT_WR)
                    return
                out = bytearray()
                pending = 0  # commands in ``out``
                for cmd in reader.feed(data):
                    now = False
                    with self._cond:
                        arm = self._take(cmd.words) if cmd.words else None
                        index = sent + pending  # the index of this command's reply
                        if arm is None or arm.kind is _Kind.STALL_REPLY:
                            if arm is not None:
                                conn.stalls[index] = (arm.seconds, arm.then)
                        elif arm.kind is _Kind.DROP_REPLY:
                            conn.relay_limit, conn.close_at = index, index + 1
                            conn.then = arm.then
                        else:
                            conn.relay_limit = conn.close_at = index
                            now = conn.replies >= index
                    if arm is not None and arm.kind is _Kind.DROP_REQUEST:
                        if out:
                            conn.server.sendall(out)
                        if now:
                            self._sever(conn, counted=True)
                        return  # the server-to-client thread severs after the replies
                    out += cmd.raw
                    pending += bool(cmd.words)
                    if arm is not None and arm.kind is _Kind.DROP_REPLY:
                        conn.server.sendall(out)
                        return  # the server-to-client thread severs after the reply
                if out:
                    conn.server.sendall(out)
                sent += pending
        except (OSError, ProtocolError):
            self._sever(conn, counted=False)

    def _server_to_client(self, conn: _Conn) -> None:
        scanner = ReplyScanner()
        try:
            while True:
                data = conn.server.recv(_RECV)
                if not data:
                    break
                if self._relay(conn, data, scanner.feed(data)):
                    return
        except (OSError, ProtocolError):
            pass
        self._sever(conn, counted=False)

    def _relay(self, conn: _Conn, data: bytes, ends: list[tuple[int, bool]]) -> bool:
        """Relay one chunk from the server; True once the connection is severed."""
        with self._cond:
            # A fault on reply k is recorded before command k is sent, so before any
            # byte of reply k is read: this snapshot holds every fault this chunk meets.
            relay_limit, close_at = conn.relay_limit, conn.close_at
            stalls = dict(conn.stalls)
            index = conn.replies
        out = bytearray()
        view = memoryview(data)
        begin = 0
        bounds = [*ends, (len(data), False)] if not ends or ends[-1][0] < len(data) else ends
        for end, counts in bounds:
            if index in stalls:
                if out:
                    conn.client.sendall(out)
                    out.clear()
                with self._cond:
                    seconds, then = conn.stalls.pop(index, (0.0, None))
                stalls.pop(index)
                if conn.ended.wait(seconds):
                    return True
                if then is not None:
                    then()
            if relay_limit is None or index < relay_limit:
                out += view[begin:end]
            begin = end
            if counts:
                index += 1
                if close_at is not None and index >= close_at:
                    if out:
                        conn.client.sendall(out)
                    with self._cond:
                        conn.replies = index
                        then, conn.then = conn.then, None
                    if then is not None:
                        then()
                    self._sever(conn, counted=True)
                    return True
        if out:
            conn.client.sendall(out)
        with self._cond:
            conn.replies = index
            close_at = conn.close_at  # a drop_request may have come meanwhile
        if close_at is not None and index >= close_at:
            self._sever(conn, counted=True)
            return True
        return False

    def _sever(self, conn: _Conn, *, counted: bool) -> bool:
        """Shut both sockets down (waking both threads); False if already severed."""
        with self._cond:
            if conn.severed:
                return False
            conn.severed = True
            if counted:
                self._dropped += 1
                self._cond.notify_all()
        conn.ended.set()
        for sock in (conn.client, conn.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        return True
