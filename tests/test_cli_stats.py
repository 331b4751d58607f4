"""``redistate stats``: counts, bytes (MEMORY USAGE sampling), largest keys, keys without
a TTL. In subprocesses on every backend a subprocess reaches; on the in-process
fakeredis backend (no MEMORY USAGE) the function the command calls, whose sizes are
then estimated from the payloads."""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import Any

import pytest

from redistate import Store
from redistate.admin.stats import BUILT_IN
from redistate.cli.stats import GAUGES, exposition
from redistate.core.keys import KeySpace
from redistate.langgraph import RedistateStore
from tests.cli import run
from tests.conftest import Backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


def stats(backend: Backend, namespace: str, *options: str) -> dict[str, dict[str, Any]]:
    """kind -> its JSON line, from the CLI (or, embedded, from the function it calls)."""
    if backend.remote:
        done = run("--url", backend.url, "--namespace", namespace, "stats", "--json", *options)
        assert done.returncode == 0, done.stderr
        rows = [json.loads(line) for line in done.stdout.splitlines()]
    else:
        expect = [options[i + 1] for i, o in enumerate(options) if o == "--expect-ttl"]
        samples = [int(options[i + 1]) for i, o in enumerate(options) if o == "--samples"]
        with Store(backend.sync_client(), namespace=namespace) as store:
            found = store.admin.stats(samples[0] if samples else 200, expect_ttl=expect)
            rows = [s.row() for s in found]
    return {row["kind"]: row for row in rows}


def sizes(backend: Backend, namespace: str) -> dict[str, dict[tuple[str, str], int]]:
    """kind -> {(id, part): bytes} of every key: MEMORY USAGE, or on fakeredis the
    payload bytes (what stats estimates with)."""
    raw = backend.raw()
    keys = KeySpace(namespace)
    found: dict[str, dict[tuple[str, str], int]] = {}
    try:
        for key in raw.scan_iter(match=f"{namespace}:*", count=1000):
            try:
                kind, entity, part = keys.parse(key)
            except ValueError:
                kind, entity, part = "(other)", key.decode(), ""
            if backend.remote:
                size = int(raw.memory_usage(key))
            elif raw.type(key) == b"list":
                size = sum(len(x) for x in raw.lrange(key, 0, -1))
            elif raw.type(key) == b"set":
                size = sum(len(x) for x in raw.smembers(key))
            elif raw.type(key) == b"zset":
                size = sum(len(m) + 8 for m in raw.zrange(key, 0, -1))
            elif raw.type(key) == b"hash":
                size = sum(len(k) + len(v) for k, v in raw.hgetall(key).items())
            else:
                size = int(raw.strlen(key))
            found.setdefault(kind, {})[(entity, part)] = size
        for kind in BUILT_IN:
            found.setdefault(kind, {})
    finally:
        raw.close()
    return found


async def _adk(store: Store) -> None:
    """An ADK session with session, user and app state, and one event."""
    from google.adk.events.event import Event
    from google.adk.events.event_actions import EventActions

    from redistate.adk import RedistateSessionService

    service = RedistateSessionService(store, ttl=600)
    state = {"k": 1, "user:tone": "dry", "app:motd": "hi"}
    session = await service.create_session(app_name="chat", user_id="u1", state=state)
    delta = EventActions(state_delta={"k": 2})
    await service.append_event(session, Event(author="user", actions=delta))


async def _claude(store: Store) -> None:
    """A Claude Agent SDK session with a main and a subagent transcript."""
    from redistate.claude import RedistateSessionStore

    sessions = RedistateSessionStore(store, ttl=600)
    key: Any = {"project_key": "p", "session_id": "s"}
    await sessions.append(key, [{"type": "user", "uuid": "a"}])
    sub: Any = {**key, "subpath": "subagents/a"}
    await sessions.append(sub, [{"type": "x"}])


async def _pydantic_ai(store: Store) -> None:
    """A Pydantic AI conversation of two turns in scope u1, and a fork of it."""
    from pydantic_ai.conversation import Conversation

    from redistate.pydantic_ai import RedistateConversationStore
    from tests.workers import pai_turn

    conversations = RedistateConversationStore(store, ttl=600)
    conversation = Conversation(conversation_id="c")
    conversation.messages.extend([*pai_turn(0, 0), *pai_turn(0, 1)])
    await conversations.save(conversation, scope="u1")
    await conversations.fork("c", at=2, new_conversation_id="f")


