"""Backup round trips as properties, on every backend: a random workload over every kind
of stored data (redistate.core.kinds), written through the public APIs only, then

1. export -> import into an empty namespace -> export: the two files hold the same
   entities (TTLs within the time the test measured around the calls), and every
   entity reads back the same through the public APIs;
2. importing the unchanged file into the same namespace changes and deletes nothing
   (step records included);
3. a task resumed after the round trip repeats no recorded step;
4. every kind the registry says is exported appears in the exported files, and every
   kind of the registry has a generator here: a new kind without round-trip coverage
   fails this test.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint

from redistate import Lease, Store
from redistate.admin import ImportReport
from redistate.agents import RedistateSession
from redistate.core import kinds
from redistate.langgraph import RedisStateSaver, RedistateStore
from tests.conftest import Backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

EXAMPLES: Final = 12  # per backend: each example is a few dozen round trips, three files
# The file holds whole ms: on the way from one export to the next, each of these
# readings is rounded to a whole ms (at most 1 ms off): the export's PTTL, read time and
# start time, the import's time left, the second export's three again.
WHOLE_MS_READINGS: Final = 7
ID_POOL: Final = ("a", "odd {id}*?")  # random ops' ids; "keep" is never deleted
USERS: Final = ("u1", "u2")
STEP_NAMES: Final = ("fetch", "plan", "send")  # "send" is not idempotent
COLLECTION: Final = "notes"
USER_KEY: Final = "user_id"  # the LangGraph config key that names a thread's user

# -- the operations --------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """One generated call: ``kind`` names the kinds.Kind whose generator drew it."""

    kind: str
    action: str
    id: str
    value: Any = None
    ttl: int | None = None
    user: str | None = None
    names: tuple[str, ...] = ()


@dataclass
class World:
    """What a workload wrote, so that the checks know what to read back."""

    store: Store
    touched: dict[str, set[str]] = field(default_factory=dict)  # kind name -> ids
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> step -> result
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)  # (task, step)
    held: list[Lease] = field(default_factory=list)

    def touch(self, kind: kinds.Kind, entity: str) -> None:
        self.touched.setdefault(kind.name, set()).add(entity)

    def ids(self, kind: kinds.Kind) -> list[str]:
        return sorted(self.touched.get(kind.name, ()))


json_leaf = st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.text(max_size=4)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("xyz"), inner, max_size=2)
    ),
    max_leaves=4,
)
patch = st.dictionaries(st.sampled_from("xyz"), json_value, max_size=2)
delta = st.dictionaries(st.sampled_from("xyz"), json_value, min_size=1, max_size=2)
ttls = st.none() | st.integers(60, 900)  # seconds: long enough to outlive the example
users = st.none() | st.sampled_from(USERS)
pool = st.sampled_from(ID_POOL)


def _op(kind: kinds.Kind, action: str, entity: Any = pool, **fields: Any) -> st.SearchStrategy[Op]:
    return st.builds(Op, st.just(kind.name), st.just(action), entity, **fields)


def _ops(
    first: st.SearchStrategy[Op], *others: st.SearchStrategy[Op]
) -> st.SearchStrategy[list[Op]]:
    """A kind's ops: one that leaves an entity of the kind (on an id no other op of the
    example deletes), then a few random ones."""
    rest = st.lists(st.one_of(*others), min_size=1, max_size=4) if others else st.just([])
    return st.tuples(first, rest).map(lambda t: [t[0], *t[1]])


def _records(kind: kinds.Kind, user: st.SearchStrategy[str | None]) -> st.SearchStrategy[list[Op]]:
    keep = st.just("keep")
    return _ops(
        _op(kind, "put", keep, value=json_value, ttl=ttls, user=user),
        _op(kind, "put", value=json_value, ttl=ttls, user=user),
        _op(kind, "merge", value=patch),
        _op(kind, "merge", keep, value=patch),
        _op(kind, "delete"),
    )


_steps = st.lists(st.sampled_from(STEP_NAMES), min_size=1, max_size=3, unique=True).map(tuple)

GENERATORS: Final[dict[str, st.SearchStrategy[list[Op]]]] = {
    kinds.SESSION.name: _records(kinds.SESSION, users),
    kinds.USER.name: _records(kinds.USER, st.none()),  # a profile is not registered to itself
    kinds.COLLECTION.name: _records(kinds.COLLECTION, users),
    kinds.TASK.name: _ops(
        _op(kinds.TASK, "save", st.just("keep"), value=json_value, ttl=ttls, user=users),
        _op(kinds.TASK, "save", value=json_value, ttl=ttls, user=users),
        _op(kinds.TASK, "log", value=delta),
        _op(kinds.TASK, "log", st.just("keep"), value=delta),
        _op(kinds.TASK, "delete"),
    ),
    # Tasks run by store.task: durable steps, a checkpoint or not, on ids never deleted.
    kinds.STEPS.name: _ops(
        _op(kinds.STEPS, "run", st.just("r0"), value=st.booleans(), names=_steps),
        _op(kinds.STEPS, "run", st.sampled_from(("r0", "r1")), value=st.booleans(), names=_steps),
    ),
    kinds.EVENTS.name: _ops(
        _op(kinds.EVENTS, "append", st.just("keep"), value=json_value, user=users),
        _op(kinds.EVENTS, "append", value=json_value, user=users),
        _op(kinds.EVENTS, "append", st.just("keep"), value=json_value),
        _op(kinds.EVENTS, "trim", value=st.integers(0, 2)),
        _op(kinds.EVENTS, "trim", st.just("keep"), value=st.integers(0, 2)),
    ),
    # Held through the exports (not exported: its fence is).
    kinds.LEASE.name: _ops(_op(kinds.LEASE, "hold", st.just("held"))),
    kinds.FENCE.name: _ops(
        _op(kinds.FENCE, "cycle", st.just("keep"), value=st.integers(1, 2)),
        _op(kinds.FENCE, "cycle", value=st.integers(1, 2)),
    ),
    kinds.USER_INDEX.name: _ops(
        _op(
            kinds.USER_INDEX,
            "register",
            st.just("owned"),
            value=json_value,
            user=st.sampled_from(USERS),
        ),
    ),
    kinds.AGENTS.name: _ops(
        _op(
            kinds.AGENTS,
            "add",
            st.just("keep"),
            value=st.lists(st.text(max_size=4), min_size=1, max_size=2),
            ttl=ttls,
            user=users,
        ),
        _op(
            kinds.AGENTS,
            "add",
            value=st.lists(st.text(max_size=4), min_size=1, max_size=2),
            ttl=ttls,
            user=users,
        ),
        _op(kinds.AGENTS, "pop"),
    ),
    kinds.GRAPH.name: _ops(
        _op(kinds.GRAPH, "put", st.just("keep"), value=st.integers(1, 3), ttl=ttls, user=users),
        _op(kinds.GRAPH, "put", value=st.integers(1, 2), ttl=ttls, user=users),
    ),
    kinds.MEMORY.name: _ops(
        _op(kinds.MEMORY, "put", st.just("keep"), value=patch, ttl=ttls),
        _op(kinds.MEMORY, "put", value=patch, ttl=ttls),
        _op(kinds.MEMORY, "delete"),
    ),
    kinds.MEMORY_NAMES.name: st.just([]),  # written by every memory put
    kinds.ADK.name: _ops(_op(kinds.ADK, "append", value=patch, ttl=ttls, user=users)),
    kinds.ADK_USER.name: st.just([]),  # written by every ADK append
    kinds.ADK_APP.name: st.just([]),
    kinds.CLAUDE.name: _ops(_op(kinds.CLAUDE, "append", value=patch, ttl=ttls, user=users)),
    kinds.CLAUDE_PROJECT.name: st.just([]),  # written by every main-transcript append
    kinds.PYDANTIC_AI.name: _ops(
        _op(
            kinds.PYDANTIC_AI,
            "save",
            st.just("keep"),
            value=st.integers(1, 2),
            ttl=ttls,
            user=users,
        ),
        _op(kinds.PYDANTIC_AI, "save", value=st.integers(1, 2), ttl=ttls, user=users),
        _op(kinds.PYDANTIC_AI, "fork", value=st.integers(0, 2), ttl=ttls),
        _op(kinds.PYDANTIC_AI, "delete"),
    ),
    kinds.PYDANTIC_AI_LIST.name: st.just([]),  # written by every save
}


@st.composite
def workloads(draw: st.DrawFn) -> list[Op]:
    """Every kind's ops, interleaved in a random order."""
    ops = [op for kind in kinds.KINDS for op in draw(GENERATORS[kind.name])]
    return [ops[i] for i in draw(st.permutations(range(len(ops))))]


