"""RedisStateSaver beyond LangGraph's conformance suite: real graphs through the sync
and the async methods, TTL, the history cap, fenced writers, encryption, bad input."""

from __future__ import annotations

import asyncio
import operator
import os
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import END, START, StateGraph

from redistate import AsyncStore, InvalidId, LockLost, Store
from redistate.adapters.langgraph.graph import PARTS
from redistate.core.kinds import GRAPH_KEY
from redistate.langgraph import RedisStateSaver
from tests.conftest import Backend, raw_keys
from tests.roundtrips import RoundTrips

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


class State(TypedDict):
    steps: Annotated[list[str], operator.add]
    secret: str


def graph(saver: RedisStateSaver) -> Any:
    builder = StateGraph(State)
    for name in ("plan", "search", "write"):
        builder.add_node(name, lambda state, name=name: {"steps": [name]})
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "search")
    builder.add_edge("search", "write")
    builder.add_edge("write", END)
    return builder.compile(checkpointer=saver)


def thread(name: str) -> Any:
    return {"configurable": {"thread_id": name}}


def test_a_graph_run_with_the_sync_methods_is_read_back_by_the_async_ones(
    stores: tuple[Store, AsyncStore],
) -> None:
    sync, asyn = stores
    saver = RedisStateSaver(sync, async_store=asyn)
    out = graph(saver).invoke({"steps": [], "secret": "s"}, thread("t1"))
    assert out["steps"] == ["plan", "search", "write"]
    history = list(saver.list(thread("t1")))
    assert len(history) == 5  # input, three nodes, end
    assert [h.metadata["step"] for h in history] == [3, 2, 1, 0, -1]
    latest = saver.get_tuple(thread("t1"))
    assert latest is not None and latest.checkpoint["channel_values"]["steps"] == out["steps"]
    assert history[0].config == latest.config
    again = graph(RedisStateSaver(sync)).get_state(thread("t1"))  # a new saver, same data
    assert again.values == out and again.next == ()

    async def read_async() -> Any:
        return await saver.aget_tuple(thread("t1")), [t async for t in saver.alist(thread("t1"))]

    import asyncio

    got, listed = asyncio.run(read_async())
    assert got == latest and listed == history


async def test_a_graph_run_with_the_async_methods(stores: tuple[Store, AsyncStore]) -> None:
    _, asyn = stores
    saver = RedisStateSaver(asyn)
    out = await graph(saver).ainvoke({"steps": [], "secret": "s"}, thread("t1"))
    assert out["steps"] == ["plan", "search", "write"]
    state = await graph(saver).aget_state(thread("t1"))
    assert state.values == out
    # On the loop's own thread a sync call would wait for itself: refused.
    with pytest.raises(Exception, match="event loop's thread"):
        saver.get_tuple(thread("t1"))
    # From another thread it runs on the loop, as LangGraph's async savers do.
    bridged = await asyncio.to_thread(saver.get_tuple, thread("t1"))
    assert bridged == await saver.aget_tuple(thread("t1"))
    listed = await asyncio.to_thread(lambda: list(saver.list(thread("t1"), limit=2)))
    assert listed == [t async for t in saver.alist(thread("t1"), limit=2)]
    await asyn.aclose()


def test_an_async_only_saver_refuses_sync_calls_before_a_loop_used_it(
    stores: tuple[Store, AsyncStore],
) -> None:
    _, asyn = stores
    with pytest.raises(Exception, match="no running event loop"):
        RedisStateSaver(asyn).get_tuple(thread("t1"))


async def test_a_sync_node_of_an_async_graph_reads_the_async_saver_from_its_thread(
    stores: tuple[Store, AsyncStore],
) -> None:
    """LangGraph runs a sync node of an async graph in a worker thread; a node that
    invokes a subgraph (or reads the saver) calls the sync methods from there."""
    _, asyn = stores
    saver = RedisStateSaver(asyn)
    await graph(saver).ainvoke({"steps": [], "secret": "s"}, thread("earlier"))

    def read_earlier(state: State) -> dict[str, Any]:
        earlier = saver.get_tuple(thread("earlier"))  # a sync call, off the loop
        assert earlier is not None
        return {"steps": [f"earlier had {len(earlier.checkpoint['channel_values']['steps'])}"]}

    builder = StateGraph(State)
    builder.add_node("read", read_earlier)
    builder.add_edge(START, "read")
    builder.add_edge("read", END)
    out = await builder.compile(checkpointer=saver).ainvoke(
        {"steps": [], "secret": "s"}, thread("now")
    )
    assert out["steps"] == ["earlier had 3"]
    await asyn.aclose()


