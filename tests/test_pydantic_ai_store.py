"""redistate.pydantic_ai.RedistateConversationStore on every backend: pydantic-ai's
own InMemoryConversationStore as the oracle on random call sequences through the
public load/save/branch/fork/update/delete/list paths, and agent runs with its
TestModel; then what only a shared store must show: writers racing on one revision
(exactly one wins), a writer SIGKILLed mid-save, a lost reply resent through the fault
proxy, the TTL, encryption, erasure per user, bad input and round trips."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import signal
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict, InMemoryConversationStore
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelRequest, UserPromptPart
from pydantic_ai.models.test import TestModel

from redistate import (
    AsyncStore,
    CodecError,
    EncryptedCodec,
    IntegrityError,
    InvalidId,
    StateTooLarge,
    Store,
)
from redistate.pydantic_ai import RedistateConversationStore
from tests import workers
from tests.conftest import Backend
from tests.erasure_frameworks import erase
from tests.proxy import FaultProxy
from tests.workers import pai_turn

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

Make = Callable[..., Awaitable[RedistateConversationStore]]


@pytest.fixture(params=["async", "sync"])
def make(request: pytest.FixtureRequest, backend: Backend, namespace: str) -> Iterator[Make]:
    """Makes a store in the namespace ``namespace + suffix``, in the event loop that uses
    it: over an AsyncStore (native) or a Store (calls in a worker thread). The keys of
    every namespace made are deleted afterwards."""
    made: list[Any] = []

    async def build(suffix: str = "", **options: Any) -> RedistateConversationStore:
        ns = namespace + suffix
        store: Store | AsyncStore
        if request.param == "sync":
            store = Store(backend.sync_client(), namespace=ns)
        else:
            store = AsyncStore(backend.async_client(), namespace=ns)
        made.append(store)
        return RedistateConversationStore(store, **options)

    yield build
    for store in made:
        if isinstance(store, Store):
            store.close()
    if backend.remote and made:
        raw = backend.raw()
        for key in list(raw.scan_iter(match=f"{namespace}*", count=1000)):
            raw.delete(key)
        raw.close()


async def _close(conversations: RedistateConversationStore) -> None:
    if isinstance(conversations.store, AsyncStore):
        await conversations.store.aclose()


# -- pydantic-ai's InMemoryConversationStore as the oracle -----------------------------

IDS = st.sampled_from(["a", "b", "f"])
SCOPES = st.sampled_from([None, None, "u1", "u2"])
AT = st.integers(min_value=0, max_value=6)
OPS = st.one_of(
    st.tuples(st.just("turn"), IDS, SCOPES, st.integers(0, 3)),
    st.tuples(st.just("turn"), IDS, SCOPES, st.integers(0, 3)),
    st.tuples(st.just("fresh"), IDS, st.integers(0, 3)),
    st.tuples(st.just("load"), IDS, st.sampled_from([None, None, 1, 3]), SCOPES),
    st.tuples(st.just("entries"), IDS),
    st.tuples(st.just("branch"), IDS, AT),
    st.tuples(st.just("fork"), IDS, st.one_of(st.none(), AT), IDS),
    st.tuples(st.just("update"), IDS, st.sampled_from([None, "T1", "T2"]), st.booleans()),
    st.tuples(st.just("meta"), IDS, st.sampled_from([None, {"model": "x"}, {"n": [1, 2]}])),
    st.tuples(st.just("delete"), IDS, SCOPES),
    st.tuples(st.just("list"), SCOPES, st.sampled_from([None, 0, 1, 2])),
)


def _messages(conversation: Conversation | None) -> Any:
    if conversation is None:
        return None
    return (conversation.conversation_id, conversation.messages, conversation.usage)


def _listed(record: Any) -> Any:
    """A listed record as both stores must agree on it (entry ids and revisions are
    each store's own)."""
    return (
        record.conversation_id,
        record.scope,
        record.title,
        record.metadata,
        len(record.branches),
        record.forked_from,
        record.forked_at is None,
        record.head_id is None,
        record.usage,
    )


async def _call(store: Any, local: dict[str, Conversation], op: tuple[Any, ...]) -> Any:
    """One op against a store; ``local`` holds the conversations as this caller last
    loaded or saved them (a stale one makes the next save conflict in both)."""
    kind, cid = op[0], op[1]
    try:
        if kind in ("turn", "fresh"):
            fresh = kind == "fresh" or cid not in local
            conversation = Conversation(conversation_id=cid) if fresh else local[cid]
            conversation.messages.extend(pai_turn(0, op[-1]))
            scope = op[2] if kind == "turn" else None
            saved = await store.save(conversation, scope=scope)
            local[cid] = conversation
            return [e.message for e in saved]
        if kind == "load":
            loaded = await store.load(cid, limit=op[2], scope=op[3])
            if loaded is not None and op[2] is None:
                local[cid] = loaded
            return _messages(loaded)
        if kind == "entries":
            entries = await store.load_entries(cid)
            if entries is None:
                return None
            ids = [e.id for e in entries]
            return [
                (e.message, None if e.parent_id is None else ids.index(e.parent_id))
                for e in entries[1:]
                if e.parent_id in ids
            ], entries[0].parent_id is None if entries else None
        if kind == "branch":
            revision = local[cid].revision if cid in local else None
            branched = await store.branch(cid, at=op[2], expected_revision=revision)
            local[cid] = branched
            return _messages(branched)
        if kind == "fork":
            forked = await store.fork(cid, at=op[2], new_conversation_id=op[3])
            local[op[3]] = forked
            return _messages(forked)
        if kind == "update":
            expected = {"expected_title": None} if op[3] else {}
            record = await store.update(cid, title=op[2], **expected)
            return _listed(record)
        if kind == "meta":
            return _listed(await store.update(cid, metadata=op[2]))
        if kind == "delete":
            return await store.delete(cid, scope=op[2])
        return [_listed(r) for r in await store.list_conversations(scope=op[1], limit=op[2])]
    except (ConversationConflict, UserError, KeyError) as exc:
        return type(exc).__name__


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(OPS, max_size=16))
def test_the_store_answers_as_pydantic_ais_in_memory_store(make: Make, ops: list[Any]) -> None:
    async def run() -> None:
        ours = await make(f"-{os.urandom(4).hex()}")
        oracle = InMemoryConversationStore()
        mine: dict[str, Conversation] = {}
        theirs: dict[str, Conversation] = {}
        for op in ops:
            got = await _call(ours, mine, op)
            want = await _call(oracle, theirs, op)
            assert got == want, op
        await _close(ours)

    asyncio.run(run())