# -- running them ----------------------------------------------------------------------


def thread(name: str) -> Any:
    return {"configurable": {"thread_id": name}}


def _record_op(world: World, op: Op, kind: kinds.Kind) -> None:
    store = world.store
    coll = {
        kinds.SESSION.name: store.sessions,
        kinds.USER.name: store.users,
        kinds.COLLECTION.name: store.collection(COLLECTION),
    }[kind.name]
    world.touch(kind, op.id)
    if op.action == "put":
        coll.put(op.id, op.value, ttl=op.ttl, user=op.user)
    elif op.action == "merge":
        coll.merge(op.id, op.value)
    else:
        coll.delete(op.id)


def _step_fn(world: World, task: str, name: str) -> Callable[[], Any]:
    def fn() -> Any:
        world.calls[(task, name)] += 1
        return {"task": task, "step": name, "call": world.calls[(task, name)]}

    return fn


def run_steps(
    world: World, store: Store, task: str, names: tuple[str, ...], save: bool
) -> list[str]:
    """``run.step`` for each name, as a worker resuming ``task`` does; returns the steps
    whose result is not the one recorded first (a recorded step must come back without
    being called)."""
    recorded = world.results.setdefault(task, {})
    wrong = []
    with store.task(task, ttl=30) as run:
        for name in names:
            result = run.step(name, _step_fn(world, task, name), idempotent=name != "send")
            if recorded.setdefault(name, result) != result:
                wrong.append(f"{task}/{name}: {recorded[name]} then {result}")
        if save:
            run.save({"done": list(names)}, phase="steps")
    return wrong


