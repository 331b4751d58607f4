"""``redistate demo`` as a user runs it: in a subprocess, on the embedded default and on
real servers. Each run really SIGKILLs and SIGSTOPs worker processes."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from redistate import Store
from tests.cli import run
from tests.conftest import Backend

DEMO_TIMEOUT = 180


def cli(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``redistate ARGS`` with the embedded server's data in ``home``."""
    environ = {k: v for k, v in os.environ.items() if k != "REDISTATE_URL"}
    environ.update(REDISTATE_HOME=str(home), COLUMNS="120", **env)
    return run(*args, env=environ, timeout=DEMO_TIMEOUT)


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
    assert result["tool_calls_repeated"] == 0  # durable steps: a recorded call never again
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


# Redis 7 and the cluster (its keys spread over three primaries: the re-run's clean-up
# scans each). What the demo's workers do on Valkey 9 is the contract suite's.
@pytest.mark.parametrize("backend", ["redis7", "cluster"], indirect=True)
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


def running_under(path: Path) -> list[str]:
    """Command lines of live processes that name ``path`` (the demo's workers and the
    embedded server all do: their socket is in it)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # exited meanwhile
        if str(path) in text:
            found.append(text)
    return found


def wait_until_gone(path: Path, allowed: str = "") -> list[str]:
    """Bounded wait for processes the kernel is tearing down; what is left."""
    deadline = time.monotonic() + 10
    while True:
        left = [c for c in running_under(path) if not allowed or allowed not in c]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)  # the kernel kills them asynchronously; bounded by the deadline


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_demo(home: Path, until: str = "• SIGKILL worker") -> subprocess.Popen[str]:
    """A demo in its own session, returned once it printed a line starting with
    ``until`` (mid-run)."""
    environ = {k: v for k, v in os.environ.items() if k != "REDISTATE_URL"}
    demo = subprocess.Popen(
        [sys.executable, "-m", "redistate.cli", "demo", "--tasks", "12"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**environ, "REDISTATE_HOME": str(home)},
        start_new_session=True,
        # A shell's background job (CI started with `&`) ignores SIGINT, and a Python
        # started with it ignored never raises KeyboardInterrupt: give the demo the
        # default a terminal's foreground process has.
        preexec_fn=_default_sigint,
    )
    assert demo.stdout is not None
    for line in demo.stdout:
        if line.startswith(until):
            return demo
    raise AssertionError(f"the demo ended without printing {until!r}")


def test_ctrl_c_stops_every_process_and_keeps_the_data(tmp_path: Path) -> None:
    demo = start_demo(tmp_path)
    os.killpg(demo.pid, signal.SIGINT)  # what a terminal sends to its foreground group
    demo.communicate(timeout=60)
    assert demo.returncode != 0
    assert wait_until_gone(tmp_path) == []
    assert "DB saved on disk" in (tmp_path / "valkey.log").read_text()
    tasks = cli("--namespace", "demo", "ls", "tasks", "--json", home=tmp_path)
    assert tasks.returncode == 0 and len(tasks.stdout.splitlines()) >= 1


def test_a_killed_demo_leaves_no_worker_and_the_next_command_stops_its_server(
    tmp_path: Path,
) -> None:
    demo = start_demo(tmp_path, until="• SIGSTOP worker")
    demo.kill()  # SIGKILL: no cleanup runs in the demo itself; one worker is stopped
    demo.communicate(timeout=60)
    left = wait_until_gone(tmp_path, allowed="valkey-server")
    assert left == []  # the workers died with it (even the SIGSTOPped one)
    assert len(running_under(tmp_path)) == 1  # its server is left, holding the data
    tasks = cli("--namespace", "demo", "ls", "tasks", "--json", home=tmp_path)
    assert tasks.returncode == 0, tasks.stderr
    assert len(tasks.stdout.splitlines()) >= 1  # what the killed demo's server held
    assert wait_until_gone(tmp_path) == []  # the stale server was shut down (and saved)


def test_a_second_command_waits_for_the_first_and_says_so(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # as a running command holds it
        environ = {k: v for k, v in os.environ.items() if k != "REDISTATE_URL"}
        waiting = subprocess.Popen(
            [sys.executable, "-m", "redistate.cli", "ls", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**environ, "REDISTATE_HOME": str(tmp_path)},
        )
        assert waiting.stderr is not None
        line = waiting.stderr.readline()  # blocks until it reports that it waits
        assert line == f"redistate: waiting for another redistate command using {tmp_path}\n"
        assert waiting.poll() is None
        fcntl.flock(handle, fcntl.LOCK_UN)
    out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 0 and out == ""