def test_agent_runs_continue_from_what_the_store_loads(make: Make) -> None:
    """Runs of an agent with tools (pydantic-ai's TestModel: no network) saved and
    loaded turn after turn, branched and forked: every load is exactly the messages
    the runs produced, and the conversation's usage is the runs' total."""

    async def run() -> None:
        ours = await make("")
        agent = Agent(TestModel())

        @agent.tool_plain
        def add(a: int, b: int) -> int:
            return a + b

        for store in (ours, InMemoryConversationStore()):
            produced: list[Any] = []
            for prompt in ("first", "second", "third"):
                conversation = await store.load("c") or Conversation(conversation_id="c")
                result = await agent.run(prompt, conversation=conversation)
                await store.save(result)
                produced = result.all_messages()
            loaded = await store.load("c")
            assert loaded is not None and loaded.messages == produced
            assert loaded.usage == result.usage
            branched = await store.branch("c", at=6, expected_revision=loaded.revision)
            again = await agent.run("instead", conversation=branched)
            await store.save(again)
            fork = await store.fork("c", at=4, new_conversation_id="fork")
            await store.save(await agent.run("elsewhere", conversation=fork))
            reloaded = await store.load("c")
            assert reloaded is not None and reloaded.messages == again.all_messages()
            forked = await store.load("fork")
            assert forked is not None and forked.messages[:4] == produced[:4]
            (record,) = [r for r in await store.list_conversations() if r.conversation_id == "c"]
            assert len(record.branches) == 1
        await _close(ours)

    asyncio.run(run())