def test_every_key_of_a_thread_expires_with_its_ttl(
    stores: tuple[Store, AsyncStore], backend: Backend, namespace: str
) -> None:
    sync, _ = stores
    saver = RedisStateSaver(sync, ttl=60)
    config = {"configurable": {"thread_id": "t1", "run_id": "r1"}}
    graph(saver).invoke({"steps": [], "secret": "s"}, config)
    keys = [sync.keys.graph_thread("t1", part) for part in PARTS]
    raw = backend.raw()
    try:
        present = [k for k in keys if raw.exists(k)]
        assert set(present) >= {keys[0], keys[1], keys[2], keys[3], keys[6]}  # cp..refs, runs
        for key in present:
            assert 0 < raw.pttl(key) <= 60_000, key
    finally:
        raw.close()


def test_refresh_on_read_restarts_the_threads_ttl_when_a_read_finds_it(
    stores: tuple[Store, AsyncStore], backend: Backend
) -> None:
    sync, asyn = stores
    with pytest.raises(ValueError, match="needs a ttl"):
        RedisStateSaver(sync, refresh_on_read=True)
    graph(RedisStateSaver(sync, ttl=60)).invoke({"steps": [], "secret": "s"}, thread("t1"))
    keys = [sync.keys.graph_thread("t1", part) for part in PARTS]
    raw = backend.raw()
    try:
        present = [k for k in keys if raw.exists(k)]

        def age() -> None:  # as if most of the TTL had passed
            for key in present:
                raw.pexpire(key, 5_000)

        age()
        assert RedisStateSaver(sync, ttl=60).get_tuple(thread("t1")) is not None
        assert all(0 < raw.pttl(k) <= 5_000 for k in present)  # a plain read leaves it
        RedisStateSaver(sync, ttl=60, refresh_on_read=True).get_tuple(thread("t1"))
        assert all(5_000 < raw.pttl(k) <= 60_000 for k in present)
        age()
        saver = RedisStateSaver(asyn, ttl=60, refresh_on_read=True)

        async def listed() -> int:
            return len([t async for t in saver.alist(thread("t1"))])

        assert asyncio.run(listed()) > 0
        assert all(5_000 < raw.pttl(k) <= 60_000 for k in present)
    finally:
        raw.close()


def test_the_history_cap_keeps_the_newest_and_frees_unused_values(
    stores: tuple[Store, AsyncStore], backend: Backend
) -> None:
    sync, _ = stores
    saver = RedisStateSaver(sync, keep=2)
    app = graph(saver)
    for _ in range(4):
        app.invoke({"steps": [], "secret": "s"}, thread("t1"))
    history = list(saver.list(thread("t1")))
    assert len(history) == 2 and history[0].checkpoint["channel_values"]["steps"] == [
        "plan", "search", "write"
    ] * 4  # fmt: skip
    raw = backend.raw()
    try:
        # Only the values of the two kept checkpoints remain, each counted.
        refs = raw.hgetall(sync.keys.graph_thread("t1", "refs"))
        blobs = raw.hgetall(sync.keys.graph_thread("t1", "blobs"))
        assert set(refs) == set(blobs) and all(int(n) >= 1 for n in refs.values())
        assert len(blobs) <= 2 * 4  # two checkpoints, at most four channels each
    finally:
        raw.close()
    saver.prune(["t1"], strategy="keep_latest")
    assert len(list(saver.list(thread("t1")))) == 1


