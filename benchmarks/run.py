"""One benchmark run: redistate next to what users would pick instead, and scaling curves.

    python benchmarks/run.py [--quick | --full] [--url redis://...] [--out DIR] [--json FILE]

Without ``--url`` a private ``redis-server`` (from PATH) is started on a free loopback
port with persistence off, and stopped at the end. Everything runs against that one
server, in one run:

1. Side by side, the same job with the same payloads and the same number of calls:
   - session put/get of a 1 KB JSON value with a 1 h TTL: ``Store.sessions`` vs raw
     redis-py ``SET PX`` / ``GET`` (sync); ``AsyncStore.sessions`` vs the OpenAI Agents
     SDK's ``RedisSession`` ``add_items`` / ``get_items`` (async only, so compared with
     redistate's AsyncStore);
   - user merge, 1 process and 8 processes on one key: ``users.merge`` vs a WATCH/MULTI
     loop (redis-py ``transaction``) vs a naive GET-then-SET, with the lost updates;
   - checkpoint save/latest of a 1 KB state: ``checkpoints`` vs a raw LPUSH+LTRIM
     pipeline / LINDEX vs LlamaIndex's ``RedisChatStore`` add_message / get_messages;
   - lock acquire+release: redistate ``store.lock(renew=False)`` vs redis-py ``Lock``,
     python-redis-lock, pottery ``Redlock``.
2. Scaling curves (tables here, PNGs under ``--out``): save/latest vs history length,
   restore vs deltas since the snapshot, ``ids()`` vs number of keys, throughput vs
   concurrent processes.
3. Issue 21's table (benchmarks/_modes.py), in both loopback modes one after the other:
   server and clients pinned to different CPUs, then all pinned to one CPU. Per
   operation (put, get, merge, save, latest, append, lease pairs with and without
   renewal, ``store.task()``): the ratio to the nearest raw redis-py job, the client µs
   it adds, the server's exec µs and the most ops/s one Redis core serves; merge into a
   100 KB vs a 1 KB record; 8 processes merging into records of 1 to 100 KB vs
   WATCH/MULTI. Once: encoding with nulls vs orjson, the write memory's bytes per key,
   a given-id save / get at 100,000 checkpoints vs 10, a batch vs one write. Then the
   issue's targets, each measured and judged. Parts 1 and 2 run where the OS puts them.

Sides alternate in ABBA blocks; ratios are redistate / peer, medians of per-block ratios.
Exits 1 if a redistate operation takes more round trips than the design promises.
``--json FILE`` (or ``--out``'s results.json) holds every figure of the docs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import gc
import io
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, cast

import _apart
import _curves
import _measure
import _memory
import _merges
import _modes
import _peers
import harness
import locks
import redis
import redis.asyncio as aredis
from _measure import async_block
from _procs import Pool
from harness import Block, Column, Row, sync_block
from records import value_1k

from redistate import AsyncStore, Store
from redistate.records.mergelog import COMPACT_AT
from tests.servers import redis_binary, running

RESULTS = Path(__file__).resolve().parent / "results"
TTL_S = _peers.TTL_S
CMD_SAMPLE = 20  # calls per MONITOR sample
MERGE_PROCS = 8
MANY = 10  # ids per get_many / tasks per latest_many
# Round trips per call the design promises ("one round trip per
# operation"; a merge is one script, and one merge in COMPACT_AT in a row also folds the
# patches back; a lock pair is two calls): the fewest and the most.
PROMISED: dict[str, tuple[float, float]] = {
    "session put": (1, 1),
    "session get": (1, 1),
    "session put (async)": (1, 1),
    "session get (async)": (1, 1),
    "user merge, 1 process": (1, 1 + 1 / COMPACT_AT),
    "checkpoint save": (1, 1),
    "checkpoint latest": (1, 1),
    f"session get_many ({MANY})": (1, 1),
    f"checkpoint latest_many ({MANY})": (1, 1),
    "lock acquire+release": (2, 2),
}


@dataclass
class Env:
    """One run's server, clients and options."""

    url: str
    namespace: str
    args: argparse.Namespace
    store: Store
    raw: redis.Redis
    stats: redis.Redis  # counters on a connection of its own
    loop: asyncio.AbstractEventLoop
    astore: AsyncStore
    araw: aredis.Redis

    def memory(self, *keys: str | bytes) -> int:
        """MEMORY USAGE (every element sampled) summed over the keys that exist."""
        total = 0
        for key in keys:
            total += self.raw.memory_usage(key, samples=0) or 0
        return total

    def monitor_client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=10.0)


