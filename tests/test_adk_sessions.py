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
from tests.erasure_frameworks import erase

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

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
    # The last event sent to the session again: an equal copy (a redelivery, not stored
    # twice) or another event that shares its id (stored).
    st.tuples(st.just("again"), USERS, SIDS, st.one_of(st.none(), DELTAS)),
    st.tuples(st.just("get"), USERS, SIDS, st.one_of(st.none(), st.integers(0, 3)), st.booleans()),
    st.tuples(st.just("list"), st.one_of(st.none(), USERS)),
    st.tuples(st.just("delete"), USERS, SIDS),
    st.tuples(st.just("user_state"), USERS),
)


async def _call(
    service: Any, op: tuple[Any, ...], clock: list[float], sent: dict[Any, Event]
) -> Any:
    """One op against a service: its result, or the name of the error it raised
    (``sent``: the last event appended to each session)."""
    kind = op[0]
    try:
        if kind == "again":
            last = sent.get((op[1], op[2]))
            session = await service.get_session(app_name=APP, user_id=op[1], session_id=op[2])
            if last is None or session is None:
                return None
            event = last.model_copy(deep=True)
            if op[3] is not None:
                event.actions = EventActions(state_delta=dict(op[3]))
            returned = await service.append_event(session, event)
            return (returned.model_dump(mode="json", exclude_none=True), _shape(session))
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
            sent[(op[1], op[2])] = event.model_copy(deep=True)
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
        ours_sent: dict[Any, Event] = {}
        oracle_sent: dict[Any, Event] = {}
        for op in ops:
            got = await _call(service, op, ours_clock, ours_sent)
            want = await _call(oracle, copy.deepcopy(op), oracle_clock, oracle_sent)
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


def test_an_event_delivered_again_is_stored_once_and_its_delta_applied_once(
    make: Make,
) -> None:
    """The same event object, then an equal copy, appended again (a caller retrying):
    stored once, its ``user:`` counter applied once, as ADK's in-memory service does;
    another event that only shares the id is stored."""

    async def run() -> tuple[list[str], dict[str, Any], int]:
        service = await make()
        session = await service.create_session(app_name=APP, user_id="u", session_id="s")
        event = Event(
            id="e1", author="user", actions=EventActions(state_delta={"user:n": 1, "k": 1})
        )
        await service.append_event(session, event)
        await service.append_event(session, event)
        await service.append_event(session, event.model_copy(deep=True))
        other = Event(id="e1", author="model", actions=EventActions(state_delta={"k": 2}))
        await service.append_event(session, other)
        got = await service.get_session(app_name=APP, user_id="u", session_id="s")
        assert got is not None
        await service.delete_session(app_name=APP, user_id="u", session_id="s")
        await _clear_state(service)
        await _close(service)
        return [e.author for e in got.events], got.state, len(session.events)

    authors, state, local = asyncio.run(run())
    assert authors == ["user", "model"]
    assert state == {"k": 2, "user:n": 1}
    assert local == 2  # the caller's session object, as ADK's own services leave it


def test_a_create_is_two_round_trips_and_three_with_shared_state(
    server_backend: Backend, namespace: str
) -> None:
    from tests.roundtrips import server_reads

    async def run() -> list[tuple[int, Session]]:
        store = AsyncStore(server_backend.async_client(), namespace=namespace)
        service = RedistateSessionService(store, ttl=600)
        raw = server_backend.raw()
        # The first contact and each script's first load are round trips of their own.
        await service.create_session(app_name=APP, user_id="w", state={"user:w": 1})
        await service.create_session(app_name=APP, user_id="w")
        out = []
        for n, state in enumerate(({"k": 1}, {"k": 2, "user:u": 3, "app:a": 4})):
            before = server_reads(raw)
            made = await service.create_session(
                app_name=APP, user_id="u", session_id=f"s{n}", state=state
            )
            out.append((server_reads(raw) - before - 1, made))
        raw.close()
        read = await service.get_session(app_name=APP, user_id="u", session_id="s0")
        assert read is not None
        out.append((0, read))
        await store.aclose()
        return out

    (plain, first), (shared, second), (_, first_read) = asyncio.run(run())
    assert plain == 2  # the indexes, then the session with the shared state read
    assert shared == 3  # the indexes, the session, then the shared state merged and read
    assert second.state == {"k": 2, "user:u": 3, "app:a": 4}
    # What a create returns is what a get reads back (its state now shared too).
    assert _shape(first)[3] | {"user:u": 3, "app:a": 4} == _shape(first_read)[3]
    assert first.last_update_time == first_read.last_update_time


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
        report = await erase(service.store, "u1")
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


