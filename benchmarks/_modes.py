"""Part 3 of run.py: the per-operation table in both loopback modes, and issue 21's
targets judged on it.

A loopback round trip costs very different times depending on where the two processes
run: with the server and the client on different CPUs each wakes the other across
cores (raw GET ~100 µs on the 2-vCPU VM), on one CPU the kernel hands over in place
(~40 µs), and a fixed client or server cost is a larger share of the smaller figure.
So, in one run, where two CPUs are usable:

- **apart**: the server on the first CPU, this process and the worker processes on the
  second;
- **one CPU**: the server, this process and the workers all on the first CPU;

each pinned with ``os.sched_setaffinity`` on every thread of each process (threads
started later inherit it), every affinity restored afterwards. In each mode: every
operation against the raw redis-py job nearest it in ABBA blocks (p50 ratio, and the
µs it adds: the median of per-block p50 differences), the server's exec µs of both
(``INFO commandstats``, benchmarks/server_time.py; the least of 5 runs, as other work
preempting the server is counted in the runs it hits) and the most operations one
server core serves (1e6 / exec µs); merge into a 100 KB vs a 1 KB record (benchmarks/costs.py's
records); merges from 8 processes into one record of 1 to 100 KB against WATCH/MULTI.
Once, as no CPU placement changes them: encoding with nulls vs ``orjson.dumps``, the
write memory's bytes per key, a given-id save / get at 100,000 checkpoints vs at 10,
and a batch of 10 mixed writes vs one write (once ``store.batch()`` exists).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import _curves
import _measure
import _merges
import batches
import costs
import harness
import server_instructions
import server_time
from _procs import Pool
from harness import Column, Row, sync_block

from redistate.records.mergelog import COMPACT_AT
from tests.servers import redis_binary, valkey_binary

if TYPE_CHECKING:
    from run import Env

MERGE_PROCS = 8
# (operation, peer side) in server_time.operations' names; "redistate" is the other side.
PAIRS: list[tuple[str, str, str]] = [
    ("put 1 KB", "put 1 KB", "raw SET PX"),
    ("get 1 KB", "get 1 KB", "raw GET"),
    ("merge 1 field", "merge 1 field", "WATCH/MULTI"),
    ("checkpoints.save 1 KB", "checkpoints.save 1 KB", "raw LPUSH+LTRIM"),
    ("checkpoints.latest", "checkpoints.latest", "raw LINDEX"),
    ("events.append", "events.append", "raw XADD"),
    ("lease pair, renew=False", "lease pair", "redis-py Lock"),
    ("lease pair, renew=True", "lease pair", "redis-py Lock"),
    ("lease pair, store.task()", "lease pair", "redis-py Lock"),
]
CONTENDED_SIDES = ["redistate users.merge", "redistate merge, returning=False", "WATCH/MULTI loop"]


@dataclass
class Mode:
    """Where the server and the clients run (None: wherever the OS puts them)."""

    name: str
    server: set[int] | None
    clients: set[int] | None


def modes(server_pid: int | None) -> tuple[list[Mode], str]:
    """The modes this run can pin, and a note saying which CPUs (or why none)."""
    if server_pid is None:
        return [Mode("as scheduled", None, None)], "not pinned: --url names a server not ours"
    if not hasattr(os, "sched_setaffinity"):
        return [Mode("as scheduled", None, None)], "not pinned: no sched_setaffinity here"
    cpus = sorted(os.sched_getaffinity(0))
    try:  # a container may refuse it: then measure where the OS puts the processes
        _pin(server_pid, set(cpus))
    except OSError as e:
        return [Mode("as scheduled", None, None)], f"not pinned: sched_setaffinity: {e}"
    first = {cpus[0]}
    if len(cpus) < 2:
        return [Mode("one CPU", first, first)], f"one usable CPU ({cpus[0]}): no apart mode"
    note = f"apart: server on CPU {cpus[0]}, clients on CPU {cpus[1]}; one CPU: all on {cpus[0]}"
    return [Mode("apart", first, {cpus[1]}), Mode("one CPU", first, first)], note


def _pin(pid: int, cpus: set[int]) -> None:
    """Every thread of ``pid`` to ``cpus`` (the affinity is per thread on Linux)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError, FileNotFoundError):
            os.sched_setaffinity(int(tid), cpus)