# -- what only a shared store must show -------------------------------------------------


@pytest.mark.parametrize("backend", ["redis7", "valkey9", "cluster"], indirect=True)
def test_writers_racing_on_one_revision_make_exactly_one_save(
    backend: Backend, namespace: str
) -> None:
    """Four processes load the same conversation, add a turn each and save at once:
    exactly one save lands, the others get ConversationConflict, and the conflicts
    leave nothing behind (no entry of theirs in the conversation's hashes)."""
    processes = 4
    workers.pai_saver(backend.url, namespace, 9, 1, None, None)  # the base: one turn
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(processes)
        with ProcessPoolExecutor(processes, mp_context=ctx) as pool:
            futures = [
                pool.submit(workers.pai_saver, backend.url, namespace, w, 1, barrier, None)
                for w in range(processes)
            ]
            saved = [f.result(timeout=300) for f in futures]
    assert sorted(saved) == [0, 0, 0, 1]
    winner = saved.index(1)

    async def check() -> None:
        store = AsyncStore(backend.async_client(), namespace=namespace)
        conversations = RedistateConversationStore(store)
        loaded = await conversations.load("c")
        assert loaded is not None
        assert loaded.messages == pai_turn(9, 0) + pai_turn(winner, 1)
        for part in ("entries", "parents"):
            held = await store._conn.idempotent("HLEN", store.keys.conversation("c", part))
            assert held == 4, part  # the losers' entries were never written
        await store.aclose()

    asyncio.run(check())


def test_a_process_killed_mid_save_leaves_whole_saves_and_a_resumed_writer_goes_on(
    server_backend: Backend, namespace: str
) -> None:
    """A writer saving turn after turn is SIGKILLed at a point no one chose: the stored
    conversation is whole turns in order, every turn it was told had landed among
    them, no entry outside its history; a new process then loads it and goes on."""
    turns = 300
    ctx = mp.get_context("spawn")
    acks = ctx.Queue()
    args = (server_backend.url, namespace, 0, turns, None, acks)
    writer = ctx.Process(target=workers.pai_saver, args=args)
    writer.start()
    acked = [acks.get(timeout=120) for _ in range(5)]  # killed while it goes on
    assert writer.pid is not None
    os.kill(writer.pid, signal.SIGKILL)
    writer.join(timeout=60)
    assert writer.exitcode == -signal.SIGKILL
    while not acks.empty():
        acked.append(acks.get())

    async def stored() -> list[Any]:
        store = AsyncStore(server_backend.async_client(), namespace=namespace)
        entries = await RedistateConversationStore(store).load_entries("c") or []
        for part in ("entries", "parents"):
            held = await store._conn.idempotent("HLEN", store.keys.conversation("c", part))
            assert held == len(entries), part
        await store.aclose()
        return [e.message for e in entries]

    got = asyncio.run(stored())
    done = len(got) // 2
    assert got == [m for n in range(done) for m in pai_turn(0, n)]  # whole turns, in order
    assert {n for _, n in acked} <= set(range(done)) and done < turns
    workers.pai_saver(server_backend.url, namespace, 0, 3, None, None)
    assert asyncio.run(stored()) == [m for n in range(done + 3) for m in pai_turn(0, n)]


