"""Running the ``redistate`` command as a user does: in a subprocess."""

from __future__ import annotations

import subprocess
import sys

__all__ = ["run"]


def run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``redistate ARGS``, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "redistate.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
