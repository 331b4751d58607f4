"""``REDISTATE_SIGNING_KEYS`` on real servers: ``rotate-keys`` seals data written before
signing (and moves seals to the primary), after which a signed store reads and verifies
it; ``verify`` and ``events`` check seals from the CLI."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pytest

from redistate import IntegrityError, SigningKeys, Store
from tests.cli import run
from tests.conftest import Backend

S1, S2 = os.urandom(32), os.urandom(32)


def _env(keys: str | None, primary: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDISTATE_")}
    if keys is not None:
        env["REDISTATE_SIGNING_KEYS"] = keys
    if primary is not None:
        env["REDISTATE_SIGNING_PRIMARY"] = primary
    return env


def _b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def _seed(store: Store) -> None:
    store.collection("notes").put("n1", {"a": 1})
    store.collection("notes").merge("n1", {"b": 2})
    store.sessions.put("s1", {"s": 1})
    store.checkpoints.save("t1", {"c": 1})
    store.checkpoints.log("t1", {"d": 1}, delta_id="d1")
    for n in range(3):
        store.events.append("e1", "updated", {"n": n})
    store.events.trim("e1", keep=2)
    with store.task("t2") as run:
        run.step("pay", lambda: {"paid": 1})


def _check(store: Store) -> None:
    assert store.collection("notes").get("n1").data == {"a": 1, "b": 2}  # type: ignore[union-attr]
    assert store.sessions.get("s1").data == {"s": 1}  # type: ignore[union-attr]
    restored = store.checkpoints.restore("t1")
    assert restored is not None and restored.complete and restored.state == {"c": 1, "d": 1}
    assert store.events.verify("e1").ok and store.checkpoints.verify("t1").ok
    assert [e.payload for e in store.events.read("e1")] == [{"n": 1}, {"n": 2}]
    assert store.checkpoints.steps("t2")[0].result == {"paid": 1}


def test_rotate_keys_seals_unsigned_data_then_moves_it_to_the_primary(
    server_backend: Backend, namespace: str
) -> None:
    plain = Store(server_backend.sync_client(), namespace=namespace)
    _seed(plain)
    plain.close()
    signed = Store(
        server_backend.sync_client(), namespace=namespace, signing=SigningKeys({"s1": S1}, "s1")
    )
    with pytest.raises(IntegrityError, match="is not signed"):
        signed.collection("notes").get("n1")
    args = ["--url", server_backend.url, "--namespace", namespace, "rotate-keys", "--json"]
    done = run(*args, env=_env(f"s1={_b64(S1)}"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["records"] == 2 and report["checkpoints"] == 1 and report["deltas"] == 1
    assert report["events"] == 3  # two events and the trim anchor
    assert report["steps"] == 1
    _check(signed)
    again = run(*args, env=_env(f"s1={_b64(S1)}"))
    row = json.loads(again.stdout)
    assert row["records"] == row["checkpoints"] == row["deltas"] == row["events"] == 0
    assert row["steps"] == 0
    # Rotation: s2 becomes the primary; everything moves off s1, then s1 can go.
    moved = run(*args, env=_env(f"s2={_b64(S2)},s1={_b64(S1)}"))
    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout)["records"] == 2
    signed.close()
    only_new = Store(
        server_backend.sync_client(), namespace=namespace, signing=SigningKeys({"s2": S2}, "s2")
    )
    try:
        _check(only_new)
    finally:
        only_new.close()


def test_cli_verify_and_events_check_seals(server_backend: Backend, namespace: str) -> None:
    signed = Store(
        server_backend.sync_client(), namespace=namespace, signing=SigningKeys({"s1": S1}, "s1")
    )
    try:
        _seed(signed)
    finally:
        signed.close()
    base = ["--url", server_backend.url, "--namespace", namespace]
    good = _env(f"s1={_b64(S1)}")
    assert run(*base, "verify", "t1", env=good).returncode == 0
    assert run(*base, "events", "e1", env=good).returncode == 0
    wrong = _env(f"s2={_b64(S2)}")
    bad = run(*base, "verify", "t1", env=wrong)
    assert bad.returncode == 1 and "signed with key 's1'" in bad.stdout + bad.stderr
    short = run(*base, "verify", "t1", env=_env(f"s1={_b64(b'short')}"))
    assert short.returncode == 2 and "signing key 's1' must be at least 16 bytes" in short.stderr
    assert _b64(S1) not in bad.stdout + bad.stderr


def test_export_and_import_keep_seals(
    server_backend: Backend, namespace: str, tmp_path: Any
) -> None:
    """A backup holds values as stored: sealed data comes back sealed and verifies;
    under another namespace its seals (bound to the Redis key) no longer authenticate,
    so that import is refused before anything is written."""
    keys = SigningKeys({"s1": S1}, "s1")
    signed = Store(server_backend.sync_client(), namespace=namespace, signing=keys)
    _seed(signed)
    url, env = ["--url", server_backend.url], _env(f"s1={_b64(S1)}")
    path = str(tmp_path / "backup.jsonl")
    done = run(*url, "--namespace", namespace, "export", "--out", path, "--json", env=env)
    assert done.returncode == 0, done.stderr
    for key in signed._conn.scan(signed.keys.namespace_pattern()):
        signed._conn.client.delete(key)
    back = run(*url, "--namespace", namespace, "import", path, "--json", env=env)
    assert back.returncode == 0, back.stderr
    assert signed.collection("notes").get("n1").data == {"a": 1, "b": 2}  # type: ignore[union-attr]
    assert signed.checkpoints.verify("t1").ok
    other = namespace + "-copy"
    moved = Store(server_backend.sync_client(), namespace=other, signing=keys)
    try:
        # Under another namespace the seals no longer authenticate: the import names
        # the first such line and writes nothing.
        copied = run(*url, "--namespace", other, "import", path, "--json", env=env)
        assert copied.returncode == 1 and "does not authenticate" in copied.stderr
        assert list(moved._conn.scan(moved.keys.namespace_pattern())) == []
    finally:
        for key in moved._conn.scan(moved.keys.namespace_pattern()):
            moved._conn.client.delete(key)
        moved.close()
        signed.close()
