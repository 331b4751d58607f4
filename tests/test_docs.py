"""README stays true: its code runs, and its test command is the one CI runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Backend

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text("utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
COMMANDS = re.findall(r"```bash\n(.*?)\n```", README, re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_code_runs(index: int, server_backend: Backend, namespace: str) -> None:
    code = BLOCKS[index].replace("redis://localhost:6379/0", server_backend.url)
    code = code.replace('namespace="myapp"', f'namespace="{namespace}"')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one() -> None:
    assert len(COMMANDS) == 2, COMMANDS
    main_job, tests = COMMANDS
    assert main_job == "pip install -e '.[embedded]' && redistate demo"  # test_cli_demo runs it
    assert tests in (ROOT / ".ci" / "run").read_text("utf-8").splitlines()


def test_sync_twins_are_generated_from_the_async_sources() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "unasync.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout
