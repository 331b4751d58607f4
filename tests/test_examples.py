"""The examples are part of the documentation: they must run, embedded and on a server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Backend

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


def _run(path: Path, url: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "REDISTATE_URL"}
    if url:
        env["REDISTATE_URL"] = url
    done = subprocess.run(
        [sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


# What each example must print: it shows the guarantee it is about.
EXPECTED = {
    "adk_two_processes.py": [
        "assistant: Nice to meet you, Ada.",
        "found 4 events of the session",  # the second process: the first one's history
        "assistant: Your name is Ada.",  # from user: state the first process set
        "turn process exit code: 0",
        "events stored: 6",
        "state: {'turns_with_tools': 1, 'user:name': 'Ada'}",
    ],
    "claude_sessions.py": [
        "mirrored 6 lines",
        "found session 6f1c2a9e: 'Plan the launch of the beta.'",  # the other process's
        "4 messages, the last by assistant",  # the resent batch stored once
        "browse process exit code: 0",
        "session: 'Beta, no rollback', first prompt 'Plan the launch of the beta.'",
        "session: 'Beta launch', first prompt 'Plan the launch of the beta.'",
    ],
    "langgraph_resume.py": [
        "process 1 killed by SIGKILL (exit -9)",
        "saved before the kill: ['outline', 'research'], next: ['draft']",
        "nodes of process 1: ['outline', 'research']",
        "nodes of process 2: ['draft', 'review', 'publish']",
        "each node once: True",
    ],
    "pydantic_ai_conversations.py": [
        "loaded 0 messages, saved 4 new",
        "loaded 4 messages, saved 2 new",  # the other process's turn, then its own
        "turn process exit code: 0",
        "stale save refused: conflict",
        "trip-b: 6 messages, title None, forked from 'trip-planning'",
        "trip-planning: 8 messages, title 'Trip', forked from None",
    ],
    "quickstart.py": ["refused: conflict", "user u1: {'prefs': {'lang': 'zh'}}"],
    "quickstart_async.py": ["facts kept: 20 of 20"],
    "resume_after_crash.py": [
        "instance 1: crashed during write",
        "starting with 3 steps done",
        "- Progress: 100%",
        "- Next step: ship it",
    ],
    "worker_pool.py": [
        "worker exit codes: [-9, 0, 0, 0]",
        "task-01: worker ",  # a survivor took over the killed worker's task...
        " resumes after phase 'fetched'",  # ...after the step it had recorded
        "step 'fetch' failed earlier with ConnectionError",
        "tasks done: 12 of 12",
        "tool calls: 25, failed and retried: 1",
        "tool calls repeated: 0",
        "every step ran once: True",
    ],
}


def test_every_example_has_expectations() -> None:
    assert {p.name for p in EXAMPLES} == set(EXPECTED)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_embedded(path: Path) -> None:
    out = _run(path, None)
    for expected in EXPECTED[path.name]:
        assert expected in out, out


# One server: an example shows the API, which does not change with the server; the
# store's behaviour on Valkey 9 (and cluster, Sentinel) is the contract suite's.
@pytest.mark.parametrize("server_backend", ["redis7"], indirect=True)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_on_a_server(path: Path, server_backend: Backend) -> None:
    out = _run(path, server_backend.url)
    for expected in EXPECTED[path.name]:
        assert expected in out, out
