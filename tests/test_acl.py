"""Least privilege on real servers: the ACL ``redistate acl`` prints is enough for a
full workload, a key outside the namespace is refused, and a user denied any one of
its commands gets PermissionDenied naming it, with nothing written (DUMP before and
after every operation)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint

from redistate import AsyncStore, LockTimeout, PermissionDenied, RedistateWarning, Store
from redistate.agents import RedistateSession
from redistate.core import connection
from redistate.core.encryption import EncryptedCodec
from redistate.core.keys import KeySpace
from redistate.core.scripts import _ARGS, acl_commands, lua_commands, names
from redistate.langgraph import RedisStateSaver, RedistateStore
from tests.cli import run
from tests.conftest import Backend
from tests.faults import tally

PASSWORD = "acl-test-password"


def _create(admin: redis.Redis, line: str, user: str) -> None:
    """Run an ``ACL SETUSER`` line as printed by ``redistate acl``."""
    assert line.startswith(f"ACL SETUSER {user} "), line
    command: Any = admin.execute_command  # untyped in redis-py
    command(*line.replace("<password>", PASSWORD).split())


@pytest.fixture
def user(server_backend: Backend) -> Iterator[str]:
    """A user name of this test's own, deleted afterwards."""
    name = f"u{uuid.uuid4().hex[:10]}"
    yield name
    admin = server_backend.raw()
    admin.acl_deluser(name)
    admin.close()


def _url(backend: Backend, user: str) -> str:
    assert backend.server is not None
    return f"redis://{user}:{PASSWORD}@127.0.0.1:{backend.server.port}/0"


def _acl_line(namespace: str, user: str) -> str:
    done = run("--namespace", namespace, "acl", "--user", user)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_acl_prints_one_setuser_line_for_the_namespace() -> None:
    line = _acl_line("app", "agent")
    words = line.split()
    assert words[:6] == ["ACL", "SETUSER", "agent", "reset", "on", "><password>"]
    assert words[6:9] == ["~app:*", "resetchannels", "-@all"]
    assert words[9:] == [f"+{c}" for c in acl_commands()]
    assert len(line.splitlines()) == 1
    # The default user is named after the namespace; --namespace may follow the command.
    done = run("acl", "--namespace", "ops")
    assert done.returncode == 0 and done.stdout.startswith("ACL SETUSER redistate-ops reset ")
    assert " ~ops:* " in done.stdout
    # --json: the same line, and its parts, as one JSON object.
    done = run("--namespace", "app", "acl", "--user", "agent", "--json")
    found = json.loads(done.stdout)
    assert found == {
        "user": "agent",
        "keys": "app:*",
        "commands": list(acl_commands()),
        "acl": line,
    }


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--namespace", "a:b", "acl"], 1, "namespace 'a:b'"),
        (["acl", "--user", "two words"], 2, "--user must be"),
        (["acl", "--user", ""], 2, "--user must be"),
    ],
)
def test_acl_refuses_a_bad_namespace_or_user(args: list[str], code: int, message: str) -> None:
    done = run(*args)
    assert done.returncode == code and message in done.stderr and done.stdout == ""


