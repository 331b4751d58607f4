"""What the ``redistate`` command prints, read from real subprocesses at 80 and 200
columns: store data as it is (no Rich markup, no emoji codes, no control characters),
ids never cut, --json everywhere, exit codes, and the hints for common mistakes."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from redistate import EncryptedCodec, Store
from tests.cli import run
from tests.conftest import Backend, _backend

WIDTHS = [80, 200]
LONG = "a-task-id-long-enough-to-be-folded-" + "x" * 60 + "-end"
ODD = "bell\x07esc\x1b[31mred"  # control characters a terminal would act on


def _env(width: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDISTATE_")}
    return {**env, "COLUMNS": str(width), **extra}


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def _fits(text: str, width: int) -> None:
    """Every line of ``text`` fits the terminal (box characters are one cell wide)."""
    assert text and max(len(line) for line in text.splitlines()) <= width, text


def _column(text: str, index: int) -> str:
    """The cells of column ``index`` of a table, joined: a folded id made whole again."""
    rows = [line.split("│") for line in text.splitlines() if "│" in line]
    return "".join(row[index + 1].strip() for row in rows if len(row) > index + 1)


def _readable(text: str) -> str:
    """``text`` and each of its table's columns joined (what a folded cell holds)."""
    widest = max((line.count("│") for line in text.splitlines()), default=0)
    return "\n".join([text, *(_column(text, i) for i in range(max(widest - 1, 0)))])


@pytest.fixture
def server_backend(request: pytest.FixtureRequest) -> Backend:
    """Redis 7 only: what the CLI prints does not depend on the server (the commands'
    behaviour on Valkey is the other CLI tests'), and this file is 30 subprocesses."""
    return _backend("redis7", request)


@pytest.fixture
def odd(server_backend: Backend, namespace: str) -> list[str]:
    """A namespace whose ids, phases, event types and payloads look like Rich markup and
    emoji codes."""
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        store.sessions.put("chat:fire:42", {"say": "[red]hi[/red] :fire:"}, ttl=600)
        store.users.put("a:b:c", {"lang": "zh"})
        store.collection("notes").put("[red]n1[/red]", {"x": 1})
        store.sessions.put(ODD, {"x": 1}, ttl=600)
        store.checkpoints.save("t:fire:1", {"step": 1}, phase="[bold]plan:fire:", progress=0.1)
        store.checkpoints.save(LONG, {"step": 1}, phase="p")
        store.events.append("t:fire:1", "x:fire:y", {"k": "[b]v :fire:"})
        store.lock("lk:fire:x", ttl=60, renew=False).acquire()
    return ["--url", server_backend.url, "--namespace", namespace]


