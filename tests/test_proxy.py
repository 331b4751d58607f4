"""The fault-injection proxy against a real Redis: relays faithfully, drops on cue."""

from __future__ import annotations

import random
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.asyncio.retry
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.proxy import FaultProxy, ProtocolError, ReplyScanner, RequestReader, command
from tests.servers import Server, redis_binary, start_server

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    srv = start_server(redis_binary())
    yield srv
    srv.stop()


@pytest.fixture
def direct(server: Server) -> Iterator[redis.Redis]:
    client = server.client()
    yield client
    client.close()


@pytest.fixture
def proxy(server: Server) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", server.port) as p:
        yield p


@pytest.fixture
def key() -> str:
    return f"proxy-test:{uuid.uuid4().hex}"


def through(proxy: FaultProxy, **kwargs: object) -> redis.Redis:
    """A client of the proxy that never retries, so a dropped connection shows."""
    options: dict[str, object] = {"socket_timeout": 5, "retry": Retry(NoBackoff(), 0)}
    options.update(kwargs)
    return redis.Redis(host="127.0.0.1", port=proxy.port, **options)  # type: ignore[arg-type]


def raw_exchange(proxy: FaultProxy, payload: bytes, *, chunk: int | None = None) -> bytes:
    """Send ``payload`` (in ``chunk``-byte pieces if given), read until the proxy closes."""
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        step = chunk or len(payload)
        for i in range(0, len(payload), step):
            sock.sendall(payload[i : i + step])
        received = bytearray()
        while data := sock.recv(65536):
            received += data
        return bytes(received)


def resp(*words: bytes) -> bytes:
    return b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)


def proxy_threads(proxy: FaultProxy) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.endswith(f"-{proxy.port}")]


# -- parsers ----------------------------------------------------------------------------

REPLIES: list[tuple[bytes, bool]] = [
    (b"+OK\r\n", True),
    (b"-ERR wrong\r\n", True),
    (b":42\r\n", True),
    (b"$5\r\nhello\r\n", True),
    (b"$6\r\n*1\r\n:1\r\n", True),  # a payload that looks like RESP is skipped by length
    (b"$-1\r\n", True),
    (b"$0\r\n\r\n", True),
    (b"*-1\r\n", True),
    (b"*0\r\n", True),
    (b"*3\r\n*2\r\n:1\r\n$1\r\na\r\n*-1\r\n*1\r\n*0\r\n", True),
    (b"_\r\n", True),
    (b"#t\r\n", True),
    (b",3.14\r\n", True),
    (b"(12345678901234567890\r\n", True),
    (b"!3\r\nbad\r\n", True),
    (b"=7\r\ntxt:abc\r\n", True),
    (b"%2\r\n+a\r\n:1\r\n+b\r\n*1\r\n%1\r\n:2\r\n:3\r\n", True),
    (b"%0\r\n", True),
    (b"~2\r\n:1\r\n:2\r\n", True),
    (b"|1\r\n+key\r\n+val\r\n:7\r\n", True),  # an attribute annotates the value after it
    (b"*2\r\n|1\r\n+k\r\n+v\r\n:1\r\n:2\r\n", True),
    (b">2\r\n+invalidate\r\n*1\r\n$1\r\nk\r\n", False),  # out-of-band push: no reply
    (b">0\r\n", False),
]


def scan(stream: bytes, chunks: list[int]) -> list[tuple[int, bool]]:
    scanner = ReplyScanner()
    ends: list[tuple[int, bool]] = []
    pos = 0
    for size in chunks:
        ends += [(pos + end, counts) for end, counts in scanner.feed(stream[pos : pos + size])]
        pos += size
    assert pos == len(stream)
    return ends


def random_chunks(total: int, rng: random.Random) -> list[int]:
    sizes: list[int] = []
    while total:
        sizes.append(min(total, rng.randint(1, 7)))
        total -= sizes[-1]
    return sizes


def test_reply_scanner_finds_every_reply_however_chunked() -> None:
    stream = b"".join(r for r, _ in REPLIES)
    expected: list[tuple[int, bool]] = []
    pos = 0
    for reply, counts in REPLIES:
        pos += len(reply)
        expected.append((pos, counts))
    rng = random.Random(7)
    assert scan(stream, [len(stream)]) == expected
    assert scan(stream, [1] * len(stream)) == expected
    for _ in range(50):
        assert scan(stream, random_chunks(len(stream), rng)) == expected


def test_reply_scanner_rejects_garbage() -> None:
    with pytest.raises(ProtocolError):
        ReplyScanner().feed(b"?what\r\n")
    with pytest.raises(ProtocolError):
        ReplyScanner().feed(b"$abc\r\n")