def test_the_printed_acl_runs_a_full_workload_and_nothing_else(
    server_backend: Backend, namespace: str, user: str, tmp_path: Path
) -> None:
    admin = server_backend.raw()
    _create(admin, _acl_line(namespace, user), user)
    admin.acl_log_reset()
    admin.function_flush()  # the user loads the library itself
    admin.config_resetstat()
    url = _url(server_backend, user)
    with Store.from_url(url, namespace=namespace) as store:
        rec = store.sessions.put("s1", {"n": 1}, ttl=60)
        got = store.sessions.get("s1", touch=True)
        assert got is not None and got.data == {"n": 1}
        store.sessions.put("s1", {"n": 2}, if_version=rec.version)
        assert store.sessions.touch("s1", ttl=600) is True
        store.users.merge("u", {"a": 1})
        for i in range(20):  # past the compaction threshold
            store.users.merge("u", {"i": i})
        assert store.users.update("u", lambda d: {**d, "b": 2}).data == {"a": 1, "i": 19, "b": 2}
        store.sessions.put("s2", {}, user="bob")
        assert sorted(store.sessions.ids()) == ["s1", "s2"]
        assert set(store.sessions.get_many(["s1", "s2"])) == {"s1", "s2"}
        assert store.sessions.ttl("s1") is not None
        assert store.sessions.delete("s1") is True
        cp = store.checkpoints.save("t", {"n": 1})
        assert store.checkpoints.log("t", {"m": 2}) == 1
        restored = store.checkpoints.restore("t")
        assert restored is not None and restored.state == {"n": 1, "m": 2}
        assert [c.id for c in store.checkpoints.history("t")] == [cp.id]
        with store.task("job", ttl=10) as job:
            assert job.step("charge", lambda: 42) == 42
            assert job.step("mail", lambda: "sent", idempotent=False) == "sent"
            job.save({"done": True})
            job.log({"more": 1})
        assert len(store.checkpoints.steps("job")) == 2
        with store.lock("L", ttl=5) as lease:
            lease.extend(10)
        for i in range(3):
            store.events.append("e", "happened", {"i": i})
        assert [e.payload for e in store.events.read("e")] == [{"i": 0}, {"i": 1}, {"i": 2}]
        assert store.events.verify("e").ok
        assert store.events.trim("e", keep=1) == 2
        session = RedistateSession("chat", store=store, ttl=60)
        asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
        assert asyncio.run(session.get_items()) == [{"role": "user", "content": "hi"}]
        asyncio.run(session.pop_item())
        asyncio.run(session.clear_session())
        # The adapters' data, exported and imported below: a Claude session with a
        # subagent transcript, a Pydantic AI conversation in a scope.
        claude = _claude_store(store)
        asyncio.run(claude.append(CLAUDE, [{"type": "user", "uuid": "a"}]))
        asyncio.run(claude.append(CLAUDE_SUB, [{"type": "x", "uuid": "b"}]))
        _pydantic_new(store)
        assert store.users.erase("bob").profile is False
        assert store.checkpoints.delete("t") is True
        assert store._conn.resends == 0 and store._conn._fcall
    stats = admin.info("commandstats")
    assert stats["cmdstat_function|load"]["calls"] == 1 and stats["cmdstat_fcall"]["calls"] > 40
    assert "cmdstat_evalsha" not in stats, stats  # every script ran as a function
    env = dict(os.environ, REDISTATE_URL=url)
    for args in (
        ["ls", "task"],
        ["show", "user", "u"],
        ["checkpoints", "job"],
        ["locks"],
        ["events", "e"],
        ["stats"],
        ["export", "--out", str(tmp_path / "backup.jsonl")],
    ):
        done = run("--namespace", namespace, *args, env=env)
        assert done.returncode == 0, (args, done.stderr)
    backup = (tmp_path / "backup.jsonl").read_bytes()
    for kind in (b"claude", b"claude-project", b"pydantic-ai", b"pydantic-ai-list"):
        assert b'"kind":"%s"' % kind in backup, kind
    done = run("--namespace", namespace, "import", str(tmp_path / "backup.jsonl"), env=env)
    assert done.returncode == 0, done.stderr
    # Nothing was denied but CLIENT SETINFO (Redis 7.2+, Valkey), whose refusal redis-py
    # ignores (the ACL cannot name it and still load on Redis 7.0), and the server
    # check's CONFIG GET, which falls back to INFO (CONFIG GET would reveal secrets).
    denied = {str(entry["object"]) for entry in admin.acl_log()}
    assert denied <= {"client|setinfo", "config|get"}, denied
    # A key outside the namespace is refused, by the server and through a store.
    plain = redis.Redis(port=server_backend.server.port, username=user, password=PASSWORD)  # type: ignore[union-attr]
    with pytest.raises(redis.exceptions.NoPermissionError):
        plain.get(f"x{namespace}:sessions:{{s1}}")
    plain.close()
    with Store.from_url(url, namespace=f"x{namespace}") as other:
        with pytest.raises(PermissionDenied, match="ACL") as info:
            other.sessions.put("s", {"n": 1})
        assert info.value.command == "fcall"
        with pytest.raises(PermissionDenied) as info:
            other.sessions.get("s")
        assert info.value.command == "get"
        assert other._conn.resends == 0  # never retried
    assert admin.keys(f"x{namespace}:*") == []
    admin.close()


# -- each command denied in turn ----------------------------------------------------------

# Operation name -> (setup on the denied user's store, returning what the operation
# needs, or raising PermissionDenied when the setup itself needs the command; the
# operation). A setup that writes does so with the admin store.
Setup = Callable[[Store, Store], Any]
Operation = Callable[[Store, Any], Any]


