"""Merges as appended patches (record_merge, record_compact): every backend, both I/O
flavours (this file has a generated sync twin)."""

from __future__ import annotations

import datetime as dt
import random
import time
from typing import Any

import pytest

from redistate import (
    AsyncStore,
    IntegrityError,
    LockLost,
    RedistateError,
    StateTooLarge,
)
from redistate.core._io import async_join, async_spawn
from redistate.core.envelope import tail, unpack
from redistate.core.scripts import script
from redistate.records.mergelog import frame, frames, should_compact
from redistate.records.mergepatch import merge_patch
from redistate.records.spec import Record, RecordMergeReply
from tests.conftest import Backend, ttl_left
from tests.resend import resent
from tests.roundtrips import server_reads

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

_MERGE = script("record_merge")
_COMPACT = script("record_compact")


def header_expiry(raw: bytes) -> dt.datetime | None:
    """The expiry a stored header carries, as a Record reports it."""
    ms = unpack("k", raw).expires_ms
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc) if ms else None


def stored(backend: Backend, key: str) -> bytes | None:
    client = backend.raw()
    try:
        value: bytes | None = client.get(key)
        return value
    finally:
        client.close()


# -- a random walk against a model ------------------------------------------------------

LEAVES: list[Any] = [0, 1, -7, 2**53 + 1, 0.5, -2.25, True, False, "", "x", "12:ab", "0:", "中🦜"]
NAMES = ["a", "b", "c", "d", "1:", "0"]


def random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth >= 3 or roll < 0.45:
        return rng.choice(LEAVES)
    if roll < 0.6:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(NAMES): random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def random_patch(rng: random.Random, depth: int = 0) -> Any:
    """Mostly objects (with deletions and nested patches); sometimes a whole new value."""
    if depth == 0 and rng.random() < 0.12:
        return rng.choice([["a", None, {"x": None}], "replaced", 42, [], None])
    patch: dict[str, Any] = {}
    for _ in range(rng.randrange(1, 4)):
        roll = rng.random()
        if roll < 0.25:
            patch[rng.choice(NAMES)] = None  # a deletion
        elif roll < 0.5 and depth < 2:
            patch[rng.choice(NAMES)] = random_patch(rng, depth + 1)
        else:
            patch[rng.choice(NAMES)] = random_value(rng, depth + 1)
    return patch


async def test_random_merges_match_the_model(store: AsyncStore, backend: Backend) -> None:
    rng = random.Random(7386)
    coll = store.users
    key = coll.spec.key("u")
    raw = backend.raw()
    model: Any = None
    exists = False
    patches: int | None = None  # patches in the stored value; None: plain or absent
    version = 0
    kinds: list[bytes] = []
    compactions = 0
    ops = ["merge"] * 16 + ["touch", "get_many", "put", "update", "delete"] * 1
    for step in range(90):
        op = rng.choice(ops)
        rec: Record | None = None
        if op == "merge":
            patch = random_patch(rng)
            rec = await coll.merge("u", patch)
            model = merge_patch(model if exists else {}, patch)
            exists = True
            patches = (patches or 0) + 1
            if should_compact(patches):
                patches = None
                compactions += 1
        elif op == "put":
            value = random_value(rng)
            rec = await coll.put("u", value)
            model, exists, patches = value, True, None
        elif op == "update":
            patch = random_patch(rng)

            def apply(data: Any, patch: Any = patch) -> Any:
                return merge_patch(data, patch)

            rec = await coll.update("u", apply)
            model, exists, patches = merge_patch(model if exists else {}, patch), True, None
        elif op == "touch":
            touched = await coll.get("u", touch=True, ttl=600)
            if exists:
                assert touched is not None and touched.data == model, step
                assert touched.version == version
            else:
                assert touched is None
        elif op == "get_many":
            found = await coll.get_many(["u", "other"])
            assert found["other"] is None
            if exists:
                many = found["u"]
                assert many is not None and many.data == model and many.version == version
            else:
                assert found["u"] is None
        else:
            await coll.delete("u")
            model, exists, patches = None, False, None
        if rec is not None:
            assert rec.data == model, (step, op)
            assert rec.version > version, (step, op)
            version = rec.version
        got = await coll.get("u")
        value_now = raw.get(key)
        if not exists:
            assert got is None and value_now is None, step
            continue
        assert got is not None and got.data == model, (step, op)
        assert got.version == version
        if rec is not None:
            assert got == rec
        kind = b"R1" if patches is None else b"M1"
        assert value_now[:2] == kind, (step, op, patches)
        if patches is not None:
            env = unpack(key, value_now)
            assert len(frames(key, env.payload)) == patches + 1  # the base and the patches
        kinds.append(kind)
    assert {b"M1", b"R1"} <= set(kinds)
    assert compactions >= 1  # a run of 16 merges folded back by the merging client