def test_a_fenced_saver_loses_to_the_newer_owner(
    stores: tuple[Store, AsyncStore], backend: Backend, namespace: str
) -> None:
    """Two writers on one thread: the first's lease runs out (a pause, a partition);
    the second takes the thread; the first's late writes are refused inside the
    script and never overwrite the second's."""
    sync, _ = stores
    other = Store(backend.sync_client(), namespace=namespace)
    first = sync.lock("t1", ttl=30, renew=False).acquire()
    old = RedisStateSaver(sync).with_lease(first)
    graph(old).invoke({"steps": [], "secret": "old"}, thread("t1"))
    first._abandon()  # its lease runs out while it is paused (the lock key goes)
    with other.lock("t1", ttl=30, wait=10) as second:
        assert first.fence is not None and second.fence is not None
        assert second.fence > first.fence
        new = RedisStateSaver(other).with_lease(second)
        graph(new).invoke({"steps": [], "secret": "new"}, thread("t1"))
        before = new.get_tuple(thread("t1"))
        with pytest.raises(LockLost):
            graph(old).invoke({"steps": [], "secret": "late"}, thread("t1"))
        latest = new.get_tuple(thread("t1"))
        assert latest == before and latest is not None
        assert latest.checkpoint["channel_values"]["secret"] == "new"
        # Writes for other threads are not guarded by the lease.
        graph(old).invoke({"steps": [], "secret": "x"}, thread("t2"))
    other.close()


def test_langgraphs_encrypted_serializer_leaves_no_plaintext(
    stores: tuple[Store, AsyncStore], backend: Backend, namespace: str
) -> None:
    sync, _ = stores
    serde = EncryptedSerializer.from_pycryptodome_aes(key=os.urandom(32))
    saver = RedisStateSaver(sync, serde=serde)
    graph(saver).invoke({"steps": [], "secret": "zebra-7781-plaintext"}, thread("t1"))
    raw = backend.raw()
    try:
        everything = b""
        for key in raw.scan_iter(match=f"{namespace}:*", count=1000):
            kind = raw.type(key)
            if kind == b"hash":
                everything += b"".join(k + v for k, v in raw.hgetall(key).items())
            elif kind == b"zset":
                everything += b"".join(raw.zrange(key, 0, -1))
    finally:
        raw.close()
    # Channel names and task paths are in field names, like ids in key names: in clear.
    assert everything and b"zebra-7781" not in everything
    state = graph(saver).get_state(thread("t1"))
    assert state.values["secret"] == "zebra-7781-plaintext"
    blind = RedisStateSaver(sync)  # without the key: refused, not misread
    with pytest.raises(Exception):  # noqa: B017 - LangGraph's own error type for a bad key
        blind.get_tuple(thread("t1"))


def test_bad_input_is_refused_and_writes_nothing(
    stores: tuple[Store, AsyncStore], backend: Backend, namespace: str
) -> None:
    sync, _ = stores
    saver = RedisStateSaver(sync)
    app = graph(saver)
    with pytest.raises(InvalidId, match="over the limit of 512"):
        app.invoke({"steps": [], "secret": "s"}, thread("x" * 600))
    checkpoint = empty_checkpoint()
    with pytest.raises(ValueError, match="must not contain NUL"):
        saver.put({"configurable": {"thread_id": "t1", "checkpoint_ns": "a\x00b"}},
                  checkpoint, {}, {})  # fmt: skip
    with pytest.raises(ValueError, match=r"needs config\['configurable'\]\['checkpoint_id'\]"):
        saver.put_writes(thread("t1"), [("ch", 1)], "task")
    with pytest.raises(ValueError, match=r"needs configurable\.thread_id"):
        saver.get_tuple({"configurable": {}})
    with pytest.raises(ValueError, match="prune strategy"):
        saver.prune(["t1"], strategy="everything")
    with pytest.raises(ValueError, match="keep must be"):
        RedisStateSaver(sync, keep=0)
    assert raw_keys(backend, namespace) == []


def of(name: str, user: Any) -> Any:
    return {"configurable": {"thread_id": name, "user_id": user}}


@pytest.mark.parametrize("flavour", ["sync", "async"])
async def test_a_thread_is_registered_to_the_user_its_config_names(
    stores: tuple[Store, AsyncStore], backend: Backend, namespace: str, flavour: str
) -> None:
    sync, asyn = stores
    saver = RedisStateSaver(sync if flavour == "sync" else asyn, user_key="user_id")

    async def run(config: Any) -> Any:
        inputs = {"steps": [], "secret": "s"}
        if flavour == "sync":
            return graph(saver).invoke(inputs, config)
        return await graph(saver).ainvoke(inputs, config)

    raw = backend.raw()
    try:
        index = sync.keys.user_index("alice")
        await run(thread("anonymous"))  # no user id in the config: registered to none
        assert raw.exists(index) == 0
        await run(of("t1", "alice"))
        assert raw.smembers(index) == {f"{GRAPH_KEY}:t1".encode()}
        raw.delete(index)
        await run(of("t1", "alice"))  # once per saver and thread: no second SADD
        assert raw.exists(index) == 0
        await run(of("t2", "alice"))
        assert raw.smembers(index) == {f"{GRAPH_KEY}:t2".encode()}
        thread_keys = [sync.keys.graph_thread("t2", part) for part in PARTS]
        assert raw.exists(*thread_keys) > 0
        report = sync.users.erase("alice")
        assert report.deleted == {GRAPH_KEY: ["t2"]}
        assert raw.exists(*thread_keys, index) == 0
        assert raw.exists(sync.keys.graph_thread("anonymous", "idx")) == 1  # not hers
    finally:
        raw.close()
        await asyn.aclose()