def test_a_save_whose_reply_was_lost_is_resent_and_stored_once(
    server_backend: Backend, namespace: str
) -> None:
    """The reply of a save is dropped after the server applied it: the resend finds its
    revision stored and writes nothing, so the save returns as saved (no conflict with
    itself) and the turn is stored once."""
    assert server_backend.server is not None
    with FaultProxy("127.0.0.1", server_backend.server.port) as proxy:

        async def run() -> None:
            behind = AsyncStore.from_url(f"redis://127.0.0.1:{proxy.port}/0", namespace=namespace)
            ours = RedistateConversationStore(behind)
            await ours.load("c")  # connects: the handshake is not a fault target
            conversation = Conversation(conversation_id="c")
            conversation.messages.extend(pai_turn(0, 0))
            await ours.save(conversation)
            proxy.drop_reply(lambda words: words[0].upper() in (b"FCALL", b"EVALSHA"))
            conversation.messages.extend(pai_turn(0, 1))
            await ours.save(conversation)
            assert proxy.dropped == 1 and proxy.armed == 0
            assert behind._conn.resends >= 1
            direct = AsyncStore(server_backend.async_client(), namespace=namespace)
            loaded = await RedistateConversationStore(direct).load("c")
            assert loaded is not None and loaded.revision == conversation.revision
            assert loaded.messages == pai_turn(0, 0) + pai_turn(0, 1)
            await behind.aclose()
            await direct.aclose()

        asyncio.run(run())


def test_every_save_sets_the_ttl_and_an_expired_conversation_leaves_the_listing(
    server_backend: Backend, namespace: str
) -> None:
    async def run() -> None:
        store = AsyncStore(server_backend.async_client(), namespace=namespace)
        conversations = RedistateConversationStore(store, ttl=60)
        keys, conn = store.keys, store._conn
        for cid in ("gone", "stays"):
            conversation = Conversation(conversation_id=cid)
            conversation.messages.extend(pai_turn(0, 0))
            await conversations.save(conversation, scope="u1")
        parts = [keys.conversation("gone", part) for part in ("", "entries", "parents")]
        ttls = [await conn.idempotent("PTTL", key) for key in parts]
        assert all(0 < ttl <= 60_000 for ttl in ttls)
        for index in (keys.conversations(None), keys.conversations("u1")):
            assert await conn.idempotent("PTTL", index) >= ttls[0] - 1_000
        # A save with no TTL makes the conversation and its indexes last.
        forever = RedistateConversationStore(store)
        loaded = await forever.load("stays")
        assert loaded is not None
        loaded.messages.extend(pai_turn(0, 1))
        await forever.save(loaded)
        assert await conn.idempotent("PTTL", keys.conversation("stays", "entries")) == -1
        assert await conn.idempotent("PTTL", keys.conversations("u1")) == -1
        for key in parts:  # expired as the server expires it: PEXPIREAT in the past
            await conn.idempotent("PEXPIREAT", key, 1)
        assert await conversations.load("gone") is None
        listed = await conversations.list_conversations(scope="u1")
        assert [r.conversation_id for r in listed] == ["stays"]
        # Its index entry goes once it is over a minute old (here, set in the past).
        await conn.idempotent("ZADD", keys.conversations("u1"), "XX", 1, "gone")
        await conversations.list_conversations(scope="u1")
        assert await conn.idempotent("ZRANGE", keys.conversations("u1"), 0, -1) == [b"stays"]
        await store.aclose()

    asyncio.run(run())