@pytest.mark.parametrize("width", WIDTHS)
def test_store_data_is_shown_as_it_is(odd: list[str], width: int) -> None:
    env = _env(width)
    shown = {
        ("ls", "sessions"): ["chat:fire:42", "bell\\x07esc\\x1b[31mred"],
        ("ls", "users"): ["a:b:c"],
        ("ls", "notes"): ["[red]n1[/red]"],
        ("ls", "tasks"): ["t:fire:1"],
        ("checkpoints", "t:fire:1"): ["[bold]plan:fire:", "checkpoints of t:fire:1"],
        ("locks",): ["lk:fire:x"],
        ("events", "t:fire:1"): ["x:fire:y", '"[b]v', ":fire:"],
        ("stats",): ["chat:fire:42", "a:b:c", "t:fire:1", "lk:fire:x"],
        ("verify",): ["t:fire:1"],
        ("show", "sessions", "chat:fire:42"): ['"say": "[red]hi[/red] :fire:"'],
        ("restore", "t:fire:1"): ['"phase": "[bold]plan:fire:"'],
        ("handoff", "t:fire:1"): ["# Task t:fire:1", "- Phase: [bold]plan:fire:"],
    }
    for command, expected in shown.items():
        text = _ok(run(*odd, *command, env=env))
        for piece in expected:
            assert piece in _readable(text), (command, piece, text)
        for mangled in ("🔥", "🅱", "\x1b", "\x07", "…"):
            assert mangled not in text, (command, mangled, text)
        _fits(text, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_ids_fold_and_titles_stay_whole(odd: list[str], width: int) -> None:
    env = _env(width)
    tasks = _ok(run(*odd, "ls", "tasks", env=env))
    assert LONG in _column(tasks, 0)  # folded at 80 columns, never cut
    assert (LONG in tasks) is (width == 200)
    history = _ok(run(*odd, "checkpoints", LONG, env=env))
    title = f"checkpoints of {LONG}" if width == 200 else "checkpoints of"
    assert any(line.strip() == title for line in history.splitlines()), history
    stats = _ok(run(*odd, "stats", env=env))
    assert LONG in _column(stats.split("largest entities")[1], 1)
    none = _ok(run(*odd, "ls", "nothing", env=env))  # an empty table keeps its title whole
    assert any(line.strip() == f"nothing in {odd[-1]}" for line in none.splitlines()), none


@pytest.mark.parametrize("width", WIDTHS)
def test_report_tables_are_readable_at_any_width(
    server_backend: Backend, namespace: str, tmp_path: Path, width: int
) -> None:
    key = base64.b64encode(os.urandom(32)).decode()
    with Store(
        server_backend.sync_client(),
        namespace=namespace,
        codec=EncryptedCodec({"k1": base64.b64decode(key)}, "k1"),
    ) as store:
        store.users.put("u1", {"name": "Ann Lee"})
    args = ["--url", server_backend.url, "--namespace", namespace]
    env = _env(width, REDISTATE_KEYS=f"k1={key}")
    rotated = _ok(run(*args, "rotate-keys", env=env))
    _fits(rotated, width)
    for field in ("already current", "event chains not verified", "moved off"):
        assert any(line.startswith(f"│ {field} ") for line in rotated.splitlines()), rotated
    assert f"rotated {namespace} to key k1" in rotated
    (tmp_path / "steps.py").write_text("def register(m):\n    pass\n", encoding="utf-8")
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    migrated = _ok(run(*args, "migrate", "--using", "steps:register", env=env))
    _fits(migrated, width)
    for field in ("upgraded", "checkpoints held", "changed meanwhile"):
        assert any(line.startswith(f"│ {field} ") for line in migrated.splitlines()), migrated
    as_json = json.loads(_ok(run(*args, "migrate", "--using", "steps:register", "--json", env=env)))
    assert as_json["current"] == 1 and as_json["event chains not verified"] == 0


def test_handoff_and_show_write_no_control_character_raw(
    server_backend: Backend, namespace: str
) -> None:
    """A phase or a note holding a terminal's escape sequences (a title change, a clear
    screen, an 8-bit CSI) reaches the terminal escaped; ``show`` stays valid JSON."""
    clear, title, csi = "esc\x1b[2Jred", "go\x1b]0;pwned\x07", "c1\x9b2J del\x7f"
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        store.checkpoints.save("t1", {"say": csi}, phase=clear, metadata={"next": title})
        store.sessions.put("s1", {"say": csi})
    where = ["--url", server_backend.url, "--namespace", namespace]
    handoff = _ok(run(*where, "handoff", "t1"))
    assert "- Phase: esc\\x1b[2Jred" in handoff and "go\\x1b]0;pwned\\x07" in handoff
    for command in (["show", "sessions", "s1"], ["restore", "t1"]):
        text = _ok(run(*where, *command))
        assert json.loads(text)["data" if command[0] == "show" else "state"] == {"say": csi}
    for text in (handoff, _ok(run(*where, "show", "sessions", "s1"))):
        raw = [c for c in text if (ord(c) < 32 and c != "\n") or 127 <= ord(c) < 160]
        assert raw == [], text


def test_json_on_show_restore_handoff_and_events(odd: list[str]) -> None:
    shown = json.loads(_ok(run(*odd, "show", "sessions", "chat:fire:42", "--json")))
    assert shown["id"] == "chat:fire:42" and shown["data"] == {"say": "[red]hi[/red] :fire:"}
    restored = json.loads(_ok(run(*odd, "restore", "t:fire:1", "--json")))
    assert restored["state"] == {"step": 1} and restored["checkpoint"]["seq"] == 1
    handoff = json.loads(_ok(run(*odd, "handoff", "t:fire:1", "--json")))
    assert handoff["task"] == "t:fire:1" and handoff["markdown"].startswith("# Task t:fire:1\n")
    events = [
        json.loads(line) for line in _ok(run(*odd, "events", "t:fire:1", "--json")).splitlines()
    ]
    assert [e["payload"] for e in events] == [{"k": "[b]v :fire:"}]  # an object, not a string
    for command in (["show", "sessions", "chat:fire:42"], ["restore", "t:fire:1"]):
        lines = _ok(run(*odd, *command, "--json")).splitlines()
        assert len(lines) == 1  # one JSON line; without --json, indented


def test_version_and_python_m_redistate() -> None:
    from redistate import __version__

    for argv in (["-m", "redistate"], ["-m", "redistate.cli"]):
        done = subprocess.run(
            [sys.executable, *argv, "--version"], capture_output=True, text=True, timeout=60
        )
        assert (done.returncode, done.stdout) == (0, f"redistate {__version__}\n"), done.stderr
    helped = subprocess.run(
        [sys.executable, "-m", "redistate", "--help"], capture_output=True, text=True, timeout=60
    )
    assert helped.returncode == 0 and "rotate-keys" in helped.stdout


def test_a_global_option_after_the_command_gets_a_hint() -> None:
    done = run("ls", "--url", "redis://x")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "redistate: put --url before the command: redistate --url redis://x ls\n"
    )
    both = run("events", "t1", "--namespace=n", "--url", "u")
    assert both.returncode == 2
    assert both.stderr == (
        "redistate: put --namespace and --url before the command: "
        "redistate --namespace=n --url u events t1\n"
    )
    # acl has a --namespace of its own: no hint, it works
    acl = run("acl", "--namespace", "app")
    assert acl.returncode == 0 and "~app:*" in acl.stdout