def test_a_bad_user_id_is_refused_and_writes_nothing(
    stores: tuple[Store, AsyncStore], backend: Backend, namespace: str
) -> None:
    sync, _ = stores
    app = graph(RedisStateSaver(sync, user_key="user_id"))
    for bad in ("", "x" * 600, 42):
        with pytest.raises(InvalidId, match=r"configurable\['user_id'\]"):
            app.invoke({"steps": [], "secret": "s"}, of("t1", bad))
    for user_key in ("", 3):
        with pytest.raises(ValueError, match="user_key must be"):
            RedisStateSaver(sync, user_key=user_key)  # type: ignore[arg-type]
    assert raw_keys(backend, namespace) == []


async def test_a_resent_write_is_applied_once(backend: Backend, namespace: str) -> None:
    """Each saver script is safe to send twice: a put, put_writes or copy whose reply is
    lost is resent by the retry layer and leaves what one send leaves."""
    from tests._async.test_resends import SCRIPT, LostReplies

    store = AsyncStore(backend.async_client(), namespace=namespace)
    saver = RedisStateSaver(store)
    lost = LostReplies(store.client, SCRIPT)
    try:
        app = graph(saver)
        lost.arm(3)  # the first put and put_writes of the run, each resent
        await app.ainvoke({"steps": [], "secret": "s"}, thread("t1"))
        assert lost.lost == 3
        state = await app.aget_state(thread("t1"))
        assert state.values["steps"] == ["plan", "search", "write"]  # nothing doubled
        history = [t async for t in saver.alist(thread("t1"))]
        assert len(history) == 5
        lost.arm(1)
        await saver.acopy_thread("t1", "t2")
        copied = [t async for t in saver.alist(thread("t2"))]
        assert [t.checkpoint["id"] for t in copied] == [t.checkpoint["id"] for t in history]
        raw = backend.raw()
        try:
            for name in ("t1", "t2"):  # every value counted once per checkpoint using it
                refs = raw.hgetall(store.keys.graph_thread(name, "refs"))
                uses: dict[bytes, int] = {}
                for item in history:
                    for channel, version in item.checkpoint["channel_versions"].items():
                        field = b"\0".join((b"", channel.encode(), str(version).encode()))
                        uses[field] = uses.get(field, 0) + 1
                assert {k: int(v) for k, v in refs.items()} == uses, name
        finally:
            raw.close()
    finally:
        await store.aclose()


# -- what a review found; each against InMemorySaver where LangGraph defines it ----------


class Text(TypedDict):
    x: str


def chain(saver: Any) -> Any:
    builder = StateGraph(Text)
    builder.add_node("a", lambda s: {"x": s["x"] + "a"})
    builder.add_node("b", lambda s: {"x": s["x"] + "b"})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", END)
    return builder.compile(checkpointer=saver)


def test_a_fork_never_overwrites_the_branch_it_forked_from(
    stores: tuple[Store, AsyncStore],
) -> None:
    """Time travel: update_state on an old checkpoint, run on; the first branch still
    reads its own values (channel versions are unique, not 1, 2, 3 on both)."""
    seen = []
    for saver in (InMemorySaver(), RedisStateSaver(stores[0])):
        app = chain(saver)
        app.invoke({"x": "0"}, thread("t1"))
        history = list(app.get_state_history(thread("t1")))
        final, after_a = history[0], next(h for h in history if h.next == ("b",))
        app.invoke(None, app.update_state(after_a.config, {"x": "FORK"}))
        original = app.get_state(final.config)
        seen.append((original.values, original.next, app.get_state(thread("t1")).values))
    assert seen[1] == seen[0] == ({"x": "0ab"}, (), {"x": "FORKb"})


