"""Per-user erasure on every backend (this file has a generated sync twin): every
registered kind is deleted, and a failed deletion never loses an index entry."""

from __future__ import annotations

from typing import Any, Final

import pytest
import redis.asyncio

from redistate import AsyncStore, InvalidId, RetryPolicy, StateTooLarge, StoreUnavailable
from redistate.core import kinds
from redistate.records.erasure import owner
from tests.conftest import Backend
from tests.erasure_frameworks import async_framework_data
from tests.proxy import FaultProxy, command

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


def scan(backend: Backend, store: AsyncStore) -> dict[str, tuple[str, str]]:
    """Every key of the namespace: (the name of the kind owning it, its entity id)."""
    raw = backend.raw()
    try:
        found = [key.decode() for key in raw.scan_iter(match=store.keys.namespace_pattern())]
    finally:
        raw.close()
    out: dict[str, tuple[str, str]] = {}
    for key in found:
        kind, entity_id, part = store.keys.parse(key)
        owner = kinds.claim(kind, part)
        assert owner is not None, f"{key} is claimed by no kind"
        out[key] = (owner.name, entity_id)
    return out


def mine(user: str, entity_id: str) -> bool:
    return entity_id == user or entity_id.startswith(f"{user}-")


# Registered kinds, and the kinds sharing their keys (a task's step records): what an
# erase deletes. Kinds outside it are never registered to a user (a task run's lease
# and fence, named by the task) and stay.
ERASED: Final = frozenset(
    k.name for k in kinds.KINDS if any(r.registered and r.key == k.key for r in kinds.KINDS)
)
NEVER_REGISTERED: Final = frozenset(
    k.name for k in kinds.KINDS if k.name not in ERASED and k.key != kinds.USER_KEY
)


async def seed(store: AsyncStore, user: str) -> None:
    """Data of every registered kind, registered to ``user``."""
    await store.users.put(user, {"name": user})
    await store.sessions.put(f"{user}-s1", {"turn": 1}, user=user)
    await store.sessions.put(f"{user}-s2", {"turn": 2}, user=user)
    notes = store.collection("notes")
    await notes.put(f"{user}-n1", {"text": "x"}, user=user)
    await store.checkpoints.save(f"{user}-t1", {"step": 1}, user=user)
    await store.checkpoints.log(f"{user}-t1", {"more": 1})
    async with store.task(f"{user}-t1") as run:
        assert await run.step("search", lambda: {"hits": 1}) == {"hits": 1}
    await store.events.append(f"{user}-t1", "initialized", {"a": 1}, user=user)
    await store.events.append(f"{user}-t1", "updated", {"a": 2}, user=user)
    assert await store.events.trim(f"{user}-t1", keep=1) == 1  # leaves an anchor
    await async_framework_data(store, user)


async def test_erase_deletes_everything_registered_to_the_user_and_nothing_else(
    store: AsyncStore, backend: Backend
) -> None:
    await seed(store, "u1")
    await seed(store, "u2")
    await store.sessions.put("unregistered", {"turn": 9})  # no user=: not the user's
    before = scan(backend, store)
    k = store.keys
    for key in (k.task_steps("u1-t1"), k.events_anchor("u1-t1"), k.task_log("u1-t1")):
        assert key in before
    report = await store.users.erase("u1")
    assert report.profile is True
    assert report.deleted == {
        kinds.SESSION_KEY: ["u1-s1", "u1-s2"],
        "notes": ["u1-n1"],
        kinds.TASK_KEY: ["u1-t1"],
        kinds.EVENTS_KEY: ["u1-t1"],
        kinds.AGENTS_KEY: ["u1-a1"],
        kinds.GRAPH_KEY: ["u1-g1"],
        kinds.MEMORY_KEY: ["u1-m.facts"],
        kinds.ADK_KEY: ["u1-app/u1/s1"],
        kinds.ADK_USER_KEY: ["u1-app/u1"],
        kinds.CLAUDE_KEY: ["u1-proj/c1"],
        kinds.PYDANTIC_AI_KEY: ["u1-p1"],
    }
    assert report.missing == [] and report.count == 13
    after = scan(backend, store)
    # Only keys of others remain, and the task run's lease and fence (never registered).
    gone = {
        key
        for key, (kind, entity_id) in before.items()
        if mine("u1", entity_id) and kind not in NEVER_REGISTERED
    }
    assert set(after) == set(before) - gone
    assert {kind for kind, entity_id in after.values() if mine("u1", entity_id)} <= (
        NEVER_REGISTERED
    )
    assert await store.sessions.get("unregistered") is not None
    again = await store.users.erase("u1")
    assert again.count == 0 and again.deleted == {} and not again.profile


