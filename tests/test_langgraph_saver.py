"""RedisStateSaver beyond LangGraph's conformance suite: real graphs through the sync
and the async methods, TTL, the history cap, fenced writers, encryption, bad input."""

from __future__ import annotations

import operator
import os
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import END, START, StateGraph

from redistate import AsyncStore, InvalidId, LockLost, Store
from redistate.graph import PARTS
from redistate.langgraph import RedisStateSaver
from tests.conftest import Backend


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


@pytest.fixture
def stores(backend: Backend, namespace: str) -> Iterator[tuple[Store, AsyncStore]]:
    sync, asyn = (
        Store(backend.sync_client(), namespace=namespace),
        AsyncStore(backend.async_client(), namespace=namespace),
    )
    yield sync, asyn
    sync.close()


def raw_keys(backend: Backend, namespace: str) -> list[bytes]:
    raw = backend.raw()
    try:
        return sorted(raw.scan_iter(match=f"{namespace}:*", count=1000))
    finally:
        raw.close()


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
    with pytest.raises(Exception, match="only an async connection"):
        saver.get_tuple(thread("t1"))
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
        for key in [*present, sync.keys.graph_run("r1")]:
            assert 0 < raw.pttl(key) <= 60_000, key
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
    first = sync.lock("t1", ttl=0.3, renew=False).acquire()
    old = RedisStateSaver(sync).with_lease(first)
    graph(old).invoke({"steps": [], "secret": "old"}, thread("t1"))
    # The second writer blocks until the first lease has expired: no sleep here.
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


async def test_a_resent_write_is_applied_once(backend: Backend, namespace: str) -> None:
    """Each saver script is safe to send twice: a put, put_writes or copy whose reply is
    lost is resent by the retry layer and leaves what one send leaves."""
    from tests._async.test_resends import LostReplies

    store = AsyncStore(backend.async_client(), namespace=namespace)
    saver = RedisStateSaver(store)
    lost = LostReplies(store.client, "EVALSHA")
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