def execute(world: World, op: Op) -> None:
    store = world.store
    kind = kinds.by_name(op.kind)
    if kind.records:
        _record_op(world, op, kind)
    elif kind is kinds.TASK:
        world.touch(kind, op.id)
        if op.action == "save":
            store.checkpoints.save(op.id, op.value, phase="p", ttl=op.ttl, user=op.user)
        elif op.action == "log":
            store.checkpoints.log(op.id, op.value)
        else:
            store.checkpoints.delete(op.id)
    elif kind is kinds.STEPS:
        world.touch(kinds.TASK, op.id)
        wrong = run_steps(world, store, op.id, op.names, bool(op.value))
        assert not wrong, f"a step ran again in its own namespace: {wrong}"
    elif kind is kinds.EVENTS:
        world.touch(kind, op.id)
        if op.action == "append":
            store.events.append(op.id, "updated", op.value, user=op.user)
        else:
            store.events.trim(op.id, keep=op.value)
    elif kind is kinds.LEASE:
        world.held.append(store.lock(op.id, ttl=120, renew=False).acquire())
    elif kind is kinds.FENCE:
        for _ in range(op.value):
            store.lock(op.id, ttl=30, renew=False).acquire().release()
    elif kind is kinds.USER_INDEX:
        world.touch(kinds.COLLECTION, op.id)
        store.collection(COLLECTION).put(op.id, op.value, user=op.user)
    elif kind is kinds.AGENTS:
        world.touch(kind, op.id)
        session = RedistateSession(op.id, store=store, ttl=op.ttl, user=op.user)
        if op.action == "add":
            asyncio.run(session.add_items([{"role": "user", "content": c} for c in op.value]))
        else:
            asyncio.run(session.pop_item())
    elif kind is kinds.GRAPH:
        world.touch(kind, op.id)
        saver = RedisStateSaver(store, ttl=op.ttl, user_key=USER_KEY)
        put_checkpoints(saver, op.id, op.value, op.user)
    elif kind is kinds.MEMORY:
        world.touch(kind, op.id)
        memory = RedistateStore(store)
        if op.action == "put":  # two items: one expires on its own, one never
            ttl = None if op.ttl is None else op.ttl / 60
            memory.put(("users", op.id), "profile", op.value, ttl=ttl)
            memory.put(("users", op.id, "notes"), "n", {"of": op.id})
        else:
            memory.delete(("users", op.id), "profile")
    elif kind is kinds.ADK:
        for touched in (kinds.ADK, kinds.ADK_USER, kinds.ADK_APP):
            world.touch(touched, op.id)
        asyncio.run(_adk_append(store, op))
    elif kind is kinds.CLAUDE:
        world.touch(kinds.CLAUDE, f"proj/{op.id}")
        world.touch(kinds.CLAUDE_PROJECT, "proj")
        asyncio.run(_claude_append(store, op))
    elif kind is kinds.PYDANTIC_AI:
        if op.action == "save":
            world.touch(kinds.PYDANTIC_AI, op.id)
            world.touch(kinds.PYDANTIC_AI_LIST, op.user or "")
        elif op.action == "fork":
            world.touch(kinds.PYDANTIC_AI, f"{op.id}-fork")
        asyncio.run(_pydantic_ai_op(store, op))
    else:
        raise AssertionError(f"no executor for kind {kind.name!r}")