def test_encrypted_conversations_read_back_and_an_entry_cannot_be_moved(
    server_backend: Backend, namespace: str
) -> None:
    async def run() -> None:
        codec = EncryptedCodec({"k1": os.urandom(32)}, primary="k1")
        store = AsyncStore(server_backend.async_client(), namespace=namespace, codec=codec)
        conversations = RedistateConversationStore(store)
        secret = Conversation(conversation_id="c")
        secret.messages.append(ModelRequest(parts=[UserPromptPart("the secret plan")]))
        await conversations.save(secret)
        await conversations.update("c", title="secret title", metadata={"m": "secret meta"})
        fork = await conversations.fork("c", new_conversation_id="f")  # copied, decodes
        assert fork.messages == secret.messages
        loaded = await conversations.load("c")
        assert loaded is not None and loaded.messages == secret.messages
        raw = server_backend.raw()
        dump = b"".join(
            bytes(v)
            for key in raw.scan_iter(match=f"{namespace}:*")
            if raw.type(key) == b"hash"
            for v in raw.hgetall(key).values()
        )
        assert b"secret" not in dump
        # An entry put under another entry's id does not decode there.
        entries = store.keys.conversation("c", "entries")
        ((_, data),) = raw.hgetall(entries).items()
        extra = Conversation(conversation_id="c2")
        extra.messages.append(ModelRequest(parts=[UserPromptPart("other")]))
        await conversations.save(extra)
        ((other_id, _),) = raw.hgetall(store.keys.conversation("c2", "entries")).items()
        raw.hset(store.keys.conversation("c2", "entries"), other_id, data)
        raw.close()
        with pytest.raises(IntegrityError):
            await conversations.load("c2")
        await store.aclose()

    asyncio.run(run())


def test_erasing_a_user_deletes_the_conversations_of_their_scope(make: Make) -> None:
    async def run() -> None:
        conversations = await make("", register_scopes=True)
        for cid, scope in (("mine", "u1"), ("mine too", "u1"), ("theirs", "u2")):
            conversation = Conversation(conversation_id=cid)
            conversation.messages.extend(pai_turn(0, 0))
            await conversations.save(conversation, scope=scope)
        await conversations.fork("mine", new_conversation_id="forked", scope="u1")
        report = await erase(conversations.store, "u1")
        assert sorted(report.deleted["pydantic-ai"]) == ["forked", "mine", "mine too"]
        for cid in ("mine", "mine too", "forked"):
            assert await conversations.load(cid) is None
        assert await conversations.list_conversations(scope="u1") == []
        listed = await conversations.list_conversations()
        assert [r.conversation_id for r in listed] == ["theirs"]
        await _close(conversations)

    asyncio.run(run())


def test_a_delete_frees_exactly_the_deleted_conversations_keys(make: Make) -> None:
    """Each conversation holds the entries its history reaches (a fork copies its
    own): deleting the source of a fork leaves the fork whole, and deleting the fork
    then leaves no key but the (emptied) listings' entries to prune."""

    async def run() -> None:
        conversations = await make("")
        source = Conversation(conversation_id="src")
        for n in range(3):
            source.messages.extend(pai_turn(0, n))
        await conversations.save(source)
        fork = await conversations.fork("src", at=4, new_conversation_id="fork")
        fork.messages.extend(pai_turn(1, 0))
        await conversations.save(fork)
        await conversations.delete("src")
        assert await conversations.load("src") is None
        again = await conversations.load("fork")
        assert again is not None and again.messages == source.messages[:4] + pai_turn(1, 0)
        await conversations.delete("fork")
        assert await conversations.list_conversations() == []
        await _close(conversations)

    asyncio.run(run())


def test_bad_input_names_the_value_and_writes_nothing(make: Make) -> None:
    async def run() -> None:
        conversations = await make("", register_scopes=True)
        cases: list[tuple[Any, Any, type[Exception], str]] = [
            ("", None, InvalidId, "conversation_id"),
            ("x" * 600, None, InvalidId, "over the limit of 512"),
            ("c", "", InvalidId, "scope"),
            ("c", "s" * 600, InvalidId, "scope"),
        ]
        for cid, scope, error, words in cases:
            conversation = Conversation(conversation_id=cid)
            conversation.messages.extend(pai_turn(0, 0))
            with pytest.raises(error, match=words):
                await conversations.save(conversation, scope=scope)
        big = Conversation(conversation_id="c")
        big.messages.append(ModelRequest(parts=[UserPromptPart("x" * 2_000_000)]))
        with pytest.raises(StateTooLarge, match="limit"):
            await conversations.save(big)
        fine = Conversation(conversation_id="ok")
        fine.messages.extend(pai_turn(0, 0))
        await conversations.save(fine)
        with pytest.raises(CodecError, match="title"):
            await conversations.update("ok", title=float("nan"))  # type: ignore[arg-type]
        with pytest.raises(CodecError, match="metadata"):
            await conversations.update("ok", metadata={"n": float("nan")})
        with pytest.raises(TypeError, match="AsyncStore or Store"):
            RedistateConversationStore(object())  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="ttl"):
            RedistateConversationStore(conversations.store, ttl=-1)
        assert await conversations.load("c") is None
        (listed,) = await conversations.list_conversations()
        assert (listed.conversation_id, listed.title, listed.metadata) == ("ok", None, None)
        await _close(conversations)

    asyncio.run(run())


