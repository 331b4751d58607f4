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
import gc
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, cast

import orjson
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from redistate import Store

# The same server fixture the tests use (free loopback port, no persistence).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.servers import redis_binary, running

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

Fn = Callable[[], object]
Row = dict[str, Any]


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


@dataclass
class Side:
    """Samples of one variant of one measurement."""

    samples: list[int] = field(default_factory=list)  # ns per call, all blocks
    block_p50: list[float] = field(default_factory=list)
    block_mean: list[float] = field(default_factory=list)
    elapsed_ns: int = 0
    reads: int = 0  # server read events (requests) while this variant ran

    def row(self, prefix: str) -> dict[str, float]:
        s = sorted(self.samples)
        return {
            f"{prefix}ops_s": len(s) / (self.elapsed_ns / 1e9),
            f"{prefix}p50_us": s[len(s) // 2] / 1000,
            f"{prefix}p99_us": s[min(len(s) - 1, int(0.99 * len(s)))] / 1000,
            f"{prefix}mean_us": statistics.fmean(s) / 1000,
            f"{prefix}round_trips": self.reads / len(s),
        }


def server_reads(stats: redis.Redis) -> int:
    info: Any = stats.info("stats")
    return int(info["total_reads_processed"])


def measure(
    fns: dict[str, Fn], args: argparse.Namespace, stats: redis.Redis, scale: int = 1
) -> dict[str, Side]:
    """Each variant in ``rounds`` blocks of ``n // rounds // scale`` calls, ABBA order."""
    for fn in fns.values():  # warm-up: connections, script cache, branch caches
        for _ in range(max(1, args.warmup // scale)):
            fn()
    sides = {name: Side() for name in fns}
    block, clock = max(1, args.n // args.rounds // scale), time.perf_counter_ns
    gc.disable()
    try:
        for i in range(args.rounds):
            for name in list(fns) if i % 2 == 0 else list(fns)[::-1]:
                fn, side, out = fns[name], sides[name], []
                gc.collect()
                reads0 = server_reads(stats)
                start = clock()
                for _ in range(block):
                    t0 = clock()
                    fn()
                    out.append(clock() - t0)
                side.elapsed_ns += clock() - start
                side.reads += server_reads(stats) - reads0 - 1  # the second INFO is a read
                side.samples += out
                side.block_p50.append(statistics.median(out))
                side.block_mean.append(statistics.fmean(out))
    finally:
        gc.enable()
    return sides


def ratios(a: Side, b: Side) -> dict[str, float]:
    """a / b: the median of the per-block ratios, of medians and of means."""
    p50 = [x / y for x, y in zip(a.block_p50, b.block_p50, strict=True)]
    mean = [x / y for x, y in zip(a.block_mean, b.block_mean, strict=True)]
    return {"ratio_p50": statistics.median(p50), "ratio_mean": statistics.median(mean)}


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
            sides = measure({"rs": rs_fn, "raw": raw_fn}, args, stats)
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
        sides = measure({"few": few_fn, "many": many_fn}, args, stats)
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
    sides = measure(fns, args, stats, scale=5)  # 1000 deltas take a few ms per restore
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


def machine(raw: redis.Redis) -> dict[str, Any]:
    server: Any = raw.info("server")
    hiredis = importlib.util.find_spec("hiredis") is not None
    return {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "redis_py": md.version("redis"),
        "hiredis": md.version("hiredis") if hiredis else None,
        "orjson": md.version("orjson"),
        "server": f"{server.get('server_name', 'redis')} {server['redis_version']}",
        "platform": platform.platform(),
    }


def table(title: str, cols: list[tuple[str, str, str]], rows: list[Row]) -> None:
    """Columns are (heading, row key, format spec); None prints as "-"."""
    cells = [[h for h, _, _ in cols]]
    cells += [["-" if r[k] is None else format(r[k], f) for _, k, f in cols] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(cols))]
    print(f"\n{title}")
    for i, line in enumerate(cells):
        padded = [c.rjust(w) for c, w in zip(line, widths, strict=True)]
        padded[0] = line[0].ljust(widths[0])
        print(" | ".join(padded))
        if i == 0:
            print("-+-".join("-" * w for w in widths))


# fmt: off
SIZE_COLS = [
    ("op", "op", ""), ("size", "size", ""), ("rs ops/s", "rs_ops_s", ",.0f"),
    ("p50 µs", "rs_p50_us", ".0f"), ("p99 µs", "rs_p99_us", ".0f"),
    ("raw ops/s", "raw_ops_s", ",.0f"), ("raw p50", "raw_p50_us", ".0f"),
    ("raw p99", "raw_p99_us", ".0f"), ("ratio p50", "ratio_p50", ".2f"),
    ("ratio mean", "ratio_mean", ".2f"), ("rt/op rs", "rs_round_trips", ".2f"),
    ("rt/op raw", "raw_round_trips", ".2f"), ("stored B", "stored_bytes", ","),
]
HISTORY_COLS = [
    ("op", "op", ""), ("p50 µs @10", "few_p50_us", ".0f"), ("p99 µs @10", "few_p99_us", ".0f"),
    ("p50 µs @10k", "many_p50_us", ".0f"), ("p99 µs @10k", "many_p99_us", ".0f"),
    ("ratio p50", "ratio_p50", ".2f"), ("ratio mean", "ratio_mean", ".2f"),
    ("rt/op @10", "few_round_trips", ".2f"), ("rt/op @10k", "many_round_trips", ".2f"),
]
DELTA_COLS = [
    ("deltas", "deltas", ""), ("ops/s", "ops_s", ",.0f"), ("p50 µs", "p50_us", ".0f"),
    ("p99 µs", "p99_us", ".0f"), ("mean µs", "mean_us", ".0f"), ("vs 0 p50", "ratio_p50", ".2f"),
    ("µs/delta p50", "per_delta_us", ".2f"), ("rt/op", "round_trips", ".2f"),
]
# fmt: on


def report(sizes: list[Row], hist: list[Row], deltas: list[Row], info: dict[str, Any]) -> None:
    title = "1. redistate vs raw redis-py (LPUSH+LTRIM pipeline / LINDEX / LINDEX+LRANGE)"
    table(title, SIZE_COLS, sizes)
    print("stored B: the newest checkpoint as redistate stores it (zlib above 16 KiB).")
    print("rt/op of a save over 4 KB is not checked: TCP may split a big request into reads.")
    title = f"2. 1 KB state after {HISTORY[0]:,} vs {HISTORY[1]:,} earlier saves (keep={KEEP})"
    table(title, HISTORY_COLS, hist)
    table(
        "3. restore of a 1 KB snapshot vs deltas logged since ({'k': i} each)", DELTA_COLS, deltas
    )
    print("\nratios: redistate / raw (1), after 10k / after 10 saves (2, flat = 1.00),")
    print("        n deltas / 0 deltas (3); rt/op: requests the server read per op")
    print("machine: " + ", ".join(f"{k}={v}" for k, v in info.items()))


def bench(url: str, args: argparse.Namespace) -> int:
    namespace = f"bench{os.getpid()}"
    store = Store.from_url(url, namespace=namespace)
    opts: dict[str, Any] = {"socket_timeout": 5.0, "socket_connect_timeout": 5.0}
    raw = redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **opts)
    stats = redis.Redis.from_url(url, **opts)
    try:
        sizes = part_sizes(store, raw, namespace, args, stats)
        hist = part_history(store, args, stats)
        deltas = part_deltas(store, args, stats)
        info = machine(raw)
        report(sizes, hist, deltas, info)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as out:
                result = {"machine": info, "sizes": sizes, "history": hist, "deltas": deltas}
                json.dump(result, out, indent=2)
        over = [r for r in sizes + hist + deltas if (r["checked_rt"] or 0) > 1.005]
        for r in over:
            name = " ".join(str(r[k]) for k in ("op", "size", "deltas") if k in r)
            print(f"FAIL {name}: {r['checked_rt']:.3f} round trips/op (target 1)", file=sys.stderr)
        return 1 if over else 0
    finally:
        for key in raw.scan_iter(match=f"{namespace}:*", count=1000):
            raw.delete(key)
        store.close()
        raw.close()
        stats.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=5000, help="timed calls per operation and side")
    parser.add_argument("--rounds", type=int, default=10, help="alternating blocks per side")
    parser.add_argument("--warmup", type=int, default=300, help="untimed calls per side first")
    parser.add_argument("--quick", action="store_true", help="small n, for a CI smoke test")
    parser.add_argument("--url", help="use this server instead of starting one (keep it quiet)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args()
    if args.quick:
        args.n, args.rounds, args.warmup = 200, 2, 20
    if args.url:
        return bench(args.url, args)
    with running(redis_binary()) as server:
        return bench(server.url, args)


if __name__ == "__main__":
    sys.exit(main())