def seed(backend: Backend, namespace: str) -> None:
    with Store(backend.sync_client(), namespace=namespace) as store:
        for i in range(40):
            store.sessions.put(f"s{i}", {"turn": i, "pad": "x" * (10 * i)}, ttl=600)
        store.sessions.put("forever", {"turn": 0}, ttl=None)
        for i in range(9):
            store.users.put(f"u{i}", {"i": i})
        store.users.put("big", {"pad": "y" * 20_000})
        notes = store.collection("notes")
        for i in range(3):
            notes.put(f"n{i}", [i])
        for step in range(3):
            store.checkpoints.save("t1", {"step": step})
        store.checkpoints.log("t1", {"d": 1})
        store.lock("t1", ttl=60, renew=False).acquire()
        RedistateStore(store).put(("users", "u1"), "profile", {"name": "a"})
        asyncio.run(_adk(store))
        asyncio.run(_claude(store))
        asyncio.run(_pydantic_ai(store))
    raw = backend.raw()
    raw.set(f"{namespace}:stray", b"not redistate's")
    raw.close()


def test_counts_bytes_largest_and_keys_without_ttl(backend: Backend, namespace: str) -> None:
    seed(backend, namespace)
    found = stats(backend, namespace, "--expect-ttl", "users")
    measured = sizes(backend, namespace)

    assert list(found) == [*BUILT_IN, "notes", "(other)"]
    counts = {kind: (row["keys"], row["entities"]) for kind, row in found.items()}
    assert counts == {
        "session": (41, 41),
        "user": (10, 10),
        "task": (5, 1),  # checkpoints, ids, log, id index, write memory: one task
        "events": (0, 0),
        "lock": (1, 1),
        "fence": (1, 1),
        "agents": (0, 0),
        "graph": (0, 0),
        "memory": (2, 1),  # items, write memory: one namespace
        "memory-names": (2, 1),  # the registry and its generations
        "adk": (3, 1),  # state and times, events, write memory: one session
        "adk-user": (3, 1),  # user state, index of sessions, write memory
        "adk-app": (3, 1),  # app state, users, write memory
        "claude": (4, 1),  # counter and summary, transcripts, subpaths, write memory
        "claude-project": (1, 1),  # the project's sessions
        "pydantic-ai": (6, 2),  # record, entries, parents: a conversation and its fork
        "pydantic-ai-list": (2, 2),  # every conversation, and scope u1's
        "notes": (3, 3),
        "(other)": (1, 1),
    }
    for kind, row in found.items():
        # Every key was sampled (fewer than 200 per kind): the bytes are exact.
        assert row["sampled"] == row["keys"], kind
        assert row["bytes"] == sum(measured[kind].values()), kind
        assert row["estimated"] is not backend.remote
        per_entity: dict[str, int] = {}
        for (entity, _), size in measured[kind].items():
            per_entity[entity] = per_entity.get(entity, 0) + size
        top = sorted(per_entity.values(), reverse=True)[:5]
        assert [x["bytes"] for x in row["largest"]] == top, kind
    assert found["user"]["largest"][0]["id"] == "big"
    assert found["user"]["largest"][0]["bytes"] > 20_000
    # A task is one entity: its checkpoint list, ids, log, index and write memory summed.
    assert [(x["id"], x["keys"]) for x in found["task"]["largest"]] == [("t1", 5)]
    # Sessions always should expire; users were asked for; the others are not checked.
    assert (found["session"]["no_ttl"], found["session"]["no_ttl_ids"]) == (1, ["forever"])
    assert found["user"]["no_ttl"] == 10 and len(found["user"]["no_ttl_ids"]) == 5
    assert all(found[k]["no_ttl"] is None for k in ("task", "lock", "fence", "notes"))


def test_a_sample_is_extrapolated_to_every_key(server_backend: Backend, namespace: str) -> None:
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        for i in range(300):
            store.users.put(f"u{i}", {"pad": "z" * (i * 7)})
    every = sizes(server_backend, namespace)["user"].values()

    users = stats(server_backend, namespace, "--samples", "20")["user"]

    assert users["keys"] == 300 and users["sampled"] == 20
    assert 300 * min(every) < users["bytes"] < 300 * max(every)
    assert users["bytes"] != sum(every)  # 20 of 300 sizes: an estimate, not a sum
    assert len(users["largest"]) == 5
    assert users["no_ttl"] is None  # users are not expected to expire