def _shout(event: dict[str, Any]) -> dict[str, Any]:
    """A schema step: version 2 of an event keeps its text upper-cased."""
    for part in event.get("content", {}).get("parts", []):
        part["text"] = part["text"].upper()
    return event


def test_events_at_an_older_schema_are_read_upgraded_and_written_back_by_migrate(
    make: Make,
) -> None:
    from google.genai import types

    from redistate import SchemaError

    def said(text: str) -> Event:
        return Event(
            author="user", content=types.Content(role="user", parts=[types.Part(text=text)])
        )

    def texts(session: Session | None) -> list[str]:
        assert session is not None
        return [p.text or "" for e in session.events for p in (e.content and e.content.parts) or []]

    async def admin_migrate(store: Store | AsyncStore) -> Any:
        if isinstance(store, AsyncStore):
            return await store.admin.migrate()
        return await asyncio.to_thread(store.admin.migrate)

    async def run() -> None:
        service = await make()
        store = service.store
        session = await service.create_session(app_name=APP, user_id="u", session_id="s")
        for text in ("hi", "there"):
            await service.append_event(session, said(text))
        events = store.keys.adk_session(f"{APP}/u/s", "events")
        conn: Any = store._conn
        read = conn.idempotent("LRANGE", events, 0, -1)
        before = await read if isinstance(store, AsyncStore) else read
        assert [e.split(b":")[1] for e in before] == [b"1", b"1"]

        store.migrations.register("adk-events", 1, _shout)
        got = await service.get_session(app_name=APP, user_id="u", session_id="s")
        assert texts(got) == ["HI", "THERE"]  # upgraded as read, not yet written
        await service.append_event(session, said("new"))  # written at schema 2
        report = await admin_migrate(store)
        assert (report.adk_events, report.invalid, report.newer) == (2, 0, 0)
        read = conn.idempotent("LRANGE", events, 0, -1)
        after = await read if isinstance(store, AsyncStore) else read
        assert [e.split(b":")[1] for e in after] == [b"2", b"2", b"2"]
        # The step is not run twice: what migrate wrote is read as it is.
        got = await service.get_session(app_name=APP, user_id="u", session_id="s")
        assert texts(got) == ["HI", "THERE", "new"]
        assert (await admin_migrate(store)).adk_events == 0

        # Code that knows only schema 1 refuses schema 2 instead of reading it wrong.
        client: Any = store._conn.client
        old = RedistateSessionService(type(store)(client, namespace=store.keys.namespace))
        with pytest.raises(SchemaError, match="newer than this code knows"):
            await old.get_session(app_name=APP, user_id="u", session_id="s")
        await _close(service)

    asyncio.run(run())