def _none(admin: Store, denied: Store) -> None:
    return None


def _record(admin: Store, denied: Store) -> Any:
    return admin.sessions.put("s", {"n": 1}, ttl=60)


def _merged(count: int) -> Setup:
    def setup(admin: Store, denied: Store) -> None:
        for i in range(count):
            admin.users.merge("u", {"i": i})

    return setup


def _task(admin: Store, denied: Store) -> None:
    admin.checkpoints.save("t", {"n": 1})
    admin.checkpoints.log("t", {"d": 1})


def _events(admin: Store, denied: Store) -> None:
    for i in range(3):
        admin.events.append("e", "x", {"i": i})


def _lease(admin: Store, denied: Store) -> Any:
    return denied.lock("L", ttl=30, renew=False).acquire()


def _run(admin: Store, denied: Store) -> Any:
    admin.checkpoints.save("job", {"n": 1})
    run = denied.task("job", ttl=30)
    run.__enter__()
    return run


def _held(admin: Store, denied: Store) -> Any:
    return admin.lock("L", ttl=30, renew=False).acquire()


def _wait_for_lock(store: Store, _: Any) -> None:
    with pytest.raises(LockTimeout):  # held by the admin: waits (BLPOP), then gives up
        store.lock("L", ttl=30, wait=0.2, renew=False).acquire()


def _indexed(admin: Store, denied: Store) -> None:
    admin.sessions.put("s", {"n": 1}, user="bob")


def _agents(admin: Store, denied: Store) -> RedistateSession:
    session = RedistateSession("chat", store=admin, ttl=60)
    asyncio.run(session.add_items([{"role": "user", "content": "a"}]))
    return RedistateSession("chat", store=denied, ttl=60)


CLAUDE: Any = {"project_key": "p", "session_id": "c"}
CLAUDE_SUB: Any = {**CLAUDE, "subpath": "subagents/a"}


def _claude(admin: Store, denied: Store) -> Any:
    """A Claude Agent SDK session with a subagent transcript (by the admin); the denied
    user's store."""
    from redistate.claude import RedistateSessionStore

    sessions = RedistateSessionStore(admin, ttl=60)
    asyncio.run(sessions.append(CLAUDE, [{"type": "user", "uuid": "a"}]))
    asyncio.run(sessions.append(CLAUDE_SUB, [{"type": "x", "uuid": "b"}]))
    return RedistateSessionStore(denied, ttl=60)


def _claude_store(store: Store) -> Any:
    from redistate.claude import RedistateSessionStore

    return RedistateSessionStore(store, ttl=60)


def _pydantic(admin: Store, denied: Store) -> Any:
    """A Pydantic AI conversation of scope u1 (by the admin); the denied user's store
    and the conversation as loaded, a turn added."""
    from redistate.pydantic_ai import RedistateConversationStore
    from tests.workers import pai_turn

    async def made() -> Any:
        from pydantic_ai.conversation import Conversation

        conversation = Conversation(conversation_id="c")
        conversation.messages.extend(pai_turn(0, 0))
        await RedistateConversationStore(admin, ttl=60).save(conversation, scope="u1")
        conversation.messages.extend(pai_turn(0, 1))
        return RedistateConversationStore(denied, ttl=60), conversation

    return asyncio.run(made())


def _pydantic_new(store: Store) -> None:
    from pydantic_ai.conversation import Conversation

    from redistate.pydantic_ai import RedistateConversationStore
    from tests.workers import pai_turn

    conversation = Conversation(conversation_id="c")
    conversation.messages.extend(pai_turn(0, 0))
    asyncio.run(RedistateConversationStore(store, ttl=60).save(conversation, scope="u1"))


def _thread(name: str) -> Any:
    return {"configurable": {"thread_id": name, "checkpoint_ns": ""}}


def _saved(admin: Store, denied: Store) -> tuple[RedisStateSaver, Any]:
    """A LangGraph thread with one checkpoint (by the admin); the denied user's saver."""
    saved = RedisStateSaver(admin).put(_thread("g"), empty_checkpoint(), {"step": -1}, {})
    return RedisStateSaver(denied), saved


