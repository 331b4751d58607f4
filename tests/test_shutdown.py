"""Graceful shutdown (``redistate.graceful()``): a worker SIGTERMed mid-task saves its
state as "interrupted", releases its lease and exits 128 + 15; a worker already waiting
for the task is woken by that release (its lease would only expire after 60 s, past
its 30 s wait: acquiring at all shows the hand-over), resumes from the saved state and
runs no recorded step again. Real processes and signals (tests/shutdown_worker.py)."""

from __future__ import annotations

import signal
import subprocess

import pytest

from tests import spawn
from tests.conftest import Backend


def _worker(url: str, namespace: str, mode: str) -> subprocess.Popen[bytes]:
    return spawn.module("shutdown_worker", url, namespace, mode)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_sigtermed_worker_hands_its_task_to_the_waiting_one(
    server_backend: Backend, namespace: str, mode: str
) -> None:
    first = _worker(server_backend.url, namespace, mode)
    second = None
    try:
        assert spawn.line(first) == "entered - {}"
        assert spawn.line(first) == "mid"  # s0 and s1 ran and were saved; it waits
        second = _worker(server_backend.url, namespace, mode)  # waits for the lease
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 128 + signal.SIGTERM
        assert first.stderr is not None and b"Traceback" not in first.stderr.read()
        # Woken by the release: the saved state, marked interrupted.
        assert spawn.line(second) == 'entered interrupted {"next":2}'
        assert spawn.line(second) == "finished"
        assert second.wait(timeout=60) == 0
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    raw = server_backend.raw()
    try:
        # Each step's effect once: s0 and s1 by the first worker, replayed by the second.
        assert raw.lrange(f"{namespace}:effects:{{job}}", 0, -1) == [
            b"0",
            b"1",
            b"2",
            b"3",
            b"4",
        ]
    finally:
        raw.close()