def test_request_reader_splits_commands_however_chunked() -> None:
    commands = [
        (b"SET", b"k", b"a\r\nb*2\r\n"),
        (b"GET", b"k"),
        (b"EVALSHA", b"0" * 40, b"1", b"k", b""),
    ]
    stream = b"".join(resp(*c) for c in commands) + b"PING  x\r\n" + b"*0\r\n"
    expected = [*commands, (b"PING", b"x"), ()]
    rng = random.Random(11)
    for chunks in [[len(stream)], [1] * len(stream)] + [
        random_chunks(len(stream), rng) for _ in range(50)
    ]:
        reader = RequestReader()
        got = []
        pos = 0
        for size in chunks:
            got += reader.feed(stream[pos : pos + size])
            pos += size
        assert [c.words for c in got] == expected
        assert b"".join(c.raw for c in got) == stream


def test_command_matcher() -> None:
    match = command(b"set", b"k")
    assert match([b"SET", b"k", b"v"])
    assert not match([b"SET", b"other", b"v"])
    assert not match([b"HSET", b"k", b"f", b"v"])
    assert not command(b"SET")([b"CLIENT", b"SETINFO", b"LIB-NAME", b"redis-py"])
    assert not command(b"PING", b"x")([b"PING"])


# -- relaying ---------------------------------------------------------------------------


def test_plain_commands_big_values_and_pipelines_pass(
    proxy: FaultProxy, direct: redis.Redis, key: str
) -> None:
    client = through(proxy)
    try:
        assert client.ping()
        big = random.Random(1).randbytes(5 * 1024 * 1024)
        assert client.set(key, big)
        assert client.get(key) == big
        assert direct.get(key) == big
        pipe = client.pipeline(transaction=False)
        for i in range(500):
            pipe.set(f"{key}:{i}", i)
            pipe.get(f"{key}:{i}")
        results = pipe.execute()
        assert results == [x for i in range(500) for x in (True, str(i).encode())]
        assert client.delete(key, *(f"{key}:{i}" for i in range(500))) == 501
    finally:
        client.close()
    assert proxy.dropped == 0
    assert proxy.connections == 1


def test_commands_split_into_bytes_or_packed_into_one_segment(
    proxy: FaultProxy, direct: redis.Redis, key: str
) -> None:
    k = key.encode()
    payload = resp(b"SET", k, b"v") + resp(b"GET", k) + resp(b"QUIT")
    expected = b"+OK\r\n$1\r\nv\r\n+OK\r\n"
    assert raw_exchange(proxy, payload, chunk=1) == expected
    assert raw_exchange(proxy, payload) == expected
    # Dropped on the last command sent byte by byte, or in the middle of one segment.
    proxy.drop_reply(b"GET " + k)
    assert raw_exchange(proxy, resp(b"SET", k, b"w") + resp(b"GET", k), chunk=1) == b"+OK\r\n"
    proxy.drop_request(b"GET " + k)
    assert raw_exchange(proxy, resp(b"DEL", k) + resp(b"GET", k), chunk=3) == b":1\r\n"
    proxy.drop_reply(b"GET " + k)
    assert raw_exchange(proxy, payload) == b"+OK\r\n"
    proxy.drop_request(b"GET " + k)
    assert raw_exchange(proxy, resp(b"DEL", k) + payload) == b":1\r\n+OK\r\n"
    assert proxy.dropped == 4
    direct.delete(key)


# -- drops ------------------------------------------------------------------------------


def test_drop_reply_applies_the_command_and_drops_the_connection(
    proxy: FaultProxy, direct: redis.Redis, key: str
) -> None:
    client = through(proxy)
    try:
        assert client.ping()
        proxy.drop_reply(b"SET")  # b"SET" would also match CLIENT SETINFO: connected already
        with pytest.raises(redis.ConnectionError):
            client.set(key, "applied")
        assert proxy.wait_dropped(1, timeout=5)
        assert direct.get(key) == b"applied"
        assert client.get(key) == b"applied"  # a new connection, the arm is spent
    finally:
        client.close()
    assert proxy.dropped == 1
    assert proxy.connections == 2
    direct.delete(key)


def test_drop_request_does_not_apply_the_command(
    proxy: FaultProxy, direct: redis.Redis, key: str
) -> None:
    client = through(proxy)  # fresh: the handshake passes, command() ignores CLIENT SETINFO
    try:
        proxy.drop_request(command(b"SET", key.encode()))
        with pytest.raises(redis.ConnectionError):
            client.set(key, "never")
        assert proxy.wait_dropped(1, timeout=5)
        assert direct.exists(key) == 0
        assert client.set(key, "later")
        assert direct.get(key) == b"later"
    finally:
        client.close()
    assert proxy.dropped == 1
    direct.delete(key)


