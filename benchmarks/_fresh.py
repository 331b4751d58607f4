"""Fresh processes, timed: what the start-up benchmarks (cli_startup.py, cold_start.py)
share. Each command runs once untimed first (it writes the bytecode cache and whatever
else a first run sets up), then ``rounds`` times in ABBA order with the others, so that
load which drifts during the run hits them alike."""

from __future__ import annotations

import resource
import statistics
import subprocess
import time

__all__ = ["medians", "run_once"]


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


def medians(
    argvs: dict[str, list[str]], env: dict[str, str], rounds: int
) -> dict[str, tuple[float, float]]:
    """Median (wall ms, CPU ms) per label over ``rounds`` ABBA rounds."""
    for argv in argvs.values():
        run_once(argv, env)
    walls: dict[str, list[float]] = {label: [] for label in argvs}
    cpus: dict[str, list[float]] = {label: [] for label in argvs}
    for i in range(rounds):
        for label in list(argvs) if i % 2 == 0 else list(argvs)[::-1]:
            wall, cpu = run_once(argvs[label], env)
            walls[label].append(wall)
            cpus[label].append(cpu)
    return {
        label: (statistics.median(walls[label]), statistics.median(cpus[label])) for label in argvs
    }