@contextlib.contextmanager
def pinned(mode: Mode, server_pid: int | None, clients: list[int]) -> Iterator[None]:
    """The server and the client processes (this one first) placed as ``mode`` says."""
    if mode.server is None or mode.clients is None or server_pid is None:
        yield
        return
    everything = os.sched_getaffinity(0)
    try:
        _pin(server_pid, mode.server)
        for pid in clients:
            _pin(pid, mode.clients)
        yield
    finally:
        for pid in [server_pid, *clients]:
            with contextlib.suppress(FileNotFoundError):
                _pin(pid, everything)


# --- in each mode --------------------------------------------------------------------


def op_table(env: Env, calls: dict[tuple[str, str], Callable[[], Any]]) -> list[Row]:
    """Each PAIRS operation against its peer: ABBA timing, then server exec µs."""
    a = env.args
    block, exec_n = max(1, a.n // a.rounds), a.exec_n
    served: dict[tuple[str, str], dict[str, Any]] = {}

    def server(key: tuple[str, str]) -> dict[str, Any]:
        if key not in served:  # the lock peer serves three rows
            served[key] = server_time.measure_least(env.stats, calls[key], exec_n)
        return served[key]

    rows: list[Row] = []
    for op, peer_op, peer in PAIRS:
        rs_key, peer_key = (op, "redistate"), (peer_op, peer)
        blocks = {"rs": sync_block(calls[rs_key]), "peer": sync_block(calls[peer_key])}
        sides = harness.abba(blocks, env.stats, rounds=a.rounds, block=block, warmup=a.warmup)
        rs, other = sides["rs"], sides["peer"]
        diffs = [x - y for x, y in zip(rs.block_p50, other.block_p50, strict=True)]
        ours, theirs = server(rs_key), server(peer_key)
        rows.append(
            {
                "op": op,
                "peer": peer,
                "rs_p50_us": rs.row("")["p50_us"],
                "peer_p50_us": other.row("")["p50_us"],
                "p50_ratio": harness.ratios(rs, other)["ratio_p50"],
                "added_us": statistics.median(diffs) / 1000,
                "round_trips": rs.row("")["round_trips"],
                "exec_us": ours["exec_us"],
                "peer_exec_us": theirs["exec_us"],
                "max_ops_s": 1e6 / ours["exec_us"] if ours["exec_us"] else None,
                "peer_max_ops_s": 1e6 / theirs["exec_us"] if theirs["exec_us"] else None,
                "exec_us_chunks": ours["exec_us_chunks"],
                "cpu_us": ours["cpu_us"],
                "cpu_ops_s": 1e6 / ours["cpu_us"] if ours["cpu_us"] else None,
            }
        )
    return rows


def merge_sizes(env: Env) -> list[Row]:
    """One-fact merges into a ~100 KB vs a ~1 KB user record, returning the merged
    value and not, in ABBA blocks. Mean ratio: one merge in 16 also folds (reads) the
    record, a cost a p50 would hide."""
    a = env.args
    merging = costs.profiles(env.store)
    rows: list[Row] = []
    for returning in (False, True):
        blocks = {
            "big": sync_block(merging("big", returning)),
            "small": sync_block(merging("small", returning)),
        }
        sides = harness.abba(
            blocks, env.stats, rounds=a.rounds, block=max(1, a.n // a.rounds // 2), warmup=a.warmup
        )
        r = harness.ratios(sides["big"], sides["small"])
        rows.append(
            {
                "returning": returning,
                "big_mean_us": sides["big"].row("")["mean_us"],
                "small_mean_us": sides["small"].row("")["mean_us"],
                "mean_ratio": r["ratio_mean"],
                "p50_ratio": r["ratio_p50"],
            }
        )
    return rows


def profile(kb: int) -> dict[str, Any]:
    """A user record of about ``kb`` KB of JSON: fields of 100 characters."""
    return {f"f{i}": "x" * 100 for i in range(max(1, kb * 1024 // 110))}


def contended(env: Env, pool: Pool) -> list[Row]:
    """8 processes merging into one record of each size, vs a WATCH/MULTI loop."""
    a = env.args
    rows: list[Row] = []
    for kb in a.merge_kb:
        out = _merges.contended(
            env,
            pool,
            op=f"{kb} KB",
            sides=CONTENDED_SIDES,
            base=profile(kb),
            procs=MERGE_PROCS,
            per_proc=a.merge_n,
            rounds=a.sweep_rounds,
        )
        by = {r["side"]: r for r in out}
        watch = by["WATCH/MULTI loop"]
        for r in out:
            r["kb"] = kb
            r["vs_watch"] = None if r is watch else _merges.ops_ratio(r, watch)
        rows += out
    return rows


def run_mode(env: Env, pool: Pool, mode: Mode, server_pid: int | None) -> dict[str, Any]:
    clients = [os.getpid(), *(p.pid for p in pool.procs if p.pid is not None)]
    with pinned(mode, server_pid, clients):
        calls = {(op, side): call for op, side, call in server_time.operations(env.store, env.raw)}
        ops = op_table(env, calls)
        _measure.progress(f"{mode.name}: measured the per-operation table")
        sizes = merge_sizes(env)
        merges = contended(env, pool)
        _measure.progress(f"{mode.name}: measured merges by record size")
    return {"mode": mode.name, "ops": ops, "merge_sizes": sizes, "contended": merges}


# --- once ------------------------------------------------------------------------------


def batch(env: Env) -> Row:
    """benchmarks/batches.py's 10 writes of mixed kinds in one ``store.batch()`` vs one
    put of the same value, once the store has batches."""
    store, a = env.store, env.args
    if not hasattr(store, "batch"):
        return {"note": "not measured: no store.batch()"}
    ticks = itertools.count()
    blocks = {
        "batch": sync_block(lambda: batches.mixed(store, next(ticks))),
        "one": sync_block(lambda: store.sessions.put("one", batches.VALUE)),
    }
    sides = harness.abba(
        blocks, env.stats, rounds=a.rounds, block=max(1, a.n // a.rounds // 5), warmup=10
    )
    return {
        "ratio": harness.ratios(sides["batch"], sides["one"])["ratio_p50"],
        "batch_p50_us": sides["batch"].row("")["p50_us"],
        "one_p50_us": sides["one"].row("")["p50_us"],
        "round_trips": sides["batch"].row("")["round_trips"],
    }


def write_memory(env: Env) -> list[Row]:
    """The write memory's bytes per hot key after a tenth of the writes and after all."""
    total = env.args.hot_writes
    first = server_time.write_memory(env.store, env.raw, env.url, total // 10)
    then = server_time.write_memory(env.store, env.raw, env.url, total - total // 10)
    return [
        {"writers": x["writers"], "after": total // 10, "bytes": x["bytes"], "after_all": total,
         "bytes_all": y["bytes"]}
        for x, y in zip(first, then, strict=True)
    ]  # fmt: skip


def server_work(env: Env) -> dict[str, Any]:
    """Instructions per operation inside the script command on Redis 7 and Valkey 9,
    now and on the code issue 21 measured (benchmarks/server_instructions.py
    --against): counted, so the ratio does not depend on the day's machine, where exec
    µs do (the issue's targets are µs on the day it measured)."""
    if env.args.quick:
        return {"note": "not counted with --quick (server_instructions.py --against does)"}
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return {"note": "not counted: valgrind (with callgrind_control) is not installed"}
    commit = server_instructions.BEFORE_ISSUE_21
    with contextlib.ExitStack() as stack:
        try:
            code = stack.enter_context(server_instructions.earlier(commit))
        except LookupError as exc:
            return {"note": f"not counted: {exc}"}
        rows = _count_against(env, code)
    _measure.progress("counted the scripts' instructions, now and before issue 21")
    return {"commit": commit, "calls": env.args.ir_calls, "rows": rows}


def _count_against(env: Env, code: Path) -> list[dict[str, Any]]:
    """server_work's rows: each operation's instructions now and in ``code``."""
    servers = [("Redis 7", redis_binary())]
    with contextlib.suppress(ImportError):
        servers.append(("Valkey 9", valkey_binary()))
    rows = []
    for label, binary in servers:
        calls = env.args.ir_calls
        now = server_instructions.run(binary, server_instructions.VARIANTS[0], calls)
        then = server_instructions.run(binary, server_instructions.VARIANTS[0], calls, code)
        for op, row in now.items():
            goal = server_instructions.TARGETS.get(op)
            rows.append(
                {
                    "server": label,
                    "op": op,
                    "before": then[op]["instructions"],
                    "now": row["instructions"],
                    "ratio": row["instructions"] / then[op]["instructions"],
                    "target": goal[0] / goal[1] if goal else None,
                    "target_us": goal,
                }
            )
    return rows


def once(env: Env) -> dict[str, Any]:
    scale = 10 if env.args.quick else 1
    out = {
        "encoding": costs.encoding(scale),
        "write_memory": write_memory(env),
        "given_ids": _curves.given_ids(env, env.args.given_points),
        "batch": batch(env),
    }
    _measure.progress("measured encoding, write memory, given ids, batch")
    out["server_work"] = server_work(env)
    return out


def run_all(env: Env, pool: Pool, server_pid: int | None) -> dict[str, Any]:
    chosen, note = modes(server_pid)
    return {
        "note": note,
        "modes": [run_mode(env, pool, mode, server_pid) for mode in chosen],
        "once": once(env),
    }


# Round trips per call the design promises for part 3's operations: the fewest and the
# most (a merge is one script; one in COMPACT_AT in a row also folds the patches back).
PROMISED: dict[str, tuple[float, float]] = {
    "put 1 KB": (1, 1),
    "get 1 KB": (1, 1),
    "merge 1 field": (1, 1 + 1 / COMPACT_AT),
    "checkpoints.save 1 KB": (1, 1),
    "checkpoints.latest": (1, 1),
    "events.append": (1, 1),
    "lease pair, renew=False": (2, 2),
    "lease pair, renew=True": (2, 2),
    # The acquire carries the restore's reads: one request in, one (release) out.
    "lease pair, store.task()": (2, 2),
}


def round_trip_failures(part: dict[str, Any]) -> list[str]:
    bad = []
    for m in part["modes"]:
        for r in m["ops"]:
            low, high = PROMISED.get(r["op"], (0, float("inf")))
            if not low - 0.005 <= r["round_trips"] <= high + 0.005:
                bad.append(f"{m['mode']} {r['op']}: {r['round_trips']:.3f} round trips")
    b = part["once"]["batch"]
    if "round_trips" in b and abs(b["round_trips"] - 1) > 0.005:
        bad.append(f"batch of 10 mixed writes: {b['round_trips']:.3f} round trips (promised 1)")
    return bad


# --- targets ---------------------------------------------------------------------------


def _target(what: str, mode: str, measured: str, met: bool | None) -> Row:
    return {"target": what, "mode": mode, "measured": measured, "met": met}


def targets(part: dict[str, Any]) -> list[Row]:
    """Issue 21's targets, each with what this run measured (per mode where it depends
    on where the processes run)."""
    out: list[Row] = []
    exec_limits = [
        ("put 1 KB", 12),
        ("checkpoints.save 1 KB", 20),
        ("events.append", 15),
        ("lease pair, renew=False", 20),
        ("lease pair, renew=True", 20),
    ]
    for m in part["modes"]:
        name, ops = m["mode"], {r["op"]: r for r in m["ops"]}
        for op, limit in exec_limits:
            us = ops[op]["exec_us"]
            out.append(
                _target(f"{op}: server exec ≤ {limit} µs", name, f"{us:.1f} µs", us <= limit)
            )
        for op, limit in (("put 1 KB", 20), ("get 1 KB", 5)):
            us = ops[op]["added_us"]
            what = f"{op.split()[0]}: client µs added over raw redis-py ≤ +{limit}"
            out.append(_target(what, name, f"{us:+.1f} µs", us <= limit))
        task = ops["lease pair, store.task()"]["p50_ratio"]
        what = "store.task() acquire+release (renews) vs redis-py Lock ≤ 1.2x"
        out.append(_target(what, name, f"{task:.2f}x p50", task <= 1.2))
        nr = next(r for r in m["merge_sizes"] if not r["returning"])
        what = "merge 100 KB vs 1 KB record, returning=False ≤ 1.3x"
        out.append(_target(what, name, f"{nr['mean_ratio']:.2f}x mean", nr["mean_ratio"] <= 1.3))
        for side in CONTENDED_SIDES[:2]:
            rows = [r for r in m["contended"] if r["side"] == side]
            got = ", ".join(f"{r['kb']} KB {r['vs_watch']:.1f}x" for r in rows)
            lost = sum(r["lost"] for r in rows)
            ok = all(r["vs_watch"] >= 5 for r in rows) and lost == 0
            what = f"contended merge ({MERGE_PROCS} procs) ≥ 5x WATCH/MULTI at every size"
            if side != CONTENDED_SIDES[0]:
                what += ", returning=False"
            out.append(_target(what, name, f"{got}; {lost} lost", ok))
    o = part["once"]
    for w in o["server_work"].get("rows", []):
        if w["target"] is None:
            continue
        us, then = w["target_us"]
        what = (
            f"{w['op']}: server work ≤ {w['target']:.2f}x the code issue 21 measured "
            f"({us} of {then} µs), in instructions"
        )
        out.append(_target(what, w["server"], f"{w['ratio']:.2f}x", w["ratio"] <= w["target"]))
    worst = max(o["encoding"], key=lambda r: r["ratio"])
    out.append(
        _target(
            "encode a value with nulls vs orjson.dumps ≤ 1.5x",
            "-",
            f"{worst['ratio']:.2f}x (worst, {worst['kb']:.0f} KB)",
            worst["ratio"] <= 1.5,
        )
    )
    b = o["batch"]
    what = "10 mixed writes in a batch vs one write ≤ 2x"
    if "note" in b:
        out.append(_target(what, "-", b["note"], None))
    else:
        out.append(
            _target(what, "-", f"{b['ratio']:.2f}x p50, {b['round_trips']:.2f} rt", b["ratio"] <= 2)
        )
    last = o["given_ids"][-1]
    for op in ("save", "get"):
        what = f"given-id {op} at {last['history']:,} checkpoints vs at 10 ≤ 1.2x"
        ratio = last[f"{op}_vs10"]
        out.append(_target(what, "-", f"{ratio:,.1f}x p50", ratio <= 1.2))
    for w in o["write_memory"]:
        grew = w["bytes_all"] - w["bytes"]
        what = "write memory per key bounded (bytes do not grow with writes)"
        measured = (
            f"{w['writers']}: {w['bytes']:,} B after {w['after']:,} puts, "
            f"{w['bytes_all']:,} B after {w['after_all']:,}"
        )
        out.append(_target(what, "-", measured, grew <= 64))
    return out


# --- report ----------------------------------------------------------------------------

# fmt: off
OP_COLS: list[Column] = [
    ("operation", "op", ""), ("peer", "peer", ""), ("p50 µs", "rs_p50_us", ".0f"),
    ("peer p50 µs", "peer_p50_us", ".0f"), ("p50 rs/peer", "p50_ratio", ".2f"),
    ("added µs", "added_us", "+.1f"), ("rt/op", "round_trips", ".2f"),
    ("exec µs", "exec_us", ".1f"), ("peer exec µs", "peer_exec_us", ".1f"),
    ("max ops/s/core", "max_ops_s", ",.0f"), ("peer max ops/s", "peer_max_ops_s", ",.0f"),
    ("server cpu µs", "cpu_us", ".1f"), ("ops/s/core by cpu", "cpu_ops_s", ",.0f"),
]
SIZE_COLS: list[Column] = [
    ("returning", "returning", ""), ("100 KB mean µs", "big_mean_us", ".0f"),
    ("1 KB mean µs", "small_mean_us", ".0f"), ("mean 100K/1K", "mean_ratio", ".2f"),
    ("p50 100K/1K", "p50_ratio", ".2f"),
]
CONTENDED_COLS: list[Column] = [
    ("record", "op_shown", ""), ("side", "side", ""), ("merges/s", "ops_s", ",.0f"),
    ("p50 µs", "p50_us", ".0f"), ("p99 µs", "p99_us", ".0f"), ("rt/merge", "round_trips", ".2f"),
    ("lost", "lost", ",d"), ("of", "calls", ",d"), ("final B", "bytes", ",.0f"),
    ("ops/s vs WATCH", "vs_watch", ".2f"),
]
WORK_COLS: list[Column] = [
    ("server", "server", ""), ("operation", "op", ""), ("before", "before", ",.0f"),
    ("now", "now", ",.0f"), ("now/before", "ratio", ".2f"), ("target", "target", ".2f"),
]
# fmt: on


def report(part: dict[str, Any], tgt: list[Row]) -> None:
    print(f"\n3. issue 21's table, in each loopback mode ({part['note']})")
    for m in part["modes"]:
        name = m["mode"]
        title = f"3a [{name}]. each operation vs the raw redis-py job nearest it (1 KB, nulls)"
        harness.print_table(OP_COLS, m["ops"], title)
        title = f"3b [{name}]. one-fact merge into a ~100 KB vs a ~1 KB user record"
        harness.print_table(SIZE_COLS, m["merge_sizes"], title)
        shown, last = [], None
        for r in m["contended"]:
            shown.append({"vs_watch": None, **r, "op_shown": r["op"] if r["op"] != last else ""})
            last = r["op"]
        title = f"3c [{name}]. {MERGE_PROCS} processes merging one fact a call into one record"
        harness.print_table(CONTENDED_COLS, shown, title)
    print("added µs: the median over ABBA blocks of (redistate p50 - peer p50); the peers")
    print("  encode and decode with orjson. exec µs: INFO commandstats usec per call of the")
    print("  top-level commands sent (a script's include what it runs), the least mean of")
    print("  5 runs of exec-n / 5 calls (the machine's other work preempts the server in")
    print("  some: commandstats times by the wall clock); max ops/s/core:")
    print("  1e6 / exec µs, what one Redis core serves of that operation and nothing else;")
    print("  server cpu µs: used_cpu_user+sys per call (parsing, replies, event loop too),")
    print("  and 1e6 / that: what one core serves counting the server's work around commands.")
    o = part["once"]
    print("\n3d. once (no CPU placement changes these)")
    for e in o["encoding"]:
        print(f"  {e['line']} ({e['us']:.1f} µs vs {e['orjson_us']:.1f} µs)")
    for w in o["write_memory"]:
        print(
            f"  write memory of one hot key, {w['writers']}: {w['bytes']:,} B after"
            f" {w['after']:,} puts, {w['bytes_all']:,} B after {w['after_all']:,}"
        )
    for g in o["given_ids"]:
        print(
            f"  given id at {g['history']:>7,} checkpoints: save p50"
            f" {g['save_given_p50_us']:,.0f} µs ({g['save_vs10']:,.1f}x at 10), get p50"
            f" {g['get_given_p50_us']:,.0f} µs"
            f" ({g['get_vs10']:,.1f}x at 10)"
        )
    b = o["batch"]
    if "note" in b:
        print(f"  batch of 10 mixed writes: {b['note']}")
    else:
        print(
            f"  batch of 10 mixed writes (benchmarks/batches.py's): p50 {b['batch_p50_us']:.0f} µs,"
            f" {b['ratio']:.2f}x one put ({b['one_p50_us']:.0f} µs), {b['round_trips']:.2f} rt"
        )
    work = o["server_work"]
    if "note" in work:
        print(f"  server work now vs before issue 21: {work['note']}")
    else:
        title = (
            f"3e. server work per operation: instructions inside FCALL (now) and EVALSHA"
            f" (the code issue 21 measured, {work['commit']}), {work['calls']} calls each"
        )
        harness.print_table(WORK_COLS, work["rows"], title)
    shown_t = [
        {**r, "met_shown": {True: "met", False: "NOT MET", None: "-"}[r["met"]]} for r in tgt
    ]
    cols: list[Column] = [
        ("issue 21 target", "target", ""),
        ("mode", "mode", ""),
        ("measured", "measured", ""),
        ("", "met_shown", ""),
    ]
    harness.print_table(cols, shown_t, "targets (issue 21), judged on this run")
