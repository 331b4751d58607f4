"""Scaffolding shared by the benchmark scripts: clients, server counters, ABBA timing, tables.

The scripts import it as ``harness`` (their folder is on ``sys.path`` when run as
``python benchmarks/x.py``). What is measured, and how it is judged, stays in each script.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from redistate import Store

# The same server fixture the tests use (free loopback port, no persistence).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.servers import redis_binary, running

Fn = Callable[[], object]
Row = dict[str, Any]
Column = tuple[str, str, str]  # (heading, row key, format spec)


def pct(sorted_ns: list[int], q: float) -> float:
    """The ``q`` quantile of sorted nanosecond samples, in µs."""
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))] / 1000


@dataclass
class Side:
    """Samples of one variant (redistate, raw, ...) of one measurement."""

    samples: list[int] = field(default_factory=list)  # ns per call, all blocks
    block_p50: list[float] = field(default_factory=list)
    block_mean: list[float] = field(default_factory=list)
    elapsed_ns: int = 0
    reads: int = 0  # server read events (requests) while this variant ran
    commands: int = 0  # commandstats calls (incl. inside Lua, excl. INFO)

    def row(self, prefix: str) -> dict[str, float]:
        """Throughput, latency and round trips per call, keys prefixed with ``prefix``."""
        s = sorted(self.samples)
        return {
            f"{prefix}ops_s": len(s) / (self.elapsed_ns / 1e9),
            f"{prefix}p50_us": pct(s, 0.50),
            f"{prefix}p99_us": pct(s, 0.99),
            f"{prefix}mean_us": statistics.fmean(s) / 1000,
            f"{prefix}round_trips": self.reads / len(s),
        }


def ratios(a: Side, b: Side) -> dict[str, float]:
    """a / b: the median of the per-block ratios, of medians and of means."""
    # Per-block ratios cancel noise that hit both variants alike (they ran back to back).
    p50 = [x / y for x, y in zip(a.block_p50, b.block_p50, strict=True)]
    mean = [x / y for x, y in zip(a.block_mean, b.block_mean, strict=True)]
    return {"ratio_p50": statistics.median(p50), "ratio_mean": statistics.median(mean)}


def counters(stats: redis.Redis) -> tuple[int, int]:
    """(total_reads_processed, commandstats calls excluding INFO) right now."""
    info = stats.execute_command("INFO", "stats", "commandstats")  # type: ignore[no-untyped-call]
    calls = sum(
        v["calls"] for k, v in info.items() if k.startswith("cmdstat_") and k != "cmdstat_info"
    )
    return int(info["total_reads_processed"]), int(calls)


Timed = tuple[list[int], int]  # (ns per call, ns for the whole block)
Block = Callable[[int], Timed]


def sync_block(fn: Callable[[], object]) -> Block:
    """A block runner for a plain function."""

    def run(n: int) -> Timed:
        clock, out = time.perf_counter_ns, []
        start = clock()
        for _ in range(n):
            t0 = clock()
            fn()
            out.append(clock() - t0)
        return out, clock() - start

    return run


def abba(
    blocks: dict[str, Block],
    stats: redis.Redis,
    *,
    rounds: int,
    block: int | dict[str, int],
    warmup: int,
) -> dict[str, Side]:
    """Each variant ``warmup`` calls untimed, then ``rounds`` timed blocks, in ABBA order.

    ``block`` may differ per variant (curves whose points cost very different times).
    The server's counters are read around each block, outside the timed calls.
    """
    sizes = block if isinstance(block, dict) else dict.fromkeys(blocks, block)
    for run in blocks.values():  # connections, script cache, branch caches
        if warmup:
            run(warmup)
    sides = {name: Side() for name in blocks}
    gc.disable()  # no collector pauses inside a block; each block starts collected
    try:
        for i in range(rounds):
            for name in list(blocks) if i % 2 == 0 else list(blocks)[::-1]:
                side = sides[name]
                gc.collect()
                reads0, cmds0 = counters(stats)
                out, elapsed = blocks[name](sizes[name])
                reads1, cmds1 = counters(stats)
                side.elapsed_ns += elapsed
                side.reads += reads1 - reads0 - 1  # the second INFO is one read too
                side.commands += cmds1 - cmds0
                side.samples += out
                side.block_p50.append(statistics.median(out))
                side.block_mean.append(statistics.fmean(out))
    finally:
        gc.enable()
    return sides


def measure(
    fns: dict[str, Fn], stats: redis.Redis, *, rounds: int, block: int, warmup: int
) -> dict[str, Side]:
    """:func:`abba` over plain functions."""
    runners = {name: sync_block(fn) for name, fn in fns.items()}
    return abba(runners, stats, rounds=rounds, block=block, warmup=warmup)


def compare(
    name: str,
    a: tuple[str, Fn],
    b: tuple[str, Fn],
    stats: redis.Redis,
    *,
    rounds: int,
    block: int,
    warmup: int,
) -> Row:
    """One table row: variant ``a`` against ``b`` in ABBA blocks, each side's numbers
    under its prefix (``a[0]``, ``b[0]``), and their ratios."""
    (pa, fa), (pb, fb) = a, b
    sides = measure({pa: fa, pb: fb}, stats, rounds=rounds, block=block, warmup=warmup)
    return {
        "operation": name,
        **sides[pa].row(pa),
        **sides[pb].row(pb),
        **ratios(sides[pa], sides[pb]),
    }


def machine(raw: redis.Redis) -> dict[str, Any]:
    """What the numbers were measured on: cores, versions, server, platform."""
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


def print_table(cols: list[Column], rows: list[Row], title: str | None = None) -> None:
    """Columns are (heading, row key, format spec); None prints as "-"."""
    cells = [[h for h, _, _ in cols]]
    cells += [["-" if r[k] is None else format(r[k], f) for _, k, f in cols] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(cols))]
    if title is not None:
        print(f"\n{title}")
    for i, line in enumerate(cells):
        # The first column names the row: left-aligned; numbers right-aligned.
        padded = [c.rjust(w) for c, w in zip(line, widths, strict=True)]
        padded[0] = line[0].ljust(widths[0])
        print(" | ".join(padded))
        if i == 0:
            print("-+-".join("-" * w for w in widths))


def write_json(path: str | None, result: dict[str, Any]) -> None:
    """Write ``result`` to ``path`` (the --json option) if one was given."""
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)


def parser(doc: str | None) -> argparse.ArgumentParser:
    """The options every benchmark takes; a script adds its own before parsing."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    p.add_argument("--n", type=int, default=5000, help="timed calls per operation and side")
    p.add_argument("--rounds", type=int, default=10, help="alternating blocks per side")
    p.add_argument("--warmup", type=int, default=300, help="untimed calls per side first")
    p.add_argument("--url", help="use this server instead of starting one (keep it quiet)")
    p.add_argument("--json", help="also write the results to this JSON file")
    p.add_argument("--quick", action="store_true", help="small n, for a CI smoke test")
    return p


