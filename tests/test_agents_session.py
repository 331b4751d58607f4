"""redistate.agents.RedistateSession on every backend, checked against the Agents SDK's own
SQLiteSession: the same operations give the same results. Also: the TTL set by every add,
batches and pops under concurrency, bad input, resends, encryption, the sync Store."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

import pytest
from agents import Agent, RunConfig, Runner
from agents.items import ModelResponse
from agents.memory import Session, SessionABC, SessionSettings, SQLiteSession
from agents.models.interface import Model
from agents.usage import Usage
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from redistate import (
    AsyncStore,
    CodecError,
    EncryptedCodec,
    IntegrityError,
    InvalidId,
    RetryPolicy,
    StateTooLarge,
    Store,
)
from redistate.agents import RedistateSession
from redistate.core.kinds import AGENTS_KEY
from tests._async.test_resends import SCRIPT, LostReplies
from tests.conftest import Backend, ttl_left
from tests.roundtrips import RoundTrips
from tests.test_properties import same

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

Op = tuple[str, Any]


class AnySession(Protocol):
    """RedistateSession as the tests use it: items are any JSON values, not only the
    SDK's typed dicts."""

    session_id: str
    session_settings: SessionSettings | None

    @property
    def key(self) -> str: ...

    async def get_items(self, limit: int | None = None) -> list[Any]: ...
    async def add_items(self, items: list[Any]) -> None: ...
    async def pop_item(self) -> Any: ...
    async def clear_session(self) -> None: ...


def open_session(session_id: Any, *, store: Any, **options: Any) -> AnySession:
    return RedistateSession(session_id, store=store, **options)


@pytest.fixture
async def store(backend: Backend, namespace: str) -> AsyncIterator[AsyncStore]:
    s = AsyncStore(backend.async_client(), namespace=namespace)
    yield s
    await s.aclose()


@pytest.fixture
async def other(backend: Backend, namespace: str) -> AsyncIterator[AsyncStore]:
    """A second client of the same namespace: another agent process."""
    s = AsyncStore(backend.async_client(), namespace=namespace)
    yield s
    await s.aclose()


@pytest.fixture
def raw(backend: Backend) -> Iterator[Any]:
    client = backend.raw()
    yield client
    client.close()


def snapshot(raw: Any, namespace: str) -> dict[bytes, Any]:
    """Every key of the namespace with its type and content."""
    found: dict[bytes, Any] = {}
    for key in raw.scan_iter(match=f"{namespace}:*", count=1000):
        kind = raw.type(key)
        if kind == b"list":
            found[key] = ("list", raw.lrange(key, 0, -1))
        elif kind == b"zset":
            found[key] = ("zset", raw.zrange(key, 0, -1, withscores=True))
        else:
            found[key] = (kind, raw.get(key) if kind == b"string" else None)
    return found


# -- the same results as the SDK's SQLiteSession ------------------------------------------

_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=12)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_message = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["user", "assistant", "system"]),
    _text,
)
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(_message | _json, max_size=4)),
        st.tuples(st.just("get"), st.sampled_from([None, -3, -1, 0, 1, 2, 3, 7])),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=25,
)

BASIC: list[Op] = [
    ("pop", None),
    ("get", None),
    ("clear", None),
    ("add", []),
    ("add", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]),
    ("add", [{"role": "user", "content": "more"}]),
    ("get", 2),
    ("get", 0),
    ("get", -1),
    ("get", 10),
    ("pop", None),
    ("get", None),
    ("add", [[1, 2.5, None], "just a string", 7]),
    ("get", 3),
    ("clear", None),
    ("get", None),
    ("pop", None),
]


async def apply(session: AnySession | Session, op: Op) -> Any:
    kind, arg = op
    if kind == "add":
        return await session.add_items(arg)
    if kind == "get":
        return await session.get_items(arg)
    if kind == "pop":
        return await session.pop_item()
    return await session.clear_session()


async def compare(backend: Backend, namespace: str, ops: list[Op], sync: bool) -> None:
    store: AsyncStore | Store = (
        Store(backend.sync_client(), namespace=namespace)
        if sync
        else AsyncStore(backend.async_client(), namespace=namespace)
    )
    sid = uuid.uuid4().hex
    mine = open_session(sid, store=store, ttl=600)
    reference = SQLiteSession(sid)
    try:
        for i, op in enumerate(ops):
            got, want = await apply(mine, op), await apply(reference, op)
            assert same(got, want), f"step {i} {op}: {got!r} != {want!r}"
        assert same(await mine.get_items(), await reference.get_items())
    finally:
        reference.close()
        if isinstance(store, Store):
            store.close()
        else:
            await store.aclose()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_ops, sync=st.booleans())