def _chained(admin: Store, denied: Store) -> RedisStateSaver:
    """A LangGraph thread of two checkpoints, the first with a write and a value (by
    the admin): a history walk reads each part of it. The denied user's saver."""
    saver = RedisStateSaver(admin)
    first = empty_checkpoint()
    first["channel_values"] = {"steps": ["a"]}
    first["channel_versions"] = {"steps": saver.get_next_version(None, None)}
    saved = saver.put(_thread("g"), first, {"step": -1}, first["channel_versions"])
    saver.put_writes(saved, [("steps", ["b"])], "t1")
    saver.put(saved, empty_checkpoint(), {"step": 0}, {})
    # Redis 7 moves a hash's incremental rehash on at each lookup, which reorders its
    # DUMP though no field changed: finish it here, or a denied read (after a few
    # HGETs of the cp hash) would count as a partial write.
    for _ in range(16):
        admin.client.hexists(admin.keys.graph_thread("g", "cp"), "delta")
    return RedisStateSaver(denied)


def _put_checkpoint(store: Store, context: Any) -> None:
    saver, saved = context
    checkpoint = {**empty_checkpoint(), "channel_values": {"steps": ["a"]}}
    saver.put(saved, checkpoint, {"step": 0}, {"steps": saver.get_next_version(None, None)})


def _memory(admin: Store, denied: Store) -> RedistateStore:
    """A namespace of the LangGraph store with an item that expires and one that does
    not (by the admin); the denied user's store."""
    RedistateStore(admin).put(("users", "u"), "p", {"v": 1}, ttl=1)
    RedistateStore(admin).put(("users", "u"), "q", {"v": 1})
    return RedistateStore(denied)


K1, K2 = os.urandom(32), os.urandom(32)


def _encrypted(admin: Store, denied: Store) -> Store:
    """A task encrypted with k1 (by the admin); the denied user's store with k2 primary."""
    old = Store(
        admin.client, namespace=admin.keys.namespace, codec=EncryptedCodec({"k1": K1}, "k1")
    )
    old.checkpoints.save("t", {"n": 1})
    old.checkpoints.log("t", {"d": 1})
    codec = EncryptedCodec({"k1": K1, "k2": K2}, "k2")
    return Store(denied.client, namespace=denied.keys.namespace, codec=codec)


def _encrypted_agents(admin: Store, denied: Store) -> Store:
    """An Agents SDK session encrypted with k1 (by the admin); the denied user's store
    with k2 primary."""
    codec = EncryptedCodec({"k1": K1}, "k1")
    old = Store(admin.client, namespace=admin.keys.namespace, codec=codec)
    asyncio.run(RedistateSession("chat", store=old).add_items([{"role": "user", "content": "a"}]))
    codec = EncryptedCodec({"k1": K1, "k2": K2}, "k2")
    return Store(denied.client, namespace=denied.keys.namespace, codec=codec)


def _recode(store: Store, _: Any) -> int:
    """Rewrite the events with every payload re-encoded (as rotate-keys does)."""
    return store.events.rewrite("e", lambda schema, data: (schema, data + b" "))


