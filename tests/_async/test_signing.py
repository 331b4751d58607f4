"""Keyed integrity on every backend (this file has a generated sync twin): someone who can
write to Redis, but holds no signing key, tampers with events, checkpoints and records.
Each case runs without signing keys (what the unkeyed digests let through, stated in
RELIABILITY.md) and with them (caught: IntegrityError or a failed verify)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import pytest

from redistate import AsyncStore, EncryptedCodec, IntegrityError, SigningKeys
from redistate.events.spec import EventSpec
from tests.conftest import Backend

S1, S2, ENC = os.urandom(32), os.urandom(32), os.urandom(32)
Entries = list[tuple[bytes, dict[bytes, bytes]]]
SIGNED = pytest.mark.parametrize("signed", [False, True], ids=["unkeyed", "signed"])


pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


def make(
    backend: Backend, namespace: str, signing: SigningKeys | None, encrypted: bool = True
) -> AsyncStore:
    codec = EncryptedCodec({"e1": ENC}, primary="e1") if encrypted else None
    return AsyncStore(backend.async_client(), namespace=namespace, codec=codec, signing=signing)


@pytest.fixture
async def stores(backend: Backend, namespace: str) -> AsyncIterator[Callable[..., AsyncStore]]:
    made: list[AsyncStore] = []

    def factory(signed: bool, encrypted: bool = True, **keys: Any) -> AsyncStore:
        signing = None
        if signed:
            signing = SigningKeys(keys.get("keys", {"s1": S1}), keys.get("primary", "s1"))
        store = make(backend, namespace, signing, encrypted)
        made.append(store)
        return store

    yield factory
    for store in made:
        await store.aclose()


def forger(signed: bool) -> SigningKeys | None:
    """What an attacker without the key can do at best: unkeyed digests, or seals under
    the store's key id made with a key of their own."""
    return SigningKeys({"s1": os.urandom(32)}, "s1") if signed else None


def raw_call(backend: Backend, fn: Callable[[Any], Any]) -> Any:
    raw = backend.raw()
    try:
        return fn(raw)
    finally:
        raw.close()


def rebuild(backend: Backend, key: str, new: Entries) -> None:
    def run(raw: Any) -> None:
        raw.delete(key)
        for eid, fields in new:
            raw.xadd(key, fields, id=eid)

    raw_call(backend, run)


def rechained(store: AsyncStore, key: str, es: Entries, signed: bool) -> Entries:
    """``es`` with every link recomputed by the forger (after an edit or a removal)."""
    spec = EventSpec(store.codec, max_bytes=1 << 20, signing=forger(signed))
    out, prev = [], ""
    for seq, (eid, fields) in enumerate(es, 1):
        f = dict(fields)
        d = spec.digest(
            key, prev, seq, f[b"t"].decode(), int(f[b"s"]), int(f[b"at"]), f[b"p"]
        )  # fmt: skip
        f.update({b"prev": prev.encode(), b"n": str(seq).encode(), b"d": d.encode()})
        out.append((eid, f))
        prev = d
    return out


def entries_of(backend: Backend, key: str) -> Entries:
    return list(raw_call(backend, lambda r: r.xrange(key, "-", "+")))


async def appended(store: AsyncStore, backend: Backend) -> Entries:
    for n in range(3):
        await store.events.append("e1", "updated", {"step": n, "paid": n == 1})
    return entries_of(backend, store.keys.events("e1"))


# -- events --------------------------------------------------------------------------------


@SIGNED
async def test_an_edited_event_with_the_chain_recomputed(
    stores: Callable[..., AsyncStore], backend: Backend, signed: bool
) -> None:
    store = stores(signed)
    es = await appended(store, backend)
    key = store.keys.events("e1")
    # Event 2's encrypted payload replaced by event 1's (valid ciphertext of this key).
    edited = [es[0], (es[1][0], {**es[1][1], b"p": es[0][1][b"p"]}), es[2]]
    rebuild(backend, key, rechained(store, key, edited, signed))
    check = await store.events.verify("e1")
    if not signed:
        assert check.ok  # the unkeyed chain cannot tell: anyone may recompute it
        return
    assert not check.ok and check.first_bad == es[0][0].decode()
    assert "does not authenticate with signing key 's1'" in check.problems[0]
    with pytest.raises(IntegrityError, match="does not authenticate"):
        await store.events.read("e1")


