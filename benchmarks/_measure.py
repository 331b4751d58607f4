"""Timing helpers for run.py: block runners for coroutines, round trips explained,
MONITOR samples of the commands an operation sends.

ABBA blocks and sync block runners are :mod:`harness`'s (every benchmark uses them).
A coroutine's block runs in one event-loop turn. MONITOR is sampled apart from the
timed blocks, because it slows the server down while it is open.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import harness
import redis
from harness import Block, Column, Row, Side, Timed

from tests.roundtrips import RoundTrips

STARTED = time.monotonic()

ROUND_TRIPS = (
    "round trips (rt/op) are read from the server: the delta of INFO total_reads_processed "
    "around each timed block (minus the INFO that reads it), divided by the calls made. A "
    "request the client writes at once (one command, a script call, a pipeline or a "
    "MULTI/EXEC) is one read; commands run inside Lua are not requests. Redis 7.0 has no "
    "per-client command counter (CLIENT INFO tot-cmds is newer) and INFO commandstats counts "
    "commands inside Lua too, so neither can count round trips. cmds/op are the top-level "
    "commands MONITOR showed for a separate, untimed sample of calls (script-inner ones, "
    "marked lua, excluded); MULTI, the queued commands and EXEC each count there. The read "
    "count is exact for requests under ~6 KB: redis-py writes a larger value in a send() of "
    "its own, which the server may read apart (every request here is smaller)."
)


def progress(what: str) -> None:
    """A progress line on stderr, with the seconds since the run started."""
    print(f"  {what} ({time.monotonic() - STARTED:.1f} s)", file=sys.stderr, flush=True)


def async_block(loop: asyncio.AbstractEventLoop, fn: Callable[[], Awaitable[object]]) -> Block:
    """A block runner for a coroutine function: the whole block runs in one loop turn."""

    async def many(n: int) -> Timed:
        clock, out = time.perf_counter_ns, []
        start = clock()
        for _ in range(n):
            t0 = clock()
            await fn()
            out.append(clock() - t0)
        return out, clock() - start

    def run(n: int) -> Timed:
        return loop.run_until_complete(many(n))

    return run


def throughput_ratio(a: Side, b: Side) -> float:
    """a's ops/s over b's: the median of per-block ratios (blocks ran back to back)."""
    # Per-block throughput is calls / sum of call times; equal block sizes per side.
    per_a = [1 / m for m in a.block_mean]
    per_b = [1 / m for m in b.block_mean]
    return statistics.median(x / y for x, y in zip(per_a, per_b, strict=True))


def commands_sent(port_client: Callable[[], redis.Redis], run: Block, calls: int) -> list[str]:
    """The top-level command names ``calls`` calls of ``run`` send, as MONITOR shows them."""
    monitor = RoundTrips(port_client())
    try:
        monitor.start()  # opens MONITOR and drains its own handshake
        run(calls)
        return [words[0].upper() for words in monitor.stop() if words]
    finally:
        monitor.close()  # MONITOR costs the server time on every command while open


def summarize_commands(names: list[str], calls: int) -> str:
    """One call's commands, runs of the same name folded: ``WATCH TYPE x3 TIME ...``."""
    per = len(names) // calls if calls else 0
    if per == 0 or len(names) % calls:
        return f"{len(names)} over {calls} calls (varies)"
    one = names[:per]
    if one * calls != names:
        return " ".join(_fold(one)) + " (varies)"
    return " ".join(_fold(one))


def _fold(names: list[str]) -> list[str]:
    out: list[str] = []
    count = 0
    for i, name in enumerate(names):
        count += 1
        if i + 1 == len(names) or names[i + 1] != name:
            out.append(name if count == 1 else f"{name} x{count}")
            count = 0
    return out


def side_row(side: Side) -> dict[str, Any]:
    """ops/s, p50/p99/mean µs and rt/op of one side (keys without a prefix)."""
    return side.row("")


def store_rows(
    loop: asyncio.AbstractEventLoop,
    operations: Mapping[str, Callable[[Any], Awaitable[object]]],
    targets: Mapping[str, Any],
    stats: redis.Redis,
    *,
    rounds: int,
    sizes: Callable[[str], tuple[int, int]],
    ratios_to: Mapping[str, tuple[str, str]],
) -> list[Row]:
    """The adapter benchmarks' table: each operation (a coroutine function of a
    target) on every target (a framework's store, labelled) in ABBA blocks of
    ``sizes(operation)`` = (calls per block, warm-up calls); a row per operation with
    each target's numbers under its label and, per key of ``ratios_to``, the p50 ratio
    of its two labels' sides."""
    rows: list[Row] = []
    for name, op in operations.items():
        blocks = {label: async_block(loop, _bound(op, t)) for label, t in targets.items()}
        block, warmup = sizes(name)
        sides = harness.abba(blocks, stats, rounds=rounds, block=block, warmup=warmup)
        row: Row = {"operation": name}
        for label, side in sides.items():
            row |= side.row(label + " ")
        for key, (a, b) in ratios_to.items():
            row[key] = harness.ratios(sides[a], sides[b])["ratio_p50"]
        rows.append(row)
        progress(f"measured {name}")
    return rows


def ms_columns(labels: list[str], rows: list[Row]) -> list[Column]:
    """The operation and each label's p50 in ms (added to ``rows``), as table columns."""
    for row in rows:
        for label in labels:
            row[f"{label} p50_ms"] = row[f"{label} p50_us"] / 1000
    cols: list[Column] = [("operation", "operation", "")]
    cols += [(f"{label} p50 ms", f"{label} p50_ms", ",.3f") for label in labels]
    return cols


def _bound(op: Callable[[Any], Awaitable[object]], target: Any) -> Callable[[], Awaitable[object]]:
    return lambda: op(target)