# -- compaction -----------------------------------------------------------------------


async def test_compaction_keeps_what_was_appended_after_the_fold(
    store: AsyncStore, backend: Backend
) -> None:
    coll = store.users
    key = coll.spec.key("u")
    raw = backend.raw()
    model: Any = {"a": 1, "gone": True}
    await coll.put("u", model, ttl=60)
    for i in range(3):
        patch = {"k": i, f"n{i}": {"deep": i}, "gone": None}
        await coll.merge("u", patch)
        model = merge_patch(model, patch)
    folded_value = raw.get(key)
    env = unpack(key, folded_value)
    assert env.log and len(frames(key, env.payload)) == 4
    folded = coll.spec.record("u", key, folded_value)
    assert folded is not None and folded.data == model
    later: list[Any] = [{"k": "later"}, {"n0": None}, {"extra": [1, None, {"z": None}]}]
    for patch in later:
        await coll.merge("u", patch)
        model = merge_patch(model, patch)
    before = await coll.get("u")
    before_env = unpack(key, raw.get(key))
    pttl = raw.pttl(key)
    base = coll.spec.encode(key, folded.data)
    args = (tail(env.schema, env.write_id), len(folded_value), base, tail(1, "compact1"), 0)
    assert await coll._conn.script(_COMPACT, (key,), args) == 1
    compacted = raw.get(key)
    after_env = unpack(key, compacted)
    assert compacted.startswith(b"M1,")  # merges came after the fold: still patches
    assert frames(key, after_env.payload) == [base, *(coll.spec.encode(key, p) for p in later)]
    assert after_env.write_id == "compact1"
    assert after_env[:3] == before_env[:3]  # version, expiry and updated stay as they were
    got = await coll.get("u")
    assert got == before and got is not None and got.data == model
    assert 0 < raw.pttl(key) <= pttl  # the TTL is kept, not reset or removed
    # A resent compaction finds the tail changed: nothing happens.
    assert await coll._conn.script(_COMPACT, (key,), args) == 0
    assert raw.get(key) == compacted
    # Merges keep appending to the compacted value.
    rec = await coll.merge("u", {"after": "compaction"})
    model = merge_patch(model, {"after": "compaction"})
    assert rec.data == model and rec.version > before_env.version
    assert (await coll.get("u")) == rec


async def test_compaction_with_nothing_appended_writes_a_plain_record(
    store: AsyncStore, backend: Backend
) -> None:
    coll = store.sessions
    key = coll.spec.key("s")
    raw = backend.raw()
    since = time.monotonic()
    await coll.merge("s", {"a": {"b": 1}})
    last = await coll.merge("s", {"a": {"c": 2}})
    value = raw.get(key)
    env = unpack(key, value)
    assert env.log
    base = coll.spec.encode(key, last.data)
    args = (tail(env.schema, env.write_id), len(value), base, tail(1, "compact2"), 0)
    assert await coll._conn.script(_COMPACT, (key,), args) == 1
    plain = raw.get(key)
    plain_env = unpack(key, plain)
    assert not plain_env.log and plain_env.payload == base
    assert plain_env[:3] == env[:3]
    assert await coll.get("s") == last
    ttl_left(raw, key, 3_600_000, since)
    assert await coll._conn.script(_COMPACT, (key,), args) == 0  # resent: nothing
    assert raw.get(key) == plain


