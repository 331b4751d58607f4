"""The documentation stays true: every Python block of README.md and of the site's
pages runs, the site's navigation lists every page, and the README's test command is
the one CI runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Backend
from tests.upstash_rest import UpstashRest

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text("utf-8")
COMMANDS = re.findall(r"```bash\n(.*?)\n```", README, re.S)
PAGES = sorted((ROOT / "docs").rglob("*.md"))
# Files a page includes whole (pymdownx.snippets): examples, run by test_examples, and
# RELIABILITY.md. A block that includes one is fenced ``` { .python } so that neither
# ruff (which formats the python blocks of Markdown) nor this test reads it as code.
SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', re.M)


def _blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def _page_blocks() -> list[tuple[str, int, str]]:
    found = []
    for page in PAGES:
        for index, code in enumerate(_blocks(page.read_text("utf-8"))):
            found.append((page.relative_to(ROOT).as_posix(), index, code))
    return found


PAGE_BLOCKS = _page_blocks()


# The Upstash URL the pages show; their blocks reach the REST emulator instead.
UPSTASH_URL = "upstash+https://eu1-sharp-cat-12345.upstash.io"


def _run(code: str, backend: Backend, namespace: str, rest: UpstashRest | None = None) -> None:
    code = code.replace("redis://localhost:6379/0", backend.url)
    code = code.replace('namespace="myapp"', f'namespace="{namespace}"')
    env = dict(os.environ)
    if rest is not None:
        code = code.replace(UPSTASH_URL, rest.url)
        env["UPSTASH_REDIS_REST_TOKEN"] = rest.token
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr


def test_the_site_has_python_blocks() -> None:
    """Guards the collection below: a changed fence syntax would run nothing."""
    assert len(PAGE_BLOCKS) >= 15, [(page, index) for page, index, _ in PAGE_BLOCKS]


@pytest.mark.parametrize("index", range(len(_blocks(README))))
def test_readme_code_runs(index: int, server_backend: Backend, namespace: str) -> None:
    _run(_blocks(README)[index], server_backend, namespace)


@pytest.mark.parametrize("server_backend", ["redis7"], indirect=True)
@pytest.mark.parametrize(
    ("page", "index", "code"), PAGE_BLOCKS, ids=[f"{p}#{i}" for p, i, _ in PAGE_BLOCKS]
)
def test_site_code_runs(
    page: str,
    index: int,
    code: str,
    server_backend: Backend,
    namespace: str,
    request: pytest.FixtureRequest,
) -> None:
    rest = request.getfixturevalue("upstash_rest") if UPSTASH_URL in code else None
    _run(code, server_backend, namespace, rest)


def test_what_the_site_includes_is_an_example_or_reliability() -> None:
    included = {name for page in PAGES for name in SNIPPET.findall(page.read_text("utf-8"))}
    assert "RELIABILITY.md" in included and "examples/langgraph_resume.py" in included
    for name in included:
        assert (ROOT / name).is_file(), name
        assert name == "RELIABILITY.md" or name.startswith("examples/"), name


def test_every_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text("utf-8")
    listed = set(re.findall(r":\s*(\S+\.md)\s*$", nav, re.M))
    assert {p.relative_to(ROOT / "docs").as_posix() for p in PAGES} == listed


def test_readme_is_short_and_links_only_inside_the_repository() -> None:
    assert len(README.splitlines()) <= 150
    for target in re.findall(r"\]\(([^)#]+)", README):
        assert not target.startswith(("http://", "https://", "/", "..")), target
        assert (ROOT / target).exists(), target


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one() -> None:
    assert len(COMMANDS) == 2, COMMANDS
    main_job, tests = COMMANDS
    assert main_job == "pip install -e '.[embedded]' && redistate demo"  # test_cli_demo runs it
    ci = (ROOT / ".ci" / "run").read_text("utf-8").splitlines()
    assert tests in ci
    assert any("mkdocs build --strict" in line for line in ci)  # warnings are errors


def test_sync_twins_are_generated_from_the_async_sources() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "unasync.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout
