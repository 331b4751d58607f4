"""Cold start: what a fresh process (a serverless function's first invocation) pays for
redistate over raw redis-py.

    python benchmarks/cold_start.py [--rounds 20] [--quick]

Each line runs in a fresh interpreter, ABBA-ordered with the others (so that load which
drifts during the run hits them alike), after one untimed run that writes the bytecode
cache; the table shows the median of ``--rounds`` runs: wall time from spawn to exit and
the child's CPU time (user + system), each over ``python -c pass`` and over its
redis-py counterpart. "first put" runs a process that connects and writes one value: a
SET by redis-py, a ``sessions.put`` by redistate (which also checks the server on first
contact), against a private redis-server. Nothing is asserted about the times.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import harness
from _fresh import medians
from cli_startup import environment
from harness import Column, Row

from tests.servers import redis_binary, running

TARGET_MS = 20.0  # issue 26: start to first put within this of raw redis-py

BASELINE = "python -c pass"
# label -> (code, the label of its redis-py counterpart, or None)
LINES: dict[str, tuple[str, str | None]] = {
    BASELINE: ("pass", None),
    "import redis": ("import redis", None),
    "import redistate": ("import redistate", "import redis"),
    "from redistate import Store, AsyncStore": (
        "from redistate import Store, AsyncStore",
        "import redis",
    ),
    "redis-py: first SET": (
        "import redis, sys; redis.Redis.from_url(sys.argv[1]).set('k', 'v')",
        None,
    ),
    "redistate: first put": (
        "import sys\nfrom redistate import Store\n"
        "Store.from_url(sys.argv[1], namespace='cold').sessions.put('s', {'a': 1})",
        "redis-py: first SET",
    ),
    "redistate: first put, server_check off": (
        "import sys\nfrom redistate import Store\n"
        "Store.from_url(sys.argv[1], namespace='cold', server_check='off')"
        ".sessions.put('s', {'a': 1})",
        "redis-py: first SET",
    ),
}


def measure(url: str, env: dict[str, str], rounds: int) -> dict[str, tuple[float, float]]:
    argvs = {label: [sys.executable, "-c", code, url] for label, (code, _) in LINES.items()}
    return medians(argvs, env, rounds)  # the first, untimed run loads the function library


def table(medians: dict[str, tuple[float, float]]) -> list[Row]:
    base_wall, base_cpu = medians[BASELINE]
    rows = []
    for label, (wall, cpu) in medians.items():
        peer = LINES[label][1]
        rows.append(
            {
                "line": label,
                "wall": wall,
                "over": wall - base_wall,
                "cpu": cpu - base_cpu,
                "vs_wall": None if peer is None else wall - medians[peer][0],
                "vs_cpu": None if peer is None else cpu - medians[peer][1],
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="ABBA rounds (runs per line)")
    parser.add_argument("--quick", action="store_true", help="2 rounds: it runs, roughly")
    args = parser.parse_args()
    rounds = 2 if args.quick else args.rounds
    with (
        tempfile.TemporaryDirectory(prefix="redistate-cold-") as tmp,
        running(redis_binary()) as server,
    ):
        medians = measure(server.url, environment(Path(tmp)), rounds)
    cols: list[Column] = [
        ("line", "line", ""),
        ("median wall ms", "wall", ".1f"),
        ("over python ms", "over", ".1f"),
        ("CPU over python ms", "cpu", ".1f"),
        ("wall over redis-py ms", "vs_wall", ".1f"),
        ("CPU over redis-py ms", "vs_cpu", ".1f"),
    ]
    load = os.getloadavg()[0]
    python = sys.version.split()[0]
    print(f"python {python}, {os.cpu_count()} CPUs, load {load:.1f}, {rounds} rounds")
    harness.print_table(cols, table(medians), "Cold start: a fresh process each (medians)")
    over = medians["redistate: first put"][0] - medians["redis-py: first SET"][0]
    verdict = "meets" if over <= TARGET_MS else "misses"
    print(
        f"\njudgement: start to first put is {over:.1f} ms over raw redis-py's; {verdict} "
        f"the {TARGET_MS:.0f} ms target (not enforced)."
    )


if __name__ == "__main__":
    main()