async def test_compaction_after_the_record_was_replaced_does_nothing(
    store: AsyncStore, backend: Backend
) -> None:
    coll = store.users
    key = coll.spec.key("u")
    raw = backend.raw()

    async def folded_args(patch: Any) -> tuple[Any, ...]:
        rec = await coll.merge("u", patch)
        value = raw.get(key)
        env = unpack(key, value)
        assert env.log
        base = coll.spec.encode(key, rec.data)
        return (tail(env.schema, env.write_id), len(value), base, tail(1, "late"), 0)

    args = await folded_args({"a": 1})
    await coll.put("u", {"replaced": True})
    now = raw.get(key)
    assert await coll._conn.script(_COMPACT, (key,), args) == 0
    assert raw.get(key) == now
    args = await folded_args({"b": 2})
    await coll.update("u", lambda d: {**d, "c": 3})
    now = raw.get(key)
    assert await coll._conn.script(_COMPACT, (key,), args) == 0
    assert raw.get(key) == now
    args = await folded_args({"d": 4})
    assert await coll.delete("u")
    assert await coll._conn.script(_COMPACT, (key,), args) == 0
    assert raw.exists(key) == 0  # not brought back
    # Deleted, then re-created by merges: another generation (another tail).
    args = await folded_args({"e": 5})
    await coll.delete("u")
    await coll.merge("u", {"e": 6})
    await coll.merge("u", {"f": 7})
    now = raw.get(key)
    assert await coll._conn.script(_COMPACT, (key,), args) == 0
    assert raw.get(key) == now
    got = await coll.get("u")
    assert got is not None and got.data == {"e": 6, "f": 7}


# -- resends ----------------------------------------------------------------------------


async def test_a_resent_merge_is_applied_once(store: AsyncStore, backend: Backend) -> None:
    coll = store.users
    key = coll.spec.key("u")
    raw = backend.raw()
    keys, guard = coll.spec.guarded_keys("u", key, None)
    assert guard == "" and coll._conn.memory_ms > 0

    def merge_args(patch: Any, write_id: str) -> tuple[tuple[Any, ...], bytes]:
        payload = coll.spec.encode(key, patch)
        args = coll.spec.merge_args(
            key, payload, 0, write_id, keep=True, memory_ms=coll._conn.memory_ms
        )
        return args.argv(), payload

    await coll.put("u", {"x": 0, "y": 0})
    # The merge that turns the plain record into patches.
    a, _ = merge_args({"x": 1}, "merge-a")
    first = await coll._conn.script(_MERGE, keys, a)
    assert type(first) is bytes and first.startswith(b"M1,")
    a_version = unpack(key, first).version
    again = await coll._conn.script(_MERGE, keys, resent(_MERGE, a))
    assert [int(again[0]), int(again[1])] == [3, a_version] and again[2] == first
    assert raw.get(key) == first
    b = await coll.merge("u", {"x": 2})
    now = raw.get(key)
    late = await coll._conn.script(_MERGE, keys, resent(_MERGE, a))
    assert [int(late[0]), int(late[1])] == [3, a_version] and late[2] == now
    assert raw.get(key) == now
    got = await coll.get("u")
    assert got is not None and got.data == {"x": 2, "y": 0} and got.version == b.version
    merged = coll.spec.merged("u", key, RecordMergeReply.parse(late))
    assert merged is not None and merged.record == got and merged.compact is None
    # A merge that appends to the patches.
    c, _ = merge_args({"y": 5}, "merge-c")
    appended = await coll._conn.script(_MERGE, keys, c)
    c_version = unpack(key, appended).version
    assert c_version > b.version
    await coll.merge("u", {"y": 6})
    now = raw.get(key)
    late = await coll._conn.script(_MERGE, keys, resent(_MERGE, c))
    assert [int(late[0]), int(late[1])] == [3, c_version] and late[2] == now
    assert raw.get(key) == now
    env = unpack(key, now)
    assert len(frames(key, env.payload)) == 5  # base, a, b, c, and the last merge: once each
    got = await coll.get("u")
    assert got is not None and got.data == {"x": 2, "y": 6}
    # Still recognised once the record is replaced.
    await coll.put("u", {"fresh": 1})
    now = raw.get(key)
    late = await coll._conn.script(_MERGE, keys, resent(_MERGE, c))
    assert int(late[0]) == 3 and late[2] == now and raw.get(key) == now


async def test_a_resent_merge_after_a_delete_creates_nothing(
    store: AsyncStore, backend: Backend
) -> None:
    coll = store.users
    key = coll.spec.key("gone")
    keys, _ = coll.spec.guarded_keys("gone", key, None)
    payload = coll.spec.encode(key, {"z": 1})
    args = coll.spec.merge_args(key, payload, 0, "merge-d", keep=True, memory_ms=36_000).argv()
    first = await coll._conn.script(_MERGE, keys, args)
    env = unpack(key, first)
    assert env.log and frames(key, env.payload) == [b"", payload]  # created: an empty base
    assert await coll.delete("gone")
    late = await coll._conn.script(_MERGE, keys, resent(_MERGE, args))
    assert [int(late[0]), int(late[1])] == [3, env.version]
    assert late[2:] in ([], [None])  # no current value (fakeredis reports a nil)
    assert backend.raw().exists(key) == 0
    merged = coll.spec.merged("gone", key, RecordMergeReply.parse(late))
    assert merged is not None  # applied, then deleted: the state after it is not known
    assert merged.record == Record("gone", None, env.version, None)


