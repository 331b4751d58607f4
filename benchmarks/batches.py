"""Batches: several writes in one round trip, against one write and against the same
writes sent one by one.

    python benchmarks/batches.py [--n 2000] [--rounds 10] [--quick] [--url ...] [--json out]

Rows: one put alone (the baseline); a batch of 10 writes of mixed kinds (4 puts, 2
merges, a delete, a checkpoint save, a delta log, an event append; target: at most 2x
the single put's p50); 10 and 100 puts batched, and the same puts sent one after the
other. Values are 200-byte dicts. Round trips are the server's
``total_reads_processed`` per call (a batch is one call); a large pipeline may reach
the server in more than one read, which counts here. Exits 1 if the mixed batch takes
more than one round trip.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from typing import Any

import harness
from harness import Clients, Column, Row, ratios

from redistate import Store

VALUE = {"text": "x" * 180, "n": 1}


def mixed(store: Store, n: int) -> None:
    """10 writes of mixed kinds in one batch (issue 21's target; run.py part 3 too)."""
    with store.batch() as b:
        for i in range(4):
            b.sessions.put(f"m{i}", VALUE)
        b.sessions.merge("m0", {"n": n})  # onto the put just before: never compacts
        b.sessions.merge("m1", {"n": n})
        b.sessions.delete("m3")
        b.checkpoints.save("task", VALUE)
        b.checkpoints.log("task", {"n": n})
        b.events.append("task", "tick", {"n": n})


def bench(c: Clients, args: argparse.Namespace) -> int:
    store = c.store
    ticks = itertools.count()

    def single() -> None:
        store.sessions.put("one", VALUE)

    def batched(count: int) -> Any:
        def run() -> None:
            with store.batch() as b:
                for i in range(count):
                    b.sessions.put(f"p{i}", VALUE)

        return run

    def sequential(count: int) -> Any:
        def run() -> None:
            for i in range(count):
                store.sessions.put(f"q{i}", VALUE)

        return run

    fns = {
        "1 put": single,
        "10 mixed writes, batched": lambda: mixed(store, next(ticks)),
        "10 puts, batched": batched(10),
        "10 puts, one by one": sequential(10),
        "100 puts, batched": batched(100),
        "100 puts, one by one": sequential(100),
    }
    per_block = max(1, args.n // args.rounds)
    sizes = {name: per_block for name in fns}
    for name in ("100 puts, batched", "100 puts, one by one"):
        sizes[name] = max(1, per_block // 10)
    runners = {name: harness.sync_block(fn) for name, fn in fns.items()}
    warmup = max(1, args.warmup // 10)
    sides = harness.abba(runners, c.stats, rounds=args.rounds, block=sizes, warmup=warmup)
    base = sides["1 put"]
    rows: list[Row] = []
    for name in fns:
        row = sides[name].row("")
        writes = 100 if name.startswith("100") else 10 if name.startswith("10") else 1
        rows.append(
            {
                "operation": name,
                **row,
                "per_write_us": row["p50_us"] / writes,
                **{f"vs_put_{k}": v for k, v in ratios(sides[name], base).items()},
            }
        )
    cols: list[Column] = [
        ("operation", "operation", ""),
        ("p50 µs", "p50_us", ",.1f"),
        ("p99 µs", "p99_us", ",.1f"),
        ("µs per write", "per_write_us", ",.1f"),
        ("p50 / 1 put", "vs_put_ratio_p50", ".2f"),
        ("round trips", "round_trips", ".2f"),
    ]
    harness.print_table(cols, rows, "batches vs single writes (sync Store)")
    by = {r["operation"]: r for r in rows}
    mixed_ratio = by["10 mixed writes, batched"]["vs_put_ratio_p50"]
    speedup = by["100 puts, one by one"]["p50_us"] / by["100 puts, batched"]["p50_us"]
    print(
        f"\njudgement: 10 writes of mixed kinds in a batch take {mixed_ratio:.2f}x one put "
        f"(target <= 2x), in {by['10 mixed writes, batched']['round_trips']:.2f} round "
        f"trips; 100 puts batched are {speedup:.1f}x faster than one by one"
    )
    harness.write_json(args.json, {"machine": harness.machine(c.raw), "batches": rows})
    trips = by["10 mixed writes, batched"]["round_trips"]
    if trips > 1.005:
        print(
            f"FAIL 10 mixed writes, batched: {trips:.2f} round trips, promised 1", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(harness.run(bench, harness.parser(__doc__).parse_args()))
