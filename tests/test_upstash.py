"""The REST transport (redistate.core.rest) against the Upstash REST emulator, in front
of a real Redis 7: what only a REST API does. The modules marked ``over_rest`` (the
contract suite, resends, bad input, backups and the adapters' own suites) run on it
too (the "upstash" backend)."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from redistate import (
    AsyncStore,
    EncryptedCodec,
    RedistateError,
    Store,
    TransportRefused,
)
from tests.servers import Server
from tests.upstash_rest import UpstashRest


@pytest.fixture
def ns() -> str:
    return f"up{uuid.uuid4().hex[:10]}"


@pytest.fixture
def raw(redis7_server: Server) -> Iterator[Any]:
    client: Any = redis.Redis.from_url(redis7_server.url)
    yield client
    client.close()


class Binary:
    """A codec whose output is not UTF-8: what a REST API cannot carry."""

    def encode(self, value: Any, context: bytes = b"") -> bytes:
        return b"\xff\xfe" + repr(value).encode()

    def decode(self, data: bytes, context: bytes = b"") -> Any:
        return data[2:].decode()


def test_upstash_sdk_reads_the_emulator(upstash_rest: UpstashRest) -> None:
    """Upstash's own SDK, with its base64 decoding, against the emulator: it speaks the
    protocol the SDK speaks (single commands, pipelines, transactions, errors)."""
    from upstash_redis import Redis as Upstash
    from upstash_redis.errors import UpstashError

    sdk: Any = Upstash(
        f"http://127.0.0.1:{upstash_rest.port}", upstash_rest.token, allow_telemetry=False
    )
    key = f"sdk{uuid.uuid4().hex}"
    assert sdk.set(key, "héllo") is True
    assert sdk.get(key) == "héllo"
    pipe = sdk.pipeline()
    pipe.incr(key + "n")
    pipe.get(key)
    assert pipe.exec() == [1, "héllo"]
    tx = sdk.multi()
    tx.incr(key + "n")
    tx.lpush(key + "l", "a")
    assert tx.exec() == [2, 1]
    with pytest.raises(UpstashError, match="WRONGTYPE"):
        sdk.incr(key + "l")
    sdk.close()


def test_a_value_that_is_not_text_is_refused_unsent(
    upstash_rest: UpstashRest, raw: Any, ns: str
) -> None:
    store = Store.from_url(upstash_rest.url, namespace=ns, codec=Binary())
    before = sum(upstash_rest.requests.values())
    with pytest.raises(TransportRefused, match="is not UTF-8 text") as info:
        store.sessions.put("s", "x")
    assert "nothing was sent" in str(info.value)
    assert not raw.exists(store.keys.record("session", "s"))
    # No request carried the put: only the first contact's (the server check's
    # pipeline) went out.
    assert sum(upstash_rest.requests.values()) - before == 1
    store.close()


def test_requests_over_the_cap_are_refused_and_pipelines_split(
    upstash_rest: UpstashRest, raw: Any, ns: str
) -> None:
    store = Store.from_url(upstash_rest.url, namespace=ns)
    with pytest.raises(TransportRefused, match="over the REST API's limit of 1000000 bytes"):
        store.sessions.put("big", "x" * 1_000_000)
    assert not raw.exists(store.keys.record("session", "big"))
    store.sessions.put("warm", {})  # scripts loaded: the batch below is writes only
    pipelines = upstash_rest.requests["/pipeline"]
    singles = upstash_rest.requests["/"]
    with store.batch() as b:  # 3 x 600 kB: no two fit in one request
        for i in range(3):
            b.sessions.put(f"p{i}", "y" * 600_000)
    sent = upstash_rest.requests["/pipeline"] - pipelines + upstash_rest.requests["/"] - singles
    # One request per write (the emulator refuses one over 1 MB, which would fail the
    # batch), and maybe one that finds the scripts loaded.
    assert sent in (3, 4)
    for i in range(3):
        got = store.sessions.get(f"p{i}")
        assert got is not None and got.data == "y" * 600_000
    store.close()


def test_replicated_durability_is_refused(upstash_rest: UpstashRest, ns: str) -> None:
    with pytest.raises(ValueError, match="needs WAIT"):
        Store.from_url(upstash_rest.url, namespace=ns, durability="replicated")
    store = Store.from_url(upstash_rest.url, namespace=ns)
    with pytest.raises(ValueError, match="needs WAIT"):
        store.batch(durability="replicated")
    store.close()


def test_a_wrong_token_is_refused_at_once(upstash_rest: UpstashRest, ns: str) -> None:
    store = Store.from_url(upstash_rest.url, namespace=ns, token="wrong")
    with pytest.raises(RedistateError, match="refused the token"):
        store.sessions.put("s", {})
    store.close()
    with pytest.raises(TypeError, match="takes only token"):
        Store.from_url(upstash_rest.url, namespace=ns, ssl_certfile="c.pem")
    saved = os.environ.pop("UPSTASH_REDIS_REST_TOKEN")
    try:
        with pytest.raises(ValueError, match="UPSTASH_REDIS_REST_TOKEN"):
            Store.from_url(upstash_rest.url, namespace=ns)
    finally:
        os.environ["UPSTASH_REDIS_REST_TOKEN"] = saved


def test_the_newest_sync_token_goes_back(upstash_rest: UpstashRest, ns: str) -> None:
    """Read your writes on a global database: each request sends the newest
    Upstash-Sync-Token the store was given."""
    store = Store.from_url(upstash_rest.url, namespace=ns)
    store.sessions.put("s", {"n": 1})
    given = upstash_rest.sync_tokens[-1] if upstash_rest.sync_tokens else None
    store.sessions.get("s")
    assert upstash_rest.sync_tokens[-1] != given  # a newer one than before the put
    assert upstash_rest.sync_tokens[-1].startswith("sync-")
    store.close()


def test_a_reply_lost_to_a_gateway_error_is_resent_and_applied_once(
    upstash_rest: UpstashRest, ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store.from_url(upstash_rest.url, namespace=ns)
    first = store.sessions.put("s", {"n": 1})
    upstash_rest.fail_next(503)  # the put runs; its reply is a 503
    with caplog.at_level(logging.WARNING, logger="redistate"):
        second = store.sessions.put("s", {"n": 2}, if_version=first.version)
    assert "HTTP 503" in caplog.text
    got = store.sessions.get("s")
    assert got is not None and got.data == {"n": 2} and got.version == second.version
    assert store._conn.resends >= 1
    store.close()


def test_text_forms_written_over_rest_read_over_tcp_and_back(
    upstash_rest: UpstashRest, redis7_server: Server, raw: Any, ns: str
) -> None:
    codec = EncryptedCodec({"k1": os.urandom(32)}, primary="k1")
    rest = Store.from_url(upstash_rest.url, namespace=ns, codec=codec)
    tcp = Store.from_url(redis7_server.url, namespace=ns, codec=codec)
    big = {"text": "agent " * 10_000}  # compressed
    rest.sessions.put("r", {"by": "rest"})
    rest.checkpoints.save("t", big)
    assert raw.get(rest.keys.record("session", "r")).count(b"E1b:k1:") == 1
    got = tcp.sessions.get("r")
    assert got is not None and got.data == {"by": "rest"}
    assert (tcp.checkpoints.latest("t") or pytest.fail()).state == big
    tcp.sessions.put("b", {"by": "tcp"})  # binary E1: replies are base64, read exactly
    assert raw.get(tcp.keys.record("session", "b")).count(b"E1:k1:") == 1
    got = rest.sessions.get("b")
    assert got is not None and got.data == {"by": "tcp"}
    rest.close()
    tcp.close()


def test_a_langgraph_saver_over_rest(upstash_rest: UpstashRest, ns: str) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    from redistate.langgraph import RedisStateSaver

    store = Store.from_url(upstash_rest.url, namespace=ns)
    saver = RedisStateSaver(store)
    config: Any = {"configurable": {"thread_id": "th", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": ["hi", b"\xff bytes"]}
    checkpoint["channel_versions"] = {"messages": saver.get_next_version(None, None)}
    saved = saver.put(config, checkpoint, {"source": "input"}, checkpoint["channel_versions"])
    got = saver.get_tuple(saved)
    assert got is not None and got.checkpoint["channel_values"] == {
        "messages": ["hi", b"\xff bytes"]
    }
    store.close()


def test_a_hundred_invocations_keep_connections_bounded(upstash_rest: UpstashRest, ns: str) -> None:
    """A module-level AsyncStore over REST, one asyncio.run per invocation: each new
    loop drops the last one's connections (their bridges end, and so do their HTTP
    connections), so the REST server sees one invocation's worth at a time."""
    base = upstash_rest.connections  # other tests' stores, closed or not
    store = AsyncStore.from_url(upstash_rest.url, namespace=ns, max_connections=4)
    counts = []

    async def invocation(i: int) -> None:
        await asyncio.gather(*(store.sessions.put(f"s{j}", {"i": i}) for j in range(3)))
        got = await store.sessions.get("s0")
        assert got is not None and got.data == {"i": i}

    for i in range(100):
        asyncio.run(invocation(i))
        # The last loop's bridges end once their sockets are closed, at the next loop.
        counts.append(upstash_rest.connections)
    assert max(counts) - base <= 8, counts  # two invocations' worth at most
    asyncio.run(store.aclose())
    assert upstash_rest.wait_connections(lambda n: n <= base)