def test_copy_into_a_thread_with_history_shows_the_sources_values(
    stores: tuple[Store, AsyncStore],
) -> None:
    saver = RedisStateSaver(stores[0])
    chain(saver).invoke({"x": "SOURCE"}, thread("A"))
    chain(saver).invoke({"x": "target"}, thread("B"))
    saver.copy_thread("A", "B")
    a_latest = saver.get_tuple(thread("A"))
    assert a_latest is not None
    copied = saver.get_tuple(
        {"configurable": {**a_latest.config["configurable"], "thread_id": "B"}}
    )
    assert copied is not None and copied.checkpoint["channel_values"]["x"] == "SOURCEab"


def test_a_resent_put_frees_nothing_and_drops_no_writes(
    stores: tuple[Store, AsyncStore],
) -> None:
    """The same put again (what a retry after a lost reply sends): a no-op, also when the
    cap removed the checkpoints that first stored its values, and when the checkpoint's
    writes arrived in between."""
    saver = RedisStateSaver(stores[0], keep=1)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"x": "X1", "y": "Y1"}
    checkpoint["channel_versions"] = {"x": saver.get_next_version(None, None),
                                      "y": saver.get_next_version(None, None)}  # fmt: skip
    config = saver.put(thread("t1"), checkpoint, {}, checkpoint["channel_versions"])
    saver.put_writes(config, [("items", "done-by-task")], "task-1")
    again = saver.put(thread("t1"), checkpoint, {}, checkpoint["channel_versions"])
    assert again == config
    got = saver.get_tuple(thread("t1"))
    assert got is not None and got.checkpoint["channel_values"] == {"x": "X1", "y": "Y1"}
    assert got.pending_writes == [("task-1", "items", "done-by-task")]
    # A newer checkpoint that keeps x's version: the cap removes the first; x stays.
    second = empty_checkpoint()
    second["channel_versions"] = {"x": checkpoint["channel_versions"]["x"]}
    saver.put(config, second, {}, {})
    saver.put(config, second, {}, {})  # resent: must not free x
    latest = saver.get_tuple(thread("t1"))
    assert latest is not None and latest.checkpoint["channel_values"] == {"x": "X1"}


def test_writes_for_a_checkpoint_the_cap_removed_are_dropped(
    stores: tuple[Store, AsyncStore], backend: Backend
) -> None:
    """LangGraph saves a step's writes in the background: they can arrive after the cap
    removed their checkpoint. The next put drops them: nothing stays unreadable."""
    sync, _ = stores
    saver = RedisStateSaver(sync, keep=1)
    first = saver.put(thread("t1"), empty_checkpoint(), {}, {})
    second = saver.put(first, empty_checkpoint(), {}, {})
    saver.put_writes(first, [("late", 1)], "task-late")  # its checkpoint is gone
    saver.put(second, empty_checkpoint(), {}, {})
    raw = backend.raw()
    try:
        assert raw.hlen(sync.keys.graph_thread("t1", "writes")) == 0
        assert raw.zcard(sync.keys.graph_thread("t1", "widx")) == 0
    finally:
        raw.close()


def extend(state: Any, writes: Any) -> list[str]:
    return [*(state or []), *(w for write in writes for w in write)]


class Log(TypedDict):
    log: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=100)]


def test_delta_channel_threads_are_never_pruned_silently(
    stores: tuple[Store, AsyncStore],
) -> None:
    """A DeltaChannel rebuilds its value from older checkpoints' writes: the cap leaves
    such a thread whole, and prune(keep_latest) refuses it, as PostgresSaver does."""

    def build(saver: Any) -> Any:
        builder = StateGraph(Log)
        builder.add_node("a", lambda s: {"log": ["a"]})
        builder.add_node("b", lambda s: {"log": ["b"]})
        builder.add_edge(START, "a")
        builder.add_edge("a", "b")
        builder.add_edge("b", END)
        return builder.compile(checkpointer=saver)

    results = []
    for saver in (InMemorySaver(), RedisStateSaver(stores[0], keep=2)):
        app = build(saver)
        app.invoke({"log": ["start"]}, thread("t1"))
        app.invoke({"log": ["again"]}, thread("t1"))
        results.append(app.get_state(thread("t1")).values)
    assert results[1] == results[0] == {"log": ["start", "a", "b", "again", "a", "b"]}
    saver = RedisStateSaver(stores[0])
    with pytest.raises(NotImplementedError, match="DeltaChannel"):
        saver.prune(["t1"])
    assert build(saver).get_state(thread("t1")).values == results[0]


