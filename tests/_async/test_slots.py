"""Every script and every transaction redistate sends touches one hash slot.

A workload that runs every operation records the keys of each script call and each
MULTI/EXEC; each group must map to one cluster slot (what makes redistate work on
Redis Cluster without CROSSSLOT), and every script must have been seen.
"""

from __future__ import annotations

from base64 import b64encode
from collections.abc import Sequence
from typing import Any

import pytest
from langgraph.store.base import GetOp, PutOp, SearchOp
from redis.crc import key_slot

from redistate import AsyncStore
from redistate.adapters.claude.spec import AppendArgs, context
from redistate.adapters.langgraph import memory_ops_async
from redistate.adapters.langgraph.graph import GraphSpec
from redistate.adapters.langgraph.threads_async import AsyncGraph
from redistate.admin.backup_format import parse_entity
from redistate.admin.backup_lines import import_call
from redistate.core.connection_async import AsyncConnection
from redistate.core.errors import IntegrityError
from redistate.core.scripts import names, script
from redistate.records.mergelog import COMPACT_AT
from tests.conftest import Backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[str, ...]]] = []


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    seen = Recorder()
    run_script = AsyncConnection.script
    run_lranges = AsyncConnection.lranges

    async def recording_script(
        self: AsyncConnection,
        s: Any,
        keys: Sequence[str],
        args: Sequence[Any],
        *more: Any,
        **options: Any,
    ) -> Any:
        seen.calls.append((s.name, tuple(keys)))
        return await run_script(self, s, keys, args, *more, **options)

    run_scripts = AsyncConnection.scripts

    async def recording_scripts(self: AsyncConnection, calls: Sequence[Any]) -> Any:
        seen.calls += [(s.name, tuple(keys)) for s, keys, _ in calls]
        return await run_scripts(self, calls)

    run_writes = AsyncConnection.writes

    async def recording_writes(self: AsyncConnection, calls: Sequence[Any], *more: Any) -> Any:
        seen.calls += [(c.script.name, tuple(c.keys)) for c in calls]
        return await run_writes(self, calls, *more)

    async def recording_lranges(self: AsyncConnection, *ranges: tuple[str, int, int]) -> Any:
        seen.calls.append(("MULTI/EXEC", tuple(r[0] for r in ranges)))
        return await run_lranges(self, *ranges)

    monkeypatch.setattr(AsyncConnection, "script", recording_script)
    monkeypatch.setattr(AsyncConnection, "lranges", recording_lranges)
    monkeypatch.setattr(AsyncConnection, "scripts", recording_scripts)
    monkeypatch.setattr(AsyncConnection, "writes", recording_writes)
    return seen


