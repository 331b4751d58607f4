"""Timing for run.py: ABBA blocks of sync or async calls, round trips, MONITOR samples.

A *block runner* makes ``n`` calls of one variant and returns the nanoseconds of each
call and of the whole block, so sync functions and coroutines (run on one event loop)
are timed the same way. Round trips are the server's ``total_reads_processed`` deltas
(see ``ROUND_TRIPS``); the commands an operation sends are sampled with MONITOR apart
from the timed blocks, because MONITOR slows the server down while it is open.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis
from harness import Side, counters

from tests.roundtrips import RoundTrips

STARTED = time.monotonic()

Timed = tuple[list[int], int]  # (ns per call, ns for the whole block)
Block = Callable[[int], Timed]

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