async def _adk_append(store: Store, op: Op) -> None:
    """An ADK session of user ``op.id`` (made on its first append; registered to that
    user if ``op.user``), an event setting ``op.value`` in each scope."""
    from google.adk.events.event import Event
    from google.adk.events.event_actions import EventActions

    from redistate.adk import RedistateSessionService

    service = RedistateSessionService(store, ttl=op.ttl, register_users=op.user is not None)
    session = await service.get_session(app_name="app", user_id=op.id, session_id="s")
    if session is None:
        session = await service.create_session(app_name="app", user_id=op.id, session_id="s")
    delta = {f"{scope}{k}": v for k, v in op.value.items() for scope in ("", "user:", "app:")}
    await service.append_event(
        session, Event(author="user", actions=EventActions(state_delta=delta))
    )


async def _claude_append(store: Store, op: Op) -> None:
    """A Claude Agent SDK session ``op.id`` of project "proj" (registered to ``op.user``
    if set), an entry holding ``op.value``."""
    from redistate.claude import RedistateSessionStore

    sessions = RedistateSessionStore(store, ttl=op.ttl, user=op.user)
    key: Any = {"project_key": "proj", "session_id": op.id}
    entry: Any = {"type": "x", "value": op.value}
    await sessions.append(key, [entry])


async def _pydantic_ai_op(store: Store, op: Op) -> None:
    """A Pydantic AI conversation ``op.id``: ``op.value`` turns saved (made in scope
    ``op.user``, registered to it), a fork ``<id>-fork`` of its first ``op.value``
    messages, or a delete."""
    from pydantic_ai.conversation import Conversation

    from redistate.pydantic_ai import RedistateConversationStore
    from tests.workers import pai_turn

    conversations = RedistateConversationStore(
        store, ttl=op.ttl, register_scopes=op.user is not None
    )
    loaded = await conversations.load(op.id)
    if op.action == "save":
        conversation = loaded or Conversation(conversation_id=op.id)
        for n in range(op.value):
            conversation.messages.extend(pai_turn(len(conversation.messages), n))
        # A stored conversation keeps the scope it was made in (pydantic-ai refuses another).
        await conversations.save(conversation, scope=op.user if loaded is None else None)
    elif op.action == "fork" and loaded is not None and loaded.messages:
        fork = f"{op.id}-fork"
        if await conversations.load(fork) is not None:
            await conversations.delete(fork)
        await conversations.fork(op.id, at=op.value, new_conversation_id=fork)
    elif op.action == "delete" and loaded is not None:
        await conversations.delete(op.id)


async def _adk_observe(store: Store, users: list[str]) -> Any:
    """Each ADK user's session and the app's listing, as the service reads them."""
    from redistate.adk import RedistateSessionService

    service = RedistateSessionService(store)
    seen = []
    for user in users:
        got = await service.get_session(app_name="app", user_id=user, session_id="s")
        seen.append(None if got is None else got.model_dump(mode="json"))
    listed = await service.list_sessions(app_name="app")
    return seen, [s.model_dump(mode="json") for s in listed.sessions]


def put_checkpoints(saver: RedisStateSaver, name: str, count: int, user: str | None) -> None:
    """``count`` checkpoints after the thread's latest, each with a task's writes; the
    thread registered to ``user`` (if not None)."""
    owner = {} if user is None else {USER_KEY: user}
    for _ in range(count):
        latest = saver.get_tuple(thread(name))
        config: Any = {
            "configurable": {
                **(latest.config if latest is not None else thread(name))["configurable"],
                **owner,
            }
        }
        previous = latest.checkpoint["channel_versions"].get("x") if latest else None
        checkpoint = empty_checkpoint()
        step = 0 if latest is None else int(latest.metadata.get("step", 0)) + 1
        checkpoint["channel_values"] = {"x": f"v{step}"}
        checkpoint["channel_versions"] = {"x": saver.get_next_version(previous, None)}
        metadata: Any = {"source": "loop", "step": step, "parents": {}}
        saved = saver.put(config, checkpoint, metadata, checkpoint["channel_versions"])
        saver.put_writes(saved, [("items", step)], f"task-{step}")