async def test_every_script_and_transaction_stays_in_one_slot(
    backend: Backend, namespace: str, recorder: Recorder
) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace)
    for entity in ("s1", "{odd}*id", "t"):
        await store.sessions.put(entity, {"n": 1})
        await store.sessions.get(entity, touch=True)
        await store.sessions.touch(entity, ttl=60)
        for i in range(COMPACT_AT):  # the last one folds the patches back: record_compact
            await store.users.merge(entity, {"a": i})
        rec = await store.users.update(entity, lambda d: {**d, "b": 2})
        await store.users.delete(entity, if_version=rec.version)
        await store.sessions.delete(entity)
        cp = await store.checkpoints.save(entity, {"n": 1})
        await store.checkpoints.log(entity, {"m": 2})
        await store.checkpoints.latest(entity)
        await store.checkpoints.history(entity)
        await store.checkpoints.get(entity, cp.id)
        await store.checkpoints.restore(entity)
        lease = await store.lock(entity, ttl=30, renew=False).acquire()
        await lease.extend()
        await store.users.put(entity, {"guarded": True}, lease=lease)
        await store.checkpoints.delete(entity, lease=lease)
        await lease.release()
        await store.lock(entity, ttl=30, renew=False)._abandon()
        task_keys = store.keys.task_keys(entity)
        await store._conn.script(script("read_lists"), task_keys, [0, -1] * 3)
        lease = await store.lock(entity, ttl=30, renew=False).acquire()
        await store.events.append(entity, "step", {"n": 1}, lease=lease)
        await store.events.trim(entity, keep=0)
        await lease.release()
        # rotate-keys: a checkpoint list and its delta log, one key per call.
        for list_key in (task_keys[0], store.keys.task_log(entity)):
            await store._conn.script(script("checkpoint_recode"), (list_key,), ())
        # redistate migrate: checkpoints in place, events rewritten in a staging stream.
        migrate_keys = (task_keys[0], task_keys[2])
        await store._conn.script(script("checkpoint_migrate"), migrate_keys, (2,))
        await store.events.append(entity, "step", {"n": 2})
        await store.events.rewrite(entity, lambda schema, data: (schema, data + b" "))
        async with store.task(entity) as run:
            await run.save({"step": 1})
            await run.step("s1", lambda: 1, idempotent=False)  # the marker, then the result
        await store._conn.script(script("recode_fields"), (store.keys.task_steps(entity),), ())
        # redistate.agents: a session's list and its write memory.
        agent_key = store.keys.agent_session(entity)
        agent_keys = (agent_key, store.keys.writes(agent_key))
        memory = store._conn.memory_ms
        await store._conn.script(script("agents_add"), agent_keys, (60_000, 0, memory, "a1", b"1"))
        await store._conn.script(script("agents_pop"), agent_keys, (memory, "a2"))
        await store._conn.script(script("recode_items"), (agent_key,), (b"1", b"2"))  # rotate
        await store._conn.script(script("agents_clear"), agent_keys, (memory, "a3"))
        # redistate.langgraph: the saver's scripts on one thread's keys.
        graph = AsyncGraph(store._conn, GraphSpec(store.keys, ttl_ms=60_000, keep=1))
        member = graph.spec.member("", "c1")
        field = graph.spec.blob_field("", "ch", 1)
        await graph.put(entity, member, b"x", b"run1", [field], [(field, b"v")], False, "")
        await graph.put_writes(
            entity, member, [(graph.spec.write_suffix("", "t", 0), False, b"w")], ""
        )
        await graph.read(entity, *graph.spec.latest(""), 1)
        with pytest.raises(IntegrityError):  # b"x" is no packed checkpoint: refused
            await graph.history(entity, *graph.spec.latest(""), [b"ch"])
        await graph.copy(entity, entity + "-copy")
        await graph.delete_runs([b"run1"])
        await graph.keep_latest(entity)
        # redistate.langgraph's store: a namespace's scripts, and its registry's.
        space = store.memory_namespaces()
        for op in (
            PutOp(("users", entity), "p", {"n": 1}, ttl=1),
            GetOp(("users", entity), "p"),
            SearchOp(("users",)),
            PutOp(("users", entity), "p", None),
        ):
            await memory_ops_async.run(space, store.codec, 1 << 20, None, [op])
        await space.sweep()
        await store._conn.script(  # rotate-keys
            script("recode_fields"), (store.keys.memory(f"users.{entity}"),), (b"k", b"1", b"2")
        )
        # redistate.adk: a session's scripts, its user's and its app's.
        adk = store.adk_sessions()
        owner, path = f"chat/{entity}", f"chat/{entity}/s1"
        await adk.create("chat", entity, owner, path, "s1", 1.0, 60_000, [b"s:k", b"1"])
        await adk.append(owner, path, "s1", 2.0, 60_000, "e1", b"{}", 1, [b"s:k", b"2"])
        await adk.merge([(store.keys.adk_user(owner), [b"k", b"1"])])
        await adk.get([path], 1, 1.5, [store.keys.adk_user(owner)])
        await adk.delete(owner, path, "s1")
        for key in (store.keys.adk_session(path), store.keys.adk_user(owner)):  # rotate-keys
            await store._conn.script(script("recode_fields"), (key,), (b"k", b"1", b"2"))
        events = store.keys.adk_session(path, "events")
        await store._conn.script(script("recode_items"), (events,), (b"1", b"2"))
        # redistate.claude: a session's scripts, its project's index.
        claude, cpath = store.claude_transcripts(), f"p/{entity}"
        main = AppendArgs(60_000, b"", 0, b"{}", [b"u"], [b"{}"])
        await claude.enter("p", cpath, entity, 60_000)
        await claude.append("p", cpath, entity, main, True)
        sub = AppendArgs(60_000, b"s", None, b"", [b""], [b"{}"])
        await claude.append("p", cpath, entity, sub, False)
        log = store.keys.claude_session(cpath, "log")  # rotate-keys
        await store._conn.script(script("claude_recode"), (log,), (b"1", b"2"))
        await claude.drop(cpath, b"s")
        await claude.sessions("p")
        await claude.prune("p", ["gone"])
        await claude.delete(cpath)
        # redistate.pydantic_ai: a save (both indexes, the record, its details), a
        # history, details alone, the listing's prune and a delete.
        pai = store.pydantic_conversations()
        argv = ["", "r1", b"body", 1, "=u", "e1", 60_000, 1, "e1", "", b"entry"]
        assert (await pai.write(entity, "u", argv, ["r1", "0", "1", b"t", "-", ""]))[0] == 1
        assert (await pai.history(entity, "e1", -1))[0] == 1
        assert await pai.details(entity, ["r1", "1", "-", "", "1", b"m"]) == 2
        await pai.prune("u", ["gone"])
        assert await pai.delete(entity, "r1")
        # redistate import: one script per entity, with the keys import_call chooses.
        await store.users.put(entity, {"n": 1})
        value = await store._conn.get(store.keys.record("user", entity))
        assert value is not None
        lines: list[dict[str, Any]] = [
            {"kind": "record", "collection": "user", "id": entity, "ttl_ms": None,
             "version": int(value[3:19]), "value": b64encode(value).decode()},
            {"kind": "task", "id": entity, "seq": 0, "ttl_ms": None, "checkpoints": [],
             "ids": [], "log": [b64encode(b"D1,d1,,0000000000000\n").decode()]},
            {"kind": "fence", "id": entity, "fence": 7},
            {"kind": "events", "id": entity, "ttl_ms": None, "anchor": {
                "id": b64encode(b"1-0").decode(), "seq": b64encode(b"1").decode(),
                "digest": b64encode(b"0" * 64).decode(), "state": b64encode(b"{}").decode(),
                "state_digest": b64encode(b"0" * 64).decode()}, "events": []},
            {"kind": "user_index", "id": entity, "owns": [f"task:{entity}"]},
            {"kind": "agents", "id": entity, "ttl_ms": None, "items": [b64encode(b"{}").decode()]},
            {"kind": "graph", "id": entity, "ttl_ms": None, "parts": {
                **{p: {} for p in ("cp", "blobs", "refs", "writes")},
                "idx": [[b64encode(b"\0c1").decode(), 0]], "widx": [], "runs": []}},
            {"kind": "memory", "id": f"users.{entity}", "ttl_ms": None, "items": [{
                "key": b64encode(b"p").decode(), "created_ms": 1, "updated_ms": 1,
                "lifetime_ms": 0, "ttl_ms": None,
                "value": b64encode(store.codec.encode({}, b"")).decode()}]},
            {"kind": "adk", "id": f"chat/{entity}/s1", "ttl_ms": None, "state": {
                b64encode(b"m:last").decode(): b64encode(b"1.0").decode()},
                "state_ttl_ms": None, "events": [], "events_ttl_ms": None},
            {"kind": "adk-user", "id": f"chat/{entity}", "ttl_ms": None, "state": {},
             "state_ttl_ms": None, "sessions": [[b64encode(b"s1").decode(), 1.0]],
             "sessions_ttl_ms": None},
            {"kind": "claude", "id": f"p/{entity}", "ttl_ms": None, "parts": {
                "session": {b64encode(b"seq").decode(): b64encode(b"1").decode()},
                "log": [[b64encode(b"s\x000000000000000001" + store.codec.encode(
                    {}, context(f"p/{entity}", b"s"))).decode(), 0]],
                "subs": [b64encode(b"s").decode()]}},
            {"kind": "claude-project", "id": entity, "ttl_ms": None, "parts": {
                "sessions": [[b64encode(b"c1").decode(), 1]]}},
            {"kind": "pydantic-ai-list", "id": f"={entity}", "ttl_ms": None, "parts": {
                "conversations": [[b64encode(b"c1").decode(), 1]]}},
        ]  # fmt: skip
        for line in lines:
            await store._conn.script(*import_call(store.keys, parse_entity(line), 0, True))
    await store.aclose()

    assert recorder.calls
    for name, keys in recorder.calls:
        slots = {key_slot(k.encode()) for k in keys}
        assert len(slots) == 1, f"{name} spans slots {slots}: {keys}"
    assert {name for name, _ in recorder.calls} >= {*names(), "MULTI/EXEC"}
