"""``redistate export`` / ``import`` of every kind of stored data (format 2): step
records, audit event streams with their anchors, user indexes, Agents SDK sessions,
LangGraph threads and ADK sessions, users and apps round-trip; an import never deletes
what the file does not replace; crafted lines of each kind are refused, naming the
line, with nothing written; a version-1 file still imports."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from redistate import Store
from redistate.adapters.langgraph.backup import GRAPH_ZSETS
from redistate.adk import RedistateSessionService
from redistate.admin.backup_format import BadFile, Limits, parse_entity
from redistate.agents import RedistateSession
from redistate.core import kinds
from redistate.core.codec import JsonCodec
from redistate.core.keys import KeySpace
from redistate.langgraph import RedisStateSaver
from tests.backup_edits import edit_line
from tests.conftest import Backend
from tests.test_cli_backup import (
    Cli,
    _dump,
    _rewrite,
    assert_import_refused,
    delete_namespace,
)

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

HOUR_US = 3600 * 10**6
EVENTS, TASK, GRAPH = kinds.EVENTS.name, kinds.TASK.name, kinds.GRAPH.name
AGENTS, USER_INDEX = kinds.AGENTS.name, kinds.USER_INDEX.name
ADK, ADK_USER, ADK_APP = kinds.ADK.name, kinds.ADK_USER.name, kinds.ADK_APP.name
ADK_SESSION = "chat/bob/s1"  # the entity id of seed_all's ADK session


def _call(calls: list[str], name: str, result: Any) -> Any:
    """A step's function: notes that it ran, returns ``result``."""
    calls.append(name)
    return result


def seed_all(store: Store, calls: list[str]) -> None:
    """One entity of every exported kind: records registered to a user, a task with
    step records (one of them started, never ended), a task of steps only, an event
    stream trimmed (anchor and events), one trimmed to nothing, one untrimmed, an
    Agents SDK session, a LangGraph thread with writes, an ADK session (with a TTL,
    an event, session, user: and app: state)."""
    store.sessions.put("s1", {"a": 1}, ttl=600, user="bob")
    store.checkpoints.save("t1", {"n": 1}, user="bob")
    with store.task("job") as job:
        job.step("charge", lambda: _call(calls, "charge", 42))
        job.save({"charged": True})
        job.step("mail", lambda: _call(calls, "mail", "sent"), idempotent=False)
    with store.task("steps-only") as job:
        job.step("only", lambda: _call(calls, "only", [1, 2]))
    for i in range(4):
        store.events.append("e1", "updated", {"i": i}, user="bob")
    store.events.trim("e1", keep=2)
    store.events.append("e2", "initialized", {"x": 1})
    store.events.trim("e2", keep=0)
    store.events.append("e3", "initialized", {"y": "ü"})
    session = RedistateSession("chat", store=store, ttl=600)
    items: Any = [{"role": "user", "content": "hi"}, {"role": "assistant"}]
    asyncio.run(session.add_items(items))
    saver = RedisStateSaver(store)
    config: RunnableConfig = {"configurable": {"thread_id": "th1", "checkpoint_ns": ""}}
    saved = saver.put(config, empty_checkpoint(), {"run_id": "r1"}, {})
    saver.put_writes(saved, [("channel", {"v": 1}), ("other", "x")], "task-1")
    asyncio.run(adk_seed(store))


async def adk_seed(store: Store) -> None:
    service = RedistateSessionService(store, ttl=600)
    state = {"turn": 1, "user:name": "Bob", "app:model": "m1"}
    session = await service.create_session(
        app_name="chat", user_id="bob", session_id="s1", state=state
    )
    delta = EventActions(state_delta={"turn": 2, "user:visits": 1})
    await service.append_event(session, Event(author="user", actions=delta))


async def adk_more(store: Store) -> None:
    """After the export: one more event, user: state, another session of the user."""
    service = RedistateSessionService(store, ttl=600)
    session = await service.get_session(app_name="chat", user_id="bob", session_id="s1")
    assert session is not None
    delta = EventActions(state_delta={"user:visits": 2})
    await service.append_event(session, Event(author="user", actions=delta))
    await service.create_session(app_name="chat", user_id="bob", session_id="s2")
    await service.create_session(app_name="chat", user_id="eve", session_id="s1")