@example(ops=BASIC, sync=False)
@example(ops=BASIC, sync=True)
def test_the_same_operations_give_what_sqlite_session_gives(
    backend: Backend, namespace: str, ops: list[Op], sync: bool
) -> None:
    asyncio.run(compare(backend, namespace, ops, sync))


async def test_session_settings_give_the_default_limit(store: AsyncStore) -> None:
    items: list[Any] = [{"n": i} for i in range(5)]
    for limit_settings in (SessionSettings(limit=2), {"limit": 2}):
        mine = RedistateSession(uuid.uuid4().hex, store=store, session_settings=limit_settings)
        reference = SQLiteSession("s", session_settings=limit_settings)
        await mine.add_items(items)
        await reference.add_items(items)
        assert mine.session_settings == SessionSettings(limit=2)
        assert await mine.get_items() == await reference.get_items() == items[-2:]
        assert await mine.get_items(4) == await reference.get_items(4) == items[-4:]
        reference.close()
    assert open_session("d", store=store).session_settings == SessionSettings()


# -- the SDK's own view of it ---------------------------------------------------------------


class ScriptedModel(Model):
    """A model that answers "reply <n>" and keeps what it was given: a Runner without an LLM."""

    def __init__(self) -> None:
        self.inputs: list[Any] = []

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        *,
        previous_response_id: Any,
        conversation_id: Any,
        prompt: Any,
    ) -> ModelResponse:
        self.inputs.append(input)
        n = len(self.inputs)
        text = ResponseOutputText(type="output_text", text=f"reply {n}", annotations=[])
        message = ResponseOutputMessage(
            id=f"msg_{n}", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def test_it_is_a_session_to_the_sdk(store: AsyncStore) -> None:
    session = RedistateSession("conversation", store=store, ttl=60)
    assert isinstance(session, Session)  # the SDK's runtime-checkable protocol
    assert isinstance(session, SessionABC)
    assert session.session_id == "conversation"


async def test_the_runner_keeps_its_history_in_it_as_in_sqlite(store: AsyncStore) -> None:
    histories = []
    for session in (RedistateSession("chat", store=store, ttl=60), SQLiteSession("chat")):
        model = ScriptedModel()
        agent = Agent(name="assistant", model=model)
        config = RunConfig(tracing_disabled=True)
        await Runner.run(agent, "hello", session=session, run_config=config)
        result = await Runner.run(agent, "again", session=session, run_config=config)
        assert result.final_output == "reply 2"
        # The second turn was given the first one from the session.
        assert [item.get("content") for item in model.inputs[1][:1]] == ["hello"]
        assert len(model.inputs[1]) == 3
        histories.append(await session.get_items())
        if isinstance(session, SQLiteSession):
            session.close()
    assert histories[0] == histories[1] and len(histories[0]) == 4


async def test_one_round_trip_per_operation(
    server_backend: Backend, namespace: str, roundtrips: RoundTrips
) -> None:
    store = AsyncStore(server_backend.async_client(), namespace=namespace)
    try:
        session = open_session("s", store=store, ttl=60)
        await session.add_items([0])  # connect and load the scripts first
        await session.pop_item()
        await session.clear_session()
        sent: dict[str, list[list[str]]] = {}
        for name, call in (
            ("add", lambda: session.add_items([1, 2, 3])),
            ("get", lambda: session.get_items()),
            ("get limit", lambda: session.get_items(2)),
            ("pop", lambda: session.pop_item()),
            ("clear", lambda: session.clear_session()),
        ):
            roundtrips.start()
            await call()
            sent[name] = roundtrips.stop()
    finally:
        await store.aclose()
    assert {k: len(v) for k, v in sent.items()} == dict.fromkeys(sent, 1), sent


# -- TTL ----------------------------------------------------------------------------------


async def test_every_add_sets_the_ttl_and_nothing_else_does(store: AsyncStore, raw: Any) -> None:
    session = open_session("s1", store=store, ttl=60)
    since = time.monotonic()
    await session.add_items([{"n": 1}, {"n": 2}, {"n": 3}])
    ttl_left(raw, session.key, 60_000, since)
    raw.pexpire(session.key, 5_000)  # as if 55 s had passed, without waiting
    await session.get_items()
    await session.pop_item()
    assert 0 < raw.pttl(session.key) <= 5_000  # reads and pops do not slide it
    since = time.monotonic()
    await session.add_items([{"n": 4}])
    ttl_left(raw, session.key, 60_000, since)  # every add does
    # The write memory expires too, within the retry window.
    writes = store.keys.writes(session.key)
    assert 0 < raw.pttl(writes) <= store._conn.memory_ms
    await session.clear_session()
    assert raw.exists(session.key) == 0


async def test_fractional_and_absent_ttls(store: AsyncStore, raw: Any) -> None:
    short = open_session("short", store=store, ttl=1.5)
    await short.add_items([1])
    assert 0 < raw.pttl(short.key) <= 1_500
    forever = open_session("forever", store=store)
    await forever.add_items([1])
    assert raw.pttl(forever.key) == -1
    # ttl=None leaves an expiry someone else set as it is.
    raw.pexpire(forever.key, 5_000)
    await forever.add_items([2])
    assert 0 < raw.pttl(forever.key) <= 5_000


# -- max_items --------------------------------------------------------------------------------


async def test_max_items_keeps_the_newest(store: AsyncStore, raw: Any) -> None:
    session = open_session("capped", store=store, ttl=60, max_items=4)
    await session.add_items([1, 2, 3])
    await session.add_items([4, 5])
    assert await session.get_items() == [2, 3, 4, 5]
    await session.add_items(list(range(6, 11)))  # a batch larger than the cap
    assert await session.get_items() == [7, 8, 9, 10]
    assert raw.llen(session.key) == 4


async def test_a_large_batch_is_one_write(store: AsyncStore) -> None:
    session = open_session("large", store=store)
    batch: list[Any] = [{"i": i} for i in range(2_500)]  # more than one RPUSH slice
    await session.add_items(batch)
    assert await session.get_items() == batch
    assert await session.get_items(3) == batch[-3:]


# -- concurrency ----------------------------------------------------------------------------


async def test_concurrent_batches_never_interleave(backend: Backend, namespace: str) -> None:
    stores = [AsyncStore(backend.async_client(), namespace=namespace) for _ in range(3)]
    sync_store = Store(backend.sync_client(), namespace=namespace)
    sessions = [open_session("shared", store=s, ttl=60) for s in (*stores, sync_store)]

    async def writer(name: str, session: AnySession) -> None:
        for b in range(8):
            await session.add_items([{"w": name, "b": b, "i": i} for i in range(5)])

    try:
        await asyncio.gather(
            *(writer(f"{k}.{j}", s) for k, s in enumerate(sessions) for j in range(4))
        )
        items = await sessions[0].get_items()
    finally:
        for s in stores:
            await s.aclose()
        sync_store.close()
    assert len(items) == 16 * 8 * 5
    last: dict[str, int] = {}
    for start in range(0, len(items), 5):
        batch = items[start : start + 5]
        assert {(x["w"], x["b"]) for x in batch} == {(batch[0]["w"], batch[0]["b"])}, batch
        assert [x["i"] for x in batch] == list(range(5))
        name, b = batch[0]["w"], batch[0]["b"]
        assert b == last.get(name, -1) + 1  # each writer's batches in its own order
        last[name] = b
    assert len(last) == 16


async def test_concurrent_pops_never_return_an_item_twice(backend: Backend, namespace: str) -> None:
    stores = [AsyncStore(backend.async_client(), namespace=namespace) for _ in range(3)]
    sync_store = Store(backend.sync_client(), namespace=namespace)
    sessions = [open_session("shared", store=s) for s in (*stores, sync_store)]
    await sessions[0].add_items(list(range(300)))
    popped: list[Any] = []

    async def popper(session: AnySession) -> None:
        while (item := await session.pop_item()) is not None:
            popped.append(item)

    try:
        await asyncio.gather(*(popper(s) for s in sessions for _ in range(4)))
        assert await sessions[0].get_items() == []
    finally:
        for s in stores:
            await s.aclose()
        sync_store.close()
    assert sorted(popped) == list(range(300))  # each once: none lost, none twice


# -- bad input changes nothing ---------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", "x" * 513, 42, None, b"bytes"])
async def test_a_bad_session_id_is_refused(store: AsyncStore, bad: Any) -> None:
    with pytest.raises(InvalidId):
        open_session(bad, store=store)


async def test_odd_but_valid_ids_are_kept_apart(store: AsyncStore) -> None:
    ids = ["{a}", "a*", "%7B", "a:b", "ü 🙂"]
    for sid in ids:
        await open_session(sid, store=store).add_items([sid])
    for sid in ids:
        assert await open_session(sid, store=store).get_items() == [sid]


async def test_bad_items_raise_and_write_nothing(
    store: AsyncStore, raw: Any, namespace: str
) -> None:
    session = open_session("s", store=store, ttl=60, max_bytes=200)
    await session.add_items([{"role": "user", "content": "kept"}])
    before = snapshot(raw, namespace)
    with pytest.raises(CodecError, match="item 1 of 3"):
        await session.add_items([{"ok": 1}, {"bad": object()}, {"ok": 2}])
    with pytest.raises(CodecError):
        await session.add_items([{"ok": 1}, {"x": float("nan")}])
    with pytest.raises(StateTooLarge) as too_large:
        await session.add_items([{"ok": 1}, {"big": "x" * 300}])
    assert too_large.value.limit == 200 and too_large.value.size > 200
    assert too_large.value.key == session.key
    for not_a_list in ({"role": "user"}, "hello", None, 3):
        with pytest.raises(TypeError):
            await session.add_items(not_a_list)  # type: ignore[arg-type]
    for bad_limit in ("3", 2.0, True):
        with pytest.raises(TypeError):
            await session.get_items(bad_limit)  # type: ignore[arg-type]
    assert snapshot(raw, namespace) == before
    assert await session.get_items() == [{"role": "user", "content": "kept"}]


async def test_the_default_item_limit_is_the_stores(backend: Backend, namespace: str) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace, max_bytes=100)
    try:
        session = open_session("s", store=store)
        await session.add_items(["x" * 90])
        with pytest.raises(StateTooLarge):
            await session.add_items(["x" * 100])
        assert await session.get_items() == ["x" * 90]
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"ttl": 0}, ValueError),
        ({"ttl": -1}, ValueError),
        ({"ttl": float("nan")}, ValueError),
        ({"ttl": "60"}, TypeError),
        ({"max_items": 0}, ValueError),
        ({"max_items": True}, TypeError),
        ({"max_items": 2.5}, TypeError),
        ({"max_bytes": 0}, ValueError),
        ({"max_bytes": "1"}, TypeError),
    ],
)
async def test_bad_options_are_refused(
    store: AsyncStore, options: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        open_session("s", store=store, **options)


async def test_only_a_redistate_store_is_taken(backend: Backend) -> None:
    client = backend.async_client()
    try:
        with pytest.raises(TypeError, match="AsyncStore or Store"):
            open_session("s", store=client)
    finally:
        await client.aclose()


async def test_a_foreign_value_at_the_key_is_an_integrity_error(
    store: AsyncStore, raw: Any
) -> None:
    session = open_session("s", store=store)
    raw.set(session.key, b"not a list")
    for call in (session.get_items, session.pop_item, lambda: session.add_items([1])):
        with pytest.raises(IntegrityError):
            await call()
    assert raw.get(session.key) == b"not a list"


# -- resends: a lost reply is applied once ---------------------------------------------------


async def test_a_lost_add_reply_adds_the_batch_once(store: AsyncStore, other: AsyncStore) -> None:
    async def add_elsewhere() -> None:
        await open_session("s", store=other).add_items(["theirs"])

    lost = LostReplies(store.client, SCRIPT, add_elsewhere).arm()
    session = open_session("s", store=store, ttl=60)
    await session.add_items(["a", "b"])
    assert lost.lost == 1 and store._conn.recovered == 1
    assert await session.get_items() == ["a", "b", "theirs"]


async def test_a_lost_pop_reply_returns_what_was_popped(
    store: AsyncStore, other: AsyncStore
) -> None:
    session = open_session("s", store=store)
    await session.add_items(["first", "second"])

    async def add_elsewhere() -> None:
        await open_session("s", store=other).add_items(["theirs"])

    lost = LostReplies(store.client, SCRIPT, add_elsewhere).arm()
    assert await session.pop_item() == "second"
    assert lost.lost == 1 and await session.get_items() == ["first", "theirs"]
    # A pop of an empty session, resent after an add, still finds it was empty.
    await session.clear_session()
    lost = LostReplies(store.client, SCRIPT, add_elsewhere).arm()
    assert await session.pop_item() is None
    assert lost.lost == 1 and await session.get_items() == ["theirs"]


async def test_a_lost_clear_reply_keeps_what_was_added_since(
    store: AsyncStore, other: AsyncStore
) -> None:
    session = open_session("s", store=store)
    await session.add_items(["old"])

    async def add_elsewhere() -> None:
        await open_session("s", store=other).add_items(["new"])

    lost = LostReplies(store.client, SCRIPT, add_elsewhere).arm()
    await session.clear_session()
    assert lost.lost == 1 and await session.get_items() == ["new"]


async def test_without_retries_nothing_is_remembered(
    backend: Backend, namespace: str, raw: Any
) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace, retry=RetryPolicy(attempts=1))
    try:
        session = open_session("s", store=store, ttl=60)
        await session.add_items([1, 2])
        assert await session.pop_item() == 2
        await session.clear_session()
        await session.add_items([3])
    finally:
        await store.aclose()
    assert list(snapshot(raw, namespace)) == [session.key.encode()]


