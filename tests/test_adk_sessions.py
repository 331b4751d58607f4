"""RedistateSessionService, Google ADK's session service on plain Redis: against ADK's
own InMemorySessionService as the oracle (random call sequences, every backend), the
state scopes, one round trip per append, concurrent appends that lose nothing, TTL."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions import InMemorySessionService
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.session import Session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from redistate import AsyncStore, InvalidId, Store
from redistate.adk import RedistateSessionService
from tests.conftest import Backend

APP = "chat"


Make = Callable[[], Awaitable[RedistateSessionService]]


@pytest.fixture(params=["async", "sync"])
def make(request: pytest.FixtureRequest, backend: Backend, namespace: str) -> Iterator[Make]:
    """Makes a service, in the event loop that uses it: over an AsyncStore (native; its
    client belongs to that loop) or over a Store (calls in a worker thread)."""
    sync = Store(backend.sync_client(), namespace=namespace)

    async def made() -> RedistateSessionService:
        if request.param == "sync":
            return RedistateSessionService(sync)
        return RedistateSessionService(AsyncStore(backend.async_client(), namespace=namespace))

    yield made
    sync.close()


async def _close(service: RedistateSessionService) -> None:
    if isinstance(service.store, AsyncStore):
        await service.store.aclose()


def _shape(session: Session | None) -> Any:
    """What two services must agree on: ids, state, events (not the creation time,
    which each service takes from its own clock)."""
    if session is None:
        return None
    return (
        session.app_name,
        session.user_id,
        session.id,
        dict(sorted(session.state.items())),
        [e.model_dump(mode="json", exclude_none=True) for e in session.events],
    )


USERS = st.sampled_from(["u1", "u2"])
SIDS = st.sampled_from(["s1", "s2", "s/3"])
KEYS = st.sampled_from(["k", "app:k", "user:k", "temp:k", "app:j", "user:j", "x"])
VALUES = st.one_of(
    st.integers(-3, 3), st.text(max_size=3), st.none(), st.lists(st.integers(0, 2), max_size=2)
)
DELTAS = st.dictionaries(KEYS, VALUES, max_size=3)
OPS = st.one_of(
    st.tuples(st.just("create"), USERS, SIDS, DELTAS),
    st.tuples(st.just("append"), USERS, SIDS, DELTAS, st.booleans()),
    st.tuples(st.just("get"), USERS, SIDS, st.one_of(st.none(), st.integers(0, 3)), st.booleans()),
    st.tuples(st.just("list"), st.one_of(st.none(), USERS)),
    st.tuples(st.just("delete"), USERS, SIDS),
    st.tuples(st.just("user_state"), USERS),
)


async def _call(service: Any, op: tuple[Any, ...], clock: list[float]) -> Any:
    """One op against a service: its result, or the name of the error it raised."""
    kind = op[0]
    try:
        if kind == "create":
            session = await service.create_session(
                app_name=APP, user_id=op[1], session_id=op[2], state=dict(op[3])
            )
            return _shape(session)
        if kind == "append":
            session = await service.get_session(app_name=APP, user_id=op[1], session_id=op[2])
            if session is None:
                session = Session(app_name=APP, user_id=op[1], id=op[2])
            clock[0] += 1.5
            event = Event(
                id=f"e{clock[0]}",
                author="user",
                invocation_id="i",
                timestamp=clock[0],
                partial=op[4] or None,
                actions=EventActions(state_delta=dict(op[3])),
            )
            returned = await service.append_event(session, event)
            return (returned.model_dump(mode="json", exclude_none=True), _shape(session))
        if kind == "get":
            config = None
            if op[3] is not None or op[4]:
                config = GetSessionConfig(
                    num_recent_events=op[3], after_timestamp=clock[0] - 2 if op[4] else None
                )
            return _shape(
                await service.get_session(
                    app_name=APP, user_id=op[1], session_id=op[2], config=config
                )
            )
        if kind == "list":
            listed = await service.list_sessions(app_name=APP, user_id=op[1])
            return sorted(_shape(s) for s in listed.sessions)
        if kind == "delete":
            await service.delete_session(app_name=APP, user_id=op[1], session_id=op[2])
            return None
        return await service.get_user_state(app_name=APP, user_id=op[1])
    except (AlreadyExistsError, SessionNotFoundError) as exc:
        return type(exc).__name__


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(OPS, max_size=12))
def test_the_service_answers_as_adks_in_memory_service(
    make: Make, ops: list[tuple[Any, ...]]
) -> None:
    async def run() -> None:
        service = await make()
        oracle = InMemorySessionService()
        ours_clock, oracle_clock = [1e9], [1e9]
        for op in ops:
            got = await _call(service, op, ours_clock)
            want = await _call(oracle, copy.deepcopy(op), oracle_clock)
            assert got == want, op
        for user in ("u1", "u2"):  # leave nothing for the next example
            for sid in ("s1", "s2", "s/3"):
                await service.delete_session(app_name=APP, user_id=user, session_id=sid)
        await _clear_state(service)
        await _close(service)

    asyncio.run(run())


async def _clear_state(service: RedistateSessionService) -> None:
    """Delete the app's and the users' state (sessions are deleted by the service)."""
    store = service.store
    keys = store.keys
    for key in (keys.adk_app(APP), keys.adk_user(f"{APP}/u1"), keys.adk_user(f"{APP}/u2")):
        if isinstance(store, AsyncStore):
            await store._conn.idempotent("DEL", key)
        else:
            store._conn.idempotent("DEL", key)


@pytest.mark.parametrize("backend", ["redis7", "cluster"], indirect=True)
def test_runners_in_processes_appending_to_one_users_sessions_lose_nothing(
    backend: Backend, namespace: str
) -> None:
    """Four processes append to the same two sessions of one user, each from a session
    object it read once: no stale-session error, every event kept, every session, user
    and app key set by each writer at its last value."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    from tests import workers

    processes, sessions, rounds = 4, 2, 25

    async def create() -> None:
        store = AsyncStore(backend.async_client(), namespace=namespace)
        service = RedistateSessionService(store, ttl=600)
        for n in range(sessions):
            await service.create_session(app_name=APP, user_id="u", session_id=f"s{n}")
        await store.aclose()

    asyncio.run(create())
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(processes)
        with ProcessPoolExecutor(processes, mp_context=ctx) as pool:
            futures = [
                pool.submit(
                    workers.adk_appender, backend.url, namespace, w, sessions, rounds, barrier
                )
                for w in range(processes)
            ]
            assert sum(f.result(timeout=300) for f in futures) == processes * sessions * rounds

    async def check() -> None:
        store = AsyncStore(backend.async_client(), namespace=namespace)
        service = RedistateSessionService(store)
        last = rounds - 1
        for n in range(sessions):
            got = await service.get_session(app_name=APP, user_id="u", session_id=f"s{n}")
            assert got is not None
            assert len(got.events) == processes * rounds  # none lost, none twice
            assert len({e.id for e in got.events}) == processes * rounds
            for w in range(processes):
                assert got.state[f"w{w}"] == last
                assert got.state[f"user:w{w}"] == last
                assert got.state[f"app:w{w}"] == last
                mine = [e.actions.state_delta[f"w{w}"] for e in got.events if e.author == f"w{w}"]
                assert mine == list(range(rounds))  # each writer's events in its order
        assert await service.get_user_state(app_name=APP, user_id="u") == {
            f"w{w}": last for w in range(processes)
        }
        await store.aclose()

    asyncio.run(check())


