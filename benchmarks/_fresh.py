"""Fresh processes, timed: what the start-up benchmarks (cli_startup.py, cold_start.py)
share. Each command runs once untimed first (it writes the bytecode cache and whatever
else a first run sets up), then ``rounds`` times in ABBA order with the others, so that
load which drifts during the run hits them alike.

A run is timed from spawn to exit, and, for ``python -c`` code that ends with ``DONE``,
also from spawn to that line: the moment its work is done, before the interpreter tears
itself down (which a serverless function, frozen after its response, does not pay on a
request). Both ends of that span read CLOCK_MONOTONIC, one clock for every process of
the machine."""

from __future__ import annotations

import resource
import statistics
import subprocess
import time
from typing import Literal, NamedTuple

__all__ = ["DONE", "Run", "medians", "paired", "run_once", "samples"]

# Appended to ``python -c`` code: a line of its own saying when its work was done
# (monotonic ns) and the CPU its process had used by then (ns). The leading newline
# ends whatever the code printed without one.
_MARK = "fresh-run-done"
DONE = f"\nimport time as _t\nprint('\\n{_MARK}', _t.monotonic_ns(), _t.process_time_ns())"


class Run(NamedTuple):
    """One run, in ms: spawn to exit and the child's CPU (user + system) by then; spawn
    to ``DONE`` and the CPU by then (None: the command prints no ``DONE`` line)."""

    wall: float
    cpu: float
    done: float | None = None
    done_cpu: float | None = None


Field = Literal["wall", "cpu", "done", "done_cpu"]


def run_once(argv: list[str], env: dict[str, str], *, done: bool = False) -> Run:
    """One timed run; ``done``: the command prints a ``DONE`` line, which the run must
    have. A command that fails, or lacks that line, stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    spawned = time.monotonic_ns()
    start = time.perf_counter()
    finished = subprocess.run(argv, env=env, capture_output=True, timeout=120)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    output = finished.stdout.decode(errors="replace")
    if finished.returncode != 0:
        raise SystemExit(
            f"{' '.join(argv)} exited {finished.returncode}: "
            f"{finished.stderr.decode(errors='replace')}"
        )
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    if not done:
        return Run(wall, cpu)
    # What the code printed itself comes before the line, anything printed at exit (an
    # atexit handler) after it.
    for line in output.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == _MARK and words[1].isdigit() and words[2].isdigit():
            return Run(wall, cpu, (int(words[1]) - spawned) / 1e6, int(words[2]) / 1e6)
    raise SystemExit(f"{' '.join(argv)} printed no {_MARK} line: {output[-200:]!r}")


def samples(
    argvs: dict[str, list[str]], env: dict[str, str], rounds: int, *, done: bool = False
) -> dict[str, list[Run]]:
    """Each label's runs over ``rounds`` ABBA rounds: run ``i`` of two labels ran in the
    same round, a few runs apart. ``done``: every command ends with ``DONE``."""
    for argv in argvs.values():
        run_once(argv, env, done=done)
    out: dict[str, list[Run]] = {label: [] for label in argvs}
    for i in range(rounds):
        for label in list(argvs) if i % 2 == 0 else list(argvs)[::-1]:
            out[label].append(run_once(argvs[label], env, done=done))
    return out


def medians(
    argvs: dict[str, list[str]], env: dict[str, str], rounds: int
) -> dict[str, tuple[float, float]]:
    """Median (wall ms, CPU ms) per label over ``rounds`` ABBA rounds."""
    return {
        label: (statistics.median(r.wall for r in runs), statistics.median(r.cpu for r in runs))
        for label, runs in samples(argvs, env, rounds).items()
    }


def paired(a: list[Run], b: list[Run], field: Field) -> float:
    """The median of ``a`` over ``b`` in one field of Run, round by round: the machine's
    speed drifts during a run by more than a small difference, and both runs of a round
    see about the same speed."""
    return float(
        statistics.median(getattr(x, field) - getattr(y, field) for x, y in zip(a, b, strict=True))
    )
