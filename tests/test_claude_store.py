# The SDK types entries and keys as TypedDicts, open to any JSON keys at run time (its
# entries are opaque transcript lines): the tests pass plain dicts, as its CLI does.
# mypy: disable-error-code="arg-type,list-item,typeddict-item,typeddict-unknown-key"
"""redistate.claude.RedistateSessionStore on every backend: the Claude Agent SDK's own
conformance suite, and the SDK's InMemorySessionStore as the oracle on random call
sequences; then what that suite leaves out: an entry's uuid as its idempotency key, a
lost reply resent through the fault proxy, processes racing on the summary, a process
SIGKILLed mid-batch, the TTL, bad input, encryption and erasure."""

from __future__ import annotations

import asyncio
import copy
import itertools
import multiprocessing as mp
import os
import signal
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest
from claude_agent_sdk import InMemorySessionStore, fold_session_summary
from claude_agent_sdk.testing import run_session_store_conformance
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from redistate import (
    AsyncStore,
    CodecError,
    EncryptedCodec,
    IntegrityError,
    InvalidId,
    StateTooLarge,
    Store,
)
from redistate.claude import RedistateSessionStore
from tests import workers
from tests.conftest import Backend
from tests.erasure_frameworks import erase
from tests.proxy import FaultProxy

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

Make = Callable[[str], Awaitable[RedistateSessionStore]]
KEY: Any = {"project_key": "p", "session_id": "s"}


@pytest.fixture(params=["async", "sync"])
def make(request: pytest.FixtureRequest, backend: Backend, namespace: str) -> Iterator[Make]:
    """Makes a store in the namespace ``namespace + suffix``, in the event loop that uses
    it: over an AsyncStore (native) or a Store (calls in a worker thread). The keys of
    every namespace made are deleted afterwards."""
    made: list[Any] = []

    async def build(suffix: str = "") -> RedistateSessionStore:
        ns = namespace + suffix
        store: Store | AsyncStore
        if request.param == "sync":
            store = Store(backend.sync_client(), namespace=ns)
        else:
            store = AsyncStore(backend.async_client(), namespace=ns)
        made.append(store)
        return RedistateSessionStore(store)

    yield build
    for store in made:
        if isinstance(store, Store):
            store.close()
    if backend.remote and made:
        raw = backend.raw()
        keys = list(raw.scan_iter(match=f"{namespace}*", count=1000))
        for key in keys:
            raw.delete(key)
        raw.close()


async def _close(sessions: RedistateSessionStore) -> None:
    if isinstance(sessions.store, AsyncStore):
        await sessions.store.aclose()


def test_the_sdks_conformance_suite_passes(make: Make) -> None:
    async def run() -> None:
        counter = itertools.count()
        made: list[RedistateSessionStore] = []

        async def fresh() -> RedistateSessionStore:
            made.append(await make(f"-{next(counter)}"))  # one namespace per contract
            return made[-1]

        await run_session_store_conformance(fresh)
        for sessions in made:
            await _close(sessions)

    asyncio.run(run())


# -- the SDK's InMemorySessionStore as the oracle -------------------------------------

PROJECTS = st.sampled_from(["p", "q/r"])
SESSIONS = st.sampled_from(["s1", "s2"])
SUBPATHS = st.sampled_from([None, None, "subagents/a", "subagents/b"])
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "customTitle": st.text(max_size=3),
        "lastPrompt": st.text(max_size=3),
        "timestamp": st.just("2026-01-01T00:00:00.000Z"),
        "cwd": st.sampled_from(["/a", "/b"]),
        "isSidechain": st.booleans(),
        "gitBranch": st.text(max_size=2),
    },
)
ENTRIES = st.lists(
    st.tuples(st.sampled_from(["user", "assistant", "tag"]), FIELDS, st.booleans()),
    min_size=1,
    max_size=4,
)
OPS = st.one_of(
    st.tuples(st.just("append"), PROJECTS, SESSIONS, SUBPATHS, ENTRIES),
    st.tuples(st.just("load"), PROJECTS, SESSIONS, SUBPATHS),
    st.tuples(st.just("list"), PROJECTS),
    st.tuples(st.just("summaries"), PROJECTS),
    st.tuples(st.just("subkeys"), PROJECTS, SESSIONS),
    st.tuples(st.just("delete"), PROJECTS, SESSIONS, SUBPATHS),
)