# -- reading back ----------------------------------------------------------------------


def observe(world: World, store: Store) -> dict[str, Any]:
    """Everything the workload wrote, read through the public APIs of ``store`` (the
    workload's namespace, or one it was imported into)."""
    seen: dict[str, Any] = {}
    for kind, coll in (
        (kinds.SESSION, store.sessions),
        (kinds.USER, store.users),
        (kinds.COLLECTION, store.collection(COLLECTION)),
    ):
        for entity in world.ids(kind):
            record = coll.get(entity)
            seen[f"{kind.name} {entity}"] = (
                None if record is None else (record.data, record.version, record.expires_at is None)
            )
    for entity in world.ids(kinds.TASK):
        restored = store.checkpoints.restore(entity)
        seen[f"{kinds.TASK.name} {entity}"] = (
            store.checkpoints.history(entity),
            None if restored is None else (restored.state, restored.skipped),
        )
        seen[f"{kinds.STEPS.name} {entity}"] = store.checkpoints.steps(entity)
    for entity in world.ids(kinds.EVENTS):
        check = store.events.verify(entity)
        seen[f"{kinds.EVENTS.name} {entity}"] = (
            store.events.read(entity),
            store.events.fold(entity),
            check.ok,
        )
    for entity in world.ids(kinds.AGENTS):
        items = asyncio.run(RedistateSession(entity, store=store).get_items())
        seen[f"{kinds.AGENTS.name} {entity}"] = items
    memory = RedistateStore(store)
    for entity in world.ids(kinds.MEMORY):
        found = [
            (item.namespace, item.key, item.value, item.created_at, item.updated_at)
            for item in memory.search(("users", entity))
        ]
        seen[f"{kinds.MEMORY.name} {entity}"] = sorted(found)
    seen[kinds.MEMORY_NAMES.name] = memory.list_namespaces(limit=1000)
    saver = RedisStateSaver(store)
    for entity in world.ids(kinds.GRAPH):
        seen[f"{kinds.GRAPH.name} {entity}"] = [
            (t.checkpoint, t.metadata, t.pending_writes, t.parent_config)
            for t in saver.list(thread(entity))
        ]
    if world.ids(kinds.ADK):
        seen[kinds.ADK.name] = asyncio.run(_adk_observe(store, world.ids(kinds.ADK)))
    if world.ids(kinds.CLAUDE):
        seen[kinds.CLAUDE.name] = asyncio.run(_claude_observe(store, world.ids(kinds.CLAUDE)))
    if world.ids(kinds.PYDANTIC_AI):
        found = asyncio.run(_pydantic_ai_observe(store, world))
        seen[kinds.PYDANTIC_AI.name] = found
    return seen


async def _claude_observe(store: Store, paths: list[str]) -> Any:
    """Each session's transcript and the project's listing and summaries, as the
    SDK's session store reads them."""
    from redistate.claude import RedistateSessionStore

    sessions = RedistateSessionStore(store)
    loaded = []
    for path in paths:
        key: Any = {"project_key": "proj", "session_id": path.split("/", 1)[1]}
        loaded.append(await sessions.load(key))
    listed = sorted(e["session_id"] for e in await sessions.list_sessions("proj"))
    summaries = sorted(
        (s["session_id"], s["mtime"], s["data"])
        for s in await sessions.list_session_summaries("proj")
    )
    return loaded, listed, summaries


async def _pydantic_ai_observe(store: Store, world: World) -> Any:
    """Each conversation as pydantic-ai loads it, every listing (all, and each
    scope's) and the records listed."""
    from redistate.pydantic_ai import RedistateConversationStore

    conversations = RedistateConversationStore(store)
    loaded = {}
    for cid in world.ids(kinds.PYDANTIC_AI):
        conversation = await conversations.load(cid)
        loaded[cid] = None if conversation is None else conversation.messages
    listings = {}
    for scope in world.ids(kinds.PYDANTIC_AI_LIST):
        records = await conversations.list_conversations(scope=scope or None)
        listings[scope] = [dataclasses.asdict(record) for record in records]
    return loaded, listings