OPERATIONS: dict[str, tuple[Setup, Operation]] = {
    "put (create)": (_none, lambda s, _: s.sessions.put("s", {"n": 1}, ttl=60)),
    "put (replace, CAS)": (
        _record,
        lambda s, rec: s.sessions.put("s", {"n": 2}, if_version=rec.version),
    ),
    "put (no ttl)": (_record, lambda s, _: s.sessions.put("s", {"n": 2}, ttl=None)),
    "get (touch)": (_record, lambda s, _: s.sessions.get("s", touch=True)),
    "touch": (_record, lambda s, _: s.sessions.touch("s", ttl=600)),
    "update": (_record, lambda s, _: s.sessions.update("s", lambda d: {"n": d["n"] + 1})),
    "delete": (_record, lambda s, _: s.sessions.delete("s")),
    "merge (create)": (_none, lambda s, _: s.users.merge("u", {"a": 1})),
    "merge (append)": (_merged(1), lambda s, _: s.users.merge("u", {"a": 1})),
    "merge (compacts)": (_merged(15), lambda s, _: s.users.merge("u", {"a": 1})),
    "put (user index)": (_none, lambda s, _: s.sessions.put("s", {"n": 1}, user="bob")),
    "users.erase": (_indexed, lambda s, _: s.users.erase("bob")),
    "checkpoints.save (create)": (_none, lambda s, _: s.checkpoints.save("t", {"n": 1})),
    "checkpoints.save": (_task, lambda s, _: s.checkpoints.save("t", {"n": 2})),
    "checkpoints.log": (_task, lambda s, _: s.checkpoints.log("t", {"d": 2})),
    "checkpoints.delete": (_task, lambda s, _: s.checkpoints.delete("t")),
    "lock.acquire": (_none, lambda s, _: s.lock("L", ttl=30, renew=False).acquire()),
    "lease.extend": (_lease, lambda s, lease: lease.extend(60)),
    "lease.release": (_lease, lambda s, lease: lease.release()),
    "run.step": (_run, lambda s, run: run.step("charge", lambda: 42)),
    "run.step (not idempotent)": (
        _run,
        lambda s, run: run.step("mail", lambda: "sent", idempotent=False),
    ),
    "run.save (guarded)": (_run, lambda s, run: run.save({"n": 2})),
    "events.append (create)": (_none, lambda s, _: s.events.append("e", "x", {"i": 0})),
    "events.append": (_events, lambda s, _: s.events.append("e", "x", {"i": 9})),
    "events.trim": (_events, lambda s, _: s.events.trim("e", keep=1)),
    "events.rewrite": (_events, _recode),
    "rotate-keys (a task)": (_encrypted, lambda s, rotating: rotating.admin.rotate_keys()),
    "rotate-keys (an agents session)": (_encrypted_agents, lambda s, r: r.admin.rotate_keys()),
    "langgraph put (create)": (
        _none,
        lambda s, _: RedisStateSaver(s).put(_thread("g"), empty_checkpoint(), {"step": -1}, {}),
    ),
    "langgraph put": (_saved, _put_checkpoint),
    "langgraph put_writes": (_saved, lambda s, c: c[0].put_writes(c[1], [("steps", ["b"])], "t1")),
    "langgraph get_tuple": (_saved, lambda s, c: c[0].get_tuple(_thread("g"))),
    "langgraph list": (_saved, lambda s, c: list(c[0].list(_thread("g")))),
    "langgraph get_delta_channel_history": (
        _chained,
        lambda s, c: c.get_delta_channel_history(config=_thread("g"), channels=["steps"]),
    ),
    "langgraph copy_thread": (_saved, lambda s, c: c[0].copy_thread("g", "g2")),
    "langgraph delete_thread": (_saved, lambda s, c: c[0].delete_thread("g")),
    "agents add_items": (
        _agents,
        lambda s, a: asyncio.run(a.add_items([{"role": "user", "content": "b"}])),
    ),
    "agents pop_item": (_agents, lambda s, a: asyncio.run(a.pop_item())),
    "store put (new namespace)": (
        _none,
        lambda s, _: RedistateStore(s).put(("users", "u"), "p", {"v": 1}, ttl=1),
    ),
    "store put": (_memory, lambda s, m: m.put(("users", "u"), "p", {"v": 2}, ttl=2)),
    "store delete": (_memory, lambda s, m: m.delete(("users", "u"), "q")),
    "store get (refresh)": (_memory, lambda s, m: m.get(("users", "u"), "p")),
    "store search (refresh)": (_memory, lambda s, m: m.search(("users",))),
    "store list_namespaces": (_memory, lambda s, m: m.list_namespaces()),
    "store sweep": (_memory, lambda s, m: m.sweep()),
    "agents clear_session": (_agents, lambda s, a: asyncio.run(a.clear_session())),
    "claude append": (_claude, lambda s, c: asyncio.run(c.append(CLAUDE, [{"type": "x"}]))),
    "claude append (new session)": (
        _none,
        lambda s, _: asyncio.run(_claude_store(s).append(CLAUDE, [{"type": "x"}])),
    ),
    "claude append (subagent)": (
        _claude,
        lambda s, c: asyncio.run(c.append(CLAUDE_SUB, [{"type": "x", "uuid": "c"}])),
    ),
    "claude delete": (_claude, lambda s, c: asyncio.run(c.delete(CLAUDE))),
    "claude delete (subagent)": (_claude, lambda s, c: asyncio.run(c.delete(CLAUDE_SUB))),
    "claude load": (_claude, lambda s, c: asyncio.run(c.load(CLAUDE))),
    "claude list_session_summaries": (
        _claude,
        lambda s, c: asyncio.run(c.list_session_summaries("p")),
    ),
    "claude list_subkeys": (_claude, lambda s, c: asyncio.run(c.list_subkeys(CLAUDE))),
    "pydantic save": (_pydantic, lambda s, c: asyncio.run(c[0].save(c[1]))),
    "pydantic save (new)": (_none, lambda s, _: _pydantic_new(s)),
    "pydantic fork": (_pydantic, lambda s, c: asyncio.run(c[0].fork("c", at=2))),
    "pydantic update": (_pydantic, lambda s, c: asyncio.run(c[0].update("c", title="t"))),
    "pydantic delete": (_pydantic, lambda s, c: asyncio.run(c[0].delete("c"))),
    "pydantic load": (_pydantic, lambda s, c: asyncio.run(c[0].load("c"))),
    "pydantic list_conversations": (
        _pydantic,
        lambda s, c: asyncio.run(c[0].list_conversations(scope="u1")),
    ),
    # Reads: nothing to write, but a denial is named all the same.
    "get": (_record, lambda s, _: s.sessions.get("s")),
    "get_many": (_record, lambda s, _: s.sessions.get_many(["s", "t"])),
    "ids": (_record, lambda s, _: list(s.sessions.ids())),
    "ttl": (_record, lambda s, _: s.sessions.ttl("s")),
    "checkpoints.restore": (_task, lambda s, _: s.checkpoints.restore("t")),
    "checkpoints.history": (_task, lambda s, _: s.checkpoints.history("t")),
    "checkpoints.steps": (_task, lambda s, _: s.checkpoints.steps("t")),
    "events.read": (_events, lambda s, _: list(s.events.read("e"))),
    "lock.acquire (waits)": (_held, _wait_for_lock),
}
# A write with user= adds the entity to the user's index before writing it (so that an
# erase never misses it; the index is in another slot): a denial of the write leaves
# the index entry, which points at nothing and which erase takes off.
INDEXED_FIRST = {"put (user index)"}
# A Claude session's first append enters it in its project's index first (another
# slot): a denial of the append leaves the entry, which the next listing takes out.
PROJECT_FIRST = {"claude append", "claude append (new session)"}
# A Claude session's delete deletes its keys, then its index entry: a denial of the
# latter leaves an entry for nothing, which listings skip.
DELETED_FIRST = {"claude delete"}
# An append to a session the object knows renews the session's index entry in the same
# pipeline (another slot): a denial of either leaves the other applied, an entry
# renewed for an append that did not land, or an append whose renewal did not (its
# entry is there since the session's first append; the next one renews it).
RENEWED_BESIDE = {"claude append (subagent)"}
# A Pydantic AI save enters the conversation in its two indexes (other slots) in the
# pipeline of its write: a denial of the write leaves the index entries (a listing
# skips them, and takes them off), a denial of an index's ZADD the write without it.
INDEXED_BESIDE = {"pydantic save", "pydantic save (new)", "pydantic fork"}
# A put that creates a namespace of the LangGraph store announces it to the registry
# first (another slot): a denial of the put leaves the registry entry, which points at
# nothing and which a sweep takes out.
ANNOUNCED_FIRST = {"store put (new namespace)"}