async def adk_read(store: Store) -> Any:
    """The seeded ADK session and its user's listing, as the service reads them."""
    service = RedistateSessionService(store)
    got = await service.get_session(app_name="chat", user_id="bob", session_id="s1")
    listed = await service.list_sessions(app_name="chat")
    return (
        None if got is None else got.model_dump(mode="json"),
        [s.id for s in listed.sessions],
    )


def contents(backend: Backend, namespace: str) -> dict[str, tuple[str, Any, bool | None]]:
    """Every exported key of ``namespace`` (relative): its type, its whole content and
    whether it expires (None for a fence: an imported one expires after the clock)."""
    raw = backend.raw()
    keys = KeySpace(namespace)
    found: dict[str, tuple[str, Any, bool | None]] = {}
    try:
        for key in raw.scan_iter(match=f"{namespace}:*", count=1000):
            kind, _, part = keys.parse(key)
            memory = part == kinds.WRITES and kind != kinds.GRAPH_KEY
            if kind == kinds.LOCK_KEY or memory:
                continue
            type_ = raw.type(key).decode()
            value: Any
            if type_ == "string":
                value = raw.get(key)
            elif type_ == "list":
                value = raw.lrange(key, 0, -1)
            elif type_ == "hash":
                value = raw.hgetall(key)
            elif type_ == "set":
                value = sorted(raw.smembers(key))
            elif type_ == "zset":
                value = raw.zrange(key, 0, -1, withscores=True)
            else:
                value = raw.xrange(key)
            expires = None if kind == kinds.FENCE_KEY else raw.pttl(key) != -1
            found[key.decode()[len(namespace) :]] = (type_, value, expires)
    finally:
        raw.close()
    return found


def _export(store: Store, path: Path) -> Path:
    with open(path, "wb") as sink:
        store.admin.export(sink)
    return path


def test_every_kind_round_trips_and_a_reimport_changes_nothing(
    backend: Backend, namespace: str, tmp_path: Path
) -> None:
    cli = Cli(backend, namespace)
    calls: list[str] = []
    with cli.store() as store:
        seed_all(store, calls)
        folded = store.events.fold("e1")
        adk_before = asyncio.run(adk_read(store))
    before = contents(backend, namespace)
    assert ":task:{job}:steps" in before and ":events:{e2}:anchor" in before
    assert ":user:{bob}:owns" in before and ":graph:{th1}:widx" in before
    path = tmp_path / "backup.jsonl"

    exported = cli.export(path)

    assert exported["tasks"] == 3 and exported["steps"] == 3, exported
    assert exported["events"] == 3 and exported["user_indexes"] == 1, exported
    assert exported["agents"] == 1 and exported["graphs"] == 1, exported
    assert exported["adks"] == exported["adk_users"] == exported["adk_apps"] == 1, exported
    assert exported["unknown"] == 0, exported
    # Re-importing the unchanged export: exit 0, nothing changes, no step record lost.
    code, report, _ = cli.import_(path)
    assert code == 0 and report["refused"] == 0 and report["steps"] == 0, report
    assert contents(backend, namespace) == before

    delete_namespace(backend, namespace)
    code, report, _ = cli.import_(path)

    assert code == 0 and report["refused"] == 0 and report["failed"] == 0, report
    assert report["steps"] == 3 and report["events"] == 3 and report["graphs"] == 1, report
    assert contents(backend, namespace) == before
    with cli.store() as store:
        for entity in ("e1", "e2", "e3"):
            assert store.events.verify(entity).ok, entity
        assert store.events.fold("e1") == folded
        # Appends continue the imported chains (after the anchor of one trimmed to nothing).
        store.events.append("e2", "updated", {"z": 1})
        store.events.append("e1", "updated", {"i": 9})
        assert store.events.verify("e2").ok and store.events.verify("e1").ok
        assert store.events.fold("e2") == {"x": 1, "z": 1}
        items = asyncio.run(RedistateSession("chat", store=store).get_items())
        assert items == [{"role": "user", "content": "hi"}, {"role": "assistant"}]
        config: RunnableConfig = {"configurable": {"thread_id": "th1", "checkpoint_ns": ""}}
        restored = RedisStateSaver(store).get_tuple(config)
        assert restored is not None and len(restored.pending_writes or []) == 2
        assert asyncio.run(adk_read(store)) == adk_before
        assert adk_before[0]["state"] == {
            "turn": 2,
            "user:name": "Bob",
            "user:visits": 1,
            "app:model": "m1",
        }
        assert sorted(store.users.erase("bob").deleted) == ["events", "session", TASK]