def test_a_step_that_makes_an_event_adk_refuses_leaves_it_as_it_was(make: Make) -> None:
    async def run() -> None:
        service = await make()
        store = service.store
        session = await service.create_session(app_name=APP, user_id="u", session_id="s")
        await service.append_event(session, Event(author="user"))
        store.migrations.register("adk-events", 1, lambda e: {**e, "timestamp": "noon"})
        report = await (
            store.admin.migrate()
            if isinstance(store, AsyncStore)
            else asyncio.to_thread(store.admin.migrate)
        )
        assert (report.adk_events, report.invalid) == (0, 1)
        assert "timestamp" in report.invalid_examples[0]
        assert f"{APP}/u/s" in report.invalid_examples[0]
        events = store.keys.adk_session(f"{APP}/u/s", "events")
        conn: Any = store._conn
        read = conn.idempotent("LRANGE", events, 0, -1)
        stored = await read if isinstance(store, AsyncStore) else read
        assert [e.split(b":")[1] for e in stored] == [b"1"]  # left as it was
        await _close(service)

    asyncio.run(run())


_GATES: dict[str, tuple[asyncio.Event, asyncio.Event]] = {}  # model -> (called, go on)


def _runner(name: str, service: Any) -> Any:
    """An ADK Runner whose agent answers through a model that waits, once called, until
    the test lets it go on: its reply is then appended from a session object read
    before the other runner's turn. The answer lands in state by ``output_key``."""
    from collections.abc import AsyncGenerator

    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import Runner
    from google.genai import types

    class Gated(BaseLlm):
        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            gate = _GATES.get(self.model)
            if gate is not None:
                gate[0].set()
                await gate[1].wait()
            heard = [
                p.text for c in llm_request.contents for p in c.parts or [] if c.role == "user"
            ]
            text = f"{self.model} heard {' + '.join(t or '' for t in heard)}"
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))

    agent = LlmAgent(name="helper", model=Gated(model=name), output_key=f"user:{name}")
    return Runner(app_name=APP, agent=agent, session_service=service)


async def _two_runners(service: Any) -> None:
    """Runner a reads the session and is held in its model call while runner b runs a
    whole turn on the same session; then a's reply is appended."""
    from google.genai import types

    def said(text: str) -> types.Content:
        return types.Content(role="user", parts=[types.Part(text=text)])

    async def turn(runner: Any, text: str) -> None:
        async for _ in runner.run_async(user_id="u", session_id="s", new_message=said(text)):
            pass

    await service.create_session(app_name=APP, user_id="u", session_id="s")
    called, go_on = asyncio.Event(), asyncio.Event()
    _GATES["a"] = (called, go_on)
    try:
        first = asyncio.create_task(turn(_runner("a", service), "hello from a"))
        await called.wait()  # a holds its session object and is in its model call
        await turn(_runner("b", service), "hello from b")
        go_on.set()
        await first
    finally:
        del _GATES["a"]


def test_two_runners_on_one_session_raise_no_stale_session_error_and_lose_nothing(
    make: Make, tmp_path: Any
) -> None:
    """What ADK's stale-session check becomes: ADK's SQL service refuses runner a's
    reply (its session object is older than what b stored); redistate appends it, and
    keeps b's turn and both answers. Runner a's own object saw only its own turn."""
    from google.adk.errors._stale_session_error import StaleSessionError
    from google.adk.sessions import DatabaseSessionService

    async def oracle() -> None:
        sql = DatabaseSessionService(f"sqlite+aiosqlite:///{tmp_path / 'adk.db'}")
        try:
            with pytest.raises(StaleSessionError):
                await _two_runners(sql)
        finally:
            await sql.close()

    async def run() -> None:
        service = await make()
        await _two_runners(service)
        got = await service.get_session(app_name=APP, user_id="u", session_id="s")
        assert got is not None
        said = [(e.author, p.text) for e in got.events if e.content for p in e.content.parts or []]
        assert said == [
            ("user", "hello from a"),
            ("user", "hello from b"),
            ("helper", "b heard hello from a + hello from b"),  # b read a's message
            ("helper", "a heard hello from a"),  # a answered from what it had read
        ]
        assert got.state == {
            "user:a": "a heard hello from a",
            "user:b": "b heard hello from a + hello from b",
        }
        await _close(service)

    asyncio.run(oracle())
    asyncio.run(run())