# -- cancellation ---------------------------------------------------------------------------


async def test_a_cancelled_add_still_lands_whole(store: AsyncStore) -> None:
    session = open_session("s", store=store)
    task = asyncio.create_task(session.add_items([{"i": i} for i in range(5)]))
    await asyncio.sleep(0)  # the write has started
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await session.get_items() == [{"i": i} for i in range(5)]


# -- encryption -----------------------------------------------------------------------------


async def test_encrypted_items_are_never_stored_in_clear(
    backend: Backend, namespace: str, raw: Any
) -> None:
    codec = EncryptedCodec({"k1": os.urandom(32)}, primary="k1")
    store = AsyncStore(backend.async_client(), namespace=namespace, codec=codec)
    stranger = AsyncStore(
        backend.async_client(),
        namespace=namespace,
        codec=EncryptedCodec({"k1": os.urandom(32)}, primary="k1"),
    )
    try:
        session = open_session("enc", store=store, ttl=60)
        items: list[Any] = [
            {"role": "user", "content": "the launch code is PLAINTEXT-1"},
            {"role": "assistant", "content": "noted PLAINTEXT-2"},
        ]
        await session.add_items(items)
        assert await session.get_items() == items
        assert await session.pop_item() == items[1]  # kept in the write memory for a resend
        stored = snapshot(raw, namespace)
        assert stored and b"PLAINTEXT" not in repr(stored).encode()
        # Over a REST API the codec writes its text form (E1b:, base64).
        magic = b"E1b:k1:" if backend.name == "upstash" else b"E1:k1:"
        assert all(e.startswith(magic) for e in raw.lrange(session.key, 0, -1))
        # Another key cannot read them: skipped, as the SDK skips what it cannot read.
        assert await open_session("enc", store=stranger).get_items() == []
        # A ciphertext copied to another session's key does not decrypt there.
        elsewhere = open_session("elsewhere", store=store)
        raw.rpush(elsewhere.key, *raw.lrange(session.key, 0, -1))
        assert await elsewhere.get_items() == []
    finally:
        await store.aclose()
        await stranger.aclose()


