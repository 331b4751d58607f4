"""``redistate demo`` as a user runs it: in a subprocess, on the embedded default and on
real servers. Each run really SIGKILLs and SIGSTOPs worker processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from redistate import Store
from tests.conftest import Backend

DEMO_TIMEOUT = 180


def cli(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``redistate ARGS`` with the embedded server's data in ``home``."""
    environ = {k: v for k, v in os.environ.items() if k != "REDISTATE_URL"}
    environ.update(REDISTATE_HOME=str(home), COLUMNS="120", **env)
    return subprocess.run(
        [sys.executable, "-m", "redistate.cli", *args],
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT,
        env=environ,
    )


def summary(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def assert_invariants(result: dict[str, Any], tasks: int = 6) -> None:
    assert result["ok"] is True and result["failed"] == []
    assert result["tasks_completed"] == result["checkpoints_intact"] == tasks
    assert result["lost_updates"] == 0
    assert result["faults"] == 2  # one SIGKILL, one SIGSTOP
    assert result["steps_redone"] <= result["faults"]
    assert result["stale_writes_rejected"] >= 1
    assert result["steps_executed"] == tasks * 8 + result["steps_redone"]
    events = " | ".join(result["events"])
    assert "SIGKILL worker" in events and "SIGSTOP worker" in events
    assert "SIGCONT worker" in events and "was rejected" in events


def test_demo_on_the_embedded_default_and_its_state_is_kept(tmp_path: Path) -> None:
    result = summary(cli("demo", "--json", home=tmp_path))
    assert_invariants(result)
    # The embedded server saved its data: the next command sees what the demo left.
    tasks = cli("--namespace", "demo", "ls", "tasks", "--json", home=tmp_path)
    assert tasks.returncode == 0, tasks.stderr
    rows = [json.loads(line) for line in tasks.stdout.splitlines()]
    assert [r["id"] for r in rows] == [f"task-{n}" for n in range(1, 7)]
    assert all(r["checkpoints"] == 8 for r in rows)  # one per step, history cap 10
    verified = cli("--namespace", "demo", "verify", home=tmp_path)
    assert verified.returncode == 0, verified.stderr
    handoff = cli("--namespace", "demo", "handoff", "task-3", home=tmp_path)
    assert handoff.stdout.startswith("# Task task-3\n") and "- Phase: done" in handoff.stdout


def test_demo_on_the_fakeredis_fallback(tmp_path: Path) -> None:
    result = summary(
        cli("demo", "--json", "--seed", "11", home=tmp_path, REDISTATE_EMBEDDED="fakeredis")
    )
    assert_invariants(result)
    assert not (tmp_path / "dump.rdb").exists()  # nothing kept


def test_demo_shows_live_progress_and_a_summary_table(tmp_path: Path) -> None:
    done = cli("demo", "--tasks", "3", "--steps", "5", "--workers", "2", home=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    text = done.stdout
    for expected in ("tasks", "workers", "summary", "steps redone after crashes", "✓"):
        assert expected in text
    assert "✗" not in text
    assert "redistate --namespace demo" in text  # how to look into what it left


@pytest.mark.parametrize("backend", ["redis7", "valkey9", "cluster"], indirect=True)
def test_demo_against_a_real_server(backend: Backend, namespace: str, tmp_path: Path) -> None:
    args = ("--url", backend.url, "--namespace", namespace, "demo", "--json", "--seed", "5")
    assert_invariants(summary(cli(*args, home=tmp_path)))
    store = Store(backend.sync_client(), namespace=namespace)
    try:
        for n in range(1, 7):
            restored = store.checkpoints.restore(f"task-{n}")
            assert restored is not None and restored.complete
            steps = restored.state["steps"]
            assert len(steps) == 8
            # Fences only grow along a task's steps: a stale owner never wrote after a newer.
            fences = [step["fence"] for step in steps]
            assert fences == sorted(fences)
    finally:
        store.close()
    # Run again in the same namespace: the previous demo's keys are replaced.
    assert_invariants(summary(cli(*args, home=tmp_path)))


def test_demo_refuses_a_namespace_holding_other_data(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    store = Store(server_backend.sync_client(), namespace=namespace)
    store.users.put("precious", {"keep": True})
    done = cli("--url", server_backend.url, "--namespace", namespace, "demo", home=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"redistate: namespace {namespace!r} holds 1 keys that are not a demo's; "
        "choose another --namespace"
    ]
    record = store.users.get("precious")
    assert record is not None and record.data == {"keep": True}
    store.close()


@pytest.mark.parametrize(
    "args",
    [
        ["--workers", "1"],
        ["--steps", "3"],
        ["--tasks", "0"],
        ["--lease-ttl", "0.1"],
        ["--seed", "x"],
    ],
)
def test_demo_refuses_bad_options_with_exit_code_2(args: list[str], tmp_path: Path) -> None:
    done = cli("demo", *args, home=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert not (tmp_path / "dump.rdb").exists()  # no server was started