def test_the_tables(server_backend: Backend, namespace: str) -> None:
    seed(server_backend, namespace)
    done = run("--url", server_backend.url, "--namespace", namespace, "stats", "--samples", "10")
    assert done.returncode == 0, done.stderr
    assert f"keys and bytes per kind in {namespace}" in done.stdout
    assert "from 10 sampled" in done.stdout  # sessions: 41 keys, 10 sized
    assert "largest entities" in done.stdout and "big" in done.stdout
    assert "estimated" not in done.stdout


def test_an_empty_embedded_store() -> None:
    env = {**os.environ, "REDISTATE_EMBEDDED": "fakeredis"}
    done = run("stats", "--json", env=env)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["kind"] for r in rows] == list(BUILT_IN)
    kinds = ["session", "user", "task", "events", "lock", "fence", "agents", "graph", "memory",
             "memory-names", "adk", "adk-user", "adk-app", "claude", "claude-project",
             "pydantic-ai", "pydantic-ai-list"]  # fmt: skip
    assert list(BUILT_IN) == kinds
    assert all(r["keys"] == 0 and r["bytes"] == 0 and r["largest"] == [] for r in rows)


@pytest.mark.parametrize(
    "args",
    [
        ["--samples", "0"],
        ["--samples", "100001"],
        ["--samples", "x"],
        ["--expect-ttl", "Bad!"],
        ["--json", "--prometheus"],
    ],
)
def test_bad_options_are_usage_errors(args: list[str]) -> None:
    env = {**os.environ, "REDISTATE_EMBEDDED": "fakeredis"}
    done = run("stats", *args, env=env)
    assert done.returncode == 2 and done.stdout == ""


def test_collect_refuses_a_bad_sample_size() -> None:
    with Store.embedded() as store, pytest.raises(ValueError, match="from 1 to 100000, got 0"):
        store.admin.stats(0)


SAMPLE = re.compile(r'^(redistate_[a-z_]+)\{namespace="([^"]*)"(?:,kind="([^"]*)")?\} (\d+)$')


def test_prometheus_gauges_are_the_json_numbers(server_backend: Backend, namespace: str) -> None:
    """``stats --prometheus``: the text exposition format, a HELP and a TYPE line per
    gauge, each kind's keys, entities and bytes as ``--json`` has them, keys without a
    TTL where they are counted, and the one lease seed() holds."""
    seed(server_backend, namespace)
    found = stats(server_backend, namespace, "--expect-ttl", "users")
    url = ["--url", server_backend.url, "--namespace", namespace]
    done = run(*url, "stats", "--prometheus", "--expect-ttl", "users")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for name in GAUGES:
        assert lines.count(f"# TYPE {name} gauge") == 1 and f"# HELP {name} {GAUGES[name]}" in lines
    samples: dict[tuple[str, str | None], int] = {}
    for line in lines:
        if line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match is not None, line
        name, ns, kind, value = match.groups()
        assert ns == namespace
        samples[(name, kind)] = int(value)
    for kind, row in found.items():
        assert samples[("redistate_keys", kind)] == row["keys"], kind
        assert samples[("redistate_entities", kind)] == row["entities"], kind
        assert samples[("redistate_bytes", kind)] == row["bytes"], kind
        if row["no_ttl"] is None:
            assert ("redistate_keys_without_ttl", kind) not in samples
        else:
            assert samples[("redistate_keys_without_ttl", kind)] == row["no_ttl"], kind
    assert samples[("redistate_keys_without_ttl", "user")] == 10
    assert samples[("redistate_leases_held", None)] == 1


def test_prometheus_labels_are_escaped() -> None:
    from redistate.admin import KindStats

    text = exposition('a"b\\c\nd', [KindStats("lock", keys=2, entities=2, main=1)])
    assert 'redistate_keys{namespace="a\\"b\\\\c\\nd",kind="lock"} 2' in text.splitlines()
    assert 'redistate_leases_held{namespace="a\\"b\\\\c\\nd"} 1' in text.splitlines()
