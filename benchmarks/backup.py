"""Backup benchmark: ``redistate export`` / ``import`` throughput and peak client memory.

    python benchmarks/backup.py [--sizes 10000,100000] [--million] [--quick] [--url ...]

For each size N the namespace holds N user records (~300-byte envelopes) and N/100 tasks
(3 checkpoints and a delta each); store.admin.export and import_file (what the CLI commands
call) run against it, the import into the emptied namespace. Each runs twice: timed
without tracing (keys/s: records and tasks per second), then under tracemalloc for the
peak of Python allocations (traced memory is the client's: buffers of the file and of the
replies, the batch in flight; tracing slows Python, so it is not timed).

Without ``--url`` a private ``redis-server`` (from PATH) is started on a free loopback port.
The target (DESIGN.md) is flat peak memory: the last size's peak over the first's ~1.
Exits 1 if that ratio is over 1.5 for export or import.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness
from harness import Clients, Column, Row

from redistate.core import keys

MAX_RATIO = 1.5
TASK_EVERY = 100  # one task per this many records


def seed(c: Clients, n: int) -> None:
    """N user records and N/100 tasks: one of each written by the store, copied raw
    (pipelined SETs of the same bytes under other ids: seeding 1M records takes seconds)."""
    store = c.store
    store.users.put("u0", {"name": "user", "prefs": {"lang": "en", "tz": "UTC"}, "pad": "x" * 200})
    value = c.raw.get(store.keys.record("user", "u0"))
    assert value is not None
    for start in range(1, n, 5000):
        pipe = c.raw.pipeline(transaction=False)
        for i in range(start, min(n, start + 5000)):
            pipe.set(store.keys.record("user", f"u{i}"), value)
        pipe.execute()
    for t in range(max(1, n // TASK_EVERY)):
        for step in range(3):
            store.checkpoints.save(f"t{t}", {"step": step, "notes": "y" * 100})
        store.checkpoints.log(f"t{t}", {"seen": t})


def clear(c: Clients) -> None:
    """Delete the namespace in pipelined batches (the harness deletes key by key)."""
    batch: list[bytes] = []
    for key in c.raw.scan_iter(match=f"{c.namespace}:*", count=5000):
        batch.append(key)
        if len(batch) >= 5000:
            c.raw.unlink(*batch)
            batch.clear()
    if batch:
        c.raw.unlink(*batch)


def measured(fn: Callable[[], Any]) -> tuple[float, int, Any]:
    """(seconds untraced, peak traced bytes, result): ``fn`` runs twice."""
    started = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - started
    # The id-escaping cache holds at most 1,024 ids (~150 KiB). Left warm, a size whose
    # ids all fit costs nothing in the traced run and a larger one refills it, which reads
    # as growth; emptied, every size pays for the same bounded cache.
    keys._escaped.cache_clear()
    tracemalloc.start()
    try:
        fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return seconds, peak, result


def run_size(c: Clients, n: int, workdir: Path) -> Row:
    store = c.store
    clear(c)
    seed(c, n)
    path = workdir / f"export-{n}.jsonl"

    def export() -> int:
        with open(path, "wb") as sink:
            return sum(store.admin.export(sink).entities.values())

    export_s, export_peak, entities = measured(export)
    clear(c)

    def restore() -> int:
        return sum(store.admin.import_file(path).imported.values())

    import_s, import_peak, imported = measured(restore)
    if imported != entities:
        raise RuntimeError(f"imported {imported} of {entities} entities")
    row = {
        "n": n,
        "entities": entities,
        "file_mib": path.stat().st_size / 2**20,
        "export_per_s": entities / export_s,
        "export_peak_mib": export_peak / 2**20,
        "import_per_s": entities / import_s,
        "import_peak_mib": import_peak / 2**20,
    }
    path.unlink()
    clear(c)
    return row


COLUMNS: list[Column] = [
    ("records", "n", ",d"),
    ("entities", "entities", ",d"),
    ("file MiB", "file_mib", ".1f"),
    ("export/s", "export_per_s", ",.0f"),
    ("export peak MiB", "export_peak_mib", ".2f"),
    ("import/s", "import_per_s", ",.0f"),
    ("import peak MiB", "import_peak_mib", ".2f"),
]


def bench(c: Clients, args: argparse.Namespace) -> int:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="redistate-bench-") as workdir:
        for n in args.size_list:
            print(f"  {n:,} records...", file=sys.stderr)
            rows.append(run_size(c, n, Path(workdir)))
    info = harness.machine(c.raw)
    harness.print_table(COLUMNS, rows, "export / import (keys/s: entities per second)")
    first, last = rows[0], rows[-1]
    ratios = {
        side: last[f"{side}_peak_mib"] / first[f"{side}_peak_mib"] for side in ("export", "import")
    }
    print(
        f"\npeak memory {last['n']:,} / {first['n']:,} records: "
        f"export {ratios['export']:.2f}x, import {ratios['import']:.2f}x (target: flat, ~1x)"
    )
    print(", ".join(f"{k}={v}" for k, v in info.items()))
    harness.write_json(args.json, {"machine": info, "results": rows, "peak_ratios": ratios})
    failed = [side for side, ratio in ratios.items() if ratio > MAX_RATIO]
    for side in failed:
        print(f"FAIL {side}: peak memory grew {ratios[side]:.2f}x (limit {MAX_RATIO}x)")
    return 1 if failed else 0


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    options.add_argument("--sizes", default="10000,100000", help="record counts, comma-separated")
    options.add_argument("--million", action="store_true", help="add 1,000,000 records")
    options.add_argument("--quick", action="store_true", help="1,000 vs 10,000: a CI smoke test")
    options.add_argument("--url", help="use this server instead of starting one (keep it quiet)")
    options.add_argument("--json", help="also write the results to this JSON file")
    args = options.parse_args()
    sizes = "1000,10000" if args.quick else args.sizes
    try:
        args.size_list = [int(s) for s in sizes.split(",")] + ([1_000_000] if args.million else [])
    except ValueError:
        options.error(f"--sizes must be integers separated by commas, got {sizes!r}")
    if len(args.size_list) < 2 or min(args.size_list) < 1:
        options.error(f"--sizes needs at least two positive counts, got {sizes!r}")
    return harness.run(bench, args)


if __name__ == "__main__":
    sys.exit(main())
