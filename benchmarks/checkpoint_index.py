"""Checkpoint lookups by id vs history length: the task's id index (issue 21).

    python benchmarks/checkpoint_index.py [--n 5000] [--rounds 10] [--sizes 10,10000,100000]
                                          [--quick] [--url ...] [--json out]

One task per size holds that many checkpoints (each saved with a chosen id, keep = the
size, so every new save trims one: the steady state); then, in alternating blocks
(ABBA) on the sync ``Store``:

- ``get(task, id)``: an id from across the history (64 of them, in turn);
- ``save, chosen id (new)``: a save with a caller-chosen id not in the history;
- ``save, chosen id (resend)``: a save of an id already in it (the stored one returns).

Ratios are medians of per-block ratios against the smallest size (flat = 1.00; the
target is <= 1.2 at 100,000). ``server µs`` is the script's execution time on the server,
from INFO commandstats (cmdstat_fcall usec / calls), read around extra untimed calls.
Without ``--url`` a private ``redis-server`` (from PATH) is started on a free port.
Exits 1 if an operation takes more than one round trip.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Callable, Iterator
from typing import Any

import harness
import redis
from harness import Clients, Column, Fn, Row, ratios

from redistate import Store

SPREAD = 64  # ids looked up, spread over the history


def fill(store: Store, task: str, count: int) -> None:
    """``count`` checkpoints with chosen ids c0..c<count-1>, small states; keep=count."""
    for i in range(count):
        store.checkpoints.save(task, {"i": i}, checkpoint_id=f"c{i}", keep=count)


def server_us(stats: redis.Redis, fn: Fn, calls: int) -> float:
    """Server execution µs per script call of ``fn`` (cmdstat_fcall, or cmdstat_evalsha
    where scripts run by EVALSHA)."""

    def evalsha() -> tuple[int, int]:
        info: dict[str, Any] = stats.info("commandstats")
        found = [info.get(f"cmdstat_{c}", {"calls": 0, "usec": 0}) for c in ("fcall", "evalsha")]
        return sum(int(f["calls"]) for f in found), sum(int(f["usec"]) for f in found)

    calls0, usec0 = evalsha()
    for _ in range(calls):
        fn()
    calls1, usec1 = evalsha()
    return (usec1 - usec0) / max(1, calls1 - calls0)


def ops(store: Store, task: str, count: int) -> dict[str, Fn]:
    cps = store.checkpoints
    spread: Iterator[str] = itertools.cycle([f"c{count * k // SPREAD}" for k in range(SPREAD)])
    fresh = itertools.count()

    def get() -> Any:
        return cps.get(task, next(spread))

    def save_new() -> Any:
        return cps.save(task, {"n": 1}, checkpoint_id=f"new{next(fresh)}", keep=count)

    def save_resend() -> Any:
        return cps.save(task, {"n": 1}, checkpoint_id=next(spread), keep=count)

    # The new saves last: each trims the oldest checkpoint (keep = the size: the history
    # stays that long), which the lookups above may name.
    return {
        "get(task, id)": get,
        "save, chosen id (resend)": save_resend,
        "save, chosen id (new)": save_new,
    }


def bench(c: Clients, args: argparse.Namespace) -> int:
    sizes = [int(s) for s in args.sizes.split(",")]
    for count in sizes:
        fill(c.store, f"hist-{count}", count)
        print(f"  filled {count:,} checkpoints", file=sys.stderr)
    by_size = {count: ops(c.store, f"hist-{count}", count) for count in sizes}
    rows: list[Row] = []
    block, warmup = max(1, args.n // args.rounds), max(1, args.warmup)
    for op in by_size[sizes[0]]:
        fns: dict[str, Callable[[], object]] = {str(n): by_size[n][op] for n in sizes}
        sides = harness.measure(fns, c.stats, rounds=args.rounds, block=block, warmup=warmup)
        base = sides[str(sizes[0])]
        for count in sizes:
            side = sides[str(count)]
            rows.append(
                {"op": op, "checkpoints": count, **side.row(""), **ratios(side, base),
                 "server_us": server_us(c.stats, by_size[count][op], max(50, block))}
            )  # fmt: skip
        print(f"  measured {op}", file=sys.stderr)
    cols: list[Column] = [
        ("op", "op", ""), ("checkpoints", "checkpoints", ","), ("p50 µs", "p50_us", ".0f"),
        ("p99 µs", "p99_us", ".0f"), ("mean µs", "mean_us", ".0f"),
        (f"vs {sizes[0]} p50", "ratio_p50", ".2f"), (f"vs {sizes[0]} mean", "ratio_mean", ".2f"),
        ("server µs", "server_us", ".1f"), ("rt/op", "round_trips", ".2f"),
    ]  # fmt: skip
    harness.print_table(cols, rows, "lookups by checkpoint id vs history length")
    info = harness.machine(c.raw)
    print(f"\nratios: against {sizes[0]} checkpoints (flat = 1.00)")
    print("server µs: cmdstat_evalsha usec per call; rt/op: requests the server read per op")
    print("machine: " + ", ".join(f"{k}={v}" for k, v in info.items()))
    harness.write_json(args.json, {"machine": info, "rows": rows})
    over = [r for r in rows if r["round_trips"] > 1.005]
    for r in over:
        rt = f"{r['round_trips']:.3f} round trips/op (target 1)"
        print(f"FAIL {r['op']} @{r['checkpoints']}: {rt}", file=sys.stderr)
    return 1 if over else 0


def main() -> int:
    p = harness.parser(__doc__)
    p.add_argument("--sizes", default="10,10000,100000", help="history lengths, comma-separated")
    args = p.parse_args()
    if args.quick:
        args.sizes = "10,2000"
    return harness.run(bench, args)


if __name__ == "__main__":
    sys.exit(main())