def test_thousands_of_writes_on_one_checkpoint_stay_readable(
    stores: tuple[Store, AsyncStore],
) -> None:
    saver = RedisStateSaver(stores[0])
    config = saver.put(thread("t1"), empty_checkpoint(), {}, {})
    for i in range(9000):  # one task each, as a fan-out of Send would
        saver.put_writes(config, [("results", i)], f"task-{i:05d}")
    got = saver.get_tuple(thread("t1"))
    assert got is not None and len(got.pending_writes or []) == 9000
    assert [w[2] for w in got.pending_writes or []][:3] == [0, 1, 2]


def test_one_id_where_a_list_belongs_is_refused(stores: tuple[Store, AsyncStore]) -> None:
    saver = RedisStateSaver(stores[0])
    for call in (saver.prune, saver.delete_for_runs):
        with pytest.raises(TypeError, match="must be a sequence of ids"):
            call("ab")


# -- get_delta_channel_history: the base class's result, in one round trip ---------------


class Notes(TypedDict):
    notes: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=2)]
    count: Annotated[int, operator.add]


def notes_graph(saver: Any) -> Any:
    """Delta channel writes in every shape a run makes them: input, one node, two in
    parallel (one super-step, ordered by task path), a subgraph (its own namespace)."""
    inner = StateGraph(Notes)
    inner.add_node("deep", lambda s: {"notes": ["deep"], "count": 1})
    inner.add_edge(START, "deep")
    inner.add_edge("deep", END)
    builder = StateGraph(Notes)
    builder.add_node("plan", lambda s: {"notes": ["plan"], "count": 1})
    builder.add_node("left", lambda s: {"notes": ["left"]})
    builder.add_node("right", lambda s: {"notes": ["right"], "count": 1})
    builder.add_node("sub", inner.compile())
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "left")
    builder.add_edge("plan", "right")
    builder.add_edge(["left", "right"], "sub")
    builder.add_edge("sub", END)
    return builder.compile(checkpointer=saver)


# Asked for: a delta channel, a plain one, one never written, the first again.
ASKED = ["notes", "count", "never", "notes"]


def history_configs(saver: RedisStateSaver, thread_id: str) -> list[Any]:
    """The config of every checkpoint of the thread (every namespace), and the
    latest of the root namespace (no checkpoint id)."""
    every = [t.config for t in saver.list({"configurable": {"thread_id": thread_id}})]
    return [*every, thread(thread_id)]


def run_notes(app: Any, thread_id: str) -> None:
    for turn in range(3):
        app.invoke({"notes": [f"turn {turn}"], "count": 0}, thread(thread_id))
    # A fork: update_state on an old checkpoint, then run on from it.
    old = next(s for s in app.get_state_history(thread(thread_id)) if s.next == ("left", "right"))
    app.invoke(None, app.update_state(old.config, {"notes": ["forked"]}))


def test_delta_channel_history_is_the_base_classs_on_a_real_graph(
    stores: tuple[Store, AsyncStore],
) -> None:
    saver = RedisStateSaver(stores[0])
    app = notes_graph(saver)
    run_notes(app, "t1")
    configs = history_configs(saver, "t1")
    assert len(configs) > 20
    namespaces = {c["configurable"].get("checkpoint_ns", "") for c in configs}
    assert len(namespaces) > 1  # the subgraph's checkpoints too
    seeded = unseeded = 0
    for config in configs:
        got = saver.get_delta_channel_history(config=config, channels=ASKED)
        assert got == BaseCheckpointSaver.get_delta_channel_history(
            saver, config=config, channels=ASKED
        ), config
        assert list(got) == ["notes", "count", "never"]
        seeded += "seed" in got["notes"]
        unseeded += "seed" not in got["notes"] and bool(got["notes"]["writes"])
    assert seeded and unseeded  # walks that stop at a snapshot, and walks to the root
    # LangGraph rebuilds the delta channel through it: the state InMemorySaver gives.
    memory = InMemorySaver()
    run_notes(notes_graph(memory), "t1")
    assert app.get_state(thread("t1")).values == notes_graph(memory).get_state(thread("t1")).values