@SIGNED
async def test_a_removed_event_on_an_encrypted_store(
    stores: Callable[..., AsyncStore], backend: Backend, signed: bool
) -> None:
    store = stores(signed)
    es = await appended(store, backend)
    key = store.keys.events("e1")
    rebuild(backend, key, rechained(store, key, [es[0], es[2]], signed))
    check = await store.events.verify("e1")
    assert check.ok is (not signed), check.problems
    if signed:
        assert check.first_bad == es[0][0].decode()


@SIGNED
async def test_the_oldest_events_removed_behind_a_forged_anchor(
    stores: Callable[..., AsyncStore], backend: Backend, signed: bool
) -> None:
    store = stores(signed)
    es = await appended(store, backend)
    key, anchor_key = store.keys.events("e1"), store.keys.events_anchor("e1")
    first_digest = es[0][1][b"d"].decode()
    state = store.codec.encode({}, key.encode())  # as if the first event never happened
    spec = EventSpec(store.codec, max_bytes=1 << 20, signing=forger(signed))
    anchor = {
        "id": es[0][0],
        "seq": 1,
        "digest": first_digest,
        "state": state,
        "state_digest": spec.state_seal(key, first_digest, state),
        "removed": 1,
    }
    raw_call(backend, lambda r: (r.xdel(key, es[0][0]), r.hset(anchor_key, mapping=anchor)))
    check = await store.events.verify("e1")
    assert check.ok is (not signed), check.problems
    if signed:
        assert check.first_bad == "anchor" and "does not authenticate" in check.problems[0]


async def test_an_unsigned_chain_on_a_signed_store_is_refused_until_rotated(
    stores: Callable[..., AsyncStore], backend: Backend
) -> None:
    before = stores(False)
    await appended(before, backend)
    after = stores(True)
    check = await after.events.verify("e1")
    assert not check.ok and "is not signed" in check.problems[0]
    with pytest.raises(IntegrityError, match="is not signed"):
        await after.events.read("e1")
    # rotate-keys' path: read without the seal check once, seal with the primary.
    assert after.signing is not None
    after.signing.read_unsigned = True
    assert await after.events.rewrite("e1", lambda schema, data: None) == 3
    after.signing.read_unsigned = False
    assert (await after.events.verify("e1")).ok
    assert len(await after.events.read("e1")) == 3


async def test_a_trim_anchor_is_sealed(stores: Callable[..., AsyncStore], backend: Backend) -> None:
    store = stores(True)
    await appended(store, backend)
    assert await store.events.trim("e1", keep=1) == 2
    assert (await store.events.verify("e1")).ok
    anchor_key = store.keys.events_anchor("e1")
    seal = raw_call(backend, lambda r: r.hget(anchor_key, "state_digest"))
    assert seal.startswith(b"s1:")
    # The folded state replaced, its unkeyed digest recomputed: refused.
    from redistate.events.spec import state_digest

    digest = raw_call(backend, lambda r: r.hget(anchor_key, "digest")).decode()
    state = store.codec.encode({"paid": False}, store.keys.events("e1").encode())
    raw_call(
        backend,
        lambda r: r.hset(
            anchor_key, mapping={"state": state, "state_digest": state_digest(digest, state)}
        ),
    )
    check = await store.events.verify("e1")
    assert not check.ok and check.first_bad == "anchor" and "is not signed" in check.problems[0]


# -- checkpoints -----------------------------------------------------------------------------


def _blob_parts(blob: bytes) -> tuple[bytes, bytes, bytes]:
    head, meta, state = blob.split(b"\n", 2)
    return head, meta, state


