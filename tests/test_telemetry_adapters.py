"""Telemetry beyond records, checkpoints, events, leases and steps: a span for each
framework adapter's own operations (named by the framework's method and the kind), for
a batch, for each page of ``ids()`` and for ``store.admin``'s maintenance; and a resend
recognised by any script with a write memory, counted where it happened. On real
servers, read with the SDK's in-memory exporter and reader (tests/telemetry.py)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from opentelemetry.semconv.attributes import db_attributes as db
from opentelemetry.semconv.attributes import server_attributes
from opentelemetry.semconv.metrics import db_metrics
from opentelemetry.trace import SpanKind

from redistate import Store
from redistate.adk import RedistateSessionService
from redistate.agents import RedistateSession
from redistate.claude import RedistateSessionStore
from redistate.core import telemetry as hooks
from redistate.core.scripts import script
from redistate.langgraph import RedisStateSaver, RedistateStore
from redistate.pydantic_ai import RedistateConversationStore
from tests.conftest import Backend
from tests.erasure_frameworks import ITEMS, adk_data, pydantic_ai_data, sync_framework_data
from tests.proxy import FaultProxy
from tests.telemetry import Seen


def _attributes(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


# (span name, the script its first round trip runs) of each adapter's operations that
# sync_framework_data makes: every one of them is a span of its own.
ADAPTER_SPANS = {
    "add_items agents": "agents_add",
    "put graph": "graph_put",
    "put_writes graph": "graph_writes",
    "get_tuple graph": "graph_read",
    "put memory": "memory_put",
    "create_session adk": "adk_index",
    "append claude": "claude_index",
    "write_record pydantic-ai": "pai_index",
}


def test_each_adapters_operations_are_spans_with_their_round_trips(
    server_backend: Backend, namespace: str, seen: Seen
) -> None:
    tracer = seen.tracer.get_tracer("app")
    with (
        Store(server_backend.sync_client(), namespace=namespace) as store,
        tracer.start_as_current_span("agent turn") as turn,
    ):
        sync_framework_data(store, "u1")
    names = {s.name for s in seen.finished()}
    assert set(ADAPTER_SPANS) <= names, set(ADAPTER_SPANS) - names
    for name, procedure in ADAPTER_SPANS.items():
        span = seen.finished(name)[0]
        attributes = _attributes(span)
        assert span.kind is SpanKind.CLIENT
        assert attributes[db.DB_SYSTEM_NAME] == "redis"
        assert attributes[hooks.ROUND_TRIPS] >= 1, name
        assert attributes[db.DB_STORED_PROCEDURE_NAME] == procedure, name
        assert attributes[server_attributes.SERVER_PORT] == server_backend.server.port  # type: ignore[union-attr]
        # Under the caller's span, through asyncio.run and worker threads alike.
        assert span.context.trace_id == turn.get_span_context().trace_id, name
    # Each is measured once, as the operation the framework asked for.
    durations = seen.points(db_metrics.DB_CLIENT_OPERATION_DURATION)
    measured = {
        (p.attributes[db.DB_OPERATION_NAME], p.attributes[db.DB_COLLECTION_NAME])
        for p in durations
        if db.DB_COLLECTION_NAME in p.attributes
    }
    assert {tuple(n.split(" ")) for n in ADAPTER_SPANS} <= measured


def test_a_failed_adapter_operation_is_an_error_span(
    server_backend: Backend, namespace: str, seen: Seen
) -> None:
    """pydantic-ai's own conflict is counted as a conflict, like a record's."""
    from pydantic_ai.conversation_store import ConversationConflict

    with Store(server_backend.sync_client(), namespace=namespace) as store:
        asyncio.run(pydantic_ai_data(store, "u1"))
        conversations = RedistateConversationStore(store)
        with pytest.raises(ConversationConflict):
            asyncio.run(conversations.delete_record("u1-p1", expected_revision="stale"))
    (span,) = seen.finished("delete_record pydantic-ai")
    assert _attributes(span)[hooks.CONFLICT] is True
    assert seen.total("redistate.conflicts", **{db.DB_OPERATION_NAME: "delete_record"}) == 1


def test_a_batch_ids_and_admin_operations_are_spans(
    server_backend: Backend, namespace: str, seen: Seen
) -> None:
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        with store.batch() as batch:
            for n in range(3):
                batch.sessions.put(f"s{n}", {"n": n})
            batch.users.merge("u1", {"seen": True})
        assert sorted(store.sessions.ids()) == ["s0", "s1", "s2"]
        store.admin.export(io.BytesIO())
        store.admin.stats()
    (sent,) = seen.finished("batch")
    attributes = _attributes(sent)
    assert attributes["db.operation.batch.size"] == 4
    assert attributes[hooks.ROUND_TRIPS] == 1  # one pipeline to one server
    assert db.DB_COLLECTION_NAME not in attributes  # many kinds: none named
    pages = seen.finished("ids session")
    assert pages and all(_attributes(p)[hooks.ROUND_TRIPS] == 1 for p in pages)
    for name in ("export", "stats"):
        (span,) = seen.finished(name)
        assert _attributes(span)[hooks.ROUND_TRIPS] >= 2, name


def _script_call(name: str) -> Callable[[Any], bool]:
    """Matches a call of script ``name`` (FCALL of its function, or EVALSHA of it)."""
    run = script(name)
    function, sha = run.function.encode(), run.sha.encode()

    def match(words: Any) -> bool:
        verb = words[0].upper()
        return bool(
            (verb == b"FCALL" and words[1] == function)
            or (verb == b"EVALSHA" and words[1].lower() == sha)
        )

    return match


def _release(store: Store) -> Callable[[], object]:
    lease = store.lock("l1", ttl=30, renew=False).acquire()
    return lease.release


def _delete_task(store: Store) -> Callable[[], object]:
    store.checkpoints.save("t1", {"n": 1})
    return lambda: store.checkpoints.delete("t1")


def _log(store: Store) -> Callable[[], object]:
    store.checkpoints.save("t1", {"n": 1})
    return lambda: store.checkpoints.log("t1", {"d": 1})


def _delete_session(store: Store) -> Callable[[], object]:
    store.sessions.put("s1", {"n": 1})
    return lambda: store.sessions.delete("s1")


def _claude(store: Store) -> Callable[[], object]:
    sessions = RedistateSessionStore(store)
    key: Any = {"project_key": "p", "session_id": "c1"}
    asyncio.run(sessions.append(key, [{"type": "user", "uuid": "e0"}]))
    return lambda: asyncio.run(sessions.append(key, [{"type": "user", "uuid": "e1"}]))


def _adk(store: Store) -> Callable[[], object]:
    from google.adk.events.event import Event

    service = RedistateSessionService(store)
    asyncio.run(adk_data(store, "u1"))
    found = asyncio.run(service.get_session(app_name="u1-app", user_id="u1", session_id="s1"))
    event = Event(author="user", invocation_id="i1")
    return lambda: asyncio.run(service.append_event(found, event))  # type: ignore[arg-type]


def _agents(store: Store) -> Callable[[], object]:
    session = RedistateSession("a1", store=store)
    return lambda: asyncio.run(session.add_items(ITEMS))


def _memory(store: Store) -> Callable[[], object]:
    memory = RedistateStore(store)
    memory.put(("users", "u1"), "name", {"n": "u"})  # its first put announces it first
    return lambda: memory.put(("users", "u1"), "likes", {"tea": True})


def _pydantic_ai(store: Store) -> Callable[[], object]:
    return lambda: asyncio.run(pydantic_ai_data(store, "u1"))


def _graph(store: Store) -> Callable[[], object]:
    saver = RedisStateSaver(store)
    config: Any = {"configurable": {"thread_id": "g1", "checkpoint_ns": ""}}
    return lambda: saver.put(config, empty_checkpoint(), {}, {})


# (span, the script whose reply is lost, what to set up and then run): each operation
# is sent again after its reply was lost, and the server recognises it.
RESENDS: dict[str, tuple[str, str, Callable[[Store], Callable[[], object]]]] = {
    "put": ("put session", "record_put", lambda s: lambda: s.sessions.put("s1", {"n": 1})),
    "merge": ("merge user", "record_merge", lambda s: lambda: s.users.merge("u1", {"a": 1})),
    "delete": ("delete session", "record_delete", _delete_session),
    "save": ("save task", "checkpoint_save", lambda s: lambda: s.checkpoints.save("t1", {})),
    "log": ("log task", "checkpoint_log", _log),
    "delete task": ("delete task", "checkpoint_delete", _delete_task),
    "append": ("append events", "event_append", lambda s: lambda: s.events.append("e", "x", {})),
    "release": ("release lease", "lock_release", _release),
    "agents": ("add_items agents", "agents_add", _agents),
    "claude": ("append claude", "claude_append", _claude),
    "adk": ("append_event adk", "adk_append", _adk),
    "memory": ("put memory", "memory_put", _memory),
    "pydantic-ai": ("write_record pydantic-ai", "pai_write", _pydantic_ai),
}


@pytest.mark.parametrize("case", sorted(RESENDS))
def test_a_resend_any_script_recognises_is_counted_on_its_operation(
    server_backend: Backend, namespace: str, seen: Seen, case: str
) -> None:
    """The reply is lost after the server applied the call; the call is sent again,
    marked as a resend, and the script's reply says it recognised it (its header's
    ``resent`` line): the operation's span says so and the counter counts it once."""
    span_name, name, prepare = RESENDS[case]
    assert server_backend.server is not None
    with FaultProxy("127.0.0.1", server_backend.server.port) as proxy:
        url = f"redis://127.0.0.1:{proxy.port}/0"
        with Store.from_url(url, namespace=namespace) as store:
            act = prepare(store)
            before = len(seen.finished(span_name))
            proxy.drop_reply(_script_call(name))
            act()
            assert proxy.dropped == 1
    spans = seen.finished(span_name)[before:]
    assert [_attributes(s).get(hooks.RESENT) for s in spans] == [True], spans
    assert _attributes(spans[0])[hooks.RETRIES] >= 1
    assert seen.total("redistate.resends") == 1


def test_a_first_send_is_never_counted_as_a_resend(
    server_backend: Backend, namespace: str, seen: Seen
) -> None:
    """Every operation of the resend cases, sent once: no resend anywhere."""
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        for _, _, prepare in RESENDS.values():
            prepare(store)()
    assert seen.total("redistate.resends") == 0
    assert not [s for s in seen.finished() if _attributes(s).get(hooks.RESENT)]