def test_urls_keep_the_token_out_of_messages() -> None:
    from redistate.core.urls import parse_url, shown_url

    target = parse_url("upstash+https://:AXs9/Se+Tok=@eu1-cat.upstash.io")
    assert (target.url, target.password) == ("https://eu1-cat.upstash.io", "AXs9/Se+Tok=")
    assert shown_url("upstash+https://:AXs9/Se+Tok=@h.io") == "upstash+https://:***@h.io"
    with pytest.raises(ValueError, match="names a host and nothing more") as info:
        parse_url("upstash+https://:tok/en@h.io/0")
    assert "tok" not in str(info.value)
    with pytest.raises(ValueError, match="goes after a colon") as info:
        parse_url("upstash+https://S3cret@h.io")
    assert "S3cret" not in str(info.value)
    # The token in clear only to a local REST server.
    assert parse_url("upstash+http://127.0.0.1:8079").url == "http://127.0.0.1:8079"
    assert parse_url("upstash+http://srh:80").url == "http://srh:80"
    with pytest.raises(ValueError, match="unencrypted"):
        parse_url("upstash+http://eu1-cat.upstash.io")


def test_a_token_a_header_cannot_carry_is_refused_unechoed(upstash_rest: UpstashRest) -> None:
    for token in ("S3cretT0ken\n", "sécret", "two words"):
        with pytest.raises(ValueError, match="an HTTP header cannot carry") as info:
            Store.from_url(upstash_rest.url, token=token)
        assert token.strip() not in str(info.value)