async def test_an_unreadable_item_is_skipped_and_dropped_as_the_sdks_sqlite_session_does(
    store: AsyncStore, raw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLiteSession skips rows it cannot read, counts ``limit`` in items it returns,
    and pop_item drops them and pops on; a store's codec failing on an item (damaged,
    another key's, another session's) is the same case."""
    from agents import SQLiteSession

    ours, oracle = open_session("s", store=store), SQLiteSession("s")
    good: list[Any] = [{"role": "user", "content": f"m{i}"} for i in range(4)]
    placeholder: list[Any] = [{"placeholder": True}]
    for session in (ours, oracle):
        await session.add_items(good[:2])
    raw.rpush(ours.key, b"not json {")  # as the oracle's own table gets below
    await oracle.add_items(placeholder)
    oracle_conn = oracle._get_connection()
    oracle_conn.execute(
        f"UPDATE {oracle.messages_table} SET message_data = 'not json {{' WHERE id ="
        f" (SELECT MAX(id) FROM {oracle.messages_table})"
    )
    oracle_conn.commit()
    for session in (ours, oracle):
        await session.add_items(good[2:3])
    raw.rpush(ours.key, b"\xff\xfe")
    await oracle.add_items(placeholder)
    oracle_conn.execute(
        f"UPDATE {oracle.messages_table} SET message_data = 'not json {{' WHERE id ="
        f" (SELECT MAX(id) FROM {oracle.messages_table})"
    )
    oracle_conn.commit()
    with caplog.at_level("WARNING", logger="redistate"):
        for limit in (None, 1, 2, 3, 5):
            assert await ours.get_items(limit) == await oracle.get_items(limit), limit
        # The newest is unreadable: dropped, and the next one popped.
        assert await ours.pop_item() == await oracle.pop_item() == good[2]
        assert await ours.get_items() == await oracle.get_items() == good[:2]
    unreadable = [
        r for r in caplog.records if getattr(r, "redistate_event", "") == ("agents_item_unreadable")
    ]
    assert unreadable and all(r.session_key == ours.key for r in unreadable)  # type: ignore[attr-defined]


# -- registered to a user (store.users.erase) -------------------------------------------


@pytest.mark.parametrize("flavour", ["async", "sync"])
async def test_a_session_of_a_user_is_registered_before_its_first_add(
    backend: Backend, namespace: str, store: AsyncStore, raw: Any, flavour: str
) -> None:
    sync_store = Store(backend.sync_client(), namespace=namespace)
    try:
        on = store if flavour == "async" else sync_store
        index = store.keys.user_index("alice")
        session = open_session("s", store=on, user="alice")
        assert await session.get_items() == [] and await session.pop_item() is None
        await session.clear_session()
        assert raw.exists(index) == 0  # reads and removals register nothing
        with pytest.raises(CodecError):
            await session.add_items([{"bad": object()}])
        assert raw.exists(index) == 0  # bad input writes nothing, the entry neither
        await session.add_items(["hi"])
        assert raw.smembers(index) == {f"{AGENTS_KEY}:s".encode()}
        raw.delete(index)
        await session.add_items(["again"])  # once per object: no second SADD
        assert raw.exists(index) == 0
        await open_session("s", store=on, user="alice").add_items(["new object"])
        assert raw.smembers(index) == {f"{AGENTS_KEY}:s".encode()}
        report = await store.users.erase("alice")
        assert report.deleted == {AGENTS_KEY: ["s"]}
        assert raw.exists(session.key, store.keys.writes(session.key), index) == 0
    finally:
        sync_store.close()


@pytest.mark.parametrize("bad", ["", "x" * 513, 42, b"bytes"])
async def test_a_bad_user_is_refused_before_anything(
    store: AsyncStore, raw: Any, namespace: str, bad: Any
) -> None:
    with pytest.raises(InvalidId, match="user"):
        open_session("s", store=store, user=bad)
    assert snapshot(raw, namespace) == {}


# -- the sync Store -------------------------------------------------------------------------


async def test_a_sync_store_serves_the_same_session(
    backend: Backend, namespace: str, store: AsyncStore, raw: Any
) -> None:
    sync_store = Store(backend.sync_client(), namespace=namespace)
    try:
        on_sync = open_session("both", store=sync_store, ttl=60)
        on_async = open_session("both", store=store, ttl=60)
        await on_sync.add_items([{"from": "sync"}])
        since = time.monotonic()
        await on_async.add_items([{"from": "async"}])
        ttl_left(raw, on_sync.key, 60_000, since)
        assert await on_sync.get_items() == [{"from": "sync"}, {"from": "async"}]
        assert await on_sync.get_items(1) == [{"from": "async"}]
        assert await on_sync.pop_item() == {"from": "async"}
        await on_sync.clear_session()
        assert await on_async.get_items() == []
        with pytest.raises(CodecError):
            await on_sync.add_items([{"bad": object()}])
        assert await on_async.get_items() == []
    finally:
        sync_store.close()


# -- import cost ----------------------------------------------------------------------------


def test_importing_redistate_does_not_import_the_sdk() -> None:
    code = (
        "import sys, redistate\n"
        "from redistate import AsyncStore, Store, EncryptedCodec\n"
        "assert 'agents' not in sys.modules, 'agents imported'\n"
        "import redistate.agents\n"
        "assert 'agents' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