def test_a_save_is_two_round_trips_and_a_load_two(server_backend: Backend, namespace: str) -> None:
    """A save reads the record (pydantic-ai's check before it works out what is new),
    then writes it, indexes and all, in one round trip; a load reads the record, then
    the whole history in one script; a listing reads the index, then every record in
    one round trip."""
    from tests.roundtrips import server_reads

    async def run() -> list[int]:
        store = AsyncStore(server_backend.async_client(), namespace=namespace)
        conversations = RedistateConversationStore(store, ttl=600)
        await conversations.load("warm")  # connects, loads the functions
        raw = server_backend.raw()
        conversation = Conversation(conversation_id="c")
        counts = []

        async def turn(n: int) -> None:
            conversation.messages.extend(pai_turn(0, n))
            await conversations.save(conversation, scope="u1")

        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: turn(0),
            lambda: turn(1),
            lambda: conversations.load("c"),
            lambda: conversations.list_conversations(scope="u1"),
        ]
        for n in range(10):
            calls.append(lambda n=n: turn(n + 2))  # type: ignore[misc]
        calls.append(lambda: conversations.load("c"))  # 24 messages, still one script
        for call in calls:
            before = server_reads(raw)
            await call()
            counts.append(server_reads(raw) - before - 1)
        raw.close()
        await store.aclose()
        return counts

    assert asyncio.run(run()) == [2, 2, 2, 2, *[2] * 10, 2]


def test_an_update_keeps_the_revision_and_a_stale_expected_title_conflicts(make: Make) -> None:
    async def run() -> None:
        conversations = await make("")
        conversation = Conversation(conversation_id="c")
        conversation.messages.extend(pai_turn(0, 0))
        await conversations.save(conversation)
        revision = conversation.revision
        other = RedistateConversationStore(conversations.store)
        assert (await other.update("c", title="user's", expected_title=None)).title == "user's"
        with pytest.raises(ConversationConflict, match="titled"):
            await conversations.update("c", title="agent's", expected_title=None)
        record = await conversations.update("c", metadata={"model": "m"})
        assert record.revision == revision and record.title == "user's"
        conversation.messages.extend(pai_turn(0, 1))
        await conversations.save(conversation)  # an update never makes a save conflict
        (listed,) = await conversations.list_conversations()
        assert (listed.title, listed.metadata) == ("user's", {"model": "m"})
        await _close(conversations)

    asyncio.run(run())


def test_listings_page_through_many_conversations_newest_first(make: Make) -> None:
    async def run() -> None:
        conversations = await make("")
        order = []
        for n in range(620):  # over a page of the index
            cid = f"c{n:04d}"
            conversation = Conversation(conversation_id=cid)
            conversation.messages.append(ModelRequest(parts=[UserPromptPart("x")]))
            await conversations.save(conversation, scope="u" if n % 2 else None)
            order.append(cid)
        every = await conversations.list_conversations()
        assert [r.conversation_id for r in every] == order[::-1]
        some = await conversations.list_conversations(scope="u", limit=5)
        assert [r.conversation_id for r in some] == [c for c in order[::-1] if int(c[1:]) % 2][:5]
        await _close(conversations)

    asyncio.run(run())