# An empty batch is not generated: the SDK's in-memory store creates an empty
# transcript for it, ours writes nothing (the SDK's contract: a no-op; its load then
# returns None, which the contract allows for a transcript never written or emptied).


def _key(project: str, session: str, subpath: str | None = None) -> Any:
    key: dict[str, Any] = {"project_key": project, "session_id": session}
    if subpath is not None:
        key["subpath"] = subpath
    return key


async def _call(store: Any, op: tuple[Any, ...], uuids: Iterator[int]) -> Any:
    """One op against a store: what the two stores must agree on (not mtimes: each
    takes them from its own clock)."""
    kind = op[0]
    if kind == "append":
        entries = []
        for type_, fields, with_uuid in op[4]:
            entry = {"type": type_, **fields}
            if with_uuid:  # unique: the SDK's in-memory store does not dedupe
                entry["uuid"] = f"u{next(uuids)}"
            entries.append(entry)
        return await store.append(_key(*op[1:4]), entries)
    if kind == "load":
        return await store.load(_key(*op[1:4]))
    if kind == "list":
        return sorted(s["session_id"] for s in await store.list_sessions(op[1]))
    if kind == "summaries":
        found = await store.list_session_summaries(op[1])
        return sorted((s["session_id"], sorted(s["data"].items())) for s in found)
    if kind == "subkeys":
        return sorted(await store.list_subkeys(_key(*op[1:3])))
    return await store.delete(_key(*op[1:4]))


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(OPS, max_size=14))
def test_the_store_answers_as_the_sdks_in_memory_store(make: Make, ops: list[Any]) -> None:
    async def run() -> None:
        ours = await make(f"-{os.urandom(4).hex()}")
        oracle = InMemorySessionStore()
        ours_ids, oracle_ids = itertools.count(), itertools.count()
        for op in ops:
            got = await _call(ours, op, ours_ids)
            want = await _call(oracle, copy.deepcopy(op), oracle_ids)
            assert got == want, op
        await _close(ours)

    asyncio.run(run())


def test_the_sdks_own_store_functions_read_it_as_they_read_their_in_memory_store(
    make: Make,
) -> None:
    """list, read, rename, tag, fork and delete through the SDK's functions: the same
    sessions, messages and titles as over InMemorySessionStore (not times, fork ids)."""
    import claude_agent_sdk as sdk

    directory = "/srv/app"
    project = sdk.project_key_for_directory(directory)
    a, b = "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"

    def turn(sid: str, n: int, text: str) -> list[Any]:
        return [
            {"type": kind, "uuid": f"{sid}-{n}-{kind}", "parentUuid": None, "sessionId": sid,
             "timestamp": f"2026-01-01T00:00:0{n}.000Z", "cwd": directory,
             "message": {"role": kind, "content": f"{text} ({kind})"}}
            for kind in ("user", "assistant")
        ]  # fmt: skip

    async def script(store: Any) -> list[Any]:
        seen: list[Any] = []

        async def listed() -> None:
            infos = await sdk.list_sessions_from_store(store, directory=directory)
            seen.append(sorted((i.summary, i.custom_title, i.first_prompt, i.tag) for i in infos))

        for sid, text in ((a, "plan"), (b, "ship")):
            await store.append({"project_key": project, "session_id": sid}, turn(sid, 1, text))
        await store.append({"project_key": project, "session_id": a}, turn(a, 2, "more"))
        await listed()
        messages = await sdk.get_session_messages_from_store(store, a, directory=directory)
        seen.append([(m.type, m.uuid, m.message) for m in messages])
        await sdk.rename_session_via_store(store, a, "Plan", directory=directory)
        await sdk.tag_session_via_store(store, b, "urgent", directory=directory)
        await listed()
        fork = await sdk.fork_session_via_store(store, a, directory=directory, title="Alt")
        forked = await sdk.get_session_messages_from_store(
            store, fork.session_id, directory=directory
        )
        seen.append([(m.type, m.message) for m in forked])
        await sdk.delete_session_via_store(store, b, directory=directory)
        await listed()
        return seen

    async def run() -> None:
        ours = await make("")
        assert await script(ours) == await script(InMemorySessionStore())
        await _close(ours)

    asyncio.run(run())


