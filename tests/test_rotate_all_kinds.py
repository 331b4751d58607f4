"""rotate-keys leaves every kind readable with the new keys alone, on every backend.

Every kind the codec encodes is written under encryption key A and signing key S1;
then B and S2 become primaries (A and S1 still known), rotate-keys runs twice (the
second rewrites nothing), and a store with only B and S2 reads every kind back as it
was. The writers are keyed by kind: a kind rotate-keys applies to but no writer here
fails the test, so a new kind cannot go unrotated unnoticed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions

from redistate import EncryptedCodec, SigningKeys, Store
from redistate.adapters.agents.recode import recoded_items
from redistate.adk import RedistateSessionService
from redistate.admin import RotateReport
from redistate.agents import RedistateSession
from redistate.core import kinds
from redistate.core.encryption import key_id
from redistate.core.kinds import Kind, Op
from redistate.core.scripts import script
from redistate.langgraph import RedistateStore
from tests.conftest import Backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

A, B = os.urandom(32), os.urandom(32)
S1, S2 = os.urandom(32), os.urandom(32)
ITEMS: list[Any] = [
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "hi"},
    {"role": "user", "content": "hello"},  # the same item twice: two elements to move
    {"role": "user", "content": "bye"},
]


def _store(
    backend: Backend, namespace: str, keys: dict[str, bytes], signing: dict[str, bytes]
) -> Store:
    """A store whose primaries are the first key of each dict (the others still read)."""
    codec = EncryptedCodec(keys, next(iter(keys)))
    sealer = SigningKeys(signing, next(iter(signing)))
    return Store(backend.sync_client(), namespace=namespace, codec=codec, signing=sealer)


def _item(i: int) -> Any:
    return {"role": "user", "content": f"message {i}"}


def _agents(store: Store) -> RedistateSession:
    return RedistateSession("chat", store=store)


def _write_session(store: Store) -> None:
    store.sessions.put("s1", {"turn": 1}, ttl=600)


def _write_user(store: Store) -> None:
    store.users.put("u1", {"name": "ann"})
    for i in range(20):  # folded at the 16th merge, then patches pending: patch frames
        store.users.merge("u1", {f"fact{i}": i})


def _write_collection(store: Store) -> None:
    store.collection("notes").put("n1", {"text": "hello"})


def _write_task(store: Store) -> None:
    store.checkpoints.save("t1", {"step": 1})
    store.checkpoints.save("t1", {"step": 2, "big": "x" * 5000})  # compressed
    store.checkpoints.log("t1", {"note": "a"})
    store.checkpoints.log("t1", {"note": "b"})


def _write_steps(store: Store) -> None:
    with store.task("t1") as run:
        assert run.step("search", lambda q: {"hits": [q]}, "zebra") == {"hits": ["zebra"]}
        assert run.step("mail", lambda: "sent", idempotent=False) == "sent"
        run.log({"searched": True})


def _write_events(store: Store) -> None:
    for i in range(4):
        store.events.append("e1", "updated", {f"k{i}": i})
    assert store.events.trim("e1", keep=2) == 2  # a trim anchor with the folded state


def _write_agents(store: Store) -> None:
    session = _agents(store)
    asyncio.run(session.add_items([*ITEMS, {"role": "user", "content": "popped"}]))
    assert asyncio.run(session.pop_item()) == {"role": "user", "content": "popped"}


def _write_memory(store: Store) -> None:
    memory = RedistateStore(store)
    memory.put(("users", "u1"), "profile", {"name": "ann"}, ttl=10)
    memory.put(("users", "u1"), "prefs", {"tone": "dry"})
    memory.put(("users", "u2"), "profile", {"name": "bo"})


def _write_adk(store: Store) -> None:
    async def write() -> None:
        service = RedistateSessionService(store, ttl=600)
        state = {"turn": 1, "user:name": "ann", "app:model": "m1"}
        session = await service.create_session(
            app_name="chat", user_id="u1", session_id="s1", state=state
        )
        for n in (2, 3):
            delta = EventActions(state_delta={"turn": n})
            await service.append_event(session, Event(author="user", actions=delta))

    asyncio.run(write())


def _read_adk(store: Store) -> Any:
    service = RedistateSessionService(store)
    got = asyncio.run(service.get_session(app_name="chat", user_id="u1", session_id="s1"))
    assert got is not None and len(got.events) == 2
    return got.model_dump(mode="json")


def _read_adk_user(store: Store) -> Any:
    service = RedistateSessionService(store)
    return asyncio.run(service.get_user_state(app_name="chat", user_id="u1"))


def _write_pydantic(store: Store) -> None:
    from pydantic_ai.conversation import Conversation

    from redistate.pydantic_ai import RedistateConversationStore
    from tests.workers import pai_turn

    async def write() -> None:
        conversations = RedistateConversationStore(store, ttl=600)
        conversation = Conversation(conversation_id="c1")
        conversation.messages.extend(pai_turn(0, 0))
        await conversations.save(conversation, scope="u1")
        await conversations.update("c1", title="t", metadata={"m": 1})

    asyncio.run(write())


def _read_pydantic(store: Store) -> Any:
    from redistate.pydantic_ai import RedistateConversationStore

    conversations = RedistateConversationStore(store)

    async def read() -> Any:
        loaded = await conversations.load("c1")
        assert loaded is not None
        listed = await conversations.list_conversations()
        return loaded.messages, [(r.title, r.metadata, r.usage) for r in listed]

    return asyncio.run(read())


CLAUDE_KEY: Any = {"project_key": "p", "session_id": "c1"}
CLAUDE_SUB: Any = {**CLAUDE_KEY, "subpath": "subagents/x"}


def _write_claude(store: Store) -> None:
    from redistate.claude import RedistateSessionStore

    async def write() -> None:
        sessions = RedistateSessionStore(store, ttl=600)
        titled: Any = {"type": "user", "uuid": "a", "customTitle": "t"}
        await sessions.append(CLAUDE_KEY, [titled])
        await sessions.append(CLAUDE_KEY, [{"type": "user", "uuid": "b"}])
        await sessions.append(CLAUDE_SUB, [{"type": "x"}])

    asyncio.run(write())


def _read_claude(store: Store) -> Any:
    from redistate.claude import RedistateSessionStore

    sessions = RedistateSessionStore(store)

    async def read() -> Any:
        sub = await sessions.load(CLAUDE_SUB)
        return await sessions.load(CLAUDE_KEY), sub, await sessions.list_session_summaries("p")

    return asyncio.run(read())


def _read_memory(store: Store) -> Any:
    memory = RedistateStore(store)
    found = [
        (i.namespace, i.key, i.value, i.created_at, i.updated_at)
        for i in memory.search(("users",), refresh_ttl=False)
    ]
    exp = store._conn.idempotent("ZSCORE", store.keys.memory("users.u1", "exp"), "profile")
    return sorted(found), exp  # values, times and the expiry: all kept


def _read_session(store: Store) -> Any:
    return store.sessions.get("s1")  # the record: data, version and expiry


def _read_user(store: Store) -> Any:
    return store.users.get("u1")


def _read_collection(store: Store) -> Any:
    return store.collection("notes").get("n1")


def _read_task(store: Store) -> Any:
    restored = store.checkpoints.restore("t1")
    assert restored is not None and store.checkpoints.verify("t1").ok
    history = [(c.seq, c.id, c.state, c.created_at) for c in store.checkpoints.history("t1")]
    return restored.state, history


def _never(*_: Any) -> Any:
    raise AssertionError("a recorded step ran again")


def _read_steps(store: Store) -> Any:
    recorded = {s.name: (s.status, s.result) for s in store.checkpoints.steps("t1")}
    with store.task("t1") as run:  # each step returns its recorded result
        replayed = (run.step("search", _never, "zebra"), run.step("mail", _never))
    return recorded, replayed


def _read_events(store: Store) -> Any:
    assert store.events.verify("e1").ok
    events = [(e.id, e.type, e.payload) for e in store.events.read("e1")]
    return events, store.events.fold("e1")  # the fold starts from the anchor's state


def _read_agents(store: Store) -> Any:
    items = asyncio.run(_agents(store).get_items())
    assert items == ITEMS
    return items


Writer = Callable[[Store], None]
Reader = Callable[[Store], Any]
# Every kind that holds values the store's codec encodes, in the order written.
WRITERS: dict[Kind, tuple[Writer, Reader]] = {
    kinds.SESSION: (_write_session, _read_session),
    kinds.USER: (_write_user, _read_user),
    kinds.COLLECTION: (_write_collection, _read_collection),
    kinds.TASK: (_write_task, _read_task),
    kinds.STEPS: (_write_steps, _read_steps),
    kinds.EVENTS: (_write_events, _read_events),
    kinds.AGENTS: (_write_agents, _read_agents),
    kinds.MEMORY: (_write_memory, _read_memory),
    kinds.ADK: (_write_adk, _read_adk),  # the session with its user's and app's state
    kinds.ADK_USER: (lambda store: None, _read_adk_user),
    kinds.ADK_APP: (lambda store: None, lambda store: None),  # read with the session
    kinds.CLAUDE: (_write_claude, _read_claude),
    kinds.PYDANTIC_AI: (_write_pydantic, _read_pydantic),
}
COUNTS = (
    "records", "checkpoints", "deltas", "steps", "events", "agent_items", "memory_items",
    "adk_values", "claude_values", "pydantic_values",
)  # fmt: skip


def test_every_kind_rotate_keys_applies_to_is_written_here() -> None:
    rotated = [k.name for k in kinds.KINDS if k.applies(Op.ROTATE)]
    assert sorted(k.name for k in WRITERS) == sorted(rotated)


def test_after_rotate_keys_every_kind_reads_with_the_new_keys_alone(
    backend: Backend, namespace: str
) -> None:
    old = _store(backend, namespace, {"a": A}, {"s1": S1})
    for write, _ in WRITERS.values():
        write(old)
    before = {kind: read(old) for kind, (_, read) in WRITERS.items()}

    both = _store(backend, namespace, {"b": B, "a": A}, {"s2": S2, "s1": S1})
    first = both.admin.rotate_keys()
    assert first.unverified == [] and first.changed == 0
    # 3 records, 2 checkpoints, 3 deltas (1 by the run), 2 steps, 2 events and the
    # anchor, 4 items (the popped one is no item any more), 3 store items, 5 ADK values
    # (the session's turn, its 2 events, the user's name, the app's model), 4 Claude
    # values (3 entries, 1 summary), 5 Pydantic AI values (a body, a title, metadata,
    # 2 entries)
    assert {name: getattr(first, name) for name in COUNTS} == {
        "records": 3, "checkpoints": 2, "deltas": 3, "steps": 2, "events": 3, "agent_items": 4,
        "memory_items": 3, "adk_values": 5, "claude_values": 4,
        "pydantic_values": 5,
    }  # fmt: skip
    assert set(first.old_keys) == {"a"}
    second = both.admin.rotate_keys()
    assert asdict(second) == {
        **asdict(RotateReport()),
        "keys_seen": second.keys_seen,
        "current": second.current,
    }  # fmt: skip: nothing rewritten, nothing left on an old key

    new = _store(backend, namespace, {"b": B}, {"s2": S2})
    after = {kind: read(new) for kind, (_, read) in WRITERS.items()}
    for kind in WRITERS:
        assert after[kind] == before[kind], kind.name
    assert 0 < new.sessions.ttl("s1") <= 600  # type: ignore[operator]
    for store in (old, both, new):
        store.close()


def test_agents_items_popped_trimmed_or_added_meanwhile_are_left_to_the_next_run(
    backend: Backend, namespace: str
) -> None:
    old = _store(backend, namespace, {"a": A}, {"s1": S1})
    capped = RedistateSession("chat", store=old, max_items=3)
    asyncio.run(capped.add_items([_item(1), _item(2), _item(3)]))
    both = _store(backend, namespace, {"b": B, "a": A}, {"s2": S2, "s1": S1})
    key, raw = capped.key, backend.raw()
    codec = both.codec
    assert isinstance(codec, EncryptedCodec)
    pairs, current = recoded_items(key, raw.lrange(key, 0, -1), codec, codec.current)
    assert (len(pairs), current) == (6, 0)
    # Between the read and the script: item 3 popped, two added (under the old key), and
    # the cap trims item 1 off the head: only item 2 is still as it was read.
    assert asyncio.run(capped.pop_item()) == _item(3)
    asyncio.run(capped.add_items([_item(4), _item(5)]))
    writes = raw.zrange(old.keys.writes(key), 0, -1, withscores=True)
    assert both._conn.script(script("recode_items"), (key,), pairs) == 1
    assert [key_id(item) for item in raw.lrange(key, 0, -1)] == ["b", "a", "a"]

    report = both.admin.rotate_keys()  # the next run moves the two added meanwhile
    assert (report.agent_items, report.current, report.changed) == (2, 1, 0)
    assert raw.zrange(old.keys.writes(key), 0, -1, withscores=True) == writes  # untouched
    new = _store(backend, namespace, {"b": B}, {"s2": S2})
    assert asyncio.run(_agents(new).get_items()) == [_item(2), _item(4), _item(5)]
    for store in (old, both, new):
        store.close()


def test_store_items_written_or_deleted_meanwhile_are_left_to_the_next_run(
    backend: Backend, namespace: str
) -> None:
    from redistate.adapters.langgraph.memory import recoded_items as recoded_memory

    old = _store(backend, namespace, {"a": A}, {"s1": S1})
    memory = RedistateStore(old)
    for key in ("k1", "k2", "k3"):
        memory.put(("users", "u1"), key, {"v": key}, ttl=10)
    both = _store(backend, namespace, {"b": B, "a": A}, {"s2": S2, "s1": S1})
    codec = both.codec
    assert isinstance(codec, EncryptedCodec)
    key, raw = old.keys.memory("users.u1"), backend.raw()
    triples, current = recoded_memory(
        "users.u1", list(raw.hgetall(key).items()), codec, codec.current
    )
    assert (len(triples), current) == (9, 0)
    # Between the read and the script: k2 written anew (old key), k3 deleted.
    memory.put(("users", "u1"), "k2", {"v": "k2 again"}, ttl=10)
    memory.delete(("users", "u1"), "k3")
    expiry = raw.zscore(old.keys.memory("users.u1", "exp"), "k1")
    assert both._conn.script(script("recode_fields"), (key,), triples) == 1
    assert raw.zscore(old.keys.memory("users.u1", "exp"), "k1") == expiry  # kept
    assert not raw.hexists(key, "k3")  # a deleted item is not brought back

    report = both.admin.rotate_keys()  # the next run moves k2
    assert (report.memory_items, report.current, report.changed) == (1, 1, 0)
    fresh = _store(backend, namespace, {"b": B}, {"s2": S2})
    new = RedistateStore(fresh)
    assert [(i.key, i.value) for i in new.search(("users",), refresh_ttl=False)] == [
        ("k2", {"v": "k2 again"}),
        ("k1", {"v": "k1"}),
    ]
    raw.close()
    for store in (old, both, fresh):
        store.close()
