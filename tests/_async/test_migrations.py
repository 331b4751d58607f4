"""Schema migrations on every backend (this file has a generated sync twin): old values
read migrated, written back when asked, newer ones refused without a write."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from redistate import AsyncStore, InvalidId, SchemaError
from redistate.core.envelope import unpack
from tests.conftest import Backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


def split_name(data: Any) -> Any:
    first, _, last = data.pop("name").partition(" ")
    return {**data, "first": first, "last": last}


def add_locale(data: Any) -> Any:
    return {**data, "locale": "en"}


@pytest.fixture
async def stores(backend: Backend, namespace: str) -> AsyncIterator[tuple[AsyncStore, AsyncStore]]:
    """An old deployment (no steps) and a new one (users: 1 -> 2 -> 3)."""
    old = AsyncStore(backend.async_client(), namespace=namespace)
    new = AsyncStore(backend.async_client(), namespace=namespace)
    new.migrations.register("users", 1, split_name)
    new.migrations.register("users", 2, add_locale)
    yield old, new
    await old.aclose()
    await new.aclose()


def schema_of(backend: Backend, store: AsyncStore, id: str) -> int:
    raw = backend.raw()
    try:
        key = store.keys.record("user", id)
        return unpack(key, raw.get(key)).schema
    finally:
        raw.close()


async def test_old_values_are_read_migrated(
    stores: tuple[AsyncStore, AsyncStore], backend: Backend
) -> None:
    old, new = stores
    await old.users.put("u1", {"name": "Ann Lee", "plan": "pro"})
    want = {"first": "Ann", "last": "Lee", "plan": "pro", "locale": "en"}
    got = await new.users.get("u1")
    assert got is not None and got.data == want
    assert (await new.users.get_many(["u1"]))["u1"].data == want  # type: ignore[union-attr]
    assert schema_of(backend, new, "u1") == 1  # reading writes nothing
    rec = await new.users.update("u1", lambda d: {**d, "plan": "team"})
    assert rec.data == {**want, "plan": "team"}
    assert schema_of(backend, new, "u1") == 3  # a write stamps the code's schema


async def test_a_merge_onto_an_old_record_migrates_it_first(
    stores: tuple[AsyncStore, AsyncStore], backend: Backend
) -> None:
    old, new = stores
    await old.users.put("u1", {"name": "Ann Lee"})
    await old.users.merge("u1", {"plan": "free"})  # a patched record at schema 1
    rec = await new.users.merge("u1", {"plan": "pro"})  # by compare-and-set, migrated
    assert rec.data == {"first": "Ann", "last": "Lee", "plan": "pro", "locale": "en"}
    assert schema_of(backend, new, "u1") == 3
    again = await new.users.merge("u1", {"vip": True})  # now appended at schema 3
    assert again.data == {**rec.data, "vip": True}
    assert await new.users.get("u1") == again


async def test_upgrade_writes_back_once_and_keeps_the_ttl(backend: Backend, namespace: str) -> None:
    old = AsyncStore(backend.async_client(), namespace=namespace)
    new = AsyncStore(backend.async_client(), namespace=namespace)
    new.migrations.register("sessions", 1, add_locale)
    try:
        await old.sessions.put("s1", {"turn": 1}, ttl=600)
        before = await old.sessions.get("s1")
        assert before is not None
        assert await new.sessions.upgrade("s1") is True
        after = await new.sessions.get("s1")
        assert after is not None and after.data == {"turn": 1, "locale": "en"}
        assert after.version > before.version and after.expires_at == before.expires_at
        assert await new.sessions.upgrade("s1") is False  # current: nothing written
        assert (await new.sessions.get("s1")) == after
        assert await new.sessions.upgrade("nobody") is False
    finally:
        await old.aclose()
        await new.aclose()


async def test_a_value_newer_than_the_code_is_refused_and_left_alone(
    stores: tuple[AsyncStore, AsyncStore], backend: Backend
) -> None:
    old, new = stores
    await new.users.put("u1", {"first": "Ann", "last": "Lee", "locale": "en"})
    raw = backend.raw()
    try:
        key = new.keys.record("user", "u1")
        stored = raw.get(key)
        with pytest.raises(SchemaError, match="has schema 3, newer than this code knows"):
            await old.users.get("u1")
        with pytest.raises(SchemaError):
            await old.users.update("u1", lambda d: {**d, "x": 1})
        with pytest.raises(SchemaError):
            await old.users.merge("u1", {"x": 1})  # another schema: by compare-and-set
        with pytest.raises(SchemaError):
            await old.users.upgrade("u1")
        assert raw.get(key) == stored  # nothing written, no field dropped
    finally:
        raw.close()


async def test_checkpoints_migrate_with_their_deltas(backend: Backend, namespace: str) -> None:
    old = AsyncStore(backend.async_client(), namespace=namespace)
    new = AsyncStore(backend.async_client(), namespace=namespace)
    new.migrations.register("checkpoints", 1, split_name)
    try:
        await old.checkpoints.save("t1", {"name": "Ann Lee", "step": 1})
        await old.checkpoints.log("t1", {"name": "Bo Chen"})  # a delta in schema 1
        latest = await new.checkpoints.latest("t1")
        assert latest is not None and latest.state == {"first": "Ann", "last": "Lee", "step": 1}
        restored = await new.checkpoints.restore("t1")
        assert restored is not None  # folded in schema 1, then migrated
        assert restored.state == {"first": "Bo", "last": "Chen", "step": 1}
        saved = await new.checkpoints.save("t1", restored.state)  # at schema 2
        assert (await new.checkpoints.latest("t1")) == saved
        with pytest.raises(SchemaError, match="schema 2, newer than this code knows"):
            await old.checkpoints.latest("t1")
        check = await old.checkpoints.verify("t1")  # integrity needs no schema
        assert check.ok
    finally:
        await old.aclose()
        await new.aclose()


async def test_upgrade_never_brings_back_a_record_deleted_meanwhile(
    stores: tuple[AsyncStore, AsyncStore], backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = stores
    await old.users.put("u1", {"name": "Ann Lee"})
    conn = new._conn
    original = type(conn).get

    async def delete_after_read(self: Any, key: str) -> Any:
        value = await original(self, key)
        if self is conn:
            await old.users.delete("u1")  # another instance deletes it meanwhile
        return value

    monkeypatch.setattr(type(conn), "get", delete_after_read)
    assert await new.users.upgrade("u1") is False
    monkeypatch.undo()
    assert await new.users.get("u1") is None


async def test_collections_cannot_take_the_built_in_names(store: AsyncStore) -> None:
    for name in ("users", "sessions", "user", "session"):
        with pytest.raises(InvalidId, match="reserved"):
            store.collection(name)


async def test_event_payloads_migrate_and_the_chain_still_verifies(
    backend: Backend, namespace: str
) -> None:
    old = AsyncStore(backend.async_client(), namespace=namespace)
    new = AsyncStore(backend.async_client(), namespace=namespace)
    new.migrations.register("events", 1, split_name)
    try:
        await old.events.append("t1", "initialized", {"name": "Ann Lee"})
        appended = await new.events.append("t1", "updated", {"first": "Bo", "last": "Chen"})
        assert appended.schema == 2
        events = await new.events.read("t1")
        assert [e.schema for e in events] == [1, 2]  # as appended
        assert events[0].payload == {"first": "Ann", "last": "Lee"}  # migrated on read
        assert await new.events.fold("t1") == {"first": "Bo", "last": "Chen"}
        with pytest.raises(SchemaError, match="schema 2, newer than this code"):
            await old.events.read("t1")
        assert (await old.events.verify("t1")).ok  # hashing needs no schema
    finally:
        await old.aclose()
        await new.aclose()


async def test_deltas_carry_the_schema_they_were_made_against(
    backend: Backend, namespace: str
) -> None:
    """New code logs a delta after a checkpoint old code saved: the state is migrated to
    the delta's schema before the patch applies (a patch in the new shape on old data
    would be wrong); a delta older than the state it would apply to is skipped, said."""
    old = AsyncStore(backend.async_client(), namespace=namespace)
    new = AsyncStore(backend.async_client(), namespace=namespace)
    new.migrations.register("checkpoints", 1, split_name)
    raw = backend.raw()
    try:
        await old.checkpoints.save("t1", {"name": "Ann Lee", "step": 1})
        await old.checkpoints.log("t1", {"step": 2})  # schema 1
        await new.checkpoints.log("t1", {"last": "Chen"})  # schema 2: after the split
        restored = await new.checkpoints.restore("t1")
        assert restored is not None and restored.complete
        assert restored.state == {"first": "Ann", "last": "Chen", "step": 2}
        assert restored.deltas_applied == 2
        with pytest.raises(SchemaError, match="schema 2, newer than this code"):
            await old.checkpoints.restore("t1")  # it cannot bring the state there
        await old.checkpoints.log("t1", {"name": "Bo Chen"})  # old code, after a new delta
        late = await new.checkpoints.restore("t1")
        assert late is not None and not late.complete and len(late.skipped) == 1
        assert late.state == restored.state  # the old-shape patch was not applied
        # The schema is inside the delta's digest: editing it is damage, not a migration.
        log_key = new.keys.task_log("t1")
        stamped = raw.lindex(log_key, 1)
        assert b",2\n" in stamped
        raw.lset(log_key, 1, stamped.replace(b",2\n", b",1\n", 1))
        check = await new.checkpoints.verify("t1")
        assert not check.ok and "damaged" in check.problems[0]
    finally:
        raw.close()
        await old.aclose()
        await new.aclose()
