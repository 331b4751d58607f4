"""Encryption at rest on every backend (this file has a generated sync twin): nothing of
the state reaches Redis in clear, and a value moved to another key does not decrypt."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from redistate import AsyncStore, EncryptedCodec, IntegrityError
from redistate.core.encryption import key_id
from redistate.records.mergelog import COMPACT_AT
from redistate.records.mergepatch import merge_patch
from tests.conftest import Backend

K1, K2 = os.urandom(32), os.urandom(32)
CANARY = "CANARY-9d2c"  # in every key and value of the state, never in Redis


pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


def secret(tag: str) -> dict[str, Any]:
    return {f"{CANARY}-{tag}-key": f"{CANARY}-{tag}-value", "deep": {"n": [f"{CANARY}-{tag}"]}}


@pytest.fixture
async def sealed(backend: Backend, namespace: str) -> AsyncIterator[AsyncStore]:
    codec = EncryptedCodec({"k1": K1}, primary="k1")
    s = AsyncStore(backend.async_client(), namespace=namespace, codec=codec)
    yield s
    await s.aclose()


def raw_dump(backend: Backend, namespace: str) -> dict[bytes, bytes]:
    """Every key of the namespace and all the bytes it holds, whatever its type."""
    client = backend.raw()
    out: dict[bytes, bytes] = {}
    try:
        for key in client.scan_iter(match=f"{namespace}:*"):
            kind = client.type(key)
            if kind == b"string":
                parts = [client.get(key)]
            elif kind == b"list":
                parts = client.lrange(key, 0, -1)
            elif kind == b"zset":
                parts = [m for m, _ in client.zrange(key, 0, -1, withscores=True)]
            elif kind == b"hash":
                parts = [b for kv in client.hgetall(key).items() for b in kv]
            else:
                raise AssertionError(f"{key!r} is a {kind!r}: extend raw_dump")
            out[key] = b"\n".join(parts)
    finally:
        client.close()
    return out


async def test_no_plaintext_of_the_state_reaches_redis(
    sealed: AsyncStore, backend: Backend, namespace: str
) -> None:
    s = sealed
    await s.sessions.put("s1", secret("session"))
    await s.collection("notes").put("n1", secret("note"))
    want: dict[str, Any] = {}
    for i in range(COMPACT_AT + 3):  # patched records, a compaction, patches again
        patch = {f"{CANARY}-fact{i}": i, "latest": secret(f"merge{i}")}
        want = merge_patch(want, patch)
        assert (await s.users.merge("u1", patch)).data == want
    await s.checkpoints.save("t1", secret("checkpoint"), phase="plan", progress=0.5)
    await s.checkpoints.log("t1", {f"{CANARY}-delta": secret("delta")})

    got = await s.sessions.get("s1")
    assert got is not None and got.data == secret("session")
    user = (await s.users.get_many(["u1"]))["u1"]
    assert user is not None and user.data == want
    restored = await s.checkpoints.restore("t1")
    assert restored is not None
    assert restored.state == {**secret("checkpoint"), f"{CANARY}-delta": secret("delta")}

    dump = raw_dump(backend, namespace)
    assert len(dump) >= 6  # records, a patched record, the task's lists, write memories
    leaks = {key: value for key, value in dump.items() if CANARY.encode() in value}
    assert not leaks, leaks
    record = dump[s.keys.record("user", "u1").encode()]
    magic = b"E1b:k1:" if backend.rest else b"E1:k1:"  # base64 over a REST API
    assert record.startswith(b"M1,") and record.count(magic) >= 2  # each frame sealed


async def test_a_value_copied_to_another_key_fails_to_decrypt(
    sealed: AsyncStore, backend: Backend
) -> None:
    await sealed.users.put("alice", {"role": "admin"})
    await sealed.users.put("mallory", {"role": "guest"})
    raw = backend.raw()
    try:
        stolen = raw.get(sealed.keys.record("user", "alice"))
        raw.set(sealed.keys.record("user", "mallory"), stolen)
    finally:
        raw.close()
    with pytest.raises(IntegrityError, match="does not authenticate"):
        await sealed.users.get("mallory")
    got = await sealed.users.get("alice")
    assert got is not None and got.data == {"role": "admin"}


async def test_a_rotated_store_reads_old_values_and_writes_with_the_new_key(
    backend: Backend, namespace: str
) -> None:
    old = AsyncStore(
        backend.async_client(), namespace=namespace, codec=EncryptedCodec({"k1": K1}, "k1")
    )
    new = AsyncStore(
        backend.async_client(),
        namespace=namespace,
        codec=EncryptedCodec({"k1": K1, "k2": K2}, primary="k2"),
    )
    try:
        await old.users.put("u", {"n": 1})
        await old.checkpoints.save("t", {"step": 1})
        rec = await new.users.merge("u", {"m": 2})  # old base frame, new patch frame
        assert rec.data == {"n": 1, "m": 2}
        restored = await new.checkpoints.restore("t")
        assert restored is not None and restored.state == {"step": 1}
        await new.users.update("u", lambda d: {**d, "k": 3})  # rewritten under k2
        raw = backend.raw()
        try:
            value = raw.get(new.keys.record("user", "u"))
        finally:
            raw.close()
        payload = value.split(b"\n", 1)[1]
        assert key_id(payload) == "k2"
        with pytest.raises(IntegrityError, match="key 'k2', not one of \\['k1'\\]"):
            await old.users.get("u")
    finally:
        await old.aclose()
        await new.aclose()