def test_an_arm_fires_exactly_as_often_as_asked(
    proxy: FaultProxy, direct: redis.Redis, key: str
) -> None:
    client = through(proxy)
    pattern = b"INCRBY " + key.encode()  # redis-py sends INCR as INCRBY k 1
    try:
        proxy.drop_reply(pattern)
        proxy.drop_request(pattern, times=2)
        assert proxy.armed == 3
        with pytest.raises(redis.ConnectionError):
            client.incr(key)  # applied: 1
        for _ in range(2):
            with pytest.raises(redis.ConnectionError):
                client.incr(key)  # not applied
        assert proxy.armed == 0
        assert client.incr(key) == 2
        assert client.incr(key) == 3
        proxy.drop_reply(pattern)
        assert proxy.disarm() == 1
        assert client.incr(key) == 4
    finally:
        client.close()
    assert proxy.dropped == 3
    assert direct.get(key) == b"4"
    direct.delete(key)


def test_arms_are_thread_safe(proxy: FaultProxy, direct: redis.Redis, key: str) -> None:
    proxy.drop_reply(command(b"INCRBY", key.encode()), times=5)
    failures: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        client = through(proxy)
        try:
            for _ in range(20):
                try:
                    client.incr(key)
                except redis.ConnectionError:
                    with lock:
                        failures.append(1)
        finally:
            client.close()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(failures) == 5
    assert proxy.dropped == 5
    assert direct.get(key) == b"160"  # every INCR applied, the dropped ones too
    direct.delete(key)


def test_drop_reply_of_a_script(proxy: FaultProxy, direct: redis.Redis, key: str) -> None:
    client = through(proxy)
    script = client.register_script("return redis.call('INCR', KEYS[1])")
    try:
        assert script(keys=[key]) == 1  # loads the script, EVALSHA from now on
        proxy.drop_reply(b"EVALSHA")
        with pytest.raises(redis.ConnectionError):
            script(keys=[key])
        assert direct.get(key) == b"2"
    finally:
        client.close()
    assert proxy.dropped == 1
    direct.delete(key)


@pytest.mark.parametrize("fault", ["drop_reply", "drop_request"])
def test_a_pipeline_dropped_in_the_middle(
    proxy: FaultProxy, direct: redis.Redis, key: str, fault: str
) -> None:
    client = through(proxy)
    keys = [f"{key}:{i}" for i in range(10)]
    try:
        assert client.ping()
        getattr(proxy, fault)(b"SET " + keys[5].encode())
        pipe = client.pipeline(transaction=False)
        for k in keys:
            pipe.set(k, "x")
        with pytest.raises(redis.ConnectionError):
            pipe.execute()
    finally:
        client.close()
    applied = [direct.exists(k) == 1 for k in keys]
    upto = 6 if fault == "drop_reply" else 5
    assert applied == [True] * upto + [False] * (10 - upto)
    assert proxy.dropped == 1
    direct.delete(*keys)


@pytest.mark.parametrize("protocol", [2, 3])
def test_replies_before_the_dropped_one_are_relayed(
    proxy: FaultProxy, direct: redis.Redis, key: str, protocol: int
) -> None:
    k = key.encode()
    direct.hset(key + ":h", mapping={"f": "v"})
    payload = (
        (resp(b"HELLO", b"3") if protocol == 3 else b"")
        + resp(b"SET", k, b"1")
        + resp(b"HGETALL", k + b":h")
        + resp(b"GET", k + b":missing")
        + resp(b"INCR", k)
        + resp(b"SET", k + b":after", b"1")
    )
    proxy.drop_reply(b"INCR " + k)
    got = raw_exchange(proxy, payload)
    tail = (
        b"+OK\r\n%1\r\n$1\r\nf\r\n$1\r\nv\r\n_\r\n"
        if protocol == 3
        else b"+OK\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n$-1\r\n"
    )
    assert got.endswith(tail)
    if protocol == 3:
        assert got.startswith(b"%")  # the HELLO map
    else:
        assert got == tail
    assert direct.get(key) == b"2"  # INCR applied, its reply swallowed
    assert direct.exists(key + ":after") == 0
    direct.delete(key, key + ":h")


def test_resp3_client(proxy: FaultProxy, direct: redis.Redis, key: str) -> None:
    client = through(proxy, protocol=3)
    try:
        direct.hset(key, mapping={"a": "1", "b": "2"})
        assert client.hgetall(key) == {b"a": b"1", b"b": b"2"}
        proxy.drop_reply(b"HGETALL")
        with pytest.raises(redis.ConnectionError):
            client.hgetall(key)
        assert client.hgetall(key) == {b"a": b"1", b"b": b"2"}
    finally:
        client.close()
    assert proxy.dropped == 1
    direct.delete(key)


# -- stalls -----------------------------------------------------------------------------