def snapshot(client: redis.Redis, namespace: str) -> dict[bytes, tuple[bytes | None, bool]]:
    """Every key of the namespace: its DUMP and whether it has a TTL."""
    return {
        key: (client.dump(key), client.pttl(key) > 0)
        for key in sorted(client.scan_iter(match=f"{namespace}:*"))
    }


def _wipe(client: redis.Redis, namespace: str) -> None:
    keys = list(client.scan_iter(match=f"{namespace}:*"))
    if keys:
        client.delete(*keys)


def _finish(context: Any) -> None:
    """Let go of a task run or lease a setup took (denied too, or released already by
    the operation: ignored; the next operation starts from an empty namespace)."""
    try:
        if hasattr(context, "step"):  # a task run
            context.__exit__(None, None, None)
        elif hasattr(context, "release") and context.value is not None:  # a lease
            context.release()
    except PermissionDenied:
        pass


def test_each_command_denied_in_turn_is_named_and_no_operation_writes_half(
    server_backend: Backend, namespace: str, user: str
) -> None:
    admin_client = server_backend.raw()
    base = _acl_line(namespace, user)
    tried = denied_ops = partial = index_entries = rounds = 0
    partials: list[tuple[str, str]] = []  # (command denied, operation) that wrote half
    uses: dict[str, int] = {}
    with Store(server_backend.sync_client(), namespace=namespace) as admin:
        for command in acl_commands():
            if command in ("select", "cluster|slots", "cluster|shards", "command", "info", "wait"):
                continue  # not sent to a standalone server on db 0 without replication
            _create(admin_client, f"{base} -{command}", user)
            rounds += 1
            with Store.from_url(_url(server_backend, user), namespace=namespace) as denied:
                for name, (setup, operation) in OPERATIONS.items():
                    _wipe(admin_client, namespace)
                    try:
                        context = setup(admin, denied)
                    except PermissionDenied as exc:
                        assert exc.command == command, (name, str(exc))
                        continue  # the operation cannot be reached without it
                    # The denied user must load what it runs.
                    admin_client.script_flush()
                    admin_client.function_flush()
                    before = snapshot(admin_client, namespace)
                    tried += 1
                    try:
                        operation(denied, context)
                    except PermissionDenied as exc:
                        assert exc.command == command, (command, name, str(exc))
                        assert "credentials" not in str(exc)
                        denied_ops += 1
                        uses[command] = uses.get(command, 0) + 1
                        after = snapshot(admin_client, namespace)
                        if after != before and name in INDEXED_FIRST:
                            index_entries += 1
                            index = KeySpace(namespace).user_index("bob").encode()
                            assert set(after) - set(before) == {index}, (command, name)
                        elif after != before and name in PROJECT_FIRST:
                            project = KeySpace(namespace).claude_project("p").encode()
                            assert set(after) - set(before) <= {project}, (command, name)
                            changed = [k for k in after if after[k] != before.get(k)]
                            assert changed == [project], (command, name)
                        elif after != before and name in RENEWED_BESIDE:
                            project = KeySpace(namespace).claude_project("p").encode()
                            renewed = {k for k in after if after[k] != before.get(k)}
                            assert renewed <= {project} or project not in renewed, (
                                command,
                                name,
                            )
                            index_entries += 1
                        elif after != before and name in DELETED_FIRST:
                            assert set(after) < set(before), (command, name)
                            assert all(after[k] == before[k] for k in after), (command, name)
                            index_entries += 1
                        elif after != before and name in INDEXED_BESIDE:
                            space = KeySpace(namespace)
                            lists = {
                                space.conversations(None).encode(),
                                space.conversations("u1").encode(),
                            }
                            moved = {k for k in after if after[k] != before.get(k)}
                            assert moved <= lists or not moved & lists, (command, name)
                            index_entries += 1
                        elif after != before and name in ANNOUNCED_FIRST:
                            registry = KeySpace(namespace).memory_names()
                            names = {registry.encode(), f"{registry}:gens".encode()}
                            assert set(after) - set(before) <= names, (command, name)
                        elif after != before:
                            partial += 1
                            partials.append((command, name))
                    finally:
                        _finish(context)
                assert denied._conn.resends == 0  # a denial is never retried
    _wipe(admin_client, namespace)
    admin_client.close()
    unused = [c for c in acl_commands() if c not in uses]
    tally(
        "ACL: each command denied in turn",
        server_backend.name,
        [],
        [],
        note=(
            f"{rounds} commands x {len(OPERATIONS)} operations: {tried} run, "
            f"{denied_ops} denied naming the command, {partial} partial writes, "
            f"{index_entries} user-index entries left; not needed by these: {', '.join(unused)}"
        ),
    )
    assert partial == 0, partials
    assert denied_ops > 250


