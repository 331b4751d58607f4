"""Per-user erasure on every backend (this file has a generated sync twin)."""

from __future__ import annotations

from typing import Any

import pytest

from redistate import AsyncStore, InvalidId, StateTooLarge
from tests.conftest import Backend


def existing(backend: Backend, keys: list[str]) -> list[str]:
    raw = backend.raw()
    try:
        return [k for k in keys if raw.exists(k)]
    finally:
        raw.close()


async def seed(store: AsyncStore, user: str) -> list[str]:
    """Data registered to ``user``; returns every key it made."""
    k = store.keys
    await store.users.put(user, {"name": user})
    await store.sessions.put(f"{user}-s1", {"turn": 1}, user=user)
    await store.sessions.put(f"{user}-s2", {"turn": 2}, user=user)
    notes = store.collection("notes")
    await notes.put(f"{user}-n1", {"text": "x"}, user=user)
    await store.checkpoints.save(f"{user}-t1", {"step": 1}, user=user)
    await store.checkpoints.log(f"{user}-t1", {"more": 1})
    await store.events.append(f"{user}-t1", "initialized", {"a": 1}, user=user)
    return [
        k.record("user", user),
        k.record("session", f"{user}-s1"),
        k.record("session", f"{user}-s2"),
        k.record("notes", f"{user}-n1"),
        *k.task_keys(f"{user}-t1"),
        k.events(f"{user}-t1"),
        k.user_index(user),
    ]


async def test_erase_deletes_everything_registered_to_the_user_and_nothing_else(
    store: AsyncStore, backend: Backend
) -> None:
    mine = await seed(store, "u1")
    theirs = await seed(store, "u2")
    await store.sessions.put("unregistered", {"turn": 9})  # no user=: not the user's
    assert existing(backend, mine) == mine
    report = await store.users.erase("u1")
    assert report.profile is True
    assert report.deleted == {
        "session": ["u1-s1", "u1-s2"],
        "notes": ["u1-n1"],
        "task": ["u1-t1"],
        "events": ["u1-t1"],
    }
    assert report.missing == [] and report.count == 6
    assert existing(backend, mine) == []
    raw = backend.raw()
    try:
        left = [key.decode() for key in raw.scan_iter(match=f"{store.keys.namespace}:*u1*")]
    finally:
        raw.close()
    assert left == []  # write memories and anchors too
    assert existing(backend, theirs) == theirs
    assert await store.sessions.get("unregistered") is not None
    again = await store.users.erase("u1")
    assert again.count == 0 and again.deleted == {} and not again.profile


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