async def test_a_resent_put_is_still_known_after_a_merge_patched_its_record(
    store: AsyncStore, backend: Backend
) -> None:
    # The put's write id leaves the header when the merge rewrites it: it must be kept.
    coll = store.users
    key = coll.spec.key("u")
    keys, _ = coll.spec.guarded_keys("u", key, None)
    memory = coll._conn.memory_ms
    payload = coll.spec.encode(key, {"p": 1})
    put = coll.spec.put_args(None, 0, "put-1", payload, memory_ms=memory).argv()
    written = await coll._conn.script(script("record_put"), keys, put)
    version = int(written.split(b",")[0])
    await coll.merge("u", {"m": 1})
    now = stored(backend, key)
    late = await coll._conn.script(script("record_put"), keys, resent(script("record_put"), put))
    assert [int(late[0]), int(late[1])] == [3, version]
    assert stored(backend, key) == now
    got = await coll.get("u")
    assert got is not None and got.data == {"p": 1, "m": 1}


@pytest.mark.parametrize(
    "change",
    [
        {0: "5:{}"},  # length does not match the patch
        {0: "{}"},  # not a frame
        {0: "x:{}"},
        {1: "-1"},  # ttl
        {1: "abc"},
        {2: "2"},  # keep flag
        {3: "1,bad id\n"},  # tail
        {3: "1,w"},
        {5: "-5"},  # memory
        {6: "-1"},  # max bytes
        {6: ""},
    ],
)
async def test_record_merge_refuses_malformed_arguments(
    store: AsyncStore, backend: Backend, change: dict[int, str]
) -> None:
    coll = store.users
    key = coll.spec.key("u")
    keys, _ = coll.spec.guarded_keys("u", key, None)
    await coll.put("u", {"a": 1})
    before = stored(backend, key)
    args = list(coll.spec.merge_args(key, b"{}", 0, "w1", keep=True).argv())
    for at, value in change.items():
        args[at] = value
    with pytest.raises(RedistateError, match="RSARG"):
        await coll._conn.script(_MERGE, keys, tuple(args))
    assert stored(backend, key) == before


# -- TTLs -------------------------------------------------------------------------------