async def test_async_delta_channel_history_is_the_base_classs_on_a_real_graph(
    stores: tuple[Store, AsyncStore],
) -> None:
    sync, asyn = stores
    saver = RedisStateSaver(asyn)
    app = notes_graph(saver)
    for turn in range(3):
        await app.ainvoke({"notes": [f"turn {turn}"], "count": 0}, thread("t1"))
    configs = [t.config async for t in saver.alist({"configurable": {"thread_id": "t1"}})]
    configs.append(thread("t1"))
    over_sync = RedisStateSaver(sync)  # its async methods run the sync ones in a thread
    for config in configs:
        expected = await BaseCheckpointSaver.aget_delta_channel_history(
            saver, config=config, channels=ASKED
        )
        assert await saver.aget_delta_channel_history(config=config, channels=ASKED) == expected
        assert await over_sync.aget_delta_channel_history(config=config, channels=ASKED) == (
            expected
        )
        # A sync call off the loop runs on it (a sync node of an async graph).
        bridged = await asyncio.to_thread(
            saver.get_delta_channel_history, config=config, channels=ASKED
        )
        assert bridged == expected
    await asyn.aclose()


def put_chain(saver: RedisStateSaver, thread_id: str, steps: list[dict[str, Any]]) -> list[Any]:
    """A chain of checkpoints, each storing the values ``steps[i]`` names (a channel
    whose value is None gets a version and no value: LangGraph's "empty"), with
    writes to "a" and "b" by two tasks whose paths sort against their ids and by one
    without a path (graph input: first)."""
    configs, config = [], thread(thread_id)
    for step, values in enumerate(steps):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {k: v for k, v in values.items() if v is not None}
        checkpoint["channel_versions"] = {k: saver.get_next_version(None, None) for k in values}
        config = saver.put(config, checkpoint, {"step": step}, checkpoint["channel_versions"])
        configs.append(config)
        saver.put_writes(config, [("a", f"z{step}"), ("b", step)], "task-0", "~pull, 2")
        saver.put_writes(config, [("a", f"y{step}")], "task-9", "~pull, 1")
        saver.put_writes(config, [("a", f"input{step}")], "task-5")  # no path: first
    return configs


def test_delta_channel_history_is_the_base_classs_on_stored_chains(
    stores: tuple[Store, AsyncStore],
) -> None:
    """Chains the saver's own methods store: a snapshot, a plain value (a thread
    migrated from a plain channel), "empty" values, the walk ending at a parent that
    is not stored, a thread or checkpoint that does not exist."""
    from langgraph.checkpoint.serde.types import _DeltaSnapshot

    saver = RedisStateSaver(stores[0])
    configs = put_chain(saver, "t1", [
        {"a": _DeltaSnapshot(["s0"])}, {"a": None, "b": [7]}, {}, {"a": None},
        {"a": _DeltaSnapshot(["s4"]), "b": None}, {}, {"b": None}, {},
    ])  # fmt: skip
    orphan = empty_checkpoint()  # its parent was never stored
    gone: Any = {"configurable": {"thread_id": "t1", "checkpoint_ns": "", "checkpoint_id": "x"}}
    configs.append(saver.put(gone, orphan, {}, {}))
    configs += [thread("t1"), thread("nobody"), gone]
    for config in configs:
        for channels in (["a"], ["b", "a"], ["a", "b", "__error__", "a"], []):
            got = saver.get_delta_channel_history(config=config, channels=channels)
            base = BaseCheckpointSaver.get_delta_channel_history(
                saver, config=config, channels=channels
            )
            assert got == base and list(got) == list(base), (config, channels)
    latest = saver.get_delta_channel_history(config=configs[7], channels=["a", "b"])
    assert latest["a"]["seed"] == _DeltaSnapshot(["s4"]) and latest["b"]["seed"] == [7]
    assert [w[2] for w in latest["a"]["writes"]] == [
        "input4", "y4", "z4", "input5", "y5", "z5", "input6", "y6", "z6",
    ]  # fmt: skip