# -- what the conformance suite leaves out --------------------------------------------


def _title(n: int, uuid: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "user", "customTitle": f"t{n}"}
    if uuid is not None:
        entry["uuid"] = uuid
    return entry


def test_an_entry_appended_again_is_stored_once_and_folded_once(make: Make) -> None:
    async def run() -> None:
        sessions = await make("")
        sub = {**KEY, "subpath": "subagents/a"}
        await sessions.append(KEY, [_title(1, "a"), _title(1, "a"), _title(2)])
        await sessions.append(KEY, [_title(3, "b")])
        # "a" again, and an entry without a uuid (never deduplicated): the summary's
        # last-wins title stays the one of the last entry stored.
        await sessions.append(KEY, [_title(1, "a")])
        await sessions.append(KEY, [_title(1, "a"), _title(4)])
        await sessions.append(sub, [_title(5, "a"), _title(5, "a")])  # its own uuids
        await sessions.append(sub, [_title(5, "a")])
        # Another store object (no cached summary) meets the same uuid.
        again = RedistateSessionStore(sessions.store)
        await again.append(KEY, [_title(3, "b")])
        got = await sessions.load(KEY)
        assert got == [_title(1, "a"), _title(2), _title(3, "b"), _title(4)]
        assert await sessions.load(sub) == [_title(5, "a")]
        summaries = await sessions.list_session_summaries("p")
        assert [s["data"] for s in summaries] == [fold_session_summary(None, KEY, got)["data"]]
        assert summaries[0]["data"]["custom_title"] == "t4"
        await _close(sessions)

    asyncio.run(run())


def _append_match(words: Any) -> bool:
    """The proxy's matcher: the FCALL of claude_append (not claude_index's)."""
    return bool(words[0].upper() == b"FCALL" and words[1].endswith(b"_claude_append"))


def test_a_batch_whose_reply_was_lost_is_resent_and_applied_once(
    server_backend: Backend, namespace: str
) -> None:
    """The reply of an append is dropped after the server applied it, and another
    process appends to the same session before the resend: the resend is recognised
    (write id), so the entries without a uuid are not stored twice, and the summary
    holds both appends."""
    assert server_backend.server is not None
    with FaultProxy("127.0.0.1", server_backend.server.port) as proxy:

        async def run() -> None:
            # A sync Store behind the proxy: its calls run in a worker thread, so this
            # loop is free to run the other process's append meanwhile.
            behind = Store.from_url(f"redis://127.0.0.1:{proxy.port}/0", namespace=namespace)
            direct = AsyncStore(server_backend.async_client(), namespace=namespace)
            ours, theirs = RedistateSessionStore(behind), RedistateSessionStore(direct)
            await ours.load(KEY)  # connects: the handshake is not a fault target
            loop = asyncio.get_running_loop()

            def elsewhere() -> None:  # on the proxy's thread, between apply and resend
                asyncio.run_coroutine_threadsafe(
                    theirs.append(KEY, [_title(9, "theirs")]), loop
                ).result(timeout=30)

            await ours.append(KEY, [_title(0, "first")])
            proxy.drop_reply(_append_match, then=elsewhere)
            batch = [_title(1), {"type": "tag", "tag": "x"}, _title(2, "ours")]
            await ours.append(KEY, batch)
            assert proxy.dropped == 1 and proxy.armed == 0
            got = await theirs.load(KEY)
            assert got == [_title(0, "first"), *batch, _title(9, "theirs")]
            summary = (await theirs.list_session_summaries("p"))[0]["data"]
            assert summary == fold_session_summary(None, KEY, got)["data"]
            behind.close()
            await direct.aclose()

        asyncio.run(run())


