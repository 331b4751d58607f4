"""Merges into one shared user record from worker processes, for run.py: redistate's
``users.merge`` against a WATCH/MULTI loop and a naive GET+SET, in ABBA blocks.

Each call adds one fact (``{"w<k>-<i>": 1}``) to the record, so the facts missing from
the final record are the lost updates (see _procs.py).
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any, cast

import harness
import orjson
from _procs import Outcome, Pool
from harness import Row

if TYPE_CHECKING:
    from run import Env

# Side label -> worker job (_procs._job).
JOBS = {
    "redistate users.merge": "rs_merge",
    "redistate merge, returning=False": "rs_merge_nr",
    "WATCH/MULTI loop": "watch_merge",
    "naive GET+SET": "naive_merge",
}


def contended(
    env: Env,
    pool: Pool,
    *,
    op: str,
    sides: list[str],
    base: dict[str, Any],
    procs: int,
    per_proc: int,
    rounds: int,
) -> list[Row]:
    """``per_proc`` merges in each of ``procs`` workers into a fresh record holding
    ``base``, ``rounds`` blocks per side (sides in JOBS, redistate's first); one row
    per side, ratios redistate (the first side) / the side's."""
    results: dict[str, list[tuple[Outcome, int, int]]] = {label: [] for label in sides}
    for rnd in range(rounds):
        for label in sides if rnd % 2 == 0 else sides[::-1]:  # ABBA
            job = JOBS[label]
            key = f"m{procs}-{job}-{len(base)}-{rnd}"
            raw_key = f"{env.namespace}:raw:{{{key}}}"
            ours = label.startswith("redistate")
            if ours:
                env.store.users.put(key, base)
            else:
                env.raw.set(raw_key, orjson.dumps(base))
            out = pool.run(job, key, per_proc, procs, env.stats)
            if ours:
                rec = env.store.users.get(key)
                final = rec.data if rec is not None else {}
                size = env.memory(env.store.keys.record("user", key))
                env.store.users.delete(key)
            else:
                final = orjson.loads(cast(bytes, env.raw.get(raw_key)))
                size = env.memory(raw_key)
                env.raw.delete(raw_key)
            kept = sum(1 for k in final if k.startswith("w") and "-" in k)
            results[label].append((out, out.calls - kept, size))
    rs = results[sides[0]]
    rows: list[Row] = []
    for label in sides:
        outs = results[label]
        samples = sorted(s for out, _, _ in outs for s in out.samples)
        calls = sum(out.calls for out, _, _ in outs)
        row: Row = {
            "op": op,
            "side": label,
            "redistate": label == sides[0],
            "ops_s": calls / (sum(out.elapsed_ns for out, _, _ in outs) / 1e9),
            "p50_us": harness.pct(samples, 0.50),
            "p99_us": harness.pct(samples, 0.99),
            "mean_us": statistics.fmean(samples) / 1000,
            "round_trips": sum(out.reads for out, _, _ in outs) / calls,
            "lost": sum(lost for _, lost, _ in outs),
            "calls": calls,
            "bytes": statistics.fmean(size for _, _, size in outs),
            "n": calls,
            "procs": procs,
            "block_ops_s": [out.ops_s for out, _, _ in outs],
        }
        if label != sides[0]:
            row["ops_ratio"] = statistics.median(
                r.ops_s / p.ops_s for (r, _, _), (p, _, _) in zip(rs, outs, strict=True)
            )
            row["p50_ratio"] = statistics.median(
                r.pct_us(0.5) / p.pct_us(0.5) for (r, _, _), (p, _, _) in zip(rs, outs, strict=True)
            )
        rows.append(row)
    return rows


def ops_ratio(a: Row, b: Row) -> float:
    """Row a's merges/s over row b's: the median of per-block ratios (ABBA neighbours)."""
    pairs = zip(a["block_ops_s"], b["block_ops_s"], strict=True)
    return float(statistics.median(x / y for x, y in pairs))