# --- part 1: side by side --------------------------------------------------------------


def compare(env: Env, op: str, variants: list[tuple[str, Block]]) -> list[Row]:
    """Time ``variants`` (redistate first) in ABBA blocks; one row per variant."""
    a = env.args
    blocks = dict(variants)
    sides = harness.abba(
        blocks, env.stats, rounds=a.rounds, block=max(1, a.n // a.rounds), warmup=a.warmup
    )
    rs_label = variants[0][0]
    rs = sides[rs_label]
    rows: list[Row] = []
    for label, run in variants:
        side = sides[label]
        names = _measure.commands_sent(env.monitor_client, run, CMD_SAMPLE)
        row: Row = {
            "op": op,
            "side": label,
            "redistate": label == rs_label,
            **side.row(""),
            "cmds_per_op": len(names) / CMD_SAMPLE,
            "cmds": _measure.summarize_commands(names, CMD_SAMPLE),
            "bytes": None,
            "n": len(side.samples),
        }
        if label != rs_label:
            row["p50_ratio"] = harness.ratios(rs, side)["ratio_p50"]
            row["ops_ratio"] = _measure.throughput_ratio(rs, side)
        rows.append(row)
    _measure.progress(f"measured {op}")
    return rows


def sessions(env: Env) -> list[Row]:
    """Session put/get, sync vs raw redis-py and async vs the Agents SDK's RedisSession."""
    value, store, loop = value_1k(), env.store, env.loop
    raw = _peers.RawSession(env.raw, env.namespace)
    agents = _peers.AgentsSessions(env.araw, env.namespace)
    astore = env.astore
    store.sessions.put("s-get", value, ttl=TTL_S)
    raw.put("s-get", value)
    loop.run_until_complete(astore.sessions.put("s-get", value, ttl=TTL_S))
    loop.run_until_complete(agents.add("s-get", value))  # a session holding one item

    async def rs_aput() -> object:
        return await astore.sessions.put("s-put", value, ttl=TTL_S)

    async def rs_aget() -> object:
        return await astore.sessions.get("s-get")

    async def ag_add() -> None:
        await agents.add("s-put", value)

    async def ag_get() -> object:
        return await agents.get("s-get")

    rows = compare(
        env,
        "session put",
        [
            ("redistate Store", sync_block(lambda: store.sessions.put("s-put", value, ttl=TTL_S))),
            ("raw SET PX", sync_block(lambda: raw.put("s-put", value))),
        ],
    )
    rows += compare(
        env,
        "session get",
        [
            ("redistate Store", sync_block(lambda: store.sessions.get("s-get"))),
            ("raw GET", sync_block(lambda: raw.get("s-get"))),
        ],
    )
    rows += compare(
        env,
        "session put (async)",
        [
            ("redistate AsyncStore", async_block(loop, rs_aput)),
            ("agents RedisSession add_items", async_block(loop, ag_add)),
        ],
    )
    rows += compare(
        env,
        "session get (async)",
        [
            ("redistate AsyncStore", async_block(loop, rs_aget)),
            ("agents RedisSession get_items", async_block(loop, ag_get)),
        ],
    )
    # Bytes per session: a fresh 1 KB session on each side (nothing else written to it).
    store.sessions.put("mem", value, ttl=TTL_S)
    raw.put("mem", value)
    loop.run_until_complete(agents.add("mem", value))
    memory = {
        "redistate Store": env.memory(store.keys.record("session", "mem")),
        "raw SET PX": env.memory(raw.key("mem")),
        "agents RedisSession add_items": env.memory(*agents.keys("mem")),
    }
    # The value's own length (STRLEN): the envelope, apart from Redis's per-key overhead
    # and the allocator's size classes, which MEMORY USAGE includes.
    strlen = {
        "redistate Store": env.raw.strlen(store.keys.record("session", "mem")),
        "raw SET PX": env.raw.strlen(raw.key("mem")),
    }
    memory["redistate AsyncStore"] = memory["redistate Store"]
    memory["raw GET"] = memory["raw SET PX"]
    memory["agents RedisSession get_items"] = memory["agents RedisSession add_items"]
    for row in rows:
        row["bytes"] = memory[row["side"]]
        row["value_bytes"] = strlen.get(row["side"])
    ids = [f"s-many-{i}" for i in range(MANY)]
    for sid in ids:
        store.sessions.put(sid, value, ttl=TTL_S)
        raw.put(sid, value)
    rows += compare(
        env,
        f"session get_many ({MANY})",
        [
            ("redistate Store", sync_block(lambda: store.sessions.get_many(ids))),
            ("raw MGET", sync_block(lambda: raw.get_many(ids))),
            (f"{MANY} x redistate get", sync_block(lambda: [store.sessions.get(i) for i in ids])),
        ],
    )
    return rows


def put_apart(env: Env) -> list[Row]:
    """Where a put's time goes (benchmarks/_apart.py): compared with the Store's put."""
    blocks, calls = _apart.variants(env.store, env.raw, value_1k(), TTL_S)
    rows = compare(env, "session put, taken apart", blocks)
    server = _apart.server_us(env.stats, calls)
    for row in rows:
        row["server_us"] = server[row["side"]]
    return rows


def merges(env: Env, pool: Pool) -> list[Row]:
    """users.merge vs WATCH/MULTI vs naive GET/SET, 1 process and 8 on one key."""
    a, rows = env.args, []
    sides = ["redistate users.merge", "WATCH/MULTI loop", "naive GET+SET"]
    for procs in (1, MERGE_PROCS):
        op = f"user merge, {procs} process" + ("es" if procs > 1 else "")
        rows += _merges.contended(
            env,
            pool,
            op=op,
            sides=sides,
            base=value_1k(),  # every record starts as a 1 KB profile
            procs=procs,
            per_proc=a.merge_n * MERGE_PROCS // procs,  # the same calls and growth either way
            rounds=a.merge_rounds,
        )
        _measure.progress(f"measured {op}")
    return rows


def checkpoints(env: Env) -> list[Row]:
    """Checkpoint save/latest vs a raw LPUSH+LTRIM pipeline and LlamaIndex RedisChatStore."""
    state, cps = value_1k(), env.store.checkpoints
    raw = _peers.RawCheckpoints(env.raw, env.namespace)
    chat = _peers.ChatCheckpoints(env.url, env.raw, env.araw, env.namespace)
    for _ in range(_peers.KEEP):  # a full history of KEEP on each side to read from
        cps.save("cp-read", state)
        raw.save("cp-read", state)
        chat.save("cp-read", state)
    rows = compare(
        env,
        "checkpoint save",
        [
            ("redistate checkpoints", sync_block(lambda: cps.save("cp-save", state))),
            ("raw LPUSH+LTRIM pipeline", sync_block(lambda: raw.save("cp-save", state))),
            ("llama-index RedisChatStore", sync_block(lambda: chat.save("cp-save", state))),
        ],
    )
    rows += compare(
        env,
        "checkpoint latest",
        [
            ("redistate checkpoints", sync_block(lambda: cps.latest("cp-read"))),
            ("raw LINDEX 0", sync_block(lambda: raw.latest("cp-read"))),
            ("llama-index RedisChatStore", sync_block(lambda: chat.latest("cp-read"))),
        ],
    )
    tasks = [f"cp-many-{i}" for i in range(MANY)]
    for task in tasks:
        cps.save(task, state)
        raw.save(task, state)
    many = compare(
        env,
        f"checkpoint latest_many ({MANY})",
        [
            ("redistate checkpoints", sync_block(lambda: cps.latest_many(tasks))),
            ("raw LINDEX 0 pipeline", sync_block(lambda: raw.latest_many(tasks))),
            (f"{MANY} x redistate latest", sync_block(lambda: [cps.latest(t) for t in tasks])),
        ],
    )
    # Bytes per checkpoint: the read task's lists (KEEP entries each) over KEEP.
    task_keys = env.store.keys.task_keys("cp-read")
    per = {
        "redistate checkpoints": env.memory(task_keys[0], task_keys[1]) / _peers.KEEP,
        "raw": env.memory(raw.key("cp-read")) / _peers.KEEP,
        "llama-index RedisChatStore": env.memory(chat.key("cp-read")) / _peers.KEEP,
    }
    for row in rows:
        row["bytes"] = per["raw" if row["side"].startswith("raw") else row["side"]]
    return rows + many


def lock_pairs(env: Env) -> list[Row]:
    """Uncontended acquire+release, a new lock object per pair (as ``with lock:`` makes)."""
    ns = env.namespace
    takes: list[tuple[str, locks.Take, str]] = [
        ("redistate store.lock", locks.rs_take(env.store, renew=False), "pair-rs"),
        ("redis-py Lock", locks.redis_py_take(env.raw, 0.1), f"{ns}:pair-redis-py"),
        ("python-redis-lock", locks.python_redis_lock_take(env.raw), f"{ns}:pair-prl"),
        ("pottery Redlock", locks.pottery_take(env.raw), f"{ns}:pair-pottery"),
    ]

    def pair(take: locks.Take, name: str) -> Block:
        return sync_block(lambda: take(name, None)())

    try:
        rows = compare(env, "lock acquire+release", [(lbl, pair(t, n)) for lbl, t, n in takes])
        for label, take, name in takes:
            held, left = _lock_bytes(env, take, f"{name}-mem")
            for row in rows:
                if row["side"] == label:
                    row["bytes"], row["bytes_left"] = held, left
    finally:
        foreign = [
            f"{p}:{n}{s}"
            for _, _, n in takes
            for p in ("lock", "lock-signal", "redlock")
            for s in ("", "-mem")
        ]
        env.raw.delete(*foreign)
    return rows


def _lock_bytes(env: Env, take: locks.Take, name: str) -> tuple[int, int]:
    """Bytes of every key holding ``name`` while the lock is held, and after release."""

    def total() -> int:
        return env.memory(*env.raw.scan_iter(match=f"*{name}*", count=1000))

    release = take(name, None)
    held = total()
    release()
    return held, total()


# --- report ------------------------------------------------------------------------------

# fmt: off
COMPARE_COLS: list[Column] = [
    ("operation", "op_shown", ""), ("side", "side", ""), ("ops/s", "ops_s", ",.0f"),
    ("p50 µs", "p50_us", ".0f"), ("p99 µs", "p99_us", ".0f"), ("rt/op", "round_trips", ".2f"),
    ("cmds/op", "cmds_per_op", ".1f"), ("B/record", "bytes", ",.0f"),
    ("p50 rs/peer", "p50_ratio", ".2f"), ("ops/s rs/peer", "ops_ratio", ".2f"),
]
MERGE_COLS: list[Column] = [
    ("operation", "op_shown", ""), ("side", "side", ""), ("merges/s", "ops_s", ",.0f"),
    ("p50 µs", "p50_us", ".0f"), ("p99 µs", "p99_us", ".0f"), ("rt/merge", "round_trips", ".2f"),
    ("lost", "lost", ",d"), ("of", "calls", ",d"), ("final B", "bytes", ",.0f"),
    ("p50 rs/peer", "p50_ratio", ".2f"), ("ops/s rs/peer", "ops_ratio", ".2f"),
]
LOCK_COLS: list[Column] = [
    ("operation", "op_shown", ""), ("side", "side", ""), ("pairs/s", "ops_s", ",.0f"),
    ("p50 µs", "p50_us", ".0f"), ("p99 µs", "p99_us", ".0f"), ("rt/pair", "round_trips", ".2f"),
    ("cmds/pair", "cmds_per_op", ".1f"), ("B held", "bytes", ",d"),
    ("B after release", "bytes_left", ",d"), ("p50 rs/peer", "p50_ratio", ".2f"),
    ("ops/s rs/peer", "ops_ratio", ".2f"),
]
# fmt: on


def shown(rows: list[Row]) -> list[Row]:
    """Rows for printing: the operation named on its first row only; ratios "-" on
    redistate's own rows."""
    out, last = [], None
    for row in rows:
        r = {"p50_ratio": None, "ops_ratio": None, **row}
        r["op_shown"] = row["op"] if row["op"] != last else ""
        last = row["op"]
        out.append(r)
    return out


def print_commands(rows: list[Row]) -> None:
    print("\ncommands one call sends (MONITOR, top level; a script's own commands not shown):")
    width = max(len(f"{r['op']} / {r['side']}") for r in rows)
    for r in rows:
        print(f"  {(r['op'] + ' / ' + r['side']).ljust(width)}  {r['cmds']}")


def header(env: Env, info: dict[str, Any], server_note: str) -> None:
    load = os.getloadavg()
    print(f"redistate benchmark run, {dt.datetime.now().isoformat(timespec='seconds')}")
    print(
        f"server: {info['server']} ({server_note}); client: Python {info['python']}, "
        f"redis-py {info['redis_py']}, hiredis {info['hiredis'] or 'not installed'}"
    )
    print(
        f"machine: {info['cpu']}, {info['nproc']} cores, {info['ram']} RAM; load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at start"
    )
    print(
        f"NOTE: {info['nproc']} cores are shared by the server, the client process(es) and "
        "whatever else runs on this machine (other work may be running): absolute numbers "
        "are noisy; compare the ratios, which come from alternating (ABBA) blocks."
    )
    a = env.args
    print(
        f"settings: {a.n} timed calls per side in {a.rounds} blocks ({a.warmup} untimed first); "
        f"merges {a.merge_n * MERGE_PROCS} per block, {a.merge_rounds} blocks per side"
        f"{'; QUICK mode (small sizes: a smoke test, not a measurement)' if a.quick else ''}"
    )
    print("\n" + "\n".join(_wrap(_measure.ROUND_TRIPS, 100)))


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines


APART_COLS: list[Column] = [
    ("side", "side", ""),
    ("ops/s", "ops_s", ",.0f"),
    ("p50 µs", "p50_us", ".0f"),
    ("p99 µs", "p99_us", ".0f"),
    ("server µs/call", "server_us", ".1f"),
    ("p50 Store/this", "p50_ratio", ".2f"),
]


def report_apart(rows: list[Row]) -> None:
    title = "1e. where a session put's time goes (the same 1 KB value, less machinery each row)"
    harness.print_table(APART_COLS, shown(rows), title)
    print("server µs/call: INFO commandstats usec per call of the top-level command (EVALSHA")
    print(f"  includes the commands the script runs), over {_apart.SERVER_CALLS} untimed calls.")
    print("  'by hand': EVALSHA of record_put with its arguments built in the loop, no store code.")


MEMORY_COLS: list[Column] = [
    ("payload B", "payload", ",d"),
    ("redistate B", "rs_bytes", ",d"),
    ("raw SET PX B", "raw_bytes", ",d"),
    ("redistate - raw", "extra", "+,d"),
    ("redistate - payload", "over_payload", ",d"),
    ("redistate STRLEN", "rs_len", ",d"),
]


def report_memory(rows: list[Row]) -> None:
    title = "1f. Redis memory per session (MEMORY USAGE) by payload size, TTL 1 h"
    harness.print_table(MEMORY_COLS, rows, title)
    print("redistate - raw: what the envelope costs in memory; the rest over the payload is")
    print("  Redis's per-key overhead and the allocator's size class, the same for raw SET PX.")


def report_part1(sess: list[Row], merge: list[Row], cps: list[Row], lock: list[Row]) -> None:
    title = "1a. sessions: 1 KB JSON value, TTL 1 h (sync vs raw redis-py; async vs RedisSession)"
    harness.print_table(COMPARE_COLS, shown(sess), title)
    print("B/record: MEMORY USAGE of one fresh 1 KB session (RedisSession: its hash + list).")
    print("RedisSession is async only, so it is compared with redistate's AsyncStore, both on")
    print("  one event loop and redis.asyncio clients; the sync rows compare the sync Store.")
    print("p50 rs/peer: redistate's p50 / the peer's (> 1: redistate slower); ops/s rs/peer:")
    print("  redistate's throughput / the peer's (> 1: redistate faster); medians of per-block")
    print("  ratios.")
    title = (
        f"1b. user merge: one fact per call into one 1 KB profile; {MERGE_PROCS} processes"
        " on one key vs 1 process, the same number of calls"
    )
    harness.print_table(MERGE_COLS, shown(merge), title)
    print("lost: facts missing from the final record (updates overwritten); rt/merge: server")
    print(
        "  reads per merge made, tries after conflicts included; final B: MEMORY USAGE at the end."
    )
    title = "1c. checkpoints: 1 KB state, history of 10 (redistate's default keep)"
    harness.print_table(COMPARE_COLS, shown(cps), title)
    print("B/record: MEMORY USAGE of a 10-checkpoint history / 10 (redistate: blob + id lists).")
    title = "1d. locks: uncontended acquire + release, ttl/expire 30 s, a new lock object per pair"
    harness.print_table(LOCK_COLS, shown(lock), title)
    print("B held / after release: MEMORY USAGE of every key with the lock's name (redistate")
    print("  keeps its fence key until the lease's TTL runs out; fences come from server time).")
    print_commands(sess + cps + lock)


def targets(sess: list[Row], merge: list[Row], hist: list[Row]) -> list[Row]:
    """The DESIGN.md targets this run can judge, with what it measured."""

    def find(rows: list[Row], op: str, side_prefix: str) -> Row:
        return next(r for r in rows if r["op"] == op and r["side"].startswith(side_prefix))

    out: list[Row] = []
    for op, peer in (("session get", "raw GET"), ("session put", "raw SET PX")):
        ratio = find(sess, op, peer)["p50_ratio"]
        out.append(
            {
                "target": f"{op.split()[1]} 1 KB vs raw redis-py ≤ 1.15x (goal 1.10x)",
                "measured": f"{ratio:.2f}x p50",
                "met": ratio <= 1.15,
            }
        )
    single = [r for r in sess if r["redistate"]]
    worst = max(r["round_trips"] for r in single)
    out.append(
        {
            "target": "round trips per single-entity op: 1",
            "measured": f"max {worst:.2f} (sessions)",
            "met": worst < 1.005,
        }
    )
    m1 = find(merge, "user merge, 1 process", "redistate")
    most = 1 + 1 / COMPACT_AT
    out.append(
        {
            "target": f"merge: 1 round trip (+1 in {COMPACT_AT} to fold patches back)",
            "measured": f"{m1['round_trips']:.3f}",
            "met": m1["round_trips"] < most + 0.005,
        }
    )
    op8 = f"user merge, {MERGE_PROCS} processes"
    rs8, watch8 = find(merge, op8, "redistate"), find(merge, op8, "WATCH")
    out.append(
        {
            "target": f"contended merge ({MERGE_PROCS} procs) ≥ 3x WATCH/MULTI, 0 lost",
            "measured": f"{watch8['ops_ratio']:.2f}x, {rs8['lost']} lost",
            "met": watch8["ops_ratio"] >= 3 and rs8["lost"] == 0,
        }
    )
    rs_put, raw_put = find(sess, "session put", "redistate"), find(sess, "session put", "raw")
    mem, raw_mem = rs_put["bytes"], raw_put["bytes"]
    value = rs_put["value_bytes"] - raw_put["value_bytes"]
    out.append(
        {
            "target": "memory per 1 KB session ≤ 1.3 KB (envelope + key ≤ 300 B)",
            "measured": f"{mem} B (raw SET PX, same JSON: {raw_mem} B; envelope: +{value} B "
            "of value)",
            "met": mem <= 1.3 * 1024 and mem - 1024 <= 300,
        }
    )
    for r in hist:
        if r.get("flat_target"):
            out.append(
                {
                    "target": r["flat_target"],
                    "measured": f"{r['flat_ratio']:.2f}x",
                    "met": r["flat_ratio"] <= 1.1,
                }
            )
    return out


def report_targets(rows: list[Row]) -> None:
    shown_rows = [{**r, "met_shown": "met" if r["met"] else "NOT MET"} for r in rows]
    cols: list[Column] = [
        ("DESIGN target", "target", ""),
        ("measured", "measured", ""),
        ("", "met_shown", ""),
    ]
    harness.print_table(cols, shown_rows, "targets (the design's), judged on this run")


def round_trip_failures(rows: list[Row]) -> list[str]:
    """redistate rows whose round trips differ from the promised count."""
    bad = []
    for r in rows:
        promised = PROMISED.get(r["op"])
        if not r.get("redistate") or promised is None:
            continue
        low, high = promised
        if not low - 0.005 <= r["round_trips"] <= high + 0.005:
            said = f"{low:g}" if low == high else f"{low:g} to {high:.4g}"
            bad.append(f"{r['op']}: {r['round_trips']:.3f} round trips (promised {said})")
    return bad


# --- machine ---------------------------------------------------------------------------


def machine(raw: redis.Redis) -> dict[str, Any]:
    """harness.machine plus the CPU model and RAM (for machine.txt)."""
    info = harness.machine(raw)
    cpu, ram = "unknown CPU", "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                break
    info["cpu"], info["ram"] = cpu, ram
    info["affinity"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return info


def write_machine(
    path: Path, info: dict[str, Any], loads: list[tuple[float, float, float]]
) -> None:
    lines = [
        f"CPU: {info['cpu']} (/proc/cpuinfo)",
        f"cores: {info['nproc']} (usable by this process: {info['affinity']})",
        f"RAM: {info['ram']}",
        f"OS: {info['platform']}",
        f"Python: {info['python']}",
        f"redis-py: {info['redis_py']}",
        f"hiredis: {info['hiredis'] or 'not installed (pure-Python parser)'}",
        f"orjson: {info['orjson']}",
        f"server: {info['server']}",
        "load average (1/5/15 min) at start: " + " ".join(f"{x:.2f}" for x in loads[0]),
        "load average (1/5/15 min) at end: " + " ".join(f"{x:.2f}" for x in loads[-1]),
        "Note: the server, the benchmark's client process(es) and any other work on this",
        "machine share these cores; absolute numbers are noisy, ratios from ABBA blocks less so.",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# --- running -----------------------------------------------------------------------------


class Tee(io.TextIOBase):
    """stdout that is also kept, for report.txt."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.kept = io.StringIO()

    def write(self, s: str) -> int:
        self.kept.write(s)
        return self.out.write(s)

    def flush(self) -> None:
        self.out.flush()


@contextlib.contextmanager
def environment(url: str, args: argparse.Namespace) -> Iterator[Env]:
    namespace = f"bench{os.getpid()}"
    loop = asyncio.new_event_loop()
    env = Env(
        url=url,
        namespace=namespace,
        args=args,
        store=Store.from_url(url, namespace=namespace),
        raw=_peers.sync_client(url),
        stats=redis.Redis.from_url(url, socket_timeout=10.0),
        loop=loop,
        astore=AsyncStore.from_url(url, namespace=namespace),
        araw=_peers.async_client(url),
    )
    try:
        yield env
    finally:
        if args.url:  # a server of our own is thrown away whole
            _curves.clear(env.raw, f"{namespace}:*")
        env.store.close()
        loop.run_until_complete(env.astore.aclose())
        loop.run_until_complete(env.araw.aclose())
        loop.close()
        env.raw.close()
        env.stats.close()


def bench(env: Env, server_note: str, server_pid: int | None = None) -> int:
    args, out = env.args, env.args.out_dir
    loads = [os.getloadavg()]
    info = machine(env.raw)
    header(env, info, server_note)
    # Everything imported so far is long-lived: keep it out of the collections run
    # before each timed block (a full collection of the peers' modules takes ~0.1 s).
    gc.freeze()
    _measure.progress("server up, peers imported")
    sess = sessions(env)
    apart = put_apart(env)
    memory = _memory.per_session(env.store, env.raw, env.namespace, TTL_S)
    cps = checkpoints(env)
    lock = lock_pairs(env)
    pool = Pool(env.url, env.namespace, max(MERGE_PROCS, *args.procs))
    _measure.progress(f"{len(pool.procs)} worker processes up")
    try:
        merge = merges(env, pool)
        report_part1(sess, merge, cps, lock)
        report_apart(apart)
        report_memory(memory)
        curves = _curves.run_all(env, pool)
        _curves.report(curves, args)
        part3 = _modes.run_all(env, pool, server_pid)
    finally:
        pool.close()
    hist = curves["history"]
    tgt = targets(sess, merge, hist)
    report_targets(tgt)
    tgt21 = _modes.targets(part3)
    _modes.report(part3, tgt21)
    loads.append(os.getloadavg())
    bad = round_trip_failures(sess + merge + cps + lock) + _curves.round_trip_failures(curves)
    bad += _modes.round_trip_failures(part3)
    result = {
        "machine": info,
        "settings": {k: v for k, v in vars(args).items() if k != "out_dir"},
        "sessions": sess,
        "put_apart": apart,
        "memory": memory,
        "merges": merge,
        "checkpoints": cps,
        "locks": lock,
        "curves": curves,
        "targets": tgt,
        "issue21": part3,
        "issue21_targets": tgt21,
        "round_trip_failures": bad,
    }
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_machine(out / "machine.txt", info, loads)
        pngs = _curves.plot(curves, out)
        print("\nwritten: " + ", ".join(str(p) for p in [*pngs, out / "machine.txt"]))
    for line in bad:
        print(f"FAIL {line}", file=sys.stderr)
    if args.json or out is not None:
        path = Path(args.json) if args.json else cast(Path, out) / "results.json"
        path.write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    return 1 if bad else 0


def options() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--url", help="use this server instead of starting one (keep it quiet)")
    p.add_argument("--quick", action="store_true", help="small sizes: a CI smoke test")
    p.add_argument("--full", action="store_true", help="also ids() over 1,000,000 keys")
    p.add_argument("--n", type=int, default=5000, help="timed calls per operation and side")
    p.add_argument("--rounds", type=int, default=10, help="alternating blocks per side")
    p.add_argument("--warmup", type=int, default=300, help="untimed calls per side first")
    # 8 x 50 facts keep the record under ~6 KB: requests stay one server read each.
    p.add_argument("--merge-n", type=int, default=50, help="merges per process per block")
    p.add_argument("--merge-rounds", type=int, default=10, help="blocks per merge side")
    p.add_argument("--out", help=f"PNGs, machine.txt, report (default {RESULTS}; none if --quick)")
    p.add_argument("--json", help="also write every result to this JSON file")
    p.add_argument("--exec-n", type=int, default=2000, help="calls per op for server exec µs")
    p.add_argument("--hot-writes", type=int, default=2000, help="puts to one key (write memory)")
    p.add_argument("--ir-calls", type=int, default=50, help="calls per op counted by callgrind")
    args = p.parse_args()
    args.merge_kb = [1, 6, 50, 100]  # part 3's contended merges: record sizes
    args.sweep_rounds = 4  # blocks per side in part 3's contended merges
    args.given_points = [10, 1000, 10_000, 100_000]
    if args.quick:
        args.n, args.rounds, args.warmup = 200, 2, 20
        args.merge_n, args.merge_rounds = 25, 2
        args.exec_n, args.hot_writes, args.sweep_rounds = 250, 200, 2
        args.merge_kb, args.given_points = [1, 6], [10, 1000]
    args.procs = [1, 2] if args.quick else [1, 2, 4, 8, 16]
    if args.out:
        args.out_dir = Path(args.out)
    else:
        args.out_dir = None if args.quick else RESULTS
    return args


def main() -> int:
    args = options()
    tee = Tee(sys.stdout)
    started = time.monotonic()
    with contextlib.redirect_stdout(tee):
        if args.url:
            with environment(args.url, args) as env:
                code = bench(env, f"--url {args.url}")
        else:
            with running(redis_binary()) as server:
                note = f"private, 127.0.0.1:{server.port}, persistence off"
                with environment(server.url, args) as env:
                    code = bench(env, note, server.process.pid)
        print(f"\nrun took {time.monotonic() - started:.0f} s")
    if args.out_dir is not None:
        (args.out_dir / "report.txt").write_text(tee.kept.getvalue(), encoding="utf-8")
    return code


if __name__ == "__main__":
    sys.exit(main())