@pytest.mark.parametrize("backend", ["redis7", "cluster"], indirect=True)
def test_processes_racing_on_one_sessions_summary_lose_nothing(
    backend: Backend, namespace: str
) -> None:
    """Four processes append batches to one session's main transcript at once (and each
    to a subagent's): every entry stored once, each writer's in its order, and the
    summary the one folded from the whole transcript: no fold lost to a race."""
    processes, batches, size = 4, 20, 3
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(processes)
        with ProcessPoolExecutor(processes, mp_context=ctx) as pool:
            futures = [
                pool.submit(
                    workers.claude_appender, backend.url, namespace, w, batches, size, barrier, None
                )
                for w in range(processes)
            ]
            assert sum(f.result(timeout=300) for f in futures) == processes * batches

    async def check() -> None:
        store = AsyncStore(backend.async_client(), namespace=namespace)
        sessions = RedistateSessionStore(store)
        got = await sessions.load(KEY)
        assert got is not None and len(got) == processes * batches * size
        uuids = [e["uuid"] for e in got]
        assert len(set(uuids)) == len(uuids)
        for w in range(processes):
            mine = [u for u in uuids if u.startswith(f"w{w}-")]
            assert mine == [f"w{w}-{b}-{e}" for b in range(batches) for e in range(size)]
            sub = await sessions.load({**KEY, "subpath": f"subagents/w{w}"})
            assert [e["uuid"] for e in sub or []] == [f"w{w}-{b}" for b in range(batches)]
        (summary,) = await sessions.list_session_summaries("p")
        assert summary["data"] == fold_session_summary(None, KEY, got)["data"]
        assert summary["data"]["custom_title"] == got[-1]["customTitle"]
        assert len(await sessions.list_subkeys(KEY)) == processes
        await store.aclose()

    asyncio.run(check())


def test_a_process_killed_mid_batch_leaves_whole_batches_and_a_rerun_adds_no_duplicate(
    server_backend: Backend, namespace: str
) -> None:
    """A writer is SIGKILLed while it appends, at a point it chose by no one: each of
    its batches is in the transcript whole or not at all, every batch it was told had
    landed is there, and the summary is the fold of what is stored. A new process
    then sends every batch again (the same uuids, as a resumed run would): nothing is
    stored twice."""
    batches, size = 400, 5
    ctx = mp.get_context("spawn")
    acks = ctx.Queue()
    args = (server_backend.url, namespace, 0, batches, size, None, acks)
    writer = ctx.Process(target=workers.claude_appender, args=args)
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
        sessions = RedistateSessionStore(store)
        got = await sessions.load(KEY) or []
        (summary,) = await sessions.list_session_summaries("p")
        assert summary["data"] == fold_session_summary(None, KEY, got)["data"]
        await store.aclose()
        return got

    got = asyncio.run(stored())
    uuids = [e["uuid"] for e in got]
    assert len(set(uuids)) == len(uuids)
    found = {int(u.split("-")[1]) for u in uuids}
    assert {b for _, b in acked} <= found
    assert len(found) < batches  # it was killed before the end
    assert uuids == [f"w0-{b}-{e}" for b in sorted(found) for e in range(size)]  # whole
    workers.claude_appender(server_backend.url, namespace, 0, batches, size, None, None)
    again = asyncio.run(stored())
    assert [e["uuid"] for e in again[: len(got)]] == uuids
    assert len(again) == batches * size and len({e["uuid"] for e in again}) == batches * size


