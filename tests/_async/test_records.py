"""Record contract suite: every backend, both I/O flavours (this file has a generated sync twin)."""

from __future__ import annotations

import datetime as dt
import math
import time
from typing import Any

import pytest

from redistate import (
    AsyncStore,
    CodecError,
    ConflictError,
    IntegrityError,
    InvalidId,
    RedistateError,
    RetryPolicy,
    SchemaError,
    StateTooLarge,
    TransportRefused,
)
from redistate.core.scripts import library, script
from tests.conftest import Backend, ttl_left
from tests.roundtrips import RoundTrips, server_reads

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

EXACT: dict[str, Any] = {
    "big": 2**63 + 12345,
    "neg": -(2**63),
    "over53": 2**53 + 1,
    "float": 0.1,
    "tiny": 5e-324,
    "huge": 1.7976931348623157e308,
    "empty_list": [],
    "empty_obj": {},
    "nested": {"a": None, "b": [None, {"c": None}], "d": {"e": {}}},
    "text": 'naïve 中文 🦜 \u0000 \n "quoted"',
    "bool": [True, False],
}


async def raw_keys(backend: Backend, namespace: str) -> list[bytes]:
    client = backend.raw()
    try:
        return sorted(client.scan_iter(match=f"{namespace}:*"))
    finally:
        client.close()


# -- put / get ------------------------------------------------------------------------


async def test_put_then_get_returns_the_same_record(store: AsyncStore) -> None:
    put = await store.sessions.put("s1", {"turn": 3})
    got = await store.sessions.get("s1")
    assert got == put
    assert got is not None and got.data == {"turn": 3} and got.id == "s1"
    assert put.version > 0


async def test_values_survive_exactly(store: AsyncStore) -> None:
    await store.users.put("u", EXACT)
    got = await store.users.get("u")
    assert got is not None
    assert got.data == EXACT
    assert type(got.data["empty_list"]) is list and type(got.data["empty_obj"]) is dict
    assert got.data["big"] == 2**63 + 12345


async def test_get_missing_is_none(store: AsyncStore) -> None:
    assert await store.sessions.get("nope") is None
    assert await store.sessions.get("nope", touch=True) is None


async def test_versions_strictly_increase_and_never_repeat(store: AsyncStore) -> None:
    seen = []
    for i in range(5):
        seen.append((await store.sessions.put("s", {"i": i})).version)
    assert await store.sessions.delete("s")
    seen.append((await store.sessions.put("s", {"i": "again"})).version)
    assert seen == sorted(seen) and len(set(seen)) == len(seen)


# -- compare-and-set ----------------------------------------------------------------


async def test_conditional_put_wins_with_the_current_version(store: AsyncStore) -> None:
    first = await store.sessions.put("s", {"n": 1})
    second = await store.sessions.put("s", {"n": 2}, if_version=first.version)
    assert second.version > first.version
    assert (await store.sessions.get("s")) == second


async def test_conditional_put_with_a_stale_version_conflicts_and_changes_nothing(
    store: AsyncStore,
) -> None:
    first = await store.sessions.put("s", {"n": 1})
    second = await store.sessions.put("s", {"n": 2})
    with pytest.raises(ConflictError) as info:
        await store.sessions.put("s", {"n": 3}, if_version=first.version)
    assert info.value.expected == first.version
    assert info.value.actual == second.version
    assert info.value.key == store.keys.record("session", "s")
    assert (await store.sessions.get("s")) == second


async def test_create_only(store: AsyncStore) -> None:
    made = await store.users.put("u", {"a": 1}, if_version=0)
    with pytest.raises(ConflictError) as info:
        await store.users.put("u", {"a": 2}, if_version=0)
    assert (info.value.expected, info.value.actual) == (0, made.version)
    assert (await store.users.get("u")) == made


async def test_conditional_put_on_a_missing_record_conflicts(store: AsyncStore) -> None:
    with pytest.raises(ConflictError) as info:
        await store.users.put("u", {"a": 1}, if_version=12345)
    assert info.value.actual == 0
    assert await store.users.get("u") is None


async def test_a_resent_write_is_recognised_not_applied_twice(
    store: AsyncStore, backend: Backend
) -> None:
    # What a retry after a lost reply does: the same write id, sent again.
    coll = store.sessions
    key = coll.spec.key("s")
    payload = coll.spec.encode(key, {"n": 1})
    args = coll.spec.put_args(None, 60_000, "write-1", payload).argv()
    first = await coll._conn.script(script("record_put"), (key,), args)
    again = await coll._conn.script(script("record_put"), (key,), args)
    version = int(first.split(b",")[0])  # written: the stored header fields
    assert int(again[0]) == 2
    assert int(again[1]) == version  # same version: nothing was written again
    cas = coll.spec.put_args(version - 1, 60_000, "write-1", payload).argv()
    resent_cas = await coll._conn.script(script("record_put"), (key,), cas)
    assert int(resent_cas[0]) == 2  # not reported as a conflict
    raw = backend.raw()
    stored, pttl = raw.get(key), raw.pttl(key)
    assert await coll.touch("s", ttl=600)  # a touch is not a write: still recognised
    again = await coll._conn.script(script("record_put"), (key,), args)
    assert int(again[0]) == 2 and int(again[1]) == version
    assert raw.get(key)[48:] == stored[48:] and raw.pttl(key) > pttl  # data kept, TTL slid
    # The documented limit: after another writer's write, a resend is applied again.
    other = await coll.put("s", {"n": "other"})
    late = await coll._conn.script(script("record_put"), (key,), args)
    assert type(late) is bytes and int(late.split(b",")[0]) > other.version


