"""A test's helper process: ``python -m tests.<module> ...`` from this checkout, talked to
line by line over its stdin and stdout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["line", "module", "send"]

ROOT = Path(__file__).resolve().parent.parent


def module(name: str, *args: str) -> subprocess.Popen[bytes]:
    """Start ``python -m tests.<name> *args`` (stdin, stdout and stderr piped)."""
    return subprocess.Popen(
        [sys.executable, "-m", f"tests.{name}", *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def line(process: subprocess.Popen[bytes]) -> str:
    """The process's next line of output; fails the test if it exited instead."""
    assert process.stdout is not None
    found = process.stdout.readline().decode().strip()
    assert found, f"the process exited (code {process.poll()})"
    return found


def send(process: subprocess.Popen[bytes], text: str = "go") -> None:
    """Write a line to the process's stdin."""
    assert process.stdin is not None
    process.stdin.write(text.encode() + b"\n")
    process.stdin.flush()