def test_the_hint_skips_the_values_of_a_commands_own_options() -> None:
    # --url is the value of show's own --using here, not a misplaced global option
    done = run("show", "sessions", "s1", "--using", "--url")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "redistate: --using '--url' must be module:function\n"
    # a global option after that value still gets the hint, the value left in place
    later = run("show", "sessions", "s1", "--using", "--url", "--namespace", "n")
    assert later.returncode == 2
    assert later.stderr == (
        "redistate: put --namespace before the command: "
        "redistate --namespace n show sessions s1 --using --url\n"
    )


def test_export_to_stdout(odd: list[str], server_backend: Backend, namespace: str) -> None:
    done = run(*odd, "export", "--out", "-")
    header, *entities, end = map(json.loads, _ok(done).splitlines())
    assert header["namespace"] == namespace and len(entities) >= 7
    assert end == {"kind": "end", "entities": len(entities)}
    assert done.stderr.startswith("exported ") and f"of namespace {namespace!r} to stdout" in (
        done.stderr
    )
    reported = run(*odd, "export", "--out", "-", "--json")
    summary = json.loads(reported.stderr.splitlines()[0])
    assert summary["entities"] == len(entities)
    assert not list(Path.cwd().glob("-*"))  # no file called "-" (or "-.partial")


def test_a_missing_entity_exits_1_with_one_line_everywhere(odd: list[str]) -> None:
    ns = odd[-1]
    for command, message in (
        (["checkpoints", "nope"], f"no task 'nope' in namespace {ns!r}"),
        (["restore", "nope"], f"no task 'nope' in namespace {ns!r}"),
        (["handoff", "nope"], f"no task 'nope' in namespace {ns!r}"),
        (["show", "users", "nope"], f"no user 'nope' in namespace {ns!r}"),
        (["events", "nope"], f"no events of 'nope' in namespace {ns!r}"),
        (["checkpoints", "nope", "--json"], f"no task 'nope' in namespace {ns!r}"),
    ):
        done = run(*odd, *command)
        assert (done.returncode, done.stdout) == (1, ""), command
        assert done.stderr == f"redistate: {message}\n", command
    assert run(*odd, "checkpoints").returncode == 2  # usage: the id is missing