@SIGNED
async def test_an_older_checkpoint_state_moved_into_the_newest(
    stores: Callable[..., AsyncStore], backend: Backend, signed: bool
) -> None:
    import hashlib

    store = stores(signed)
    cps = store.checkpoints
    old = await cps.save("t1", {"balance": 100})
    new = await cps.save("t1", {"balance": 0})
    key = store.keys.task_keys("t1")[0]
    blobs = raw_call(backend, lambda r: r.lrange(key, 0, -1))
    newest = next(i for i, b in enumerate(blobs) if new.id.encode() in _blob_parts(b)[1])
    oldest = 1 - newest
    _, meta, _ = _blob_parts(blobs[newest])
    _, _, old_state = _blob_parts(blobs[oldest])
    if signed:  # a seal of the forger's own, under the store's key id
        assert blobs[newest].startswith(b"K1,s1:")
        forged = forger(True)
        assert forged is not None
        digest = forged.seal(b"checkpoint", key.encode(), new.id.encode(), meta, old_state)
    else:
        digest = hashlib.sha256(meta + b"\n" + old_state).hexdigest().encode()
    raw_call(backend, lambda r: r.lset(key, newest, b"K1,%s,-\n%s\n%s" % (digest, meta, old_state)))
    restored = await cps.restore("t1")
    assert restored is not None and restored.checkpoint is not None
    if not signed:
        # The older state passes as the newest checkpoint's, and as complete.
        assert restored.complete and restored.state == {"balance": 100}
        assert restored.checkpoint.id == new.id
        return
    # Skipped and said so; restore falls back to the older checkpoint, itself intact.
    assert not restored.complete and restored.skipped == (new.id,)
    assert restored.checkpoint.id == old.id and restored.state == {"balance": 100}
    check = await cps.verify("t1")
    assert not check.ok and check.first_bad == new.id
    assert "does not authenticate with signing key 's1'" in check.problems[0]
    with pytest.raises(IntegrityError, match=new.id):
        await cps.history("t1")


@SIGNED
async def test_an_older_checkpoint_blob_moved_whole_into_the_newest_slot(
    stores: Callable[..., AsyncStore], backend: Backend, signed: bool
) -> None:
    store = stores(signed)
    cps = store.checkpoints
    await cps.save("t1", {"balance": 100})
    new = await cps.save("t1", {"balance": 0})
    key = store.keys.task_keys("t1")[0]
    blobs = raw_call(backend, lambda r: r.lrange(key, 0, -1))
    newest = next(i for i, b in enumerate(blobs) if new.id.encode() in b)
    raw_call(backend, lambda r: r.lset(key, newest, blobs[1 - newest]))
    restored = await cps.restore("t1")
    assert restored is not None and not restored.complete  # the id check, keyed or not
    assert restored.skipped == (new.id,)


@SIGNED
async def test_a_delta_moved_to_another_task(
    stores: Callable[..., AsyncStore], backend: Backend, signed: bool
) -> None:
    store = stores(signed, encrypted=False)
    cps = store.checkpoints
    await cps.save("t1", {"n": 1})
    await cps.save("t2", {"n": 1})
    await cps.log("t1", {"n": 2}, delta_id="d1")
    log1, log2 = store.keys.task_log("t1"), store.keys.task_log("t2")
    t2_cp = (await cps.latest("t2")).id  # type: ignore[union-attr]
    raw_delta = raw_call(backend, lambda r: r.lindex(log1, 0))
    # The same delta relabelled to follow t2's checkpoint, appended to t2's log.
    head, rest = raw_delta.split(b"\n", 1)
    parts = head.split(b",")
    parts[2] = t2_cp.encode()
    raw_call(backend, lambda r: r.rpush(log2, b",".join(parts) + b"\n" + rest))
    restored = await cps.restore("t2")
    assert restored is not None
    if not signed:
        assert restored.complete and restored.state == {"n": 2}
        return
    assert not restored.complete and restored.skipped == ("d1",) and restored.state == {"n": 1}
    check = await cps.verify("t2")
    assert not check.ok and check.first_bad == "d1"
    assert "does not authenticate with signing key 's1'" in check.problems[0]