def test_an_append_without_shared_state_is_one_round_trip(
    server_backend: Backend, namespace: str
) -> None:
    from tests.roundtrips import server_reads

    async def run() -> tuple[int, int]:
        store = AsyncStore(server_backend.async_client(), namespace=namespace)
        service = RedistateSessionService(store, ttl=600)
        session = await service.create_session(app_name=APP, user_id="u", session_id="s")
        raw = server_backend.raw()
        counts = []
        for delta in ({"k": 1, "temp:t": 2}, {"k": 2, "user:u": 1}):
            event = Event(author="user", actions=EventActions(state_delta=delta))
            before = server_reads(raw)
            await service.append_event(session, event)
            counts.append(server_reads(raw) - before - 1)
        raw.close()
        await store.aclose()
        return counts[0], counts[1]

    plain, shared = asyncio.run(run())
    assert plain == 1  # the event, its session delta and the index: one pipeline
    assert shared == 2  # then the user: delta, once the event landed


def test_a_session_expires_with_its_ttl_and_leaves_its_users_listing(
    server_backend: Backend, namespace: str
) -> None:
    async def run() -> None:
        store = AsyncStore(server_backend.async_client(), namespace=namespace)
        service = RedistateSessionService(store, ttl=60)
        await service.create_session(
            app_name=APP, user_id="u", session_id="gone", state={"user:keep": 1}
        )
        await service.create_session(app_name=APP, user_id="u", session_id="stays")
        keys = store.keys
        hash_key = keys.adk_session(f"{APP}/u/gone")
        ttl = await store._conn.idempotent("PTTL", hash_key)
        assert 0 < ttl <= 60_000  # set by the create itself
        index_ttl = await store._conn.idempotent("PTTL", keys.adk_user(f"{APP}/u", "sessions"))
        assert index_ttl >= ttl - 1_000  # the index outlives what it lists
        # Expired as the server expires it (DEBUG SLEEP-free): PEXPIREAT in the past.
        await store._conn.idempotent("PEXPIREAT", hash_key, 1)
        assert await store._conn.idempotent("EXISTS", hash_key) == 0
        listed = await service.list_sessions(app_name=APP, user_id="u")
        assert [s.id for s in listed.sessions] == ["stays"]
        index = await store._conn.idempotent("ZRANGE", keys.adk_user(f"{APP}/u", "sessions"), 0, -1)
        assert index == [b"stays"]  # the expired one was taken off
        assert await service.get_user_state(app_name=APP, user_id="u") == {"keep": 1}
        await store.aclose()

    asyncio.run(run())