def export(store: Store, path: Path, left_out: Counter[str] | None = None) -> list[dict[str, Any]]:
    """The file's lines; ``left_out`` gains the report's keys of kinds not exported yet."""
    with open(path, "wb") as sink:
        report = store.admin.export(sink)
    if left_out is not None:
        left_out.update(report.left_out)
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def is_ttl(name: str) -> bool:
    return name == "ttl_ms" or name.endswith("_ttl_ms")


def _split(value: Any, ttls: list[int]) -> Any:
    """``value`` with every TTL field replaced by a marker (kept: None, which must
    match exactly), the TTLs appended to ``ttls`` in order."""
    if isinstance(value, dict):
        out = {}
        for name in sorted(value):
            item = value[name]
            if is_ttl(name) and isinstance(item, int):
                ttls.append(item)
                out[name] = "<ttl>"
            else:
                out[name] = _split(item, ttls)
        return out
    if isinstance(value, list):
        return [_split(item, ttls) for item in value]
    return value


def shapes(lines: list[dict[str, Any]]) -> dict[bytes, list[int]]:
    """Each entity line without its TTLs (as canonical JSON) -> its TTLs."""
    found: dict[bytes, list[int]] = {}
    for line in lines:
        ttls: list[int] = []
        shape = orjson.dumps(_split(line, ttls), option=orjson.OPT_SORT_KEYS)
        assert shape not in found, f"the same line twice: {shape!r:.300}"
        found[shape] = ttls
    return found


HEADER_VARIES: Final = ("namespace", "exported_ms", "exported_at")