async def test_versions_continue_from_a_version_ahead_of_the_clock(
    store: AsyncStore, backend: Backend
) -> None:
    # max(previous + 1, server time): a stored version ahead of the clock still grows.
    ahead = 8_000_000_000_000_000
    backend.raw().set(
        store.keys.record("user", "u"), b"R1,%016d,0000000000000,0000000000000,1,w\n{}" % ahead
    )
    assert (await store.users.put("u", {"a": 1})).version == ahead + 1
    assert (await store.users.merge("u", {"b": 2})).version == ahead + 2


async def test_a_write_never_takes_a_version_past_2_53(store: AsyncStore, backend: Backend) -> None:
    key = store.keys.record("user", "u")
    last = b"R1,9007199254740991,0000000000000,0000000000000,1,w\n{}"
    backend.raw().set(key, last)
    got = await store.users.get("u")
    assert got is not None and got.version == 2**53 - 1
    with pytest.raises(IntegrityError, match="2\\^53"):
        await store.users.put("u", {"a": 1})
    assert backend.raw().get(key) == last


async def test_the_header_records_when_a_record_was_written(
    store: AsyncStore, backend: Backend
) -> None:
    from redistate.core.envelope import unpack

    key = store.keys.record("session", "s")
    before_ms = time.time() * 1000  # the server's clock is this machine's
    await store.sessions.put("s", {"a": 1}, ttl=60)
    after_ms = time.time() * 1000
    env = unpack(key, backend.raw().get(key))
    assert before_ms - 1 <= env.updated_ms <= after_ms + 1
    assert 59_000 < env.expires_ms - env.updated_ms <= 60_000


async def test_store_options_set_the_defaults(backend: Backend, namespace: str) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace, session_ttl=120)
    raw = backend.raw()
    put = lambda: store.sessions.put("s", {})  # noqa: E731
    await ttl_left_after(raw, store.keys.record("session", "s"), put, 120_000)
    raw.close()
    forever = AsyncStore(backend.async_client(), namespace=namespace, session_ttl=None)
    await forever.sessions.put("t", {})
    assert backend.raw().pttl(store.keys.record("session", "t")) == -1
    mib = 1024 * 1024
    for coll in (store.sessions, store.users):
        if backend.rest is not None:
            # Over Upstash's REST API its 1 MB request cap binds first: refused, unsent.
            with pytest.raises(TransportRefused, match="over the REST API's limit of 1000000"):
                await coll.put("fits", "x" * (mib - 2))
            assert not backend.raw().exists(store.keys.record(coll.spec.kind, "fits"))
        else:
            await coll.put("fits", "x" * (mib - 2))  # two quotes: exactly 1 MiB encoded
        with pytest.raises(StateTooLarge) as info:
            await coll.put("over", "x" * (mib - 1))
        assert (info.value.size, info.value.limit) == (mib + 1, mib)
    await store.aclose()
    await forever.aclose()


async def test_ids_spans_many_scan_batches(store: AsyncStore, backend: Backend) -> None:
    raw = backend.raw()
    pipe = raw.pipeline(transaction=False)
    for i in range(2500):
        pipe.set(store.keys.record("user", f"u{i}"), b"x")
    pipe.execute()
    assert {i async for i in store.users.ids()} == {f"u{i}" for i in range(2500)}


# -- delete -------------------------------------------------------------------------


async def test_delete(store: AsyncStore, backend: Backend, namespace: str) -> None:
    await store.sessions.put("s", {})
    assert await store.sessions.delete("s") is True
    assert await store.sessions.delete("s") is False
    # Only the write memory is left, so that a resend of the put or the delete is
    # still recognised; it expires within the retry window.
    memory = store.keys.writes(store.keys.record("session", "s"))
    assert await raw_keys(backend, namespace) == [memory.encode()]
    # The client's socket timeout (10 s; over REST one second more than a request's).
    assert 0 < backend.raw().pttl(memory) <= store.retry.memory_ms(store._conn.timeout)


async def test_delete_without_retries_leaves_no_key(backend: Backend, namespace: str) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace, retry=RetryPolicy(attempts=1))
    await store.sessions.put("s", {})
    await store.sessions.put("s", {"overwritten": True})
    assert await store.sessions.delete("s") is True
    assert await raw_keys(backend, namespace) == []
    await store.aclose()


async def test_conditional_delete(store: AsyncStore) -> None:
    rec = await store.users.put("u", {"a": 1})
    newer = await store.users.put("u", {"a": 2})
    with pytest.raises(ConflictError) as info:
        await store.users.delete("u", if_version=rec.version)
    assert info.value.actual == newer.version
    assert await store.users.get("u") == newer
    assert await store.users.delete("u", if_version=newer.version) is True
    assert await store.users.get("u") is None
    with pytest.raises(ConflictError):
        await store.users.delete("u", if_version=newer.version)
    with pytest.raises(ValueError, match="if_version"):
        await store.users.delete("u", if_version=0)


