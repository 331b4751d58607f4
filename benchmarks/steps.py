"""Durable steps: what ``run.step`` adds to a tool call.

    python benchmarks/steps.py [--n 5000] [--rounds 10] [--quick] [--url ...] [--json out]

A small tool (it returns a 200-byte dict) called directly, and through ``run.step``:
idempotent (its result recorded: one script), not idempotent (a start marker, then the
result: two), and replayed (a result already recorded: no round trip at all). The
baseline for the cost of a record is a raw HSET of the same bytes on the same server;
the step's overhead is its time minus the direct call's. Round trips are the server's
``total_reads_processed`` deltas; the run exits 1 if a step takes more than promised.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from typing import Any

import harness
import orjson
from harness import Clients, Column, Row, ratios

PROMISED = {"step (idempotent)": 1.0, "step (not idempotent)": 2.0, "step replayed": 0.0}


def tool(query: str) -> dict[str, Any]:
    return {"query": query, "hits": ["x" * 40] * 4}


def bench(c: Clients, args: argparse.Namespace) -> int:
    names = (f"s{i}" for i in itertools.count())
    raw_key = f"{c.namespace}:raw-steps"
    data = orjson.dumps(tool("q"))
    rows: list[Row] = []
    with c.store.task("bench-steps", ttl=600) as run:  # no renewal inside the blocks
        run.step("recorded", tool, "q")
        variants = {
            "step (idempotent)": lambda: run.step(next(names), tool, "q"),
            "step (not idempotent)": lambda: run.step(next(names), tool, "q", idempotent=False),
            "step replayed": lambda: run.step("recorded", tool, "q"),
        }
        baselines = {
            "direct call": lambda: tool("q"),
            "raw HSET": lambda: c.raw.hset(raw_key, "f", data),
        }
        sides = harness.measure(
            {**variants, **baselines},
            c.stats,
            rounds=args.rounds,
            block=max(1, args.n // args.rounds),
            warmup=args.warmup,
        )
    direct = sides["direct call"].row("")["p50_us"]
    for name in [*variants, *baselines]:
        row = sides[name].row("")
        rows.append(
            {
                "operation": name,
                **row,
                "overhead_us": row["p50_us"] - direct,
                **{f"vs_hset_{k}": v for k, v in ratios(sides[name], sides["raw HSET"]).items()},
            }
        )
    cols: list[Column] = [
        ("operation", "operation", ""),
        ("p50 µs", "p50_us", ",.1f"),
        ("p99 µs", "p99_us", ",.1f"),
        ("ops/s", "ops_s", ",.0f"),
        ("over a direct call µs", "overhead_us", ",.1f"),
        ("p50 / raw HSET", "vs_hset_ratio_p50", ".2f"),
        ("round trips", "round_trips", ".2f"),
    ]
    harness.print_table(cols, rows, "run.step vs calling the tool directly")
    bad = [
        f"{r['operation']}: {r['round_trips']:.2f} round trips, promised {PROMISED[r['operation']]}"
        for r in rows
        if r["operation"] in PROMISED and r["round_trips"] > PROMISED[r["operation"]] + 0.005
    ]
    by = {r["operation"]: r for r in rows}
    print(
        f"\njudgement: an idempotent step adds {by['step (idempotent)']['overhead_us']:.0f} µs "
        f"({by['step (idempotent)']['vs_hset_ratio_p50']:.2f}x a raw HSET of its record), one "
        f"that is not {by['step (not idempotent)']['overhead_us']:.0f} µs (two writes); a "
        f"replayed one {by['step replayed']['overhead_us']:.1f} µs, no round trip"
    )
    harness.write_json(args.json, {"machine": harness.machine(c.raw), "steps": rows})
    for line in bad:
        print(f"FAIL {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(harness.run(bench, harness.parser(__doc__).parse_args()))