async def test_a_merge_that_creates_takes_the_collection_ttl(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    key = store.sessions.spec.key("new")
    since = time.monotonic()
    rec = await store.sessions.merge("new", {"a": 1})
    value = raw.get(key)
    env = unpack(key, value)
    assert env.log and env.expires_ms - env.updated_ms == 3_600_000
    ttl_left(raw, key, 3_600_000, since)
    assert rec.expires_at == header_expiry(value) is not None
    again = await store.sessions.merge("new", {"b": 2})  # appended: the TTL is kept
    assert again.expires_at == rec.expires_at == header_expiry(raw.get(key))
    ukey = store.users.spec.key("new")
    made = await store.users.merge("new", {"a": 1})  # users never expire
    assert made.expires_at is None and raw.pttl(ukey) == -1
    assert header_expiry(raw.get(ukey)) is None


async def test_a_merge_keeps_the_records_own_ttl(store: AsyncStore, backend: Backend) -> None:
    raw = backend.raw()
    coll = store.users
    key = coll.spec.key("u")
    since = time.monotonic()
    put = await coll.put("u", {"n": 0}, ttl=60)
    assert put.expires_at is not None
    pttl = raw.pttl(key)
    converted = await coll.merge("u", {"m": 1})  # plain -> patches
    assert raw.get(key).startswith(b"M1,")
    assert converted.expires_at == put.expires_at == header_expiry(raw.get(key))
    assert ttl_left(raw, key, 60_000, since) <= pttl  # kept, not set again
    appended = await coll.merge("u", {"m": 2})  # patches -> one more patch
    assert appended.expires_at == put.expires_at == header_expiry(raw.get(key))
    assert ttl_left(raw, key, 60_000, since) <= pttl
    # A session without expiry keeps having none (not the collection's hour).
    skey = store.sessions.spec.key("s")
    await store.sessions.put("s", {"n": 0}, ttl=None)
    for patch in ({"m": 1}, {"m": 2}):
        rec = await store.sessions.merge("s", patch)
        assert rec.expires_at is None and raw.pttl(skey) == -1
        assert header_expiry(raw.get(skey)) is None
    # After a sliding touch the merge keeps the touched expiry.
    await store.sessions.merge("t", {"a": 1})
    await store.sessions.merge("t", {"b": 1})
    since = time.monotonic()
    touched = await store.sessions.get("t", touch=True, ttl=90)
    assert touched is not None and touched.expires_at is not None
    rec = await store.sessions.merge("t", {"c": 1})
    tkey = store.sessions.spec.key("t")
    assert rec.expires_at == touched.expires_at == header_expiry(raw.get(tkey))
    ttl_left(raw, tkey, 90_000, since)


async def test_an_explicit_ttl_sets_it(store: AsyncStore, backend: Backend) -> None:
    raw = backend.raw()
    coll = store.users
    key = coll.spec.key("v")

    async def check(merge: Any, ttl_ms: int | None) -> None:
        since = time.monotonic()
        rec: Record = await merge()
        value = raw.get(key)
        env = unpack(key, value)
        assert env.log
        assert rec.expires_at == header_expiry(value)
        if ttl_ms is None:
            assert env.expires_ms == 0 and raw.pttl(key) == -1
        else:
            assert env.expires_ms - env.updated_ms == ttl_ms
            ttl_left(raw, key, ttl_ms, since)

    await coll.put("v", {"n": 0}, ttl=60)
    await check(lambda: coll.merge("v", {"a": 1}, ttl=120), 120_000)  # on the conversion
    await check(lambda: coll.merge("v", {"a": 2}, ttl=300), 300_000)  # on an append
    await check(lambda: coll.merge("v", {"a": 3}, ttl=None), None)  # persisted
    await check(lambda: coll.merge("v", {"a": 4}), None)  # and kept so
    await check(lambda: coll.merge("v", {"a": 5}, ttl=30), 30_000)  # from none to one
    await coll.put("v", {"n": 1}, ttl=60)
    await check(lambda: coll.merge("v", {"a": 6}, ttl=None), None)  # conversion, persisted
    await coll.delete("v")
    await check(lambda: coll.merge("v", {"a": 7}, ttl=45), 45_000)  # creation with a TTL
    got = await coll.get("v")
    assert got is not None and got.data == {"a": 7}


# -- max_bytes --------------------------------------------------------------------------


async def test_patches_past_max_bytes_fold_by_compare_and_set(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    notes = store.collection("notes", max_bytes=100)
    for nid, extra in (("exact", 0), ("over", 1)):
        key = notes.spec.key(nid)
        await notes.merge(nid, {"a": 1})
        used = len(unpack(key, raw.get(key)).payload)
        assert used == len(frame(b"")) + len(frame(notes.spec.encode(key, {"a": 1})))
        # The longest patch whose frame fits exactly in what is left, plus ``extra``.
        size = next(
            k
            for k in range(100)
            if len(frame(notes.spec.encode(key, {"b": "x" * k}))) == 100 - used
        )
        patch = {"b": "x" * (size + extra)}
        before = await notes.get(nid)
        assert before is not None
        rec = await notes.merge(nid, patch)
        value = raw.get(key)
        assert rec.data == {"a": 1, **patch} == (await notes.get(nid)).data  # type: ignore[union-attr]
        assert rec.version > before.version
        if extra == 0:
            assert value.startswith(b"M1,") and len(unpack(key, value).payload) == 100
        else:  # merged by compare-and-set: the folded record fits, as a plain record
            assert value.startswith(b"R1,")
            assert unpack(key, value).payload == notes.spec.encode(key, rec.data)
    # A deletion that would not fit as a frame shrinks the record: it succeeds.
    key = notes.spec.key("shrink")
    await notes.merge("shrink", {"a": "x" * 30})
    await notes.merge("shrink", {"b": "y" * 30})
    assert raw.get(key).startswith(b"M1,")
    rec = await notes.merge("shrink", {"a": None, "c": "z" * 8})
    assert rec.data == {"b": "y" * 30, "c": "z" * 8}
    assert raw.get(key).startswith(b"R1,")
    assert await notes.get("shrink") == rec


async def test_a_merge_whose_result_is_over_max_bytes_changes_nothing(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    notes = store.collection("notes", ttl=600, max_bytes=100)
    # Plain record: the conversion does not fit, nor does the merged record.
    key = notes.spec.key("plain")
    await notes.put("plain", {"a": "x" * 80})
    patch: Any = {"d": "y" * 10}
    assert len(notes.spec.codec.encode({"a": "x" * 80, **patch}, b"")) > 100
    before, pttl = raw.get(key), raw.pttl(key)
    with pytest.raises(StateTooLarge) as info:
        await notes.merge("plain", patch)
    assert info.value.limit == 100 and info.value.size > 100
    assert raw.get(key) == before and 0 < raw.pttl(key) <= pttl
    # Patched record: the next frame does not fit, nor does the folded record.
    key = notes.spec.key("log")
    await notes.merge("log", {"a": 1})
    await notes.merge("log", {"b": "x" * 40})
    before, pttl = raw.get(key), raw.pttl(key)
    assert before.startswith(b"M1,")
    patch = {"c": "y" * 40}
    assert len(notes.spec.codec.encode({"a": 1, "b": "x" * 40, **patch}, b"")) > 100
    with pytest.raises(StateTooLarge):
        await notes.merge("log", patch)
    assert raw.get(key) == before and 0 < raw.pttl(key) <= pttl
    got = await notes.get("log")
    assert got is not None and got.data == {"a": 1, "b": "x" * 40}
    # A patch over max_bytes by itself is refused before anything is sent.
    with pytest.raises(StateTooLarge):
        await notes.merge("log", {"huge": "z" * 200})
    with pytest.raises(StateTooLarge):
        await notes.merge("absent", {"huge": "z" * 200})
    assert raw.get(key) == before and raw.exists(notes.spec.key("absent")) == 0


# -- leases -----------------------------------------------------------------------------


async def test_a_merge_guarded_by_a_lost_lease_writes_nothing(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    coll = store.users
    key = coll.spec.key("u")
    old = await store.lock("u", ttl=30, renew=False).acquire()
    made = await coll.merge("u", {"a": 1}, lease=old)  # creates, guarded
    rec = await coll.merge("u", {"b": 2}, lease=old)  # appends, guarded
    assert rec.data == {"a": 1, "b": 2} and rec.version > made.version
    await coll.put("u", {"plain": 1}, lease=old)
    rec = await coll.merge("u", {"c": 3}, lease=old)  # converts, guarded
    assert rec.data == {"plain": 1, "c": 3} and raw.get(key).startswith(b"M1,")
    raw.delete(old.key)  # it expired while its holder was paused
    new = await store.lock("u", ttl=30, renew=False).acquire()
    before = raw.get(key)
    with pytest.raises(LockLost):
        await coll.merge("u", {"stale": True}, lease=old)  # onto patches
    assert raw.get(key) == before
    await coll.put("u", {"plain": 2}, lease=new)
    before = raw.get(key)
    with pytest.raises(LockLost):
        await coll.merge("u", {"stale": True}, lease=old)  # onto a plain record
    assert raw.get(key) == before
    rec = await coll.merge("u", {"fresh": True}, lease=new)
    assert rec.data == {"plain": 2, "fresh": True}
    # Past max_bytes the merge is a guarded compare-and-set: the lease still decides.
    small = store.collection("small", max_bytes=60)
    skey = small.spec.key("u")
    await small.put("u", {"a": "x" * 40}, lease=new)
    before = raw.get(skey)
    with pytest.raises(LockLost):
        await small.merge("u", {"a": "y" * 40}, lease=old)
    assert raw.get(skey) == before
    rec = await small.merge("u", {"a": "y" * 40}, lease=new)
    assert rec.data == {"a": "y" * 40} and raw.get(skey).startswith(b"R1,")
    absent = store.keys.record("user", "other")
    with pytest.raises((LockLost, ValueError)):
        await coll.merge("other", {"x": 1}, lease=new)  # a lease for another id
    assert raw.exists(absent) == 0
    await new.release()


# -- values that are not (well-formed) records -------------------------------------------


async def test_a_merge_onto_a_foreign_value_is_an_integrity_error(
    store: AsyncStore, backend: Backend
) -> None:
    raw = backend.raw()
    coll = store.users
    key = coll.spec.key("u")
    for value in (b"hello", b"M1,garbage\n0:", b"R1,123\n{}", b""):
        raw.set(key, value)
        with pytest.raises(IntegrityError):
            await coll.merge("u", {"a": 1})
        assert raw.get(key) == value
        with pytest.raises(IntegrityError):
            await coll._conn.script(_COMPACT, (key,), ("1,w\n", "10", b"{}", "1,v\n", "0"))
        assert raw.get(key) == value
    assert raw.exists(store.keys.writes(key)) == 0
    raw.delete(key)
    raw.hset(key, "f", "v")
    with pytest.raises(IntegrityError):
        await coll.merge("u", {"a": 1})
    assert raw.hgetall(key) == {b"f": b"v"}


@pytest.mark.parametrize(
    "payload",
    [b"10:abc", b"", b"0:x:{}", b'0:9:{"a":1}', b'7:{"a":1}3', b"{}"],
)
async def test_damaged_patches_are_an_integrity_error(
    store: AsyncStore, backend: Backend, payload: bytes
) -> None:
    raw = backend.raw()
    coll = store.users
    key = coll.spec.key("u")
    value = b"M1,1700000000123456,0000000000000,1700000000123,1,w\n" + payload
    raw.set(key, value)
    with pytest.raises(IntegrityError, match="frame"):
        await coll.get("u")
    with pytest.raises(IntegrityError):
        await coll.get_many(["u"])
    with pytest.raises(IntegrityError):
        await coll.update("u", lambda d: {"replaced": True})
    assert raw.get(key) == value
    # record_merge appends without parsing the frames: the reader's fold reports the
    # damage to the merging client, and it stays visible (never folded into data).
    # Without even a base frame the script refuses the merge before writing anything.
    with pytest.raises(IntegrityError):
        await coll.merge("u", {"a": None, "b": 1})
    if not payload:
        assert raw.get(key) == value
    with pytest.raises(IntegrityError):
        await coll.get("u")
    # The same bytes as a plain record are not frames: an opaque payload to decode.
    raw.set(key, b"R1" + value[2:])
    if payload == b"{}":
        got = await coll.get("u")
        assert got is not None and got.data == {}


# -- concurrency -------------------------------------------------------------------------


def calls(client: Any) -> dict[str, int]:
    """Commands the server ran so far, by name (INFO commandstats)."""
    return {name: int(stat["calls"]) for name, stat in client.info("commandstats").items()}


def connections(client: Any) -> int:
    return int(client.info("stats")["total_connections_received"])


async def test_concurrent_merges_lose_nothing_in_one_round_trip_each(
    server_store: AsyncStore, server_backend: Backend
) -> None:
    coll = server_store.users
    raw = server_backend.raw()
    workers, each = 20, 10
    done: dict[str, Record] = {}

    def worker(rid: str, w: int) -> Any:
        async def run() -> None:
            for i in range(each):
                done[f"{rid}/w{w}-{i}"] = await coll.merge(rid, {f"w{w}-{i}": i})

        return run

    async def contend(rid: str) -> None:
        handles = [async_spawn(worker(rid, w), f"merger {w}") for w in range(workers)]
        for handle in handles:
            await async_join(handle)

    await contend("warm")  # connections open and scripts load first: not counted
    calls_before, connected = calls(raw), connections(raw)
    before = server_reads(raw)
    await contend("u")
    reads = server_reads(raw) - before - 1  # the second INFO is a read too
    # A thread pool may still open a connection; its handshake (HELLO and two CLIENT
    # SETINFO) is not a merge's cost.
    handshakes = 3 * (connections(raw) - connected)
    made = {k: n - calls_before.get(k, 0) for k, n in calls(raw).items()}
    assert len(done) == 2 * workers * each
    expected = {f"w{w}-{i}": i for w in range(workers) for i in range(each)}
    got = await coll.get("u")
    assert got is not None and got.data == expected
    mine = [rec for name, rec in done.items() if name.startswith("u/")]
    for name, rec in done.items():
        if name.startswith("u/"):
            field = name.split("/", 1)[1]
            assert rec.data[field] == expected[field]  # each result holds its own merge
    assert len({rec.version for rec in mine}) == workers * each  # one version per merge
    assert max(rec.version for rec in mine) == got.version
    assert made["cmdstat_fcall"] <= 1.2 * workers * each, made
    assert reads - handshakes <= 1.2 * workers * each, (reads, handshakes)


# -- a compaction that fails --------------------------------------------------------------


async def test_a_failed_compaction_does_not_fail_the_merge_it_follows(
    server_store: AsyncStore, server_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge is applied before its compaction: the compaction's error (here a real
    maxmemory refusal, set between the two scripts) must not reach the caller, who
    would otherwise retry and apply the patch twice."""
    coll = server_store.users
    for i in range(15):
        await coll.merge("full", {f"k{i}": i})
    raw = server_backend.raw()
    conn = coll._conn
    original = type(conn).script
    compactions: list[str] = []

    async def fill_before_compaction(
        self: Any,
        s: Any,
        keys: Any,
        args: Any,
        budget: Any = None,
        replicas: int = 0,
        lease: Any = None,
        wid: Any = None,
    ) -> Any:
        if s.name == "record_compact":
            compactions.append(keys[0])
            raw.config_set("maxmemory", "1")
        return await original(self, s, keys, args, budget, replicas, lease, wid)

    monkeypatch.setattr(type(conn), "script", fill_before_compaction)
    try:
        rec = await coll.merge("full", {"last": True})  # the 16th patch: due to compact
    finally:
        raw.config_set("maxmemory", "0")
    assert compactions == [coll.spec.key("full")]
    want = {**{f"k{i}": i for i in range(15)}, "last": True}
    assert rec.data == want
    stored = raw.get(coll.spec.key("full"))
    assert stored.startswith(b"M1,")  # not folded back: the compaction was refused
    got = await coll.get("full")
    assert got is not None and got.data == want and got.version == rec.version


# -- merges that do not read the record back ---------------------------------------------


async def test_a_merge_not_returning_the_value_replies_small_and_still_folds(
    store: AsyncStore, backend: Backend
) -> None:
    coll = store.users
    big = {f"field{i}": "x" * 100 for i in range(1000)}  # ~110 KB
    await coll.put("u", big)
    key = coll.spec.key("u")
    keys, _ = coll.spec.guarded_keys("u", key, None)
    payload = coll.spec.encode(key, {"n": 0})
    args = coll.spec.merge_args(key, payload, 0, "brief-1", keep=True, brief=True).argv()
    reply = await coll._conn.script(_MERGE, keys, args)
    assert int(reply[0]) == 5 and len(reply[1]) < 64  # the fields, not 110 KB
    versions = [unpack(key, backend.raw().get(key)).version]
    assert int(reply[1].split(b",")[0]) == versions[0]
    folds = 0
    for n in range(1, 200):
        rec = await coll.merge("u", {"n": n, f"k{n}": n}, returning=False)
        assert rec.data is None and rec.version > versions[-1] and rec.expires_at is None
        versions.append(rec.version)
        stored = backend.raw().get(key)
        assert unpack(key, stored).version == rec.version
        folds += not stored.startswith(b"M1,")
    # Folded back now and then (one merge in 16 by chance), never losing a patch.
    assert folds >= 1, folds
    got = await coll.get("u")
    assert got is not None and got.version == versions[-1]
    assert got.data == {**big, "n": 199, **{f"k{n}": n for n in range(1, 200)}}
    # Bounded: patches pile up only until a fold.
    env = unpack(key, backend.raw().get(key))
    assert not env.log or len(frames(key, env.payload)) < 150


async def test_a_merge_not_returning_the_value_is_resent_once(
    store: AsyncStore, backend: Backend
) -> None:
    coll = store.users
    key = coll.spec.key("r")
    keys, _ = coll.spec.guarded_keys("r", key, None)
    await coll.put("r", {"a": 1})
    payload = coll.spec.encode(key, {"b": 2})
    memory = coll._conn.memory_ms
    args = coll.spec.merge_args(
        key, payload, 0, "brief-r", keep=True, memory_ms=memory, brief=True
    ).argv()
    first = await coll._conn.script(_MERGE, keys, args)
    version = int(first[1].split(b",")[0])
    again = await coll._conn.script(_MERGE, keys, resent(_MERGE, args))
    assert [int(again[0]), int(again[1])] == [3, version]  # recognised: not appended again
    got = await coll.get("r")
    assert got is not None and got.data == {"a": 1, "b": 2} and got.version == version
    with pytest.raises(RedistateError, match="RSARG"):
        await coll._conn.script(_MERGE, keys, (*args[:7], "2"))
