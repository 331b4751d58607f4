"""``redistate migrate --using module:function`` on real servers."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from redistate import Store
from redistate.core.envelope import unpack
from tests.cli import run
from tests.conftest import Backend

STEPS = """
def split_name(data):
    first, _, last = data.pop("name").partition(" ")
    return {**data, "first": first, "last": last}


def register(migrations):
    migrations.register("users", 1, split_name)
    migrations.register("notes", 1, lambda d: {**d, "v": 2})
"""


def _env(path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def _records(stdout: str) -> dict[str, int]:
    row = json.loads(stdout)
    return {name: row[name] for name in ("upgraded", "current", "newer")}


def test_migrate_writes_back_every_old_record(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    (tmp_path / "mysteps.py").write_text(STEPS, encoding="utf-8")
    store = Store(server_backend.sync_client(), namespace=namespace)
    for i in range(1200):  # more than two batches
        store.users.put(f"u{i}", {"name": f"Ann Lee{i}"})
    store.collection("notes").put("n1", {"text": "x"}, ttl=600)
    store.sessions.put("s1", {"turn": 1})  # no steps for sessions: current already
    store.events.append("t1", "initialized", {})  # not a record: left alone
    args = ["--url", server_backend.url, "--namespace", namespace, "migrate"]

    done = run(*args, "--using", "mysteps:register", "--json", env=_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert _records(done.stdout) == {"upgraded": 1201, "current": 1, "newer": 0}
    raw: Any = store._conn.client
    for key in (store.keys.record("user", "u7"), store.keys.record("notes", "n1")):
        assert unpack(key, raw.get(key)).schema == 2
    assert 0 < raw.pttl(store.keys.record("notes", "n1")) <= 600_000  # TTL kept
    new = Store(server_backend.sync_client(), namespace=namespace)
    new.migrations.register("users", 1, lambda d: d)  # reads at schema 2 as they are
    got = new.users.get("u7")
    assert got is not None and got.data == {"first": "Ann", "last": "Lee7"}

    again = run(*args, "--using", "mysteps:register", "--json", env=_env(tmp_path))
    assert _records(again.stdout) == {"upgraded": 0, "current": 1202, "newer": 0}

    # Code that knows fewer steps than the data: reported, exit 1, nothing written.
    (tmp_path / "oldsteps.py").write_text("def register(m):\n    pass\n", encoding="utf-8")
    before = raw.get(store.keys.record("user", "u7"))
    older = run(*args, "--using", "oldsteps:register", "--json", env=_env(tmp_path))
    assert older.returncode == 1
    assert json.loads(older.stdout.splitlines()[0])["newer"] == 1201
    assert "value(s) are newer than the registered steps" in older.stderr
    assert raw.get(store.keys.record("user", "u7")) == before
    store.close()
    new.close()


# Refused before anything is read or written: the same on any server.
@pytest.mark.parametrize("server_backend", ["redis7"], indirect=True)
def test_migrate_needs_a_function_it_can_import(server_backend: Backend, namespace: str) -> None:
    args = ["--url", server_backend.url, "--namespace", namespace, "migrate", "--using"]
    for spec, message in (
        ("nocolon", "must be module:function"),
        ("no_such_module_x:register", "cannot import 'no_such_module_x'"),
        ("json:no_such_function", "json has no function 'no_such_function'"),
    ):
        done = run(*args, spec)
        assert done.returncode == 2, (spec, done.stderr)
        assert message in done.stderr


TASK_STEPS = """
def split_name(data):
    first, _, last = data.pop("name").partition(" ")
    return {**data, "first": first, "last": last}


def register(migrations):
    migrations.register("checkpoints", 1, split_name)
    migrations.register("events", 1, split_name)
"""


def test_migrate_writes_back_checkpoints_and_events(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    (tmp_path / "tasksteps.py").write_text(TASK_STEPS, encoding="utf-8")
    old = Store(server_backend.sync_client(), namespace=namespace)
    old.checkpoints.save("t1", {"name": "Ann Lee", "step": 1})
    old.checkpoints.save("t1", {"name": "Ann Lee", "step": 2})
    old.checkpoints.log("t1", {"step": 3})  # a schema-1 patch follows the newest: held
    old.checkpoints.save("t2", {"name": "Bo Chen"}, ttl=600)
    old.events.append("t1", "initialized", {"name": "Cy Diaz"})
    old.events.append("t1", "updated", {"name": "Di Eng"})
    args = ["--url", server_backend.url, "--namespace", namespace, "migrate"]
    new = Store(server_backend.sync_client(), namespace=namespace)
    new.migrations.register("checkpoints", 1, lambda d: d)  # reads schema 2 as it is
    new.migrations.register("events", 1, lambda d: d)

    done = run(*args, "--using", "tasksteps:register", "--json", env=_env(tmp_path))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["checkpoints"], report["checkpoints held"], report["events"]) == (2, 1, 2)
    (second, first) = new.checkpoints.history("t1")  # newest first
    assert first.state == {"first": "Ann", "last": "Lee", "step": 1}  # stored at schema 2
    assert second.state == {"name": "Ann Lee", "step": 2}  # held: the identity step shows it
    assert new.checkpoints.latest("t2").state == {"first": "Bo", "last": "Chen"}  # type: ignore[union-attr]
    raw: Any = new._conn.client
    assert 0 < raw.pttl(new.keys.task("t2")) <= 600_000  # TTL kept
    assert new.checkpoints.verify("t1").ok and new.checkpoints.verify("t2").ok
    assert [e.schema for e in new.events.read("t1")] == [2, 2]
    assert new.events.fold("t1") == {"first": "Di", "last": "Eng"}
    assert new.events.verify("t1").ok  # the chain recomputed over the migrated payloads

    # The task's next save compacts the old delta away; then the held one migrates.
    real = Store(server_backend.sync_client(), namespace=namespace)
    real.migrations.register("checkpoints", 1, lambda d: {**d, "seen": True})
    restored = real.checkpoints.restore("t1")
    assert restored is not None
    real.checkpoints.save("t1", {**restored.state, "name": "Ann Lee"})
    real.checkpoints.save("t3", {"name": "Fay Gu"})  # schema 2 already
    again = run(*args, "--using", "tasksteps:register", "--json", env=_env(tmp_path))
    report = json.loads(again.stdout)
    assert (report["checkpoints"], report["checkpoints held"], report["events"]) == (1, 0, 0)
    assert new.checkpoints.history("t1")[1].state == {"first": "Ann", "last": "Lee", "step": 2}
    for store in (old, new, real):
        store.close()