@SIGNED
async def test_a_delta_relabelled_to_follow_an_older_checkpoint(
    stores: Callable[..., AsyncStore], backend: Backend, signed: bool
) -> None:
    """The newest checkpoint removed (both lists) and its deltas relabelled to follow
    the one before: a patch of another state applied to an older one."""
    store = stores(signed, encrypted=False)
    cps = store.checkpoints
    old = await cps.save("t1", {"n": 1})
    await cps.save("t1", {"n": 10, "safe": True})
    await cps.log("t1", {"n": 11}, delta_id="d1")
    blobs_key, ids_key, log_key = store.keys.task_keys("t1")

    def relabel(raw: Any) -> None:
        raw.lpop(blobs_key)
        raw.lpop(ids_key)
        head, rest = raw.lindex(log_key, 0).split(b"\n", 1)
        parts = head.split(b",")
        parts[2] = old.id.encode()
        raw.lset(log_key, 0, b",".join(parts) + b"\n" + rest)

    raw_call(backend, relabel)
    restored = await cps.restore("t1")
    assert restored is not None and restored.checkpoint is not None
    if not signed:
        assert restored.complete and restored.state == {"n": 11}
        return
    assert not restored.complete and restored.skipped == ("d1",) and restored.state == {"n": 1}


async def test_a_delta_is_sealed_for_a_checkpoint_another_store_saved(
    stores: Callable[..., AsyncStore], backend: Backend
) -> None:
    a, b = stores(True), stores(True)
    await a.checkpoints.save("t1", {"n": 1})
    await a.checkpoints.log("t1", {"a": 1})
    await b.checkpoints.save("t1", {"n": 2})  # a has not seen it: told, and resends
    await a.checkpoints.log("t1", {"a": 2})
    restored = await b.checkpoints.restore("t1")
    assert restored is not None and restored.complete and restored.state == {"n": 2, "a": 2}
    assert (await a.checkpoints.verify("t1")).ok


@SIGNED
async def test_a_forged_step_result(
    stores: Callable[..., AsyncStore], backend: Backend, signed: bool
) -> None:
    """A recorded tool call's result replaced (digest recomputed): a resumed run would
    return the forged result without calling the tool."""
    import hashlib

    store = stores(signed, encrypted=False)
    calls: list[str] = []

    def pay(to: str) -> dict[str, str]:
        calls.append(to)
        return {"paid": to}

    async with store.task("t1") as run:
        assert await run.step("pay", pay, "alice") == {"paid": "alice"}
    key = store.keys.task_steps("t1")
    raw = raw_call(backend, lambda r: r.hget(key, "pay"))
    head, payload = raw.split(b"\n", 1)
    forged_payload = payload.replace(b"alice", b"mallory")
    prefix = head[: head.rindex(b",") + 1]
    own = forger(signed)
    if own is None:
        digest = hashlib.sha256(forged_payload).hexdigest().encode()
    else:  # a seal of the forger's own key
        assert head.split(b",")[-1].startswith(b"s1:")
        digest = own.seal(b"step", key.encode(), b"pay", prefix, forged_payload)
    forged = prefix + digest + b"\n" + forged_payload
    raw_call(backend, lambda r: r.hset(key, "pay", forged))
    if not signed:
        async with store.task("t1") as run:
            assert await run.step("pay", pay, "alice") == {"paid": "mallory"}
        assert calls == ["alice"]
        return
    with pytest.raises(IntegrityError, match=r"step 'pay' of .* does not authenticate"):
        async with store.task("t1") as run:
            await run.step("pay", pay, "alice")
    assert calls == ["alice"]


# -- records -------------------------------------------------------------------------------


@SIGNED
async def test_an_edited_record_schema_re_runs_no_migration(
    stores: Callable[..., AsyncStore], backend: Backend, signed: bool
) -> None:
    store = stores(signed)
    store.migrations.register("notes", 1, lambda v: {**v, "credit": v["credit"] + 100})
    coll = store.collection("notes")
    await coll.put("n1", {"credit": 5})  # written at schema 2: migrated already
    key = coll.spec.key("n1")
    raw = raw_call(backend, lambda r: r.get(key))
    assert raw.split(b",")[4] == b"2"
    edited = b",".join([*raw.split(b",")[:4], b"1", *raw.split(b",")[5:]])
    raw_call(backend, lambda r: r.set(key, edited))
    if not signed:
        found = await coll.get("n1")
        assert found is not None and found.data == {"credit": 105}  # the migration ran again
        return
    with pytest.raises(IntegrityError, match="does not authenticate"):
        await coll.get("n1")