def test_a_checkpoint_that_is_its_own_ancestor_is_refused(
    stores: tuple[Store, AsyncStore],
) -> None:
    """The base class would walk such a chain forever; the script, which would hold the
    server, refuses it."""
    from redistate import IntegrityError

    saver = RedisStateSaver(stores[0])

    def put(checkpoint_id: str, parent: str) -> Any:
        checkpoint = empty_checkpoint()
        checkpoint["id"] = checkpoint_id
        config: Any = {"configurable": {"thread_id": "t1", "checkpoint_id": parent}}
        return saver.put(config, checkpoint, {}, {})

    put("1", "2")
    put("2", "1")
    head = put("3", "1")
    with pytest.raises(IntegrityError, match="own ancestor"):
        saver.get_delta_channel_history(config=head, channels=["a"])


def test_delta_channel_history_refuses_bad_channels(stores: tuple[Store, AsyncStore]) -> None:
    saver = RedisStateSaver(stores[0])
    config = saver.put(thread("t1"), empty_checkpoint(), {}, {})
    for bad, error, match in (
        ("notes", TypeError, "sequence of channel names, not one str"),
        (b"notes", TypeError, "not one bytes"),
        (["notes", 3], TypeError, "must be a str, got int: 3"),
        (["no\0te"], ValueError, "must not contain NUL"),
    ):
        with pytest.raises(error, match=match):
            saver.get_delta_channel_history(config=config, channels=bad)  # type: ignore[arg-type]
        with pytest.raises(error, match=match):
            asyncio.run(saver.aget_delta_channel_history(config=config, channels=bad))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="thread_id"):
        saver.get_delta_channel_history(config={"configurable": {}}, channels=["a"])
    # No channels: nothing to read, as the base class (no thread needed either).
    assert saver.get_delta_channel_history(config={"configurable": {}}, channels=[]) == {}


def test_delta_channel_history_restarts_the_ttl_as_get_tuple_does(
    stores: tuple[Store, AsyncStore], backend: Backend
) -> None:
    sync, _ = stores
    saver = RedisStateSaver(sync, ttl=60, refresh_on_read=True)
    configs = put_chain(saver, "t1", [{}, {}, {}])
    keys = [sync.keys.graph_thread("t1", part) for part in PARTS]
    raw = backend.raw()
    try:
        present = [k for k in keys if raw.exists(k)]
        for key in present:
            raw.pexpire(key, 5_000)
        RedisStateSaver(sync, ttl=60).get_delta_channel_history(config=configs[-1], channels=["a"])
        assert all(0 < raw.pttl(k) <= 5_000 for k in present)  # a plain read leaves it
        saver.get_delta_channel_history(config=configs[-1], channels=["a"])
        assert all(5_000 < raw.pttl(k) <= 60_000 for k in present)
    finally:
        raw.close()


@pytest.mark.parametrize("length", [1, 10, 300])
async def test_delta_channel_history_is_one_round_trip_however_long_the_chain(
    server_backend: Backend, namespace: str, roundtrips: RoundTrips, length: int
) -> None:
    """Counted from the server (MONITOR): one script per call, sync and async, where
    the base class sends one get_tuple per checkpoint of the chain."""
    sync = Store(server_backend.sync_client(), namespace=namespace)
    asyn = AsyncStore(server_backend.async_client(), namespace=namespace)
    try:
        saver = RedisStateSaver(sync, async_store=asyn)
        head = put_chain(saver, "t1", [{}] * length)[-1]  # no seed: walked to the root
        saver.get_delta_channel_history(config=head, channels=["a"])  # scripts loaded
        await saver.aget_delta_channel_history(config=head, channels=["a"])
        counted = {}
        roundtrips.start()
        got = saver.get_delta_channel_history(config=head, channels=["a", "b"])
        counted["sync"] = roundtrips.stop()
        roundtrips.start()
        agot = await saver.aget_delta_channel_history(config=head, channels=["a", "b"])
        counted["async"] = roundtrips.stop()
        roundtrips.start()
        base = BaseCheckpointSaver.get_delta_channel_history(
            saver, config=head, channels=["a", "b"]
        )
        counted["base"] = roundtrips.stop()
    finally:
        sync.close()
        await asyn.aclose()
    assert got == agot == base and len(got["a"]["writes"]) == 3 * (length - 1)
    assert [len(counted["sync"]), len(counted["async"])] == [1, 1], counted
    assert counted["sync"][0][0].strip('"').upper() in ("FCALL", "EVALSHA")
    assert len(counted["base"]) == length  # the target, then each of its ancestors