# -- TTL ----------------------------------------------------------------------------


async def test_sessions_expire_after_an_hour_by_default(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    since = time.monotonic()
    rec = await store.sessions.put("s", {"a": 1})
    ttl_left(raw, store.keys.record("session", "s"), 3_600_000, since)
    assert rec.expires_at is not None
    left = (rec.expires_at - dt.datetime.now(dt.timezone.utc)).total_seconds()
    assert 3_600 - (time.monotonic() - since) - 0.01 <= left <= 3_600.01  # server's clock


async def test_users_do_not_expire(store: AsyncStore, backend: Backend) -> None:
    rec = await store.users.put("u", {"a": 1})
    assert rec.expires_at is None
    assert backend.raw().pttl(store.keys.record("user", "u")) == -1
    assert await store.users.ttl("u") == math.inf


async def ttl_left_after(raw: Any, key: str, write: Any, ttl_ms: int) -> None:
    """The TTL ``write()`` set on ``key``, read back: at most ``ttl_ms``, and no less than
    what the time measured around the write and the read can have taken off it (no
    fixed margin: a loaded machine may take a second over it). ``raw`` is made before,
    outside the time measured (a cluster client takes a while to make)."""
    started = time.monotonic()
    await write()
    ttl_left(raw, key, ttl_ms, started)


async def test_ttl_per_call_and_none(store: AsyncStore, backend: Backend) -> None:
    key = store.keys.record("session", "s")
    raw = backend.raw()
    await ttl_left_after(raw, key, lambda: store.sessions.put("s", {}, ttl=5), 5_000)
    rec = await store.sessions.put("s", {}, ttl=None)
    assert raw.pttl(key) == -1 and rec.expires_at is None
    again = lambda: store.sessions.put("s", {}, if_version=rec.version, ttl=2.5)  # noqa: E731
    await ttl_left_after(raw, key, again, 2_500)
    raw.close()


async def test_every_write_sets_the_ttl_with_the_data(store: AsyncStore, backend: Backend) -> None:
    key = store.keys.record("session", "s")
    raw = backend.raw()
    await store.sessions.put("s", {"n": 0}, ttl=None)
    update = lambda: store.sessions.update("s", lambda d: {"n": d["n"] + 1}, ttl=30)  # noqa: E731
    await ttl_left_after(raw, key, update, 30_000)
    await ttl_left_after(raw, key, lambda: store.sessions.merge("s", {"m": 1}, ttl=40), 40_000)
    raw.close()


async def test_ttl_reports_seconds_left(store: AsyncStore) -> None:
    assert await store.sessions.ttl("missing") is None
    await store.sessions.put("s", {}, ttl=100)
    left = await store.sessions.ttl("s")
    # Between 100 s and what the server counts after it: no allowance for a slow run.
    assert left is not None and left <= 100
    assert left * 1000 >= (await store.sessions._conn.pttl(store.keys.record("session", "s")))


def _server_ms(raw: Any) -> int:
    seconds, micros = raw.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def test_touch_slides_the_ttl_and_keeps_the_version(
    store: AsyncStore, backend: Backend
) -> None:
    key = store.keys.record("session", "s")
    rec = await store.sessions.put("s", {"a": 1}, ttl=10)
    raw = backend.raw()
    first = _server_ms(raw)
    assert await store.sessions.touch("s", ttl=600) is True
    # The new expiry is 600 s from when the server ran the touch: between the server's
    # clock before it and after it (exact bounds, whatever the machine's load).
    assert first + 600_000 <= raw.pexpiretime(key) <= _server_ms(raw) + 600_000
    after = await store.sessions.get("s")
    assert after is not None and after.version == rec.version and after.data == rec.data
    assert after.expires_at is not None and rec.expires_at is not None
    assert after.expires_at > rec.expires_at
    assert await store.sessions.touch("s", ttl=None) is True
    assert backend.raw().pttl(key) == -1


async def test_touch_of_a_missing_record_creates_nothing(
    store: AsyncStore, backend: Backend, namespace: str
) -> None:
    assert await store.sessions.touch("ghost") is False
    assert await raw_keys(backend, namespace) == []


async def test_get_with_touch_slides_in_the_same_call(store: AsyncStore, backend: Backend) -> None:
    key = store.keys.record("session", "s")
    raw = backend.raw()
    rec = await store.sessions.put("s", {"a": 1}, ttl=10)
    since = time.monotonic()
    got = await store.sessions.get("s", touch=True)
    assert got is not None and got.data == {"a": 1} and got.version == rec.version
    ttl_left(raw, key, 3_600_000, since)
    since = time.monotonic()
    got = await store.sessions.get("s", touch=True, ttl=20)
    assert got is not None and got.expires_at is not None
    ttl_left(raw, key, 20_000, since)
    left = (got.expires_at - dt.datetime.now(dt.timezone.utc)).total_seconds()
    # The reply carries the new expiry, not the old header's (10 s).
    assert 20 - (time.monotonic() - since) - 0.01 <= left <= 20.01
    again = await store.sessions.get("s")
    assert again is not None and again.expires_at == got.expires_at


async def test_collection_settings(store: AsyncStore, backend: Backend) -> None:
    notes = store.collection("notes", ttl=86400, max_bytes=100)
    raw = backend.raw()
    since = time.monotonic()
    await notes.put("n1", {"text": "hi"})
    ttl_left(raw, store.keys.record("notes", "n1"), 86_400_000, since)
    with pytest.raises(StateTooLarge):
        await notes.put("n2", {"text": "x" * 200})
    assert [i async for i in notes.ids()] == ["n1"]
    with pytest.raises(InvalidId, match="reserved"):
        store.collection("lock")
    with pytest.raises(InvalidId):
        store.collection("Bad Name")


# -- update / merge ----------------------------------------------------------------


async def test_update_applies_the_function(store: AsyncStore) -> None:
    await store.sessions.put("s", {"turn": 1})
    rec = await store.sessions.update("s", lambda d: {**d, "turn": d["turn"] + 1})
    assert rec.data == {"turn": 2}
    assert await store.sessions.get("s") == rec


async def test_update_of_a_missing_record_starts_from_empty(store: AsyncStore) -> None:
    rec = await store.sessions.update("s", lambda d: {**d, "n": d.get("n", 0) + 1})
    assert rec.data == {"n": 1}


async def test_update_refuses_a_function_that_returns_none(
    store: AsyncStore, backend: Backend
) -> None:
    """``lambda d: d.update(...)`` returns None: refused, the record untouched, the
    function named; a deliberate null is still a put, and a null merge patch (RFC 7386
    makes the record null) goes on working through the update fallback."""
    before = await store.sessions.put("s", {"turn": 1})

    def add_turn(data: Any) -> None:
        data.update(turn=2)

    for fn, name in ((add_turn, "add_turn"), (lambda d: d.update(turn=2), "<lambda>")):
        with pytest.raises(TypeError, match="returned None") as caught:
            await store.sessions.update("s", fn)
        message = str(caught.value)
        assert name in message and "test_records.py" in message and "put(" in message
        assert await store.sessions.get("s") == before
    with pytest.raises(TypeError, match="returned None"):
        await store.sessions.update("new", lambda d: None)
    assert await store.sessions.get("new") is None
    assert (await store.sessions.put("null", None)).data is None
    got = await store.sessions.get("null")
    assert got is not None and got.data is None


async def test_update_gives_up_after_its_bound(store: AsyncStore, backend: Backend) -> None:
    from redistate import Store

    other = Store(backend.sync_client(), namespace=store.keys.namespace)
    await store.sessions.put("s", {"n": 0})
    calls = 0

    def meddle(data: Any) -> Any:
        nonlocal calls
        calls += 1
        other.sessions.put("s", {"n": -calls})  # someone else writes first, every time
        return {"n": data["n"] + 1}

    with pytest.raises(ConflictError):
        await store.sessions.update("s", meddle, attempts=3)
    assert calls == 3
    final = await store.sessions.get("s")
    assert final is not None and final.data == {"n": -3}
    other.close()


async def test_merge_is_rfc7386(store: AsyncStore) -> None:
    await store.users.put("u", {"a": "b", "c": {"d": "e", "f": "g"}, "keep": [1, 2]})
    rec = await store.users.merge("u", {"a": "z", "c": {"f": None}, "new": {"x": None, "y": 1}})
    assert rec.data == {"a": "z", "c": {"d": "e"}, "keep": [1, 2], "new": {"y": 1}}
    assert await store.users.get("u") == rec


async def test_merge_creates_and_keeps_values_exact(store: AsyncStore) -> None:
    rec = await store.users.merge("u", {"prefs": {"lang": "zh"}})
    assert rec.data == {"prefs": {"lang": "zh"}}
    rec = await store.users.merge("u", EXACT)
    got = await store.users.get("u")
    assert got is not None and got.data == {"prefs": {"lang": "zh"}, **_without_nulls(EXACT)}


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


async def test_merge_accepts_rich_python_values(store: AsyncStore) -> None:
    import uuid
    from dataclasses import dataclass

    @dataclass
    class Pref:
        lang: str
        since: dt.datetime

    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    uid = uuid.UUID(int=7)
    rec = await store.users.merge("u", {"pref": Pref("zh", when), "id": uid})
    assert rec.data == {"pref": {"lang": "zh", "since": when.isoformat()}, "id": str(uid)}


# -- bad input changes nothing -------------------------------------------------------


@pytest.mark.parametrize("bad", ["", 5, None, b"bytes", "x" * 513, "\ud800"])
async def test_invalid_ids_are_refused(
    store: AsyncStore, backend: Backend, namespace: str, bad: Any
) -> None:
    with pytest.raises(InvalidId):
        await store.sessions.put(bad, {"a": 1})
    with pytest.raises(InvalidId):
        await store.sessions.get(bad)
    with pytest.raises(InvalidId):
        await store.users.merge(bad, {"a": 1})
    with pytest.raises(InvalidId):
        await store.users.delete(bad)
    assert await raw_keys(backend, namespace) == []


async def test_oversized_state_is_refused_and_nothing_changes(
    store: AsyncStore, backend: Backend, namespace: str
) -> None:
    small = AsyncStore(backend.async_client(), namespace=namespace, max_bytes=1000)
    with pytest.raises(StateTooLarge) as info:
        await small.users.put("u", {"blob": "x" * 2000})
    assert info.value.limit == 1000 and info.value.size > 2000
    assert "1000" in str(info.value) and str(info.value.size) in str(info.value)
    assert await raw_keys(backend, namespace) == []
    before = await small.users.put("u", {"blob": "x" * 500})
    with pytest.raises(StateTooLarge):
        await small.users.merge("u", {"more": "y" * 600})
    assert await small.users.get("u") == before
    await small.aclose()


async def test_unserializable_values_are_refused_and_nothing_changes(
    store: AsyncStore, backend: Backend, namespace: str
) -> None:
    with pytest.raises(CodecError, match=r"\$\.tools\[1\].*object"):
        await store.sessions.put("s", {"tools": ["ok", object()]})
    with pytest.raises(CodecError):
        await store.users.merge("u", {"fn": print})
    with pytest.raises(CodecError):
        await store.sessions.update("s", lambda d: {"bad": {1, object()}})
    assert await raw_keys(backend, namespace) == []


@pytest.mark.parametrize("ttl", [0, -1, math.inf, math.nan, "60", True])
async def test_bad_ttls_are_refused(
    store: AsyncStore, backend: Backend, namespace: str, ttl: Any
) -> None:
    with pytest.raises((ValueError, TypeError), match="ttl"):
        await store.sessions.put("s", {}, ttl=ttl)
    assert await raw_keys(backend, namespace) == []


@pytest.mark.parametrize("version", [-1, 1.5, "3", True, 2**64])
async def test_bad_versions_are_refused(store: AsyncStore, version: Any) -> None:
    with pytest.raises((ValueError, TypeError), match="if_version"):
        await store.sessions.put("s", {}, if_version=version)
    assert await store.sessions.get("s") is None


async def test_a_foreign_value_is_an_integrity_error(store: AsyncStore, backend: Backend) -> None:
    raw = backend.raw()
    raw.set(store.keys.record("user", "plain"), b"not a record")
    raw.hset(store.keys.record("user", "hash"), "f", "v")
    for uid in ("plain", "hash"):
        with pytest.raises(IntegrityError):
            await store.users.get(uid)
        with pytest.raises(IntegrityError):
            await store.users.put(uid, {"a": 1})
    assert raw.get(store.keys.record("user", "plain")) == b"not a record"


# -- ids and keys --------------------------------------------------------------------


SPECIAL_IDS = [
    "plain",
    "a{b}",
    "{",
    "}",
    "*",
    "?",
    "[x]",
    "\\",
    "%7B",
    "%",
    "a:b",
    "中文",
    "x" * 512,
]


async def test_ids_lists_exactly_the_collection(store: AsyncStore, backend: Backend) -> None:
    for sid in SPECIAL_IDS:
        await store.sessions.put(sid, {"id": sid})
    await store.users.put("a-user", {})
    other = AsyncStore(backend.async_client(), namespace=store.keys.namespace + "x")
    await other.sessions.put("elsewhere", {})
    assert sorted({i async for i in store.sessions.ids()}) == sorted(SPECIAL_IDS)
    assert [i async for i in store.users.ids()] == ["a-user"]
    for sid in SPECIAL_IDS:
        got = await store.sessions.get(sid)
        assert got is not None and got.data == {"id": sid}
    await other.sessions.delete("elsewhere")
    await other.aclose()


async def test_special_characters_never_change_the_key(store: AsyncStore, backend: Backend) -> None:
    keys = {store.keys.record("session", sid) for sid in SPECIAL_IDS}
    assert len(keys) == len(SPECIAL_IDS)
    for sid in SPECIAL_IDS:
        await store.sessions.put(sid, {"id": sid})
    raw = sorted(k.decode() for k in backend.raw().scan_iter(match=f"{store.keys.namespace}:*"))
    assert raw == sorted(keys)


# -- scripts ------------------------------------------------------------------------


def _libraries(raw: Any) -> list[bytes]:
    """The function libraries on the server (a cluster: on every primary)."""
    found = raw.execute_command("FUNCTION", "LIST")
    rows = [r for node in found.values() for r in node] if isinstance(found, dict) else found
    names = []
    for row in rows:
        fields = dict(zip(row[::2], row[1::2], strict=True)) if isinstance(row, list) else row
        names.append(fields[b"library_name"])
    return names


async def test_scripts_reload_after_a_function_or_script_flush(
    store: AsyncStore, backend: Backend
) -> None:
    """FUNCTION FLUSH (the library is gone: a restart without persistence) between two
    calls: loaded again; SCRIPT FLUSH the same way for a connection that runs its
    scripts by EVALSHA (a server without functions, or a user who may not load them)."""
    await store.sessions.put("s", {"n": 1})
    raw = backend.raw()
    if backend.rest is None:
        assert library()[0].encode() in _libraries(raw)
        raw.execute_command("FUNCTION", "FLUSH")
        assert _libraries(raw) == []
        await store.sessions.put("s", {"n": 2})
        assert library()[0].encode() in _libraries(raw)  # loaded again
        store._conn._fcall = False  # as after a server without functions
    else:  # over a REST API scripts go by EVALSHA from the start
        assert not store._conn._fcall
    raw.script_flush()
    assert raw.script_exists(script("record_put").sha) == [False]
    await store.sessions.put("s", {"n": 3})
    assert raw.script_exists(script("record_put").sha) == [True]  # loaded again
    got = await store.sessions.get("s")
    assert got is not None and got.data == {"n": 3}
    raw.close()


# -- scripts refuse malformed arguments before writing anything --------------------

ZEROED = b"R1,0000000000000000,0000000000000,0000000000000,"


@pytest.mark.parametrize(
    "args",
    [
        ("", "nan", ZEROED + b"1,w1\n{}", b"1,w1\n", 0),
        ("", "0x10", ZEROED + b"1,w1\n{}", b"1,w1\n", 0),
        ("", " 5", ZEROED + b"1,w1\n{}", b"1,w1\n", 0),
        ("", "1.5", ZEROED + b"1,w1\n{}", b"1,w1\n", 0),
        ("", "-1", ZEROED + b"1,w1\n{}", b"1,w1\n", 0),
        ("", "01000", ZEROED + b"1,w1\n{}", b"1,w1\n", 0),  # passed to PX as it is
        ("", "3153600000001", ZEROED + b"1,w1\n{}", b"1,w1\n", 0),
        ("x", "1000", ZEROED + b"1,w1\n{}", b"1,w1\n", 0),
        ("", "1000", ZEROED + b"1,w1\n{}", b"1,w2\n", 0),  # tails disagree
        ("", "1000", ZEROED + b"1,w1{}", b"1,w1{", 0),  # no newline
        ("", "1000", ZEROED + b"x,w1\n{}", b"x,w1\n", 0),  # schema not digits
        ("", "1000", ZEROED + b"1234567890,w1\n{}", b"1234567890,w1\n", 0),  # schema too long
        ("", "1000", ZEROED + b"1," + b"w" * 33 + b"\n{}", b"1," + b"w" * 33 + b"\n", 0),
        ("", "1000", b"R1,0000000000000001,0000000000000,0000000000000,1,w1\n{}", b"1,w1\n", 0),
        ("", "1000", ZEROED + b"1,w1\n{}", b"1,w1\n", 2),
        ("", "1000", ZEROED + b"1,w1\n{}", b"1,w1\n", 0, "", "-1"),  # memory ms
        ("", "1000", ZEROED + b"1,w1\n{}", b"1,w1\n", 0, "", "1e3"),
    ],
)
async def test_record_put_refuses_malformed_arguments(
    store: AsyncStore, backend: Backend, args: tuple[Any, ...]
) -> None:
    before = await store.users.put("u", {"a": 1}, ttl=100)
    key = store.keys.record("user", "u")
    expires = backend.raw().pexpiretime(key)
    keys = (key, key, store.keys.writes(key))
    full = args if len(args) == 7 else (*args, "", 0)
    with pytest.raises(RedistateError, match="RSARG"):
        await store.users._conn.script(script("record_put"), keys, full)
    assert await store.users.get("u") == before
    assert backend.raw().pexpiretime(key) == expires  # the same expiry, to the ms


@pytest.mark.parametrize("args", [("1.5", 0), ("nan", 1), ("-5", 0), ("10", 2), ("", 0)])
async def test_record_touch_refuses_malformed_arguments(
    store: AsyncStore, backend: Backend, args: tuple[Any, ...]
) -> None:
    await store.users.put("u", {"a": 1}, ttl=100)
    key = store.keys.record("user", "u")
    raw_before = backend.raw().get(key)
    expires = backend.raw().pexpiretime(key)
    with pytest.raises(RedistateError, match="RSARG"):
        await store.users._conn.script(script("record_touch"), (key,), args)
    assert backend.raw().get(key) == raw_before
    assert backend.raw().pexpiretime(key) == expires  # the same expiry, to the ms


@pytest.mark.parametrize(
    "args",
    [
        ("0", "", "d1", 0),
        ("abc", "", "d1", 0),
        ("-1", "", "d1", 0),
        ("1.5", "", "d1", 0),
        (" 1", "", "d1", 0),
        ("", "", "", 0),  # no delete id
        ("", "", "d" * 33, 0),
        ("", "", "d,1", 0),
        ("", "", "d1", "x"),  # memory ms
    ],
)
async def test_record_delete_refuses_malformed_arguments(
    store: AsyncStore, args: tuple[Any, ...]
) -> None:
    await store.users.put("u", {"a": 1})
    key = store.keys.record("user", "u")
    with pytest.raises(RedistateError, match="RSARG"):
        keys = (key, store.keys.lock("u"), store.keys.writes(key))
        await store.users._conn.script(script("record_delete"), keys, args)
    assert await store.users.get("u") is not None


# -- which TTL a write keeps ----------------------------------------------------------


async def test_update_and_merge_keep_the_records_own_ttl(
    store: AsyncStore, backend: Backend
) -> None:
    key = store.keys.record("user", "u")
    raw = backend.raw()
    since = time.monotonic()
    put = await store.users.put("u", {"n": 0}, ttl=60)
    merged = await store.users.merge("u", {"m": 1})
    updated = await store.users.update("u", lambda d: {**d, "n": 1})
    ttl_left(raw, key, 60_000, since)  # a user record given a TTL keeps it
    assert put.expires_at == merged.expires_at == updated.expires_at
    got = await store.users.get("u")
    assert got is not None and got.expires_at == put.expires_at
    skey = store.keys.record("session", "s")
    since = time.monotonic()
    await store.sessions.put("s", {"n": 0}, ttl=30)
    await store.sessions.update("s", lambda d: {"n": 1})
    ttl_left(raw, skey, 30_000, since)
    since = time.monotonic()
    await store.sessions.update("s", lambda d: {"n": 2}, ttl=90)  # explicit: replaced
    ttl_left(raw, skey, 90_000, since)


async def test_update_and_merge_that_create_use_the_collection_ttl(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    since = time.monotonic()
    await store.sessions.merge("new", {"a": 1})
    await store.sessions.update("new2", lambda d: {"a": 1})
    for sid in ("new", "new2"):
        ttl_left(raw, store.keys.record("session", sid), 3_600_000, since)
    await store.users.merge("u", {"a": 1})
    assert backend.raw().pttl(store.keys.record("user", "u")) == -1


async def test_touching_a_collection_without_ttl_needs_one(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    since = time.monotonic()
    await store.users.put("u", {"a": 1}, ttl=50)
    key = store.keys.record("user", "u")
    with pytest.raises(ValueError, match="no TTL to slide"):
        await store.users.touch("u")
    with pytest.raises(ValueError, match="no TTL to slide"):
        await store.users.get("u", touch=True)
    ttl_left(raw, key, 50_000, since)
    assert await store.users.touch("u", ttl=None) is True
    assert backend.raw().pttl(key) == -1


async def test_nan_in_a_merge_is_refused_not_a_delete(store: AsyncStore) -> None:
    before = await store.users.put("u", {"score": 0.5, "name": "x"})
    for bad in (math.nan, math.inf):
        with pytest.raises(CodecError, match=r"\$\.score"):
            await store.users.merge("u", {"score": bad})
        with pytest.raises(CodecError):
            await store.users.put("u", {"score": bad})
    assert await store.users.get("u") == before


# -- round trips (read from the server) ---------------------------------------------


async def test_one_round_trip_per_operation(
    server_store: AsyncStore, roundtrips: RoundTrips
) -> None:
    s = server_store
    await s.sessions.put("warm", {})  # connect and load scripts first
    await s.sessions.get("warm", touch=True)
    ops: dict[str, Any] = {}
    roundtrips.start()
    rec = await s.sessions.put("s", {"n": 1})
    ops["put"] = roundtrips.stop()
    roundtrips.start()
    await s.sessions.get("s")
    ops["get"] = roundtrips.stop()
    roundtrips.start()
    rec = await s.sessions.put("s", {"n": 2}, if_version=rec.version)
    ops["conditional put"] = roundtrips.stop()
    roundtrips.start()
    await s.sessions.get("s", touch=True)
    ops["get touch"] = roundtrips.stop()
    roundtrips.start()
    await s.sessions.touch("s", ttl=60)
    ops["touch"] = roundtrips.stop()
    roundtrips.start()
    await s.sessions.ttl("s")
    ops["ttl"] = roundtrips.stop()
    roundtrips.start()
    await s.sessions.delete("s")
    ops["delete"] = roundtrips.stop()
    assert {k: len(v) for k, v in ops.items()} == dict.fromkeys(ops, 1), ops


async def test_merge_takes_one_round_trip_and_update_two(
    server_store: AsyncStore, roundtrips: RoundTrips
) -> None:
    s = server_store
    await s.users.put("u", {"a": 1})
    roundtrips.start()
    await s.users.merge("u", {"b": 2})
    merge = roundtrips.stop()
    roundtrips.start()
    await s.users.update("u", lambda d: {**d, "c": 3})
    update = roundtrips.stop()
    assert [c[0].upper() for c in merge] == ["FCALL"], merge
    assert [c[0].upper() for c in update] == ["GET", "FCALL"], update


async def test_the_sixteenth_merge_in_a_row_also_compacts(
    server_store: AsyncStore, roundtrips: RoundTrips
) -> None:
    s = server_store
    for i in range(16):  # the server loads record_compact on its first use: not counted
        await s.users.merge("warm", {"i": i})
    await s.users.put("u", {"a": 1})
    sent = []
    for i in range(1, 33):
        roundtrips.start()
        await s.users.merge("u", {f"k{i}": i})
        sent.append(len(roundtrips.stop()))
    due = {16, 32}  # a compaction with nothing appended since starts the count again
    assert sent == [2 if i in due else 1 for i in range(1, 33)]
    raw = await s._conn.client.get(s.keys.record("user", "u"))
    assert isinstance(raw, bytes) and raw.startswith(b"R1,")  # folded back, nothing appended since
    rec = await s.users.get("u")
    assert rec is not None and rec.data == {"a": 1, **{f"k{i}": i for i in range(1, 33)}}


VALID_HEADERS = [
    b"R1,1795960294114192,0000000000000,1795960294114,1,abc\n{}",
    b"R1,1795960294114192,1795960294114,1795960294114,123456789,a-_Z9" + b"w" * 27 + b"\n[]",
    b"R1,0000000000000001,0000000000000,0000000000000,1,abc\n{}",
    b"R1,9007199254740990,0000000000000,1795960294114,1,abc\n{}",  # 2**53 - 2
]
HEADERS = [
    *VALID_HEADERS,
    b"R1,0000000000000000,0000000000000,1795960294114,1,abc\n{}",  # version 0
    b"R1,9007199254740992,0000000000000,1795960294114,1,abc\n{}",  # 2**53
    b"R1,9007199254740993,0000000000000,1795960294114,1,abc\n{}",  # rounds in Lua
    b"R1,9999999999999999,0000000000000,1795960294114,1,abc\n{}",
    b"R1,179596029411419,0000000000000,1795960294114,1,abc\n{}",  # version too short
    b"R1,1795960294114192,000000000000,1795960294114,1,abc\n{}",  # expiry too short
    b"R1,1795960294114192,0000000000000,1795960294114,1,\n{}",  # empty write id
    b"R1,1795960294114192,0000000000000,1795960294114,1,a b\n{}",  # bad write id
    b"R1,+795960294114192,0000000000000,1795960294114,1,abc\n{}",  # sign
    b"R1,1795960294114192,0000000000000,1795960294114,1,abc{}",  # no newline
    b"R2,1795960294114192,0000000000000,1795960294114,1,abc\n{}",  # other format
    b"",
    b"R1,1795960294114192,0000000000000,1795960294114,1," + b"w" * 33 + b"\n{}",  # long id
    b"R1,1795960294114192,0000000000000,1795960294114,1234567890,abc\n{}",  # long schema
    b"R1,1795960294114192,0000000000000,1,1,abc\n{}",  # updated too short
    b"R1,1795960294114192,0000000000000,17959602941140,1,abc\n{}",  # updated too long
]


@pytest.mark.parametrize("raw", HEADERS)
async def test_python_and_lua_accept_the_same_headers(
    store: AsyncStore, backend: Backend, raw: bytes
) -> None:
    key = store.keys.record("user", "u")
    outcomes: dict[str, bool] = {}

    async def accepted(name: str, op: Any) -> None:
        backend.raw().set(key, raw)  # afresh: a successful op may have rewritten it
        try:
            await op()
            outcomes[name] = True
        except SchemaError:
            outcomes[name] = True  # the header parsed; its schema is newer than the code
        except IntegrityError:
            outcomes[name] = False
            assert backend.raw().get(key) == raw  # refused: nothing changed

    async def conditional_delete() -> None:
        try:
            await store.users.delete("u", if_version=1)
        except ConflictError:
            pass  # a conflict means the script parsed the header: accepted

    await accepted("python get", lambda: store.users.get("u"))
    await accepted("lua touch", lambda: store.users.touch("u", ttl=None))
    await accepted("lua get touch", lambda: store.users.get("u", touch=True, ttl=60))
    await accepted("lua put", lambda: store.users.put("u", {"new": 1}))
    await accepted("lua delete", conditional_delete)
    assert set(outcomes.values()) == {raw in VALID_HEADERS}, outcomes


async def test_get_many_reads_each_record_in_the_order_asked(store: AsyncStore) -> None:
    await store.sessions.put("a", {"n": 1}, ttl=600)
    await store.sessions.put("b{x}", {"n": 2})  # another hash slot on a cluster
    found = await store.sessions.get_many(["b{x}", "missing", "a"])
    assert list(found) == ["b{x}", "missing", "a"]
    assert found["a"] == await store.sessions.get("a")
    assert found["b{x}"] == await store.sessions.get("b{x}")
    assert found["missing"] is None
    assert await store.sessions.get_many([]) == {}
    assert list(await store.users.get_many(iter(["u"]))) == ["u"]  # any iterable
    with pytest.raises(InvalidId):
        await store.sessions.get_many(["a", ""])
    with pytest.raises(TypeError, match="not one str"):
        await store.sessions.get_many("ab")


async def test_get_many_is_one_round_trip(
    server_store: AsyncStore, server_backend: Backend
) -> None:
    ids = [f"s{n}" for n in range(20)]
    for sid in ids:
        await server_store.sessions.put(sid, {"sid": sid})
    await server_store.sessions.get_many(ids)  # the pipeline's connection is warm
    raw = server_backend.raw()
    before = server_reads(raw)
    found = await server_store.sessions.get_many(ids)
    after = server_reads(raw)
    assert [r.data["sid"] for r in found.values() if r is not None] == ids
    assert after - before - 1 == 1  # the second INFO is a read too