def test_every_append_sets_the_ttl_and_an_expired_session_leaves_the_listing(
    server_backend: Backend, namespace: str
) -> None:
    async def run() -> None:
        store = AsyncStore(server_backend.async_client(), namespace=namespace)
        sessions = RedistateSessionStore(store, ttl=60)
        keys = store.keys
        for sid in ("gone", "stays"):
            await sessions.append({**KEY, "session_id": sid}, [_title(1, "a")])
        await sessions.append({**KEY, "session_id": "gone", "subpath": "x"}, [_title(2)])
        path = "p/gone"
        parts = [keys.claude_session(path, part) for part in ("", "log", "subs")]
        ttls = [await store._conn.idempotent("PTTL", key) for key in parts]
        assert all(0 < ttl <= 60_000 for ttl in ttls)  # set by the appends themselves
        index_ttl = await store._conn.idempotent("PTTL", keys.claude_project("p"))
        assert index_ttl >= ttls[0] - 1_000  # the index outlives what it lists
        longer = RedistateSessionStore(store, ttl=3600)
        await longer.append({**KEY, "session_id": "stays"}, [_title(3)])
        assert await store._conn.idempotent("PTTL", keys.claude_project("p")) > 60_000
        # Expired as the server expires it: PEXPIREAT in the past.
        for key in parts:
            await store._conn.idempotent("PEXPIREAT", key, 1)
        assert await sessions.load({**KEY, "session_id": "gone"}) is None
        listed = await sessions.list_sessions("p")
        assert [s["session_id"] for s in listed] == ["stays"]
        # Its index entry goes once its time (its TTL, and a minute for the clocks of a
        # cluster's servers) has passed: here, set in the past as well.
        index = keys.claude_project("p")
        assert await store._conn.idempotent("ZSCORE", index, "gone") is not None
        await store._conn.idempotent("ZADD", index, "XX", 1, "gone")
        assert [s["session_id"] for s in await sessions.list_sessions("p")] == ["stays"]
        assert await store._conn.idempotent("ZRANGE", index, 0, -1) == [b"stays"]
        await store.aclose()

    asyncio.run(run())


def test_an_append_is_one_round_trip_and_a_load_one(
    server_backend: Backend, namespace: str
) -> None:
    from tests.roundtrips import server_reads

    async def run() -> list[int]:
        store = AsyncStore(server_backend.async_client(), namespace=namespace)
        sessions = RedistateSessionStore(store, ttl=600)
        await sessions.append({**KEY, "session_id": "warm"}, [_title(0)])  # connects, loads
        raw = server_backend.raw()
        counts = []
        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: sessions.append(KEY, [_title(1, "a")]),  # a new session
            lambda: sessions.append(KEY, [_title(2, "b"), _title(3)]),  # its summary known
            lambda: sessions.append({**KEY, "subpath": "s"}, [_title(4)]),
            lambda: sessions.load(KEY),
            lambda: RedistateSessionStore(store).append(KEY, [_title(5)]),  # summary unknown
        ]
        for call in calls:
            before = server_reads(raw)
            await call()
            counts.append(server_reads(raw) - before - 1)
        raw.close()
        await store.aclose()
        return counts

    # The first append of an object to a session enters it in its project's index and
    # reads its summary (one round trip) before it appends; later ones renew the index
    # entry and append in one. Also for a session another process wrote.
    assert asyncio.run(run()) == [2, 1, 1, 1, 2]


def test_bad_input_names_the_value_and_writes_nothing(make: Make) -> None:
    async def run() -> None:
        sessions = await make("")
        sessions_async = sessions.store
        cases: list[tuple[Any, Any, type[Exception], str]] = [
            ({"project_key": "", "session_id": "s"}, [_title(1)], InvalidId, "project_key"),
            ({"project_key": "p", "session_id": 3}, [_title(1)], InvalidId, "session_id"),
            ({**KEY, "subpath": "a\nb"}, [_title(1)], InvalidId, "control character"),
            ({**KEY, "subpath": "x" * 600}, [_title(1)], InvalidId, "over the limit of 512"),
            ({**KEY, "subpath": ""}, [_title(1)], InvalidId, "subpath"),
            (KEY, [_title(1), "not a dict"], TypeError, "entry 1 must be a dict"),
            (KEY, [_title(1), {"type": "x", "n": float("nan")}], CodecError, "entry 1 of 2"),
            (KEY, [{"type": "x", "big": "x" * 2_000_000}], StateTooLarge, "limit"),
            (KEY, "entries", TypeError, "entries must be a list"),
            ("p/s", [_title(1)], TypeError, "SessionKey"),
        ]
        for key, entries, error, words in cases:
            with pytest.raises(error, match=words):
                await sessions.append(key, entries)
        with pytest.raises(InvalidId, match="project_key"):
            await sessions.list_sessions("")
        with pytest.raises(InvalidId, match="user"):
            RedistateSessionStore(sessions_async, user="")
        with pytest.raises(TypeError, match="AsyncStore or Store"):
            RedistateSessionStore(object())
        assert await sessions.load(KEY) is None
        assert await sessions.list_sessions("p") == []
        await _close(sessions)

    asyncio.run(run())