def test_a_resumed_task_repeats_no_recorded_step_after_export_and_import(
    backend: Backend, namespace: str, tmp_path: Path
) -> None:
    cli = Cli(backend, namespace)
    other = namespace + "-resumed"
    calls: list[str] = []
    with cli.store() as store:
        with store.task("job") as job:
            assert job.step("charge", lambda: _call(calls, "charge", 42)) == 42
            assert job.step("mail", lambda: _call(calls, "mail", "sent")) == "sent"
            # ...and the process dies here: nothing saved, only steps recorded.
        path = _export(store, tmp_path / "backup.jsonl")
    try:
        code, report, _ = cli.import_(path, namespace=other)
        assert code == 0 and report["steps"] == 2, report
        with cli.store(other) as store, store.task("job") as job:
            assert job.step("charge", lambda: _call(calls, "charge", 0)) == 42
            assert job.step("mail", lambda: _call(calls, "mail", "")) == "sent"
            assert job.step("ship", lambda: _call(calls, "ship", "shipped")) == "shipped"
        assert calls == ["charge", "mail", "ship"]  # each step ran once, across stores
    finally:
        delete_namespace(backend, other)


def test_an_import_never_deletes_a_step_record(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    """Steps recorded after the export are kept by an import of the older file, also
    when the file's task is refused as older, and with --force; --force overwrites only
    the step records the file holds."""
    cli = Cli(server_backend, namespace)
    with cli.store() as store:
        with store.task("job") as job:
            job.step("a", lambda: 1)
            job.save({"n": 1})
        path = _export(store, tmp_path / "backup.jsonl")
        with store.task("job") as job:
            job.step("b", lambda: 2)
            job.save({"n": 2})  # newer: the file's task is refused
        steps_key = store.keys.task_steps("job")
        recorded = store.client.hgetall(steps_key)
    assert sorted(recorded) == [b"a", b"b"]

    code, report, _ = cli.import_(path)
    assert code == 1 and report["refused_ids"] == ["task job"], report
    with cli.store() as store:
        assert store.client.hgetall(steps_key) == recorded

    code, report, _ = cli.import_(path, force=True)
    assert code == 0 and report["tasks"] == 1, report
    with cli.store() as store:
        assert store.client.hgetall(steps_key) == recorded  # "a" is the same record
        assert store.checkpoints.restore("job").state == {"n": 1}  # type: ignore[union-attr]


def test_different_streams_sessions_and_threads_are_refused_unless_forced(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    cli = Cli(server_backend, namespace)
    with cli.store() as store:
        seed_all(store, [])
        path = _export(store, tmp_path / "backup.jsonl")
        exported = contents(server_backend, namespace)
        store.events.append("e3", "updated", {"later": 1})
        more: Any = [{"role": "user"}]
        asyncio.run(RedistateSession("chat", store=store).add_items(more))
        config: RunnableConfig = {"configurable": {"thread_id": "th1", "checkpoint_ns": ""}}
        RedisStateSaver(store).put(config, empty_checkpoint(), {"run_id": "r2"}, {})
        store.checkpoints.save("t2", {"m": 1}, user="bob")  # one more index entry
        asyncio.run(adk_more(store))
    changed = contents(server_backend, namespace)

    code, report, _ = cli.import_(path)

    assert code == 1, report
    assert sorted(report["refused_ids"]) == [
        f"adk {ADK_SESSION}",
        "adk-user chat/bob",
        "agents chat",
        "events e3",
        "graph th1",
    ]
    # The ADK indexes are merged, not refused: the file's entries are there (a session
    # at its later time).
    assert exported[":adk-app:{chat}:users"][1] == [b"bob"]
    assert changed[":adk-app:{chat}:users"][1] == [b"bob", b"eve"]
    assert [m for m, _ in changed[":adk-user:{chat/bob}:sessions"][1]] == [b"s1", b"s2"]
    after = contents(server_backend, namespace)
    for key in (
        ":events:{e3}",
        ":agents:{chat}",
        ":graph:{th1}:idx",
        ":user:{bob}:owns",
        f":adk:{{{ADK_SESSION}}}",
        f":adk:{{{ADK_SESSION}}}:events",
        ":adk-user:{chat/bob}",
        ":adk-user:{chat/bob}:sessions",
        ":adk-app:{chat}:users",
    ):
        assert after[key] == changed[key], key  # the indexes: a union, the file's are there
    assert (b"task:t2") in after[":user:{bob}:owns"][1]

    code, report, _ = cli.import_(path, force=True)

    assert code == 0 and report["refused"] == 0, report
    after = contents(server_backend, namespace)
    for key in (
        ":events:{e3}",
        ":agents:{chat}",
        ":graph:{th1}:idx",
        ":graph:{th1}:cp",
        f":adk:{{{ADK_SESSION}}}",
        f":adk:{{{ADK_SESSION}}}:events",
        ":adk-user:{chat/bob}",
    ):
        assert after[key] == exported[key], key
    for key in (":user:{bob}:owns", ":adk-user:{chat/bob}:sessions", ":adk-app:{chat}:users"):
        assert after[key] == changed[key], key  # indexes are never shrunk


def test_a_version_1_file_still_imports_and_keeps_step_records(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    cli = Cli(server_backend, namespace)
    with cli.store() as store:
        store.users.put("u1", {"a": 1})
        with store.task("job") as job:
            job.step("a", lambda: 1)
            job.save({"n": 1})
        store.lock("L", ttl=30, renew=False).acquire().release()
        path = _export(store, tmp_path / "backup.jsonl")
        steps_key = store.keys.task_steps("job")
        recorded = store.client.hgetall(steps_key)

    def version_1(lines: list[Any]) -> list[Any]:
        kept = [{k: v for k, v in line.items() if k != "steps"} for line in lines[1:-1]]
        kept = [line for line in kept if line["kind"] in ("record", TASK, kinds.FENCE.name)]
        return [{**lines[0], "version": 1}, *kept, {"kind": "end", "entities": len(kept)}]

    old = _rewrite(path, version_1)
    assert b'"steps"' not in old.read_bytes()
    code, report, _ = cli.import_(old)  # the task of a v1 file has no step records
    assert code == 0 and report["imported"] == 2 and report["fences_kept"] == 2, report
    with cli.store() as store:
        assert store.client.hgetall(steps_key) == recorded  # not deleted any more
    delete_namespace(server_backend, namespace)
    code, report, _ = cli.import_(old)
    assert code == 0 and report["imported"] == 4, report
    with cli.store() as store:
        assert store.users.get("u1").data == {"a": 1}  # type: ignore[union-attr]
        assert store.checkpoints.restore("job").state == {"n": 1}  # type: ignore[union-attr]


# -- crafted or damaged lines of each kind ------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _un(text: str) -> bytes:
    return base64.b64decode(text)


def _step(change: Any) -> Any:
    """An edit of task job's step "charge": ``change(record, now_us)``."""

    def edit(line: dict[str, Any], now_us: int) -> dict[str, Any]:
        steps = dict(line["steps"])
        steps["charge"] = _b64(change(_un(steps["charge"]), now_us))
        return {**line, "steps": steps}

    return edit_line(TASK, "job", edit)


def _started_late(record: bytes, now_us: int) -> bytes:
    """The step started 2 h past the server's clock (unsigned: the digest covers only
    the payload, so only the limit can refuse it)."""
    parts = record.split(b",", 6)
    parts[4] = b"%013d" % (now_us // 1000 + 2 * HOUR_US // 1000)
    return b",".join(parts)


def _events(change: Any, entity: str = "e1") -> Any:
    return edit_line(EVENTS, entity, lambda line, now: change(line, now))


def _event_field(n: int, name: str, value: bytes) -> Any:
    def change(line: dict[str, Any], now: int) -> dict[str, Any]:
        events = [list(e) for e in line["events"]]
        events[n] = [events[n][0], {**events[n][1], name: _b64(value)}]
        return {**line, "events": events}

    return _events(change)


def _late_id(line: dict[str, Any], now: int) -> dict[str, Any]:
    events = [list(e) for e in line["events"]]
    events[-1][0] = f"{now // 1000 + 2 * HOUR_US // 1000}-0"
    return {**line, "events": events}


def _graph(change: Any) -> Any:
    return edit_line(GRAPH, "th1", lambda line, now: {**line, "parts": change(dict(line["parts"]))})


def _adk(kind: str, entity: str, change: Any) -> Any:
    return edit_line(kind, entity, lambda line, now: change(line))


def _adk_state(line: dict[str, Any], name: bytes, value: bytes | None) -> dict[str, str]:
    """The line's state with field ``name`` set to ``value`` (None: removed)."""
    state = {_un(f): v for f, v in line["state"].items()}
    if value is None:
        del state[name]
    else:
        state[name] = _b64(value)
    return {_b64(f): v for f, v in state.items()}


def _state(payload: bytes) -> Any:
    """An anchor whose state is ``payload`` with a matching state digest (unsigned)."""

    def change(line: dict[str, Any], now: int) -> dict[str, Any]:
        from redistate.events.spec import state_digest

        anchor = dict(line["anchor"])
        digest = _un(anchor["digest"]).decode()
        anchor["state"] = _b64(payload)
        anchor["state_digest"] = _b64(state_digest(digest, payload).encode())
        return {**line, "anchor": anchor}

    return _events(change)


# case -> (edit(lines, server µs), the label the message starts with, what it says)
CRAFTED: dict[str, tuple[Any, str, str]] = {
    "step record edited": (
        _step(lambda r, now: r[:-1] + b"9"),
        "task job",
        "does not decode with the store's step spec",
    ),
    "step started 2 h ahead": (_step(_started_late), "task job", "started (ms)"),
    "step payload not JSON": (
        _step(
            lambda r, now: (
                r[: r.rindex(b",") + 1] + hashlib.sha256(b"\xff").hexdigest().encode() + b"\n\xff"
            )
        ),
        "task job",
        "does not decode",
    ),
    "steps not an object": (
        edit_line(TASK, "job", lambda line, now: {**line, "steps": ["charge"]}),
        "",
        "field 'steps' must be an object",
    ),
    "step name empty": (
        edit_line(TASK, "job", lambda line, now: {**line, "steps": {"": line["steps"]["charge"]}}),
        "",
        "id must not be empty",
    ),
    "event payload edited": (_event_field(0, "p", b'{"i": 7}'), "events e1", "do not verify"),
    "event removed": (
        _events(lambda line, now: {**line, "events": line["events"][1:]}),
        "events e1",
        "do not verify",
    ),
    "event ids not ascending": (
        _events(lambda line, now: {**line, "events": line["events"][::-1]}),
        "",
        "is not after",
    ),
    "event id 2 h ahead": (_events(_late_id), "events e1", "over the limit"),
    "event id malformed": (
        _events(lambda line, now: {**line, "events": [["x", line["events"][0][1]]]}),
        "",
        "must be a stream id",
    ),
    "event field unknown": (_event_field(0, "extra", b"1"), "", "has unknown fields ['extra']"),
    "anchor state edited": (
        _events(lambda line, now: {**line, "anchor": {**line["anchor"], "state": _b64(b"{}")}}),
        "events e1",
        "anchor: the trim anchor",
    ),
    "anchor state not JSON": (_state(b"\xff"), "events e1", "anchor: "),
    "anchor missing a field": (
        _events(lambda line, now: {**line, "anchor": {"id": line["anchor"]["id"]}}),
        "",
        "lacks ['digest', 'seq', 'state', 'state_digest']",
    ),
    "events and anchor empty": (
        _events(lambda line, now: {**line, "events": [], "anchor": None}),
        "",
        "needs events or an anchor",
    ),
    "user index entry malformed": (
        edit_line(USER_INDEX, "bob", lambda line, now: {**line, "owns": ["no-kind"]}),
        "",
        "owns[0] 'no-kind' is not an index entry",
    ),
    "user index entry id too long": (
        edit_line(USER_INDEX, "bob", lambda line, now: {**line, "owns": ["task:" + "x" * 513]}),
        "",
        "is not an index entry",
    ),
    "agents item not JSON": (
        edit_line(AGENTS, "chat", lambda line, now: {**line, "items": [_b64(b"\xff")]}),
        "agents chat",
        "items[0] does not decode with the store's codec",
    ),
    "agents no items": (
        edit_line(AGENTS, "chat", lambda line, now: {**line, "items": []}),
        "",
        "needs items",
    ),
    "graph part missing": (
        _graph(lambda parts: {k: v for k, v in parts.items() if k != "runs"}),
        "",
        "parts must name exactly",
    ),
    "graph score not a number": (
        _graph(lambda parts: {**parts, "idx": [[m, "0"] for m, _ in parts["idx"]]}),
        "",
        "parts.idx[0] score must be a finite number",
    ),
    "graph refs count": (
        _graph(lambda parts: {**parts, "refs": {_b64(b"\0channel\x001"): _b64(b"-1")}}),
        "",
        "is not a count",
    ),
    "graph cp field": (
        _graph(lambda parts: {**parts, "cp": {_b64(b"x|y"): _b64(b"1")}}),
        "",
        "is not c|, r|, u|<checkpoint> or delta",
    ),
    "graph value not base64": (
        _graph(lambda parts: {**parts, "blobs": {_b64(b"\0channel\x001"): "***"}}),
        "",
        "not valid base64",
    ),
    "adk event not decodable": (
        _adk(ADK, ADK_SESSION, lambda line: {**line, "events": [_b64(b"1.5:1:\xff")]}),
        f"adk {ADK_SESSION}",
        "events[0] does not decode with the store's codec",
    ),
    "adk event without a schema": (
        _adk(ADK, ADK_SESSION, lambda line: {**line, "events": [_b64(b"1.5:{}")]}),
        "",
        "events[0] is not '<timestamp>:<schema>:<event>'",
    ),
    "adk event without a time": (
        _adk(ADK, ADK_SESSION, lambda line: {**line, "events": [_b64(b"{}")]}),
        "",
        "events[0] is not '<timestamp>:<schema>:<event>'",
    ),
    "adk state value not decodable": (
        _adk(
            ADK, ADK_SESSION, lambda line: {**line, "state": _adk_state(line, b"s:turn", b"\xff")}
        ),
        f"adk {ADK_SESSION}",
        "state 'turn' does not decode",
    ),
    "adk state field foreign": (
        _adk(ADK, ADK_SESSION, lambda line: {**line, "state": _adk_state(line, b"x", b"1")}),
        "",
        "state field b'x' is not m:last, s:<key> or e:<id>",
    ),
    "adk event mark not 1": (
        _adk(ADK, ADK_SESSION, lambda line: {**line, "state": _adk_state(line, b"e:x", b"2")}),
        "",
        "state field b'e:x' (an event id's mark) is not 1",
    ),
    "adk no last update": (
        _adk(ADK, ADK_SESSION, lambda line: {**line, "state": _adk_state(line, b"m:last", None)}),
        "",
        "state has no m:last",
    ),
    "adk ttl not the later one": (
        _adk(ADK, ADK_SESSION, lambda line: {**line, "ttl_ms": 5}),
        "",
        "ttl_ms must be the later of state_ttl_ms and events_ttl_ms",
    ),
    "adk user session time not a number": (
        _adk(ADK_USER, "chat/bob", lambda line: {**line, "sessions": [[_b64(b"s1"), "soon"]]}),
        "",
        "sessions[0] time",
    ),
    "adk app users twice": (
        _adk(ADK_APP, "chat", lambda line: {**line, "users": line["users"] * 2}),
        "",
        "users lists a member twice",
    ),
    "adk app empty": (
        _adk(
            ADK_APP, "chat", lambda line: {**line, "users": [], "state": {}, "state_ttl_ms": None}
        ),
        "",
        "needs content",
    ),
    "graph all empty": (
        _graph(lambda parts: {k: ([] if isinstance(v, list) else {}) for k, v in parts.items()}),
        "",
        "every part is empty",
    ),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_line_of_each_kind_is_named_and_nothing_is_imported(
    server_backend: Backend, namespace: str, tmp_path: Path, case: str
) -> None:
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        seed_all(store, [])
        path = _export(store, tmp_path / "backup.jsonl")
    delete_namespace(server_backend, namespace)
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        store.users.put("live", {"a": 1})  # live data, left as it is
    edit, label, message = CRAFTED[case]
    assert_import_refused(server_backend, namespace, path, edit, label, message)


def test_a_signed_event_chain_needs_the_stores_signing_keys(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    import os

    from redistate.core.signing import SigningKeys

    signing = SigningKeys({"s1": os.urandom(32)}, primary="s1")
    with Store(server_backend.sync_client(), namespace=namespace, signing=signing) as store:
        store.events.append("e", "initialized", {"a": 1})
        with store.task("job") as job:
            job.step("a", lambda: 1)
        path = _export(store, tmp_path / "backup.jsonl")
    delete_namespace(server_backend, namespace)
    other = SigningKeys({"s1": os.urandom(32)}, primary="s1")
    with (
        Store(server_backend.sync_client(), namespace=namespace, signing=other) as store,
        pytest.raises(BadFile, match=r"does not authenticate|do not verify"),
    ):
        store.admin.import_file(path)
    assert _dump(server_backend, namespace) == {}
    with Store(server_backend.sync_client(), namespace=namespace, signing=signing) as store:
        report = store.admin.import_file(path)
        assert report.refused_count == 0 and report.steps == 1
        assert store.events.verify("e").ok


# -- the pure checks ---------------------------------------------------------------------


def _limits(now_us: int = 1_800_000_000 * 10**6) -> Limits:
    return Limits(KeySpace("app"), JsonCodec(), now_us)


def test_pure_checks_name_the_field_and_the_limit() -> None:
    line: dict[str, Any] = {"kind": EVENTS, "id": "e", "ttl_ms": None, "anchor": None}
    line["events"] = []
    with pytest.raises(ValueError, match="needs events or an anchor"):
        parse_entity(line)
    with pytest.raises(ValueError, match="must be a stream id"):
        parse_entity({**line, "events": [["0-0", {}]]})
    with pytest.raises(ValueError, match="ttl_ms must be null or an int"):
        parse_entity({"kind": AGENTS, "id": "s", "ttl_ms": -1, "items": [_b64(b"1")]})
    with pytest.raises(ValueError, match="owns lists an entry twice"):
        parse_entity({"kind": USER_INDEX, "id": "u", "owns": ["task:a", "task:a"]})
    parts: dict[str, Any] = {p: [] if p in GRAPH_ZSETS else {} for p in kinds.GRAPH_PARTS}
    graph: dict[str, Any] = {"kind": GRAPH, "id": "t", "ttl_ms": None, "parts": parts}
    graph["parts"]["idx"] = [[_b64(b"ns-without-separator"), 0]]
    with pytest.raises(ValueError, match=r"parts.idx member .* is not"):
        parse_entity(graph)
    graph["parts"]["idx"] = [[_b64(b"\0id"), float("nan")]]
    with pytest.raises(ValueError, match="score must be a finite number"):
        parse_entity(graph)
    # A step record whose fence is past the clock: the limit names field and bound.
    spec_key = KeySpace("app").task_steps("t")
    from redistate.steps.spec import StepSpec

    now_us = 1_800_000_000 * 10**6
    record = StepSpec(JsonCodec(), max_bytes=1000).done(
        spec_key, "s", True, now_us + 2 * HOUR_US, now_us // 1000, now_us // 1000, 1
    )
    task = parse_entity(
        {"kind": TASK, "id": "t", "seq": 0, "ttl_ms": None, "checkpoints": [], "ids": [],
         "log": [], "steps": {"s": _b64(record)}}
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"task t: steps\['s'\] fence \d+ is over the limit \d+"):
        _limits(now_us).check(task)
    _limits(now_us + 2 * HOUR_US).check(task)  # within the allowance of a later clock


def test_lines_of_a_file_are_json_serialisable_as_written(tmp_path: Path) -> None:
    """An export of an embedded store holds one line per kind, each parsed back."""
    with Store.embedded(namespace="app") as store:
        seed_all(store, [])
        path = _export(store, tmp_path / "backup.jsonl")
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    found = {line["kind"] for line in lines[1:-1]}
    assert found == {
        "record", TASK, kinds.FENCE.name, EVENTS, USER_INDEX, AGENTS, GRAPH, ADK, ADK_USER, ADK_APP
    }  # fmt: skip
    for line in lines[1:-1]:
        parse_entity(line)