async def test_every_registered_kind_is_covered_by_the_erase_test(
    store: AsyncStore, backend: Backend
) -> None:
    """Iterates the registry: a kind registered to users that seed() does not make, or
    that erase leaves behind, fails here."""
    await seed(store, "u1")
    before = scan(backend, store)
    report = await store.users.erase("u1")
    after = scan(backend, store)
    reported = [owner(entry_kind) for entry_kind in report.deleted]
    assert {k.name for k in kinds.KINDS if k.registered} <= ERASED
    for name in sorted(ERASED):
        kind = kinds.by_name(name)
        assert [key for key, (n, _) in before.items() if n == name], (
            f"seed() makes no {kind.title}: add them to the erase test"
        )
        assert [key for key, (n, _) in after.items() if n == name] == [], kind.title
        if kind.registered:
            assert kind in reported, f"erase reported no {kind.title}"


async def test_an_entry_whose_data_is_gone_is_reported_missing(store: AsyncStore) -> None:
    await store.sessions.put("s1", {"turn": 1}, user="u1")
    await store.sessions.delete("s1")
    report = await store.users.erase("u1")
    assert report.missing == ["session:s1"] and report.deleted == {}
    assert report.profile is False  # there was no profile


async def test_a_bad_user_id_is_refused_before_anything(
    store: AsyncStore, backend: Backend
) -> None:
    with pytest.raises(InvalidId):
        await store.sessions.put("s1", {"turn": 1}, user="")
    assert await store.sessions.get("s1") is None
    with pytest.raises(InvalidId):
        await store.users.erase("")


async def test_bad_input_registers_nothing(store: AsyncStore, backend: Backend) -> None:
    for bad in ({"x": object()}, {"x": "y" * (2 * 1024 * 1024)}):
        with pytest.raises((TypeError, StateTooLarge)):
            await store.sessions.put("s-bad", bad, user="u1")
    raw = backend.raw()
    try:
        assert raw.exists(store.keys.user_index("u1")) == 0
    finally:
        raw.close()


async def test_an_entity_registered_again_while_erasing_is_erased_too(
    store: AsyncStore, backend: Backend, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = AsyncStore(backend.async_client(), namespace=namespace)
    await store.sessions.put("s1", {"turn": 1}, user="u1")
    conn = store._conn
    original = type(conn).idempotent
    wrote: list[str] = []

    async def write_during_erase(self: Any, *args: Any) -> Any:
        result = await original(self, *args)
        if self is conn and args[0] == "DEL" and not wrote:  # the agent is still running
            wrote.append("s1")
            await agent.sessions.put("s1", {"chat": "written while erasing"}, user="u1")
        return result

    monkeypatch.setattr(type(conn), "idempotent", write_during_erase)
    try:
        report = await store.users.erase("u1")
    finally:
        await agent.aclose()
    assert wrote == ["s1"]
    assert report.deleted == {"session": ["s1", "s1"]}  # once, and again
    assert await store.sessions.get("s1") is None


async def test_a_failed_deletion_puts_the_entry_back_so_a_later_erase_finds_it(
    server_backend: Backend, namespace: str
) -> None:
    """The connection is lost on every DEL of the entry's data (the request never
    reaches the server): erase gives up, and the entry it took off the index is back."""
    assert server_backend.server is not None
    raw = server_backend.raw()
    with FaultProxy("127.0.0.1", server_backend.server.port) as proxy:
        client = redis.asyncio.Redis(host=proxy.host, port=proxy.port, socket_timeout=10)
        retry = RetryPolicy(attempts=3, deadline=5, base=0, cap=0)
        store = AsyncStore(client, namespace=namespace, retry=retry)
        try:
            await store.sessions.put("s1", {"turn": 1}, user="u1")
            index = store.keys.user_index("u1")
            proxy.drop_request(command(b"DEL"), times=100)
            with pytest.raises(StoreUnavailable):
                await store.users.erase("u1")
            assert proxy.dropped >= 1
            proxy.disarm()
            assert raw.smembers(index) == {f"{kinds.SESSION_KEY}:s1".encode()}
            assert raw.exists(store.keys.record(kinds.SESSION_KEY, "s1")) == 1
            report = await store.users.erase("u1")
            assert report.deleted == {kinds.SESSION_KEY: ["s1"]}
            assert raw.exists(index, store.keys.record(kinds.SESSION_KEY, "s1")) == 0
        finally:
            await store.aclose()
            raw.close()