@dataclass
class Clients:
    """A store and two plain clients on one server, all under one throwaway namespace."""

    namespace: str  # also the prefix of the raw side's keys, so cleanup removes them too
    store: Store
    raw: redis.Redis  # the hand-written baseline
    stats: redis.Redis  # reads the counters on its own connection, apart from the measured
    url: str = ""  # the server's, for clients a benchmark makes itself (an AsyncStore)


@contextlib.contextmanager
def connect(url: str) -> Iterator[Clients]:
    """Clients for one run; the namespace's keys are deleted and clients closed after."""
    namespace = f"bench{os.getpid()}"  # a stray run's keys never collide with this one
    store = Store.from_url(url, namespace=namespace)
    # Bounded timeouts: a stuck server fails the run instead of hanging it.
    opts: dict[str, Any] = {"socket_timeout": 5.0, "socket_connect_timeout": 5.0}
    # No retries on the baseline: a failure must surface, not become an extra round trip.
    raw = redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **opts)
    stats = redis.Redis.from_url(url, **opts)
    try:
        yield Clients(namespace, store, raw, stats, url)
    finally:
        for key in raw.scan_iter(match=f"{namespace}:*", count=1000):
            raw.delete(key)
        store.close()
        raw.close()
        stats.close()


def quick(args: argparse.Namespace) -> argparse.Namespace:
    """With ``--quick``, the few timed calls of a smoke test."""
    if getattr(args, "quick", False):
        args.n, args.rounds, args.warmup = 200, 2, 20
    return args


def run(bench: Callable[[Clients, argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``bench``'s exit code, against ``--url`` or a private redis-server started for it.
    ``--quick`` shrinks the timed calls to a smoke test's."""
    quick(args)
    if args.url:
        with connect(args.url) as clients:
            return bench(clients, args)
    with running(redis_binary()) as server, connect(server.url) as clients:
        return bench(clients, args)