def test_encrypted_entries_and_summaries_read_back_and_cannot_be_moved(
    server_backend: Backend, namespace: str
) -> None:
    async def run() -> None:
        codec = EncryptedCodec({"k1": os.urandom(32)}, primary="k1")
        store = AsyncStore(server_backend.async_client(), namespace=namespace, codec=codec)
        sessions = RedistateSessionStore(store)
        secret = {"type": "user", "uuid": "a", "lastPrompt": "the secret plan"}
        await sessions.append(KEY, [secret])
        await sessions.append({**KEY, "session_id": "other"}, [_title(1)])
        assert await sessions.load(KEY) == [secret]
        raw = server_backend.raw()
        dump = b"".join(
            bytes(v)
            for key in raw.scan_iter(match=f"{namespace}:*")
            for v in (
                raw.zrange(key, 0, -1) if raw.type(key) == b"zset" else [raw.dump(key) or b""]
            )
        )
        assert b"secret plan" not in dump
        # An entry copied into another session's transcript does not decode there.
        log = store.keys.claude_session("p/s", "log")
        (member,) = [m for m in raw.zrange(log, 0, -1) if m[:1] == b"\x00"]
        other = store.keys.claude_session("p/other", "log")
        raw.zadd(other, {member[:1] + b"9" * 16 + member[17:]: 0})
        raw.close()
        with pytest.raises(IntegrityError):
            await sessions.load({**KEY, "session_id": "other"})
        (summary,) = [
            s for s in await sessions.list_session_summaries("p") if s["session_id"] == "s"
        ]
        assert summary["data"]["last_prompt"] == "the secret plan"
        await store.aclose()

    asyncio.run(run())


def test_erasing_a_user_deletes_their_sessions_and_leaves_the_rest(make: Make) -> None:
    async def run() -> None:
        sessions = await make("")
        mine = RedistateSessionStore(sessions.store, user="u1")
        await mine.append(KEY, [_title(1, "a")])
        await mine.append({**KEY, "subpath": "subagents/a"}, [_title(2)])
        await sessions.append({**KEY, "session_id": "theirs"}, [_title(3)])
        store = sessions.store
        if isinstance(store, AsyncStore):
            report = await store.users.erase("u1")
        else:
            report = await asyncio.to_thread(store.users.erase, "u1")
        assert report.deleted == {"claude": ["p/s"]}
        assert await sessions.load(KEY) is None
        assert await sessions.load({**KEY, "subpath": "subagents/a"}) is None
        assert [s["session_id"] for s in await sessions.list_sessions("p")] == ["theirs"]
        await _close(sessions)

    asyncio.run(run())


