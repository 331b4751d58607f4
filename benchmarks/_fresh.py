"""Fresh processes, timed: what the start-up benchmarks (cli_startup.py, cold_start.py)
share. Each command runs once untimed first (it writes the bytecode cache and whatever
else a first run sets up), then ``rounds`` times in ABBA order with the others, so that
load which drifts during the run hits them alike."""

from __future__ import annotations

import resource
import statistics
import subprocess
import time

__all__ = ["medians", "paired", "run_once", "samples"]


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, the child's CPU ms: user + system) of one run; a command that fails
    stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, timeout=120)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode(errors='replace')}"
        )
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def samples(
    argvs: dict[str, list[str]], env: dict[str, str], rounds: int
) -> dict[str, list[tuple[float, float]]]:
    """Each label's (wall ms, CPU ms) per round, over ``rounds`` ABBA rounds: sample
    ``i`` of two labels ran in the same round, a few runs apart."""
    for argv in argvs.values():
        run_once(argv, env)
    out: dict[str, list[tuple[float, float]]] = {label: [] for label in argvs}
    for i in range(rounds):
        for label in list(argvs) if i % 2 == 0 else list(argvs)[::-1]:
            out[label].append(run_once(argvs[label], env))
    return out


def medians(
    argvs: dict[str, list[str]], env: dict[str, str], rounds: int
) -> dict[str, tuple[float, float]]:
    """Median (wall ms, CPU ms) per label over ``rounds`` ABBA rounds."""
    return {
        label: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        for label, runs in samples(argvs, env, rounds).items()
    }


def paired(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> tuple[float, float]:
    """Median (wall ms, CPU ms) of ``a`` over ``b``, round by round: the machine's speed
    drifts during a run by more than a small difference, and both runs of a round
    see about the same speed."""
    return (
        statistics.median(x[0] - y[0] for x, y in zip(a, b, strict=True)),
        statistics.median(x[1] - y[1] for x, y in zip(a, b, strict=True)),
    )
