"""Checkpoints benchmark: store.checkpoints vs a hand-written redis-py + orjson client.

    python benchmarks/checkpoints.py [--n 5000] [--rounds 10] [--quick] [--url ...] [--json out]

Three parts, all with the sync ``Store`` on one server in one process:

1. save / latest / restore of 1 KB, 10 KB and 100 KB states (redistate compresses states
   above 16 KiB) against raw redis-py: an LPUSH+LTRIM pipeline (one round trip) of the
   orjson state; LINDEX 0 + orjson.loads; LINDEX 0 + LRANGE of a delta list (pipelined).
2. save and latest after 10 vs 10,000 earlier saves (the history is capped: must be flat).
3. restore with 0, 10, 100 and 1000 deltas logged after the snapshot.

Without ``--url`` a private ``redis-server`` (from PATH) is started on a free loopback port.
Variants run in alternating blocks (ABBA order); ratios are medians of per-block ratios.
Round trips per op are the server's ``total_reads_processed`` deltas (one read per request;
TCP may split a big request into several reads, so saves over 4 KB are shown, not checked).
Exits 1 if a checked redistate operation takes more than one round trip.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from functools import partial
from typing import Any, cast

import harness
import orjson
import redis
from harness import Clients, Column, Fn, Row, Side, ratios

from redistate import Store

SIZES = {"1 KB": 1024, "10 KB": 10 * 1024, "100 KB": 100 * 1024}
KEEP = 10  # the store's default
HISTORY = (10, 10_000)
DELTAS = (0, 10, 100, 1000)
CHECKED_REQUEST = 4096  # a request under this size is exactly one server read
# fmt: off
WORDS = ["agent", "plan", "tool", "call", "result", "user", "search", "page", "summary",
         "draft", "review", "step", "file", "patch", "test", "passed", "failed", "retry",
         "token", "context", "decision", "next", "because", "error", "output", "answer"]
# fmt: on


def make_state(size: int) -> dict[str, Any]:
    """A task state (strings and numbers) whose orjson encoding is exactly ``size`` bytes."""
    rng = random.Random(size)
    state: dict[str, Any] = {"turn": 42, "progress": 0.625, "phase": "draft", "done": [1, 2, 3]}
    i = 0
    while len(orjson.dumps(state)) < size - 300:
        state[f"note_{i}"] = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))
        state[f"score_{i}"] = round(rng.random() * 100, 3)
        i += 1
    state["pad"] = ""
    state["pad"] = " ".join(rng.choice(WORDS) for _ in range(60))[: size - len(orjson.dumps(state))]
    assert len(orjson.dumps(state)) == size
    return state


def measure_scaled(
    fns: dict[str, Fn], args: argparse.Namespace, stats: redis.Redis, scale: int = 1
) -> dict[str, Side]:
    """Each variant in ``rounds`` blocks of ``n // rounds // scale`` calls, ABBA order."""
    # ``scale`` shrinks the work for slow variants; each still runs at least once untimed.
    block, warmup = max(1, args.n // args.rounds // scale), max(1, args.warmup // scale)
    return harness.measure(fns, stats, rounds=args.rounds, block=block, warmup=warmup)


def raw_save(raw: redis.Redis, key: str, state: Any) -> None:
    pipe = raw.pipeline(transaction=False)
    pipe.lpush(key, orjson.dumps(state))
    pipe.ltrim(key, 0, KEEP - 1)
    pipe.execute()


def raw_latest(raw: redis.Redis, key: str) -> Any:
    return orjson.loads(cast(bytes, raw.lindex(key, 0)))


def raw_restore(raw: redis.Redis, key: str, log: str) -> Any:
    pipe = raw.pipeline(transaction=False)
    pipe.lindex(key, 0)
    pipe.lrange(log, 0, -1)
    blob, deltas = pipe.execute()
    return orjson.loads(blob), [orjson.loads(d) for d in deltas]


def part_sizes(
    store: Store, raw: redis.Redis, prefix: str, args: argparse.Namespace, stats: redis.Redis
) -> list[Row]:
    cps, rows = store.checkpoints, []
    for label, size in SIZES.items():
        state, task = make_state(size), f"size-{size}"
        key, log = f"{prefix}:raw:{{{task}}}:cp", f"{prefix}:raw:{{{task}}}:log"
        for _ in range(KEEP):  # steady state: a full history, every push trims one
            cps.save(task, state)
            raw.lpush(key, orjson.dumps(state))
        stored = len(cast(bytes, raw.lindex(store.keys.task(task), 0)))
        ops: dict[str, tuple[Fn, Fn]] = {
            "save": (partial(cps.save, task, state), partial(raw_save, raw, key, state)),
            "latest": (partial(cps.latest, task), partial(raw_latest, raw, key)),
            "restore": (partial(cps.restore, task), partial(raw_restore, raw, key, log)),
        }
        for op, (rs_fn, raw_fn) in ops.items():
            sides = measure_scaled({"rs": rs_fn, "raw": raw_fn}, args, stats)
            rs, base = sides["rs"], sides["raw"]
            checked = op != "save" or stored < CHECKED_REQUEST
            rows.append(
                {"op": op, "size": label, **rs.row("rs_"), **base.row("raw_"),
                 **ratios(rs, base), "stored_bytes": stored,
                 "checked_rt": rs.reads / len(rs.samples) if checked else None}
            )  # fmt: skip
            print(f"  measured {op} {label}", file=sys.stderr)
    return rows


def part_history(store: Store, args: argparse.Namespace, stats: redis.Redis) -> list[Row]:
    cps, state, rows = store.checkpoints, make_state(1024), []
    few, many = (f"history-{count}" for count in HISTORY)
    for task, count in zip((few, many), HISTORY, strict=True):
        for _ in range(count):
            cps.save(task, state)
    ops: dict[str, tuple[Fn, Fn]] = {
        "save": (partial(cps.save, few, state), partial(cps.save, many, state)),
        "latest": (partial(cps.latest, few), partial(cps.latest, many)),
    }
    for op, (few_fn, many_fn) in ops.items():
        sides = measure_scaled({"few": few_fn, "many": many_fn}, args, stats)
        a, b = sides["few"], sides["many"]
        rt = max(a.reads / len(a.samples), b.reads / len(b.samples))
        rows.append({"op": op, **a.row("few_"), **b.row("many_"), **ratios(b, a), "checked_rt": rt})
        print(f"  measured {op} after {HISTORY}", file=sys.stderr)
    return rows


def part_deltas(store: Store, args: argparse.Namespace, stats: redis.Redis) -> list[Row]:
    cps, fns, rows = store.checkpoints, dict[str, Fn](), []
    for count in DELTAS:
        task = f"deltas-{count}"
        cps.save(task, make_state(1024))
        for i in range(count):
            cps.log(task, {"k": i})
        fns[str(count)] = partial(cps.restore, task)
    restored = cps.restore(f"deltas-{DELTAS[-1]}")
    assert restored is not None and restored.deltas_applied == DELTAS[-1]
    sides = measure_scaled(fns, args, stats, scale=5)  # 1000 deltas take a few ms per restore
    base = sides["0"]
    for count in DELTAS:
        side = sides[str(count)]
        extra_ns = statistics.median(side.block_p50) - statistics.median(base.block_p50)
        rows.append(
            {"deltas": count, **side.row(""), **ratios(side, base),
             "per_delta_us": extra_ns / count / 1000 if count else None,
             "checked_rt": side.reads / len(side.samples)}
        )  # fmt: skip
    print("  measured restore vs deltas", file=sys.stderr)
    return rows


# fmt: off
SIZE_COLS: list[Column] = [
    ("op", "op", ""), ("size", "size", ""), ("rs ops/s", "rs_ops_s", ",.0f"),
    ("p50 µs", "rs_p50_us", ".0f"), ("p99 µs", "rs_p99_us", ".0f"),
    ("raw ops/s", "raw_ops_s", ",.0f"), ("raw p50", "raw_p50_us", ".0f"),
    ("raw p99", "raw_p99_us", ".0f"), ("ratio p50", "ratio_p50", ".2f"),
    ("ratio mean", "ratio_mean", ".2f"), ("rt/op rs", "rs_round_trips", ".2f"),
    ("rt/op raw", "raw_round_trips", ".2f"), ("stored B", "stored_bytes", ","),
]
HISTORY_COLS: list[Column] = [
    ("op", "op", ""), ("p50 µs @10", "few_p50_us", ".0f"), ("p99 µs @10", "few_p99_us", ".0f"),
    ("p50 µs @10k", "many_p50_us", ".0f"), ("p99 µs @10k", "many_p99_us", ".0f"),
    ("ratio p50", "ratio_p50", ".2f"), ("ratio mean", "ratio_mean", ".2f"),
    ("rt/op @10", "few_round_trips", ".2f"), ("rt/op @10k", "many_round_trips", ".2f"),
]
DELTA_COLS: list[Column] = [
    ("deltas", "deltas", ""), ("ops/s", "ops_s", ",.0f"), ("p50 µs", "p50_us", ".0f"),
    ("p99 µs", "p99_us", ".0f"), ("mean µs", "mean_us", ".0f"), ("vs 0 p50", "ratio_p50", ".2f"),
    ("µs/delta p50", "per_delta_us", ".2f"), ("rt/op", "round_trips", ".2f"),
]
# fmt: on


def report(sizes: list[Row], hist: list[Row], deltas: list[Row], info: dict[str, Any]) -> None:
    title = "1. redistate vs raw redis-py (LPUSH+LTRIM pipeline / LINDEX / LINDEX+LRANGE)"
    harness.print_table(SIZE_COLS, sizes, title)
    print("stored B: the newest checkpoint as redistate stores it (zlib above 16 KiB).")
    print("rt/op of a save over 4 KB is not checked: TCP may split a big request into reads.")
    title = f"2. 1 KB state after {HISTORY[0]:,} vs {HISTORY[1]:,} earlier saves (keep={KEEP})"
    harness.print_table(HISTORY_COLS, hist, title)
    title = "3. restore of a 1 KB snapshot vs deltas logged since ({'k': i} each)"
    harness.print_table(DELTA_COLS, deltas, title)
    print("\nratios: redistate / raw (1), after 10k / after 10 saves (2, flat = 1.00),")
    print("        n deltas / 0 deltas (3); rt/op: requests the server read per op")
    print("machine: " + ", ".join(f"{k}={v}" for k, v in info.items()))


def bench(c: Clients, args: argparse.Namespace) -> int:
    sizes = part_sizes(c.store, c.raw, c.namespace, args, c.stats)
    hist = part_history(c.store, args, c.stats)
    deltas = part_deltas(c.store, args, c.stats)
    info = harness.machine(c.raw)
    report(sizes, hist, deltas, info)
    harness.write_json(
        args.json, {"machine": info, "sizes": sizes, "history": hist, "deltas": deltas}
    )
    over = [r for r in sizes + hist + deltas if (r["checked_rt"] or 0) > 1.005]
    for r in over:
        name = " ".join(str(r[k]) for k in ("op", "size", "deltas") if k in r)
        print(f"FAIL {name}: {r['checked_rt']:.3f} round trips/op (target 1)", file=sys.stderr)
    return 1 if over else 0


def main() -> int:
    return harness.run(bench, harness.parser(__doc__).parse_args())


if __name__ == "__main__":
    sys.exit(main())