def test_stall_reply_delays_one_reply(proxy: FaultProxy, direct: redis.Redis, key: str) -> None:
    direct.set(key, "v")
    client = through(proxy)
    try:
        assert client.ping()
        proxy.stall_reply(b"GET " + key.encode(), 0.3)
        started = time.monotonic()
        assert client.get(key) == b"v"
        assert time.monotonic() - started >= 0.3
        # Spent after one reply: the next GET is not held back (not timed: on a loaded
        # machine a GET may take 0.3 s anyway).
        assert proxy.armed == 0
        assert client.get(key) == b"v"
    finally:
        client.close()
    assert proxy.dropped == 0
    direct.delete(key)


def test_stall_reply_then_runs_after_the_command_and_before_its_reply(
    proxy: FaultProxy, direct: redis.Redis, key: str
) -> None:
    client = through(proxy)
    seen: list[Any] = []

    def meanwhile() -> None:
        seen.append(direct.get(key))  # the SET has run
        direct.set(key, "overwritten")

    try:
        proxy.stall_reply(command(b"SET", key.encode()), 0, then=meanwhile)
        assert client.set(key, "v")
        assert seen == [b"v"] and client.get(key) == b"overwritten"
        assert proxy.armed == 0
    finally:
        client.close()
    direct.delete(key)


def test_stall_reply_provokes_a_client_timeout(
    server: Server, direct: redis.Redis, key: str
) -> None:
    proxy = FaultProxy("127.0.0.1", server.port)
    client = through(proxy, socket_timeout=0.2)
    try:
        assert client.ping()
        proxy.stall_reply(b"SET " + key.encode(), 30)
        with pytest.raises(redis.TimeoutError):
            client.set(key, "late")
        assert direct.get(key) == b"late"  # applied; only the reply is late
    finally:
        client.close()
        started = time.monotonic()
        proxy.close()  # interrupts the 30 s stall
        assert time.monotonic() - started < 5
    direct.delete(key)


# -- lifetime ---------------------------------------------------------------------------


def test_close_stops_the_listener_and_joins_every_thread(server: Server) -> None:
    proxy = FaultProxy("127.0.0.1", server.port)
    clients = [through(proxy) for _ in range(3)]
    for c in clients:
        assert c.ping()
    assert proxy.connections == 3
    assert len(proxy_threads(proxy)) == 1 + 2 * 3  # acceptor, two pumps a connection
    proxy.close()
    proxy.close()  # idempotent
    assert proxy_threads(proxy) == []
    for c in clients:
        with pytest.raises(redis.ConnectionError):
            c.ping()
        c.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=1).close()
    with pytest.raises(RuntimeError):
        proxy.drop_reply(b"GET")
    assert proxy.dropped == 0  # closing is no fault


def test_drop_all_and_wait_dropped(proxy: FaultProxy) -> None:
    assert not proxy.wait_dropped(1, timeout=0.01)
    clients = [through(proxy) for _ in range(2)]
    try:
        for c in clients:
            assert c.ping()
        waiter_result: list[bool] = []
        waiter = threading.Thread(target=lambda: waiter_result.append(proxy.wait_dropped(2, 5)))
        waiter.start()
        assert proxy.drop_all() == 2
        waiter.join()
        assert waiter_result == [True]
        for c in clients:
            assert c.ping()  # redis-py sees the idle connection closed and reconnects
    finally:
        for c in clients:
            c.close()
    assert proxy.dropped == 2
    assert proxy.connections == 4


def test_upstream_down_closes_the_client(direct: redis.Redis) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    with FaultProxy("127.0.0.1", dead_port) as proxy:
        client = through(proxy)
        with pytest.raises(redis.ConnectionError):
            client.ping()
        client.close()
        assert proxy.dropped == 0


# -- asyncio ----------------------------------------------------------------------------


async def test_async_client_through_the_proxy(
    proxy: FaultProxy, direct: redis.Redis, key: str
) -> None:
    client = redis.asyncio.Redis(
        host="127.0.0.1",
        port=proxy.port,
        socket_timeout=5,
        retry=redis.asyncio.retry.Retry(NoBackoff(), 0),
    )
    try:
        assert await client.set(key, "a")
        assert await client.get(key) == b"a"
        proxy.drop_reply(b"SET " + key.encode())
        with pytest.raises(redis.ConnectionError):
            await client.set(key, "b")
        assert direct.get(key) == b"b"
        proxy.drop_request(b"SET " + key.encode())
        with pytest.raises(redis.ConnectionError):
            await client.set(key, "c")
        assert direct.get(key) == b"b"
        async with client.pipeline(transaction=True) as pipe:
            pipe.set(key, "d")
            pipe.get(key)
            assert await pipe.execute() == [True, b"d"]
    finally:
        await client.aclose()
    assert proxy.dropped == 2
    direct.delete(key)
