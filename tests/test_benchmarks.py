"""The benchmark scripts keep working; records.py exits non-zero over its round-trip targets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_records_benchmark_runs_and_meets_round_trip_targets() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "records.py"),
            "--n",
            "200",
            "--rounds",
            "2",
            "--warmup",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for op in ("put", "get", "conditional put", "merge", "update", "get(touch)"):
        assert f"\n{op} " in done.stdout


def test_checkpoints_benchmark_runs_and_meets_round_trip_targets() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "checkpoints.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "after 10 vs 10,000 earlier saves" in done.stdout
    assert "vs deltas" in done.stdout


def test_locks_benchmark_runs_and_meets_round_trip_targets() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "locks.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hand-off" in done.stdout and "redis-py Lock" in done.stdout


def test_durability_benchmark_runs_and_keeps_replicated_writes_to_one_request() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "durability.py"),
            *("--n", "200", "--rounds", "2", "--warmup", "20"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for op in ("put", "merge", "checkpoint save"):
        assert f"\n{op} " in done.stdout


def test_backup_benchmark_runs_and_keeps_peak_memory_flat() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "backup.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "peak memory 10,000 / 1,000 records: export" in done.stdout
    assert "import peak MiB" in done.stdout