NEWER = """
def register(migrations):
    migrations.register("users", 1, lambda d: {**d, "v": 2})
"""


def test_show_reads_a_newer_schema_with_using(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        store.migrations.register("users", 1, lambda d: {**d, "v": 2})
        store.users.put("u1", {"v": 2})  # written at schema 2
    args = ["--url", server_backend.url, "--namespace", namespace, "show", "users", "u1"]
    plain = run(*args)
    assert plain.returncode == 1 and "schema" in plain.stderr
    (tmp_path / "newer.py").write_text(NEWER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    shown = json.loads(_ok(run(*args, "--using", "newer:register", "--json", env=env)))
    assert shown["data"] == {"v": 2}
    bad = run(*args, "--using", "newer")
    assert bad.returncode == 2 and "must be module:function" in bad.stderr


def test_stats_counts_agree_with_its_largest_list(server_backend: Backend, namespace: str) -> None:
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        store.checkpoints.save("t1", {"step": 1})
        store.checkpoints.log("only-log", {"d": 1})  # a task with a delta log only
        store.sessions.put("s1", {"x": 1}, ttl=600)
        store.collection("notes").put("n1", {"x": 1})
    args = ["--url", server_backend.url, "--namespace", namespace, "stats"]
    rows = {r["kind"]: r for r in map(json.loads, _ok(run(*args, "--json")).splitlines())}
    for kind, row in rows.items():
        assert row["sampled"] == row["keys"], kind  # everything sampled: must agree
        assert len(row["largest"]) == min(5, row["entities"]), (kind, row)
    assert rows["task"]["entities"] == 2
    assert {x["id"] for x in rows["task"]["largest"]} == {"t1", "only-log"}
    unknown = run(*args, "--expect-ttl", "sesions")
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert "'sesions'" in unknown.stderr and "sessions" in unknown.stderr.split("known kinds")[1]
    assert "tasks" in unknown.stderr and "notes" in unknown.stderr
    collection = [
        json.loads(x) for x in _ok(run(*args, "--expect-ttl", "notes", "--json")).splitlines()
    ]
    assert {r["kind"]: r["no_ttl"] for r in collection}["notes"] == 1


def test_an_encrypted_namespace_without_keys_says_so(
    server_backend: Backend, namespace: str
) -> None:
    codec = EncryptedCodec({"k1": os.urandom(32)}, "k1")
    with Store(server_backend.sync_client(), namespace=namespace, codec=codec) as store:
        store.sessions.put("s1", {"x": 1})
        store.checkpoints.save("t1", {"x": 1})
        store.events.append("t1", "made", {"x": 1})
    args = ["--url", server_backend.url, "--namespace", namespace]
    env = _env(80)
    for command in (["show", "sessions", "s1"], ["restore", "t1"], ["handoff", "t1"],
                    ["checkpoints", "t1"], ["events", "t1"], ["verify"]):  # fmt: skip
        done = run(*args, *command, env=env)
        assert done.returncode == 1, command
        last: Any = done.stderr.splitlines()[-1 if command != ["verify"] else 0]
        assert "is encrypted (key 'k1'): set REDISTATE_KEYS" in last, (command, done.stderr)
        assert "UTF-8" not in done.stderr and "surrogates" not in done.stderr