@SIGNED
async def test_an_edited_record_payload(
    stores: Callable[..., AsyncStore], backend: Backend, signed: bool
) -> None:
    store = stores(signed, encrypted=False)
    coll = store.collection("notes")
    await coll.put("n1", {"role": "user"})
    key = coll.spec.key("n1")
    raw = raw_call(backend, lambda r: r.get(key))
    raw_call(backend, lambda r: r.set(key, raw.replace(b'"user"', b'"root"')))
    if not signed:
        found = await coll.get("n1")
        assert found is not None and found.data == {"role": "root"}
        return
    with pytest.raises(IntegrityError, match=f"value at {key!r} does not authenticate"):
        await coll.get("n1")


@SIGNED
async def test_a_record_moved_to_another_key(
    stores: Callable[..., AsyncStore], backend: Backend, signed: bool
) -> None:
    store = stores(signed, encrypted=False)
    coll = store.collection("notes")
    await coll.put("admin", {"role": "root"})
    await coll.put("guest", {"role": "guest"})
    raw = raw_call(backend, lambda r: r.get(coll.spec.key("admin")))
    raw_call(backend, lambda r: r.set(coll.spec.key("guest"), raw))
    if not signed:
        found = await coll.get("guest")
        assert found is not None and found.data == {"role": "root"}
        return
    with pytest.raises(IntegrityError, match="guest"):
        await coll.get("guest")


@SIGNED
async def test_an_edited_merge_patch(
    stores: Callable[..., AsyncStore], backend: Backend, signed: bool
) -> None:
    store = stores(signed, encrypted=False)
    coll = store.collection("notes")
    await coll.put("n1", {"a": 1})
    await coll.merge("n1", {"limit": 10})
    key = coll.spec.key("n1")
    raw = raw_call(backend, lambda r: r.get(key))
    assert raw.startswith(b"M1,")
    raw_call(backend, lambda r: r.set(key, raw.replace(b"10}", b"99}")))
    if not signed:
        found = await coll.get("n1")
        assert found is not None and found.data == {"a": 1, "limit": 99}
        return
    with pytest.raises(IntegrityError, match="does not authenticate"):
        await coll.get("n1")


@SIGNED
async def test_edited_version_and_expiry_substitute_no_data(
    stores: Callable[..., AsyncStore], backend: Backend, signed: bool
) -> None:
    """What the seal does not cover (the server writes them inside the script): an
    edited version makes a compare-and-set conflict, an edited expiry is reported; the
    data read is still the data written."""
    store = stores(signed, encrypted=False)
    coll = store.collection("notes")
    rec = await coll.put("n1", {"a": 1})
    key = coll.spec.key("n1")
    raw = raw_call(backend, lambda r: r.get(key))
    fields = raw.split(b",")
    fields[1] = b"%016d" % (rec.version + 5)
    fields[2] = b"%013d" % 1_000_000_000_000
    raw_call(backend, lambda r: r.set(key, b",".join(fields)))
    found = await coll.get("n1")
    assert found is not None and found.data == {"a": 1}
    assert found.version == rec.version + 5 and found.expires_at is not None


async def test_unsigned_records_on_a_signed_store_are_refused(
    stores: Callable[..., AsyncStore], backend: Backend
) -> None:
    await stores(False).collection("notes").put("n1", {"a": 1})
    with pytest.raises(IntegrityError, match="is not signed"):
        await stores(True).collection("notes").get("n1")


# -- keys ------------------------------------------------------------------------------------