def same_files(
    first: list[dict[str, Any]], second: list[dict[str, Any]], bound_ms: int
) -> list[str]:
    """How the files differ: the same entities, each TTL within ``bound_ms`` plus
    whole-ms rounding, are no difference.

    A file's TTL is the time left at its export's start, read at most the export's
    duration late (PTTL, then the clock: too long by at most that). So two files'
    TTLs of one expiry differ by at most the time between their starts plus the first
    export's duration (the expiry kept as it was), or the time from the first start
    to the second export's end (an import setting it anew): ``bound_ms``, from what
    the test measured around the calls."""
    problems = []
    head1, head2 = (
        {k: v for k, v in f[0].items() if k not in HEADER_VARIES} for f in (first, second)
    )
    if head1 != head2:
        problems.append(f"headers {head1} and {head2}")
    one, two = shapes(first[1:]), shapes(second[1:])
    problems += [f"only in the first: {m[:300]!r}" for m in sorted(one.keys() - two.keys())]
    problems += [f"only in the second: {e[:300]!r}" for e in sorted(two.keys() - one.keys())]
    bound = bound_ms + WHOLE_MS_READINGS
    for shape in one.keys() & two.keys():
        for a, b in zip(one[shape], two[shape], strict=True):
            if abs(a - b) > bound:
                problems.append(f"TTL {a} ms then {b} ms (bound {bound} ms): {shape[:300]!r}")
    return problems


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Each entity (kind and id) that reads back differently."""
    return [
        f"{name}: {before.get(name)!r:.300} then {after.get(name)!r:.300}"
        for name in sorted(before.keys() | after.keys())
        if before.get(name) != after.get(name)
    ]


def kinds_of(line: dict[str, Any]) -> set[str]:
    """The registry kinds an entity line holds (a record line: by its collection)."""
    name = line.get("kind")
    assert isinstance(name, str), line
    if name == "end":
        return set()
    if name == "record":
        collection = line.get("collection")
        builtin = {kinds.SESSION.key: kinds.SESSION.name, kinds.USER.key: kinds.USER.name}
        return {builtin.get(str(collection), kinds.COLLECTION.name)}
    try:
        return {kinds.by_name(name).name}
    except KeyError:
        raise AssertionError(f"an export line of no registry kind: {line!r:.300}") from None


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def clean(backend: Backend, namespaces: list[str]) -> None:
    if not backend.remote:
        return
    client = backend.raw()
    try:
        for ns in namespaces:
            keys = list(client.scan_iter(match=f"{ns}:*", count=1000))
            if keys:
                client.delete(*keys)
    finally:
        client.close()


# -- the test --------------------------------------------------------------------------


def test_every_kind_has_a_generator() -> None:
    """A kind added to the registry needs a generator here (and its executor)."""
    assert sorted(GENERATORS) == sorted(k.name for k in kinds.KINDS)


@dataclass
class Run:
    namespaces: list[str] = field(default_factory=list)
    exported: set[str] = field(default_factory=set)  # kinds seen in the exported files
    examples: int = 0

    def namespace(self) -> str:
        ns = f"t{uuid.uuid4().hex[:12]}"
        self.namespaces.append(ns)
        return ns


def test_backup_round_trips(backend: Backend, tmp_path: Path) -> None:
    run = Run()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        # No shrinking: an example takes a tenth of a second, and shrinking one of a few
        # dozen ops runs into minutes; the report names each kind and id that differs.
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(workload=workloads())
    def round_trip(workload: list[Op]) -> None:
        run.examples += 1
        source = Store(backend.sync_client(), namespace=run.namespace())
        target = Store(backend.sync_client(), namespace=run.namespace())
        world = World(source)
        try:
            for op in workload:
                execute(world, op)
            problems = check(world, source, target, tmp_path / f"{run.examples}", run)
        finally:
            for lease in world.held:
                lease.release()
            source.close()
            target.close()
        assert not problems, "\n".join(problems)

    exportable = {k.name for k in kinds.KINDS if k.applies(kinds.Op.EXPORT)}
    failure: AssertionError | None = None
    try:
        round_trip()
    except AssertionError as exc:
        failure = exc
    finally:
        clean(backend, run.namespaces)
    missing = sorted(exportable - run.exported)
    # 4. Every kind the workload wrote that the registry says is exported, in a file.
    coverage = f"exportable kinds no export file held: {missing}" if missing else ""
    if failure is not None:
        raise AssertionError(f"{failure}\n{coverage}") from failure
    assert not missing, coverage


def check(world: World, source: Store, target: Store, stem: Path, run: Run) -> list[str]:
    """What goes wrong in the backup round trips of ``source`` (properties 1-3)."""
    problems: list[str] = []
    before = observe(world, source)
    steps = {name: value for name, value in before.items() if name.startswith(kinds.STEPS.name)}
    path = stem.with_suffix(".1.jsonl")
    # 1. export -> import into an empty namespace -> export: the same entities.
    started = now_ms()
    left: Counter[str] = Counter()
    first = export(source, path, left)
    late = now_ms() - started  # how late the first file's TTLs may have been read
    # Kinds export does not handle yet (kinds.NOT_YET) and only those are reported left
    # out, by kind: an export that leaves data out says so.
    not_yet = {
        k.name
        for k in kinds.KINDS
        if k.skips.get(kinds.Op.EXPORT, "").startswith(kinds.NOT_YET) and world.ids(k)
    }
    if set(left) != not_yet:
        problems.append(f"0. keys reported left out: {left}, written of kinds not yet: {not_yet}")
    for line in first[1:]:
        run.exported |= kinds_of(line)
    report = source.admin.import_file(path, namespace=target.keys.namespace)
    problems += import_problems("into an empty namespace", report, refused=False)
    second = export(target, stem.with_suffix(".2.jsonl"))
    bound = now_ms() - started + late
    problems += [f"1. exports differ: {p}" for p in same_files(first, second, bound)]
    problems += [f"1. imported: {p}" for p in differences(before, observe(world, target))]
    # 2. The same file into the same namespace: nothing changes, nothing is deleted.
    report = source.admin.import_file(path)
    problems += import_problems("into its own namespace", report, refused=True)
    third = export(source, stem.with_suffix(".3.jsonl"))
    bound = now_ms() - started + late
    problems += [f"2. exports differ: {p}" for p in same_files(first, third, bound)]
    after = observe(world, source)
    problems += [f"2. re-imported: {p}" for p in differences(before, after)]
    lost = [name for name, value in steps.items() if value and after.get(name) != value]
    problems += [f"2. step records lost or changed: {lost}"] if lost else []
    # 3. Resumed in the imported namespace, no task repeats a recorded step.
    calls = Counter(world.calls)
    for task, results in sorted(world.results.items()):
        wrong = run_steps(world, target, task, tuple(results), save=False)
        problems += [f"3. resumed: {w}" for w in wrong]
    again = world.calls - calls
    problems += [f"3. steps run again after the round trip: {dict(again)}"] if again else []
    return problems


def import_problems(what: str, report: ImportReport, *, refused: bool) -> list[str]:
    """An import that failed a line, found one expired or (``refused`` False) refused one."""
    bad = report.failed_count or report.expired or (report.refused_count and not refused)
    return [f"import {what}: {report.as_dict()}"] if bad else []