def test_close_ends_the_bridges(upstash_rest: UpstashRest, ns: str) -> None:
    import threading

    def bridges() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "redistate-rest"}

    before = bridges()
    store = Store.from_url(upstash_rest.url, namespace=ns)
    store.sessions.put("s", {})
    mine = bridges() - before
    assert mine
    store.close()
    for thread in mine:
        thread.join(10)
    assert not any(t.is_alive() for t in mine)


def test_a_large_pipeline_and_many_descriptors(upstash_rest: UpstashRest, ns: str) -> None:
    """A sync pipeline larger than the socket buffers (the bridge reads while it
    writes), in a process with descriptors past 1023 (no select())."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200 <= hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1200, hard))
    held: list[int] = []
    try:
        while len(held) < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        from redistate.core.connect import client_for

        client: Any = client_for(upstash_rest.url, 10, {})[0]
        assert max(held) > 1024
        key = f"{ns}:big"
        client.set(key, "v" * 1000)
        pipe = client.pipeline(transaction=False)
        for _ in range(10_000):
            pipe.get(key)
        assert pipe.execute() == [b"v" * 1000] * 10_000
        client.close()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_replies_match_tcp_for_errors_inside_arrays_and_a_lone_multi(
    upstash_rest: UpstashRest,
) -> None:
    from redistate.core.connect import client_for

    client: Any = client_for(upstash_rest.url, 1, {})[0]
    first, second = client.eval("return {redis.error_reply('ERR inner'), 1}", 0)
    assert isinstance(first, redis.ResponseError) and str(first) == "inner"  # as over TCP
    assert second == 1
    with pytest.raises(redis.ResponseError, match="sent whole"):
        client.execute_command("MULTI")  # nothing follows: refused after the timeout
    pipe = client.pipeline(transaction=True)
    pipe.set(f"lone{uuid.uuid4().hex}", 1)
    assert pipe.execute() == [True]  # the connection still works
    client.close()