async def test_a_wrong_key_id_is_named(stores: Callable[..., AsyncStore], backend: Backend) -> None:
    writer = stores(True)
    await writer.collection("notes").put("n1", {"a": 1})
    await writer.events.append("e1", "updated", {"a": 1})
    await writer.checkpoints.save("t1", {"a": 1})
    other = stores(True, keys={"s2": S2}, primary="s2")
    with pytest.raises(IntegrityError, match=r"signed with key 's1', not one of \['s2'\]"):
        await other.collection("notes").get("n1")
    with pytest.raises(IntegrityError, match="signed with key 's1'"):
        await other.events.read("e1")
    check = await other.checkpoints.verify("t1")
    assert not check.ok and "signed with key 's1'" in check.problems[0]
    # A seal relabelled to another known id does not authenticate either.
    both = stores(True, keys={"s1": S1, "s2": S2}, primary="s1")
    key = both.collection("notes").spec.key("n1")
    raw = raw_call(backend, lambda r: r.get(key))
    raw_call(backend, lambda r: r.set(key, raw.replace(b",s1:", b",s2:")))
    with pytest.raises(IntegrityError, match="does not authenticate with signing key 's2'"):
        await both.collection("notes").get("n1")


async def test_rotation_old_key_verifies_new_writes_use_the_primary(
    stores: Callable[..., AsyncStore], backend: Backend
) -> None:
    old = stores(True)
    await old.collection("notes").put("n1", {"a": 1})
    await old.events.append("e1", "updated", {"a": 1})
    await old.checkpoints.save("t1", {"a": 1})
    new = stores(True, keys={"s1": S1, "s2": S2}, primary="s2")
    notes = new.collection("notes")
    assert (await notes.get("n1")).data == {"a": 1}  # type: ignore[union-attr]
    await notes.put("n2", {"b": 2})
    event = await new.events.append("e1", "updated", {"b": 2})
    cp = await new.checkpoints.save("t1", {"b": 2})
    assert event.digest.startswith("s2:") and cp.digest.startswith("s2:")
    raw = raw_call(backend, lambda r: r.get(notes.spec.key("n2")))
    assert b",s2:" in raw.split(b"\n")[1]
    assert (await new.events.verify("e1")).ok  # a chain of s1 then s2 links
    assert (await new.checkpoints.verify("t1")).ok
    assert [e.payload for e in await new.events.read("e1")] == [{"a": 1}, {"b": 2}]


async def test_signed_data_reads_without_keys_but_does_not_verify(
    stores: Callable[..., AsyncStore], backend: Backend
) -> None:
    signed = stores(True)
    await signed.collection("notes").put("n1", {"a": 1})
    await signed.events.append("e1", "updated", {"a": 1})
    await signed.checkpoints.save("t1", {"a": 1})
    plain = stores(False)
    assert (await plain.collection("notes").get("n1")).data == {"a": 1}  # type: ignore[union-attr]
    assert (await plain.checkpoints.restore("t1")).state == {"a": 1}  # type: ignore[union-attr]
    for check in (await plain.events.verify("e1"), await plain.checkpoints.verify("t1")):
        assert not check.ok and "has no signing keys to check it" in check.problems[0]


async def test_from_url_and_embedded_take_signing_keys(
    server_backend: Backend, namespace: str
) -> None:
    keys = SigningKeys({"s1": S1}, "s1")
    for store in (
        AsyncStore.from_url(server_backend.url, namespace=namespace, signing=keys),
        AsyncStore.embedded(namespace=namespace, signing=keys),
    ):
        try:
            event = await store.events.append("e1", "updated", {"a": 1})
            assert event.digest.startswith("s1:") and store.signing is keys
        finally:
            await store.aclose()
    with pytest.raises(TypeError, match="signing must be SigningKeys"):
        AsyncStore.embedded(namespace=namespace, signing={"s1": S1})


def test_signing_keys_validate_and_hide_their_material() -> None:
    with pytest.raises(ValueError, match="at least 16 bytes"):
        SigningKeys({"s1": b"short"}, "s1")
    with pytest.raises(ValueError, match="primary 'x'"):
        SigningKeys({"s1": S1}, "x")
    with pytest.raises(ValueError, match="key id"):
        SigningKeys({"bad id": S1}, "bad id")
    assert S1.hex() not in repr(SigningKeys({"s1": S1}, "s1"))
    assert orjson.dumps(repr(SigningKeys({"s1": S1}, "s1")))