def test_a_summary_from_before_a_delete_and_a_new_session_is_never_folded_on(
    make: Make,
) -> None:
    """An object remembers a session's summary; another deletes the session and makes
    it again: the first object's next append folds from the new session's summary (the
    version never repeats: the old one does not match), and it is registered again."""

    async def run() -> None:
        sessions = await make("")
        mine = RedistateSessionStore(sessions.store, user="u1")
        other = RedistateSessionStore(sessions.store)
        old = {"type": "user", "uuid": "o", "customTitle": "OLD", "cwd": "/old"}
        await mine.append(KEY, [old])
        await other.delete(KEY)
        await other.append(KEY, [{"type": "user", "uuid": "n1", "lastPrompt": "new"}])
        await mine.append(KEY, [{"type": "user", "uuid": "n2", "lastPrompt": "new2"}])
        got = await sessions.load(KEY)
        (summary,) = await sessions.list_session_summaries("p")
        assert summary["data"] == fold_session_summary(None, KEY, got)["data"]
        assert "custom_title" not in summary["data"] and "cwd" not in summary["data"]
        # Erased, then written again by the same object: registered again.
        first = await erase(sessions.store, "u1")
        assert first.deleted == {"claude": ["p/s"]}
        await mine.append(KEY, [{"type": "user", "uuid": "n3"}])
        again = await erase(sessions.store, "u1")
        assert again.deleted == {"claude": ["p/s"]}
        assert await sessions.load(KEY) is None
        await _close(sessions)

    asyncio.run(run())


def test_ttls_are_renewed_by_subagent_and_stored_again_appends_and_kept_by_rotate_keys(
    server_backend: Backend, namespace: str
) -> None:
    async def run() -> None:
        k1 = {"k1": os.urandom(32)}
        codec = EncryptedCodec(k1, primary="k1")
        store = AsyncStore(server_backend.async_client(), namespace=namespace, codec=codec)
        sessions = RedistateSessionStore(store, ttl=600)
        keys = store.keys
        log, head = keys.claude_session("p/s", "log"), keys.claude_session("p/s")
        index = keys.claude_project("p")
        await sessions.append(KEY, [{"type": "title"}])  # one member: no uuid, no mark
        for key in (log, head, index):
            await store._conn.idempotent("PEXPIRE", key, 5_000)
        await sessions.append({**KEY, "subpath": "a"}, [{"type": "x"}])
        assert await store._conn.idempotent("PTTL", index) > 5_000  # renewed with it
        await sessions.append(KEY, [_title(1, "u")])
        await store._conn.idempotent("PEXPIRE", head, 5_000)
        fresh = RedistateSessionStore(store, ttl=600)  # no summary cached
        await fresh.append(KEY, [_title(1, "u")])  # stored already: only the TTL
        assert await store._conn.idempotent("PTTL", head) > 5_000
        assert len(await sessions.load(KEY) or []) == 2
        # rotate-keys replaces the members of a transcript; its TTL stays.
        await store._conn.idempotent("DEL", log)
        await RedistateSessionStore(store, ttl=600).append(
            {**KEY, "session_id": "one"}, [{"type": "title"}]
        )
        one = keys.claude_session("p/one", "log")
        rotated = AsyncStore(
            server_backend.async_client(),
            namespace=namespace,
            codec=EncryptedCodec({"k2": os.urandom(32), **k1}, primary="k2"),
        )
        report = await rotated.admin.rotate_keys()
        assert report.claude_values >= 2 and report.changed == 0
        assert 0 < await store._conn.idempotent("PTTL", one) <= 600_000
        await store.aclose()
        await rotated.aclose()

    asyncio.run(run())


def test_a_summary_larger_than_max_bytes_is_written_and_a_bad_uuid_refused(
    server_backend: Backend, namespace: str
) -> None:
    async def run() -> None:
        store = AsyncStore(server_backend.async_client(), namespace=namespace, max_bytes=1_000)
        sessions = RedistateSessionStore(store)
        fields = ("customTitle", "lastPrompt", "summary", "gitBranch", "aiTitle")
        for n, name in enumerate(fields):  # each entry fits, the summary does not
            entry: Any = {"type": "user", "uuid": f"e{n}", name: "x" * 800}
            await sessions.append(KEY, [entry])
        (summary,) = await sessions.list_session_summaries("p")
        assert len(summary["data"]) >= len(fields)
        for uuid in (1, True, {"a": 1}):
            with pytest.raises(TypeError, match="uuid must be a str"):
                await sessions.append(KEY, [{"type": "x", "uuid": uuid}])
        assert len(await sessions.load(KEY) or []) == len(fields)
        await store.aclose()

    asyncio.run(run())