@pytest.mark.parametrize("denied", ["function|load", "fcall"])
def test_a_user_who_may_not_load_or_call_functions_runs_scripts_by_evalsha(
    server_backend: Backend,
    namespace: str,
    user: str,
    denied: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An ACL from before functions (or one that leaves them out): the first call meets
    NOPERM on FUNCTION LOAD (or FCALL), the store warns once, loudly, naming the missing
    permission, and runs every script by EVALSHA from then on; nothing is refused."""
    monkeypatch.setattr(connection, "_warned", set())  # earlier tests warned already
    admin = server_backend.raw()
    _create(admin, f"{_acl_line(namespace, user)} -{denied}", user)
    admin.function_flush()
    admin.config_resetstat()
    url = _url(server_backend, user)
    with Store.from_url(url, namespace=namespace) as store:
        with pytest.warns(RedistateWarning, match=rf"refused '{re.escape(denied)}'") as found:
            store.sessions.put("s", {"n": 1})
        assert "EVALSHA instead of FCALL" in str(found[0].message)
        assert "+fcall +function|load" in str(found[0].message)
        assert not store._conn._fcall
        store.users.merge("u", {"a": 1})
        store.checkpoints.save("t", {"n": 1})
        got = store.sessions.get("s")
        assert got is not None and got.data == {"n": 1}
    with Store.from_url(url, namespace=namespace) as again, warnings.catch_warnings():
        warnings.simplefilter("error")  # once per server and process
        again.sessions.put("s", {"n": 2})
    stats = admin.info("commandstats")
    assert stats["cmdstat_evalsha"]["calls"] >= 4, stats
    assert admin.function_list() == [] or denied == "fcall"
    admin.close()


def test_the_checked_argument_counts_are_the_servers_arities(server_backend: Backend) -> None:
    """The ACL check gives each command as many arguments as the server requires: with
    fewer, Redis 7.0 crashes (SIGSEGV in ACLCheckAllUserCommandPerm)."""
    admin = server_backend.raw()
    lua = sorted(set().union(*(lua_commands(n) for n in names())))
    command: Any = admin.execute_command
    found = command("COMMAND", "INFO", *lua)
    assert {n: abs(int(found[n]["arity"])) - 1 for n in lua} == {n: _ARGS[n] for n in lua}
    admin.close()


@pytest.mark.parametrize("flavour", ["cluster", "sentinel"])
def test_the_printed_acl_is_enough_on_a_cluster_and_behind_sentinel(
    flavour: str, request: pytest.FixtureRequest
) -> None:
    """Created on every data node (sentinels keep their default user): the slot map
    (CLUSTER SLOTS/SHARDS), scans of each primary and replicated writes (WAIT) work."""
    namespace = f"t{uuid.uuid4().hex[:12]}"
    name = f"u{uuid.uuid4().hex[:10]}"
    if flavour == "cluster":
        cluster = request.getfixturevalue("cluster3")
        nodes, url = cluster.nodes, cluster.url
    else:
        setup = request.getfixturevalue("sentinel_setup")
        nodes, url = [setup.primary, setup.replica], setup.url
    admins = [node.client() for node in nodes]
    scheme, _, rest = url.partition("://")
    try:
        for admin in admins:
            _create(admin, _acl_line(namespace, name), name)
            admin.acl_log_reset()
        with Store.from_url(
            f"{scheme}://{name}:{PASSWORD}@{rest}", namespace=namespace, durability="replicated"
        ) as store:
            for i in range(20):
                store.sessions.put(f"s{i}", {"i": i}, ttl=60)
                store.users.merge(f"u{i % 3}", {"i": i})
            assert sorted(store.sessions.ids()) == sorted(f"s{i}" for i in range(20))
            store.checkpoints.save("t", {"n": 1})
            store.checkpoints.log("t", {"m": 2})
            with store.task("job", ttl=10) as job:
                assert job.step("charge", lambda: 42) == 42
                job.save({"done": True})
            store.events.append("e", "happened", {"i": 1})
            assert store.events.verify("e").ok
            restored = store.checkpoints.restore("t")
            assert restored is not None and restored.state == {"n": 1, "m": 2}
            assert store._conn.resends == 0
        for admin in admins:
            denied = {str(entry["object"]) for entry in admin.acl_log()}
            assert denied <= {"client|setinfo", "config|get"}, denied
    finally:
        for admin in admins:
            keys = list(admin.scan_iter(match=f"{namespace}:*"))
            if keys and flavour == "sentinel" and admin is admins[1]:
                keys = []  # the replica is read-only: its keys go with the primary's
            for key in keys:
                admin.delete(key)
            admin.acl_deluser(name)
            admin.close()


def test_a_denial_is_named_by_the_async_store_and_by_the_cli(
    server_backend: Backend, namespace: str, user: str
) -> None:
    admin = server_backend.raw()
    _create(admin, f"{_acl_line(namespace, user)} -setrange -scan", user)
    url = _url(server_backend, user)

    async def put() -> PermissionDenied:
        async with AsyncStore.from_url(url, namespace=namespace) as store:
            with pytest.raises(PermissionDenied) as info:
                await store.sessions.put("s", {"n": 1})
            assert store._conn.resends == 0
            return info.value

    denied = asyncio.run(put())
    assert denied.command == "setrange" and "record_put checked before any write" in str(denied)
    assert admin.keys(f"{namespace}:*") == []
    done = run("--url", url, "--namespace", namespace, "ls", "sessions")
    assert done.returncode == 1 and done.stdout == ""
    assert "refused 'scan' to this user (ACL)" in done.stderr, done.stderr
    assert "credentials" not in done.stderr
    admin.close()