def test_erasing_a_user_deletes_their_sessions_and_user_state_in_every_app(
    make: Make,
) -> None:
    async def run() -> None:
        service = await make()
        plain = RedistateSessionService(service.store)  # register_users=False: the default
        registered = RedistateSessionService(service.store, register_users=True)
        for app in ("a1", "a2"):
            for user in ("u1", "u2"):
                await registered.create_session(
                    app_name=app, user_id=user, session_id="s", state={"user:n": 1, "app:v": 2}
                )
        await plain.create_session(
            app_name="a3", user_id="u1", session_id="unregistered", state={"user:n": 3}
        )
        with pytest.raises(InvalidId, match="user_id"):
            await registered.create_session(app_name="a1", user_id="u" * 5000)
        report = await _erase(service.store, "u1")
        assert report.deleted == {
            "adk": ["a1/u1/s", "a2/u1/s"],
            "adk-user": ["a1/u1", "a2/u1"],
        }
        for app in ("a1", "a2"):
            assert await service.get_session(app_name=app, user_id="u1", session_id="s") is None
            assert await service.get_user_state(app_name=app, user_id="u1") == {}
            other = await service.get_session(app_name=app, user_id="u2", session_id="s")
            assert other is not None and other.state == {"user:n": 1, "app:v": 2}
        # The app's state is every user's; what was not registered is left.
        listed = await service.list_sessions(app_name="a1")
        assert [(s.user_id, s.state) for s in listed.sessions] == [
            ("u2", {"user:n": 1, "app:v": 2})
        ]
        listed = await service.list_sessions(app_name="a3", user_id="u1")
        assert [(s.id, s.state) for s in listed.sessions] == [("unregistered", {"user:n": 3})]
        await _close(service)

    asyncio.run(run())


async def _erase(store: Store | AsyncStore, user: str) -> Any:
    if isinstance(store, AsyncStore):
        return await store.users.erase(user)
    return await asyncio.to_thread(store.users.erase, user)
