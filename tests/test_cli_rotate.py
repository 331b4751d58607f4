"""``redistate rotate-keys`` on real servers: every value moves to the primary key, in
place (versions, TTLs, checkpoint sequence kept); the old key can go afterwards."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from dataclasses import replace
from typing import Any

import pytest

from redistate import EncryptedCodec, Store
from redistate.agents import RedistateSession
from redistate.core.encryption import key_id
from redistate.core.envelope import unpack
from redistate.records.mergelog import frames
from tests.cli import run
from tests.conftest import Backend

K1, K2 = os.urandom(32), os.urandom(32)


def _env(keys: str | None, primary: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDISTATE_")}
    if keys is not None:
        env["REDISTATE_KEYS"] = keys
    if primary is not None:
        env["REDISTATE_PRIMARY_KEY"] = primary
    return env


def _store(backend: Backend, namespace: str, keys: dict[str, bytes], primary: str) -> Store:
    codec = EncryptedCodec(keys, primary)
    return Store(backend.sync_client(), namespace=namespace, codec=codec)


def _b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def _key_ids(store: Store) -> dict[str, set[str | None]]:
    """The key ids of every encrypted value under the namespace, by kind of value."""
    raw: Any = store._conn.client
    found: dict[str, set[str | None]] = {
        "record": set(), "checkpoint": set(), "delta": set(), "event": set()
    }  # fmt: skip
    for key in store._conn.scan(store.keys.namespace_pattern()):
        kind, _, part = store.keys.parse(key)
        if kind == "task" and part == "":
            for blob in raw.lrange(key, 0, -1):
                state = blob.split(b"\n", 2)[2]
                found["checkpoint"].add(key_id(state))
        elif kind == "task" and part == "log":
            for delta in raw.lrange(key, 0, -1):
                found["delta"].add(key_id(delta.split(b"\n", 2)[2]))
        elif kind == "events" and part == "":
            found["event"].update(key_id(f[b"p"]) for _, f in raw.xrange(key, "-", "+"))
        elif kind in ("session", "user", "notes") and part == "":
            env = unpack(key.decode(), raw.get(key))
            parts = frames(key.decode(), env.payload) if env.log else [env.payload]
            found["record"].update(key_id(p) for p in parts if p)
    return found


def _seed(store: Store) -> dict[str, Any]:
    store.sessions.put("s1", {"turn": 1}, ttl=600)
    store.collection("notes").put("n1", {"text": "hello"})
    store.users.put("u1", {"name": "ann"})
    for i in range(20):  # a compaction, then patches pending: an M1 record
        store.users.merge("u1", {f"fact{i}": i})
    store.checkpoints.save("t1", {"step": 1})
    store.checkpoints.save("t1", {"step": 2, "big": "x" * 5000})  # compressed
    store.checkpoints.log("t1", {"note": "a"})
    store.checkpoints.log("t1", {"note": "b"})
    store.events.append("t1", "initialized", {"a": 1})
    store.events.append("t1", "updated", {"b": 2})
    users = store.users.get("u1")
    assert users is not None
    return {
        "session": store.sessions.get("s1"),
        "note": store.collection("notes").get("n1"),
        "user": users,
        "restored": store.checkpoints.restore("t1"),
        "history": store.checkpoints.history("t1"),
        "events": store.events.read("t1"),
    }


def test_rotate_keys_moves_everything_to_the_primary_in_place(
    server_backend: Backend, namespace: str
) -> None:
    old = Store(
        server_backend.sync_client(), namespace=namespace, codec=EncryptedCodec({"k1": K1}, "k1")
    )
    before = _seed(old)
    assert _key_ids(old) == {
        "record": {"k1"}, "checkpoint": {"k1"}, "delta": {"k1"}, "event": {"k1"}
    }  # fmt: skip
    args = ["--url", server_backend.url, "--namespace", namespace, "rotate-keys", "--json"]
    both = f"k2={_b64(K2)},k1={_b64(K1)}"  # the first listed is the primary

    done = run(*args, env=_env(both))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["records"], report["checkpoints"], report["deltas"]) == (3, 2, 2)
    # session 1, note 1, u1 5 frames (folded at the 16th merge: a base + 4 patches since),
    # 2 checkpoint states, 2 deltas
    assert report["moved off"] == "k1: 13"  # and 2 event payloads
    assert report["events"] == 2 and report["event chains not verified"] == 0

    new = Store(
        server_backend.sync_client(), namespace=namespace, codec=EncryptedCodec({"k2": K2}, "k2")
    )
    assert _key_ids(new) == {
        "record": {"k2"}, "checkpoint": {"k2"}, "delta": {"k2"}, "event": {"k2"}
    }  # fmt: skip
    session = new.sessions.get("s1")
    assert session == before["session"]  # data, version and expiry unchanged
    assert 0 < new.sessions.ttl("s1") <= 600  # type: ignore[operator]
    assert new.collection("notes").get("n1") == before["note"]
    assert new.users.get("u1") == before["user"]
    restored = new.checkpoints.restore("t1")
    assert restored is not None and restored.state == before["restored"].state
    # The same checkpoint; only its digest changed, with the bytes it covers.
    now, then = restored.checkpoint, before["restored"].checkpoint
    assert now is not None and now.digest != then.digest
    assert replace(now, digest="") == replace(then, digest="")
    after = new.checkpoints.history("t1")
    assert [(c.seq, c.id, c.state, c.created_at) for c in after] == [
        (c.seq, c.id, c.state, c.created_at) for c in before["history"]
    ]
    assert new.checkpoints.verify("t1").ok
    assert new.events.verify("t1").ok  # re-chained over the new ciphertexts
    events = new.events.read("t1")
    assert [(e.id, e.type, e.payload) for e in events] == [
        (e.id, e.type, e.payload) for e in before["events"]
    ]

    again = run(*args, env=_env(both))
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert (second["records"], second["checkpoints"], second["deltas"]) == (0, 0, 0)
    assert second["moved off"] == "none" and second["events"] == 0
    old.close()
    new.close()


def test_rotate_keys_leaves_an_event_chain_that_does_not_verify(
    server_backend: Backend, namespace: str
) -> None:
    old = _store(server_backend, namespace, {"k1": K1}, "k1")
    old.events.append("t1", "initialized", {"a": 1})
    old.events.append("t1", "updated", {"b": 2})
    old.events.append("t2", "initialized", {"c": 3})
    raw: Any = old._conn.client
    key = old.keys.events("t1")
    _, (_, second) = raw.xrange(key, "-", "+")
    raw.delete(key)
    raw.xadd(key, second, id=b"1-1")  # the first event removed: the chain is broken
    args = ["--url", server_backend.url, "--namespace", namespace, "rotate-keys", "--json"]

    done = run(*args, env=_env(f"k2={_b64(K2)},k1={_b64(K1)}"))
    assert done.returncode == 1
    report = json.loads(done.stdout.splitlines()[0])
    assert report["events"] == 1 and report["event chains not verified"] == 1
    assert f"were not re-encrypted (see redistate events ENTITY), e.g. {key}" in done.stderr
    assert [f for _, f in raw.xrange(key, "-", "+")] == [second]  # the evidence kept
    assert key_id(raw.xrange(old.keys.events("t2"), "-", "+")[0][1][b"p"]) == "k2"
    old.close()


# Refused before anything is read or written: the same on any server.
@pytest.mark.parametrize("server_backend", ["redis7"], indirect=True)
def test_rotate_keys_needs_keys_and_refuses_bad_ones(
    server_backend: Backend, namespace: str
) -> None:
    args = ["--url", server_backend.url, "--namespace", namespace, "rotate-keys"]
    missing = run(*args, env=_env(None))
    assert missing.returncode == 1
    assert "rotate-keys needs the keys: set REDISTATE_KEYS" in missing.stderr
    bad = run(*args, env=_env("k1=!!not-base64!!"))
    assert bad.returncode == 2 and "key 'k1' is not valid base64" in bad.stderr
    assert "!!not-base64!!" not in bad.stderr  # key material never echoed
    short = run(*args, env=_env(f"k1={_b64(b'short')}"))
    assert short.returncode == 2 and "key 'k1' must be 16, 24 or 32 bytes, got 5" in short.stderr
    unknown = run(*args, env=_env(f"k1={_b64(K1)}", primary="k9"))
    assert unknown.returncode == 2 and "primary 'k9' is not one of the key ids" in unknown.stderr


def test_inspection_reads_an_encrypted_namespace_with_the_keys(
    server_backend: Backend, namespace: str
) -> None:
    store = Store(
        server_backend.sync_client(), namespace=namespace, codec=EncryptedCodec({"k1": K1}, "k1")
    )
    store.users.put("u1", {"name": "ann"})
    store.close()
    args = ["--url", server_backend.url, "--namespace", namespace, "show", "user", "u1"]
    shown = run(*args, env=_env(f"k1={_b64(K1)}"))
    assert shown.returncode == 0 and "ann" in shown.stdout
    blind = run(*args, env=_env(None))
    assert blind.returncode == 1 and "ann" not in blind.stdout + blind.stderr


def test_rotate_keys_encrypts_a_namespace_written_before_encryption(
    server_backend: Backend, namespace: str
) -> None:
    plain = Store(server_backend.sync_client(), namespace=namespace)
    plain.users.put("u1", {"name": "ann"})
    plain.users.merge("u2", {"a": 1})
    plain.checkpoints.save("t1", {"step": 1})
    plain.checkpoints.log("t1", {"note": "a"})
    plain.events.append("t1", "initialized", {"secret": "ann"})
    args = ["--url", server_backend.url, "--namespace", namespace, "rotate-keys", "--json"]
    done = run(*args, env=_env(f"k1={_b64(K1)}"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["records"], report["checkpoints"], report["deltas"]) == (2, 1, 1)
    assert report["events"] == 1
    assert report["moved off"] == "(not encrypted): 5"  # u1, u2 (one patch), state, delta, event
    sealed = _store(server_backend, namespace, {"k1": K1}, "k1")
    assert _key_ids(sealed) == {
        "record": {"k1"}, "checkpoint": {"k1"}, "delta": {"k1"}, "event": {"k1"}
    }  # fmt: skip
    assert sealed.events.verify("t1").ok
    assert sealed.events.read("t1")[0].payload == {"secret": "ann"}
    assert sealed.users.get("u1").data == {"name": "ann"}  # type: ignore[union-attr]
    assert sealed.users.get("u2").data == {"a": 1}  # type: ignore[union-attr]
    restored = sealed.checkpoints.restore("t1")
    assert restored is not None and restored.state == {"step": 1, "note": "a"}
    plain.close()
    sealed.close()


def test_rotate_keys_moves_step_records_too(server_backend: Backend, namespace: str) -> None:
    """A task's durable step results are encrypted like its checkpoints: left on the old
    key, the task could not be entered once that key is gone."""
    old = _store(server_backend, namespace, {"k1": K1}, "k1")
    with old.task("t1") as task_run:
        task_run.step("search", lambda q: {"hits": [q]}, "zebra")
        task_run.save({"n": 1})
    args = ["--url", server_backend.url, "--namespace", namespace, "rotate-keys", "--json"]
    done = run(*args, env=_env(f"k2={_b64(K2)},k1={_b64(K1)}"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["steps"] == 1
    new = _store(server_backend, namespace, {"k2": K2}, "k2")
    with new.task("t1") as again:
        assert again.step("search", lambda q: {"hits": ["called again"]}, "zebra") == {
            "hits": ["zebra"]
        }
    raw: Any = new._conn.client
    (record,) = raw.hvals(new.keys.task_steps("t1"))
    assert key_id(record.split(b"\n", 1)[1]) == "k2"
    old.close()
    new.close()


def test_rotate_keys_moves_agents_session_items(server_backend: Backend, namespace: str) -> None:
    """Agents SDK items are encoded by the store's codec: left on the old key, the
    session could not be read once that key is gone."""
    old = _store(server_backend, namespace, {"k1": K1}, "k1")
    items: list[Any] = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    asyncio.run(RedistateSession("c1", store=old).add_items(items))
    args = ["--url", server_backend.url, "--namespace", namespace, "rotate-keys"]
    both = _env(f"k2={_b64(K2)},k1={_b64(K1)}")
    done = run(*args, "--json", env=both)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["agent items"] == 2 and report["moved off"] == "k1: 2"
    table = run(*args, env={**both, "COLUMNS": "300"})  # a row's headers unwrapped
    assert table.returncode == 0, table.stderr
    assert "agent items" in table.stdout and "rotated" in table.stdout
    new = _store(server_backend, namespace, {"k2": K2}, "k2")
    assert asyncio.run(RedistateSession("c1", store=new).get_items()) == items
    old.close()
    new.close()
