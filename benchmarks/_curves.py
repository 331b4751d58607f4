"""Scaling curves for run.py: how redistate's costs grow, printed and plotted.

- save / latest vs history length (10 ... 100,000 earlier saves), with ``keep`` as large
  as the history (so it really is that long) and with the default keep=10; LlamaIndex's
  RedisChatStore reading its newest message next to them. Long histories are bulk-loaded
  as real checkpoints (blobs and id entries built by redistate's own CheckpointSpec,
  pushed in pipelines): saving them one by one with keep=N costs O(N) each.
- restore vs deltas logged since the snapshot (0 ... 1000, the default cap), against a
  raw pipeline (LINDEX + LRANGE) applying the same merge patches;
- ``ids()`` vs number of keys (1k ... 100k; 1M with --full), against a raw SCAN loop;
  records are copies of one real record under other ids, SET in pipelines;
- throughput vs concurrent processes (1 ... 16), each process on its own key.
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import _measure
import _peers
import harness
import redis
from _procs import Pool
from harness import Block, Column, Row, Side, sync_block
from records import value_1k

from redistate import Store
from redistate.checkpoints.spec import new_checkpoint_id

if TYPE_CHECKING:
    from run import Env

BATCH = 2000  # values per pipelined command while bulk loading


def sizes(args: argparse.Namespace) -> dict[str, list[int]]:
    """The points of each curve for this run's mode."""
    if args.quick:
        return {"history": [10, 100, 1000], "deltas": [0, 10, 100], "keys": [1000, 10_000]}
    keys = [1000, 10_000, 100_000] + ([1_000_000] if args.full else [])
    return {
        "history": [10, 100, 1000, 10_000, 100_000],
        "deltas": [0, 10, 100, 1000],
        "keys": keys,
    }


def clear(raw: redis.Redis, pattern: str) -> None:
    """UNLINK every key matching ``pattern``, in batches (SCAN, never KEYS)."""
    batch: list[bytes] = []
    for key in raw.scan_iter(match=pattern, count=5000):
        batch.append(key)
        if len(batch) >= 5000:
            raw.unlink(*batch)
            batch.clear()
    if batch:
        raw.unlink(*batch)


def adaptive(blocks: dict[str, Block], target_s: float, most: int) -> dict[str, int]:
    """Calls per block for each variant so that a block takes about ``target_s``."""
    out = {}
    for name, run in blocks.items():
        run(1)  # warm: connections, scripts
        _, ns = run(1)
        out[name] = max(2, min(most, int(target_s / max(ns / 1e9, 1e-6))))
    return out


def measure(env: Env, blocks: dict[str, Block]) -> dict[str, Side]:
    a = env.args
    rounds, target = (2, 0.05) if a.quick else (6, 0.3)
    calls = adaptive(blocks, target, max(2, a.n // a.rounds))
    return harness.abba(blocks, env.stats, rounds=rounds, block=calls, warmup=0)


# --- save / latest vs history ---------------------------------------------------------


def load_history(store: Store, raw: redis.Redis, task: str, total: int, stored: int) -> None:
    """The task's lists as ``total`` saves would leave them with a history cap of
    ``stored``: seqs ``total - stored + 1 ... total``, newest first, real blobs."""
    spec, state = store.checkpoints.spec, value_1k()
    keys = spec.task_keys(task)
    raw.delete(*keys)
    now_ms = int(time.time() * 1000)
    first = total - stored + 1
    ids = {seq: new_checkpoint_id() for seq in range(max(1, first - 1), total + 1)}
    seqs = list(range(total, first - 1, -1))  # newest first, as LPUSH leaves them
    for i in range(0, len(seqs), BATCH):
        chunk = seqs[i : i + BATCH]
        blobs = [spec.blob(keys[0], ids[s], state, None, None, None)[0] for s in chunk]
        entries = [
            f"{s:016d},{now_ms - (total - s):013d},0,{ids[s]},{ids.get(s - 1, '')}".encode()
            for s in chunk
        ]
        pipe = raw.pipeline(transaction=False)
        pipe.rpush(keys[0], *blobs)
        pipe.rpush(keys[1], *entries)
        pipe.execute()
    newest = store.checkpoints.latest(task)  # the store reads it back: digest verified
    if newest is None or newest.seq != total or raw.llen(keys[0]) != stored:
        raise RuntimeError(f"bulk-loaded history of {task} does not read back")


def history(env: Env, points: list[int]) -> list[Row]:
    store, raw, cps = env.store, env.raw, env.store.checkpoints
    chat = _peers.ChatCheckpoints(env.url, env.raw, env.araw, env.namespace)
    state = value_1k()
    message = chat.encoded(state)
    load_history(store, raw, "h-ref", 10, 10)
    rows: list[Row] = []
    for n in points:
        load_history(store, raw, "h-all", n, n)  # keep=n: the whole history stored
        load_history(store, raw, "h-cap", n, min(n, _peers.KEEP))  # the default keep=10
        raw.delete(chat.key("h-chat"))
        for i in range(0, n, BATCH):
            raw.rpush(chat.key("h-chat"), *([message] * min(BATCH, n - i)))
        save_ref = sync_block(lambda: cps.save("h-ref", state))
        latest_ref = sync_block(lambda: cps.latest("h-ref"))
        whole = measure(
            env,
            {
                "save_all": sync_block(partial(cps.save, "h-all", state, keep=n)),
                "save_ref": save_ref,
                "latest_all": sync_block(lambda: cps.latest("h-all")),
                "latest_ref": latest_ref,
                "chat": sync_block(lambda: chat.latest("h-chat")),
            },
        )
        # The keep=10 flatness apart, after 100 small saves: a keep=N save leaves N
        # strings of Lua garbage that the next scripts of any task pay to collect
        # (measured: the next 1 KB save takes ~2x at N=100,000; ~30 saves later, 1x).
        save_ref(100)
        capped = measure(
            env,
            {
                "save_cap": sync_block(lambda: cps.save("h-cap", state)),
                "save_ref": save_ref,
                "latest_cap": sync_block(lambda: cps.latest("h-cap")),
                "latest_ref": latest_ref,
            },
        )
        if raw.llen(store.keys.task("h-all")) != n:
            raise RuntimeError("keep=n did not keep the history at n")
        row: Row = {"history": n}
        for sides in (whole, capped):  # the references as measured with keep=10
            for name, side in sides.items():
                row |= {f"{name}_{k}": v for k, v in side.row("").items()}
        for sides, kind in ((capped, "cap"), (whole, "all")):
            for op in ("save", "latest"):
                ratio = harness.ratios(sides[f"{op}_{kind}"], sides[f"{op}_ref"])
                row[f"{op}_{kind}_vs10"] = ratio["ratio_p50"]
        rows.append(row)
        _measure.progress(f"measured history {n:,}")
    clear(raw, f"{env.namespace}:task:{{h-*")
    raw.delete(chat.key("h-chat"))
    last = rows[-1]
    most = f"{last['history']:,}"
    for name, what in (
        ("save_cap", f"save after 10 vs {most} earlier saves (default keep=10) ≤ 1.1x"),
        ("latest_cap", f"latest after 10 vs {most} earlier saves (default keep=10) ≤ 1.1x"),
        ("save_all", f"save after 10 vs {most} earlier saves, keep={most} (all stored) ≤ 1.1x"),
        ("latest_all", f"latest after 10 vs {most} earlier saves, keep={most} (all stored) ≤ 1.1x"),
    ):
        rows.append({"flat_target": what, "flat_ratio": last[f"{name}_vs10"]})
    return rows


# --- given ids vs history -------------------------------------------------------------


def given_ids(env: Env, points: list[int]) -> list[Row]:
    """A save under a caller-chosen id (keep=N, so the history stays N long) and
    ``get(task, id)`` of the oldest stored id, after N stored checkpoints vs after 10,
    in the same ABBA blocks. Separate tasks for the two: the saves trim the oldest."""
    store, raw, cps, state = env.store, env.raw, env.store.checkpoints, value_1k()

    def oldest(task: str) -> str:
        entry = raw.lindex(store.checkpoints.spec.task_keys(task)[1], -1)
        return bytes(entry).decode().split(",")[3]  # type: ignore[arg-type]

    def given(task: str, keep: int) -> Block:
        return sync_block(
            lambda: cps.save(task, state, checkpoint_id=new_checkpoint_id(), keep=keep)
        )

    load_history(store, raw, "g-ref-save", 10, 10)
    load_history(store, raw, "g-ref-get", 10, 10)
    ref_id = oldest("g-ref-get")
    rows: list[Row] = []
    for n in points:
        load_history(store, raw, "g-save", n, n)
        load_history(store, raw, "g-get", n, n)
        old = oldest("g-get")
        if cps.get("g-get", old) is None:
            raise RuntimeError("get(task, id) did not find the oldest bulk-loaded id")
        sides = measure(
            env,
            {
                "save_given": given("g-save", n),
                "save_ref": given("g-ref-save", 10),
                "get_given": sync_block(partial(cps.get, "g-get", old)),
                "get_ref": sync_block(lambda: cps.get("g-ref-get", ref_id)),
            },
        )
        row: Row = {"history": n}
        for name, side in sides.items():
            row |= {f"{name}_{k}": v for k, v in side.row("").items()}
        for op in ("save", "get"):
            row[f"{op}_vs10"] = harness.ratios(sides[f"{op}_given"], sides[f"{op}_ref"])[
                "ratio_p50"
            ]
        rows.append(row)
        _measure.progress(f"measured given ids at {n:,}")
    clear(raw, f"{env.namespace}:task:{{g-*")
    return rows


# --- restore vs deltas ------------------------------------------------------------------


def deltas(env: Env, points: list[int]) -> list[Row]:
    cps, state = env.store.checkpoints, value_1k()
    raw = _peers.RawCheckpoints(env.raw, env.namespace)
    blocks: dict[str, Block] = {}
    for d in points:
        cps.save(f"d{d}", state)
        raw.save(f"d{d}", state)
        for i in range(d):
            cps.log(f"d{d}", {"k": i, "step": {"n": i}})
            raw.log(f"d{d}", {"k": i, "step": {"n": i}})
        restored = cps.restore(f"d{d}")
        if (
            restored is None
            or restored.deltas_applied != d
            or raw.restore(f"d{d}") != restored.state
        ):
            raise RuntimeError(f"restore with {d} deltas does not match the raw peer's")
        blocks[f"rs{d}"] = sync_block(partial(cps.restore, f"d{d}"))
        blocks[f"raw{d}"] = sync_block(partial(raw.restore, f"d{d}"))
    sides = measure(env, blocks)
    rows = []
    for d in points:
        rs, base = sides[f"rs{d}"], sides[f"raw{d}"]
        rows.append(
            {
                "deltas": d,
                **{f"rs_{k}": v for k, v in rs.row("").items()},
                **{f"raw_{k}": v for k, v in base.row("").items()},
                "ratio_p50": harness.ratios(rs, base)["ratio_p50"],
                "vs0_p50": harness.ratios(rs, sides[f"rs{points[0]}"])["ratio_p50"],
            }
        )
    _measure.progress("measured restore vs deltas")
    return rows


# --- ids() vs keys ----------------------------------------------------------------------


def ids(env: Env, points: list[int]) -> list[Row]:
    store, raw = env.store, env.raw
    store.users.put("k0", {"name": "user", "prefs": {"lang": "en"}, "n": 0})
    value = raw.get(store.keys.record("user", "k0"))
    assert value is not None
    pattern = store.keys.record_pattern("user")
    start = len(pattern) - 2  # the pattern ends with "{*}": the id sits in the braces
    clear(raw, pattern)  # only the copies made below
    loaded, rows = 0, []
    for n in points:
        for start in range(loaded, n, BATCH * 5):
            pipe = raw.pipeline(transaction=False)
            for i in range(start, min(n, start + BATCH * 5)):
                pipe.set(store.keys.record("user", f"k{i}"), value)
            pipe.execute()
        loaded = n

        def listing() -> int:
            return len(list(store.users.ids()))

        def raw_listing(cut: int = start) -> int:
            # The same job by hand: SCAN, and the id cut out of each key.
            keys = raw.scan_iter(match=pattern, count=1000)
            return len([key[cut:-1].decode() for key in keys])

        if listing() != n or raw_listing() != n:
            raise RuntimeError(f"ids() did not list {n:,} records")
        sides = measure(env, {"rs": sync_block(listing), "raw": sync_block(raw_listing)})
        rs, base = sides["rs"], sides["raw"]
        rows.append(
            {
                "keys": n,
                "dbsize": raw.dbsize(),
                **{f"rs_{k}": v for k, v in rs.row("").items()},
                **{f"raw_{k}": v for k, v in base.row("").items()},
                "rs_keys_s": n / (rs.row("")["p50_us"] / 1e6),
                "ratio_p50": harness.ratios(rs, base)["ratio_p50"],
            }
        )
        _measure.progress(f"measured ids() over {n:,} keys")
    clear(raw, pattern)
    return rows


# --- throughput vs processes -------------------------------------------------------------

JOBS = {
    "rs_put": "redistate put",
    "raw_set": "raw SET PX",
    "rs_get": "redistate get",
    "raw_get": "raw GET",
}


def processes(env: Env, pool: Pool) -> list[Row]:
    per_proc = 100 if env.args.quick else 2000
    jobs, rows = list(JOBS), []
    for procs in env.args.procs:
        got: dict[str, list[Any]] = {job: [] for job in jobs}
        for rnd in range(2):
            for job in jobs if rnd % 2 == 0 else jobs[::-1]:  # ABBA
                got[job].append(pool.run(job, "tp", per_proc, procs, env.stats))
        row: Row = {"procs": procs}
        for job, outs in got.items():
            calls = sum(o.calls for o in outs)
            row[f"{job}_ops_s"] = calls / (sum(o.elapsed_ns for o in outs) / 1e9)
            row[f"{job}_p50_us"] = statistics.median(o.pct_us(0.5) for o in outs)
            row[f"{job}_round_trips"] = sum(o.reads for o in outs) / calls
        row["put_ratio"] = row["rs_put_ops_s"] / row["raw_set_ops_s"]
        row["get_ratio"] = row["rs_get_ops_s"] / row["raw_get_ops_s"]
        rows.append(row)
        _measure.progress(f"measured throughput with {procs} processes")
    return rows


def run_all(env: Env, pool: Pool) -> dict[str, list[Row]]:
    points = sizes(env.args)
    return {
        "history": history(env, points["history"]),
        "deltas": deltas(env, points["deltas"]),
        "ids": ids(env, points["keys"]),
        "processes": processes(env, pool),
    }


# --- report --------------------------------------------------------------------------------

# fmt: off
HISTORY_COLS: list[Column] = [
    ("earlier saves", "history", ","), ("save p50 keep=N", "save_all_p50_us", ",.0f"),
    ("vs 10", "save_all_vs10", ".2f"), ("save p50 keep=10", "save_cap_p50_us", ",.0f"),
    ("vs 10", "save_cap_vs10", ".2f"), ("latest p50 keep=N", "latest_all_p50_us", ",.0f"),
    ("vs 10", "latest_all_vs10", ".2f"), ("latest p50 keep=10", "latest_cap_p50_us", ",.0f"),
    ("vs 10", "latest_cap_vs10", ".2f"), ("chat store latest p50", "chat_p50_us", ",.0f"),
    ("rt save/latest", "rt", ""),
]
DELTA_COLS: list[Column] = [
    ("deltas", "deltas", ","), ("restore/s", "rs_ops_s", ",.0f"),
    ("p50 µs", "rs_p50_us", ",.0f"), ("p99 µs", "rs_p99_us", ",.0f"), ("vs 0", "vs0_p50", ".2f"),
    ("raw p50 µs", "raw_p50_us", ",.0f"), ("p50 rs/raw", "ratio_p50", ".2f"),
    ("rt rs", "rs_round_trips", ".2f"), ("rt raw", "raw_round_trips", ".2f"),
]
IDS_COLS: list[Column] = [
    ("keys", "keys", ","), ("db keys", "dbsize", ","), ("ids() ms p50", "rs_p50_ms", ",.1f"),
    ("p99 ms", "rs_p99_ms", ",.1f"), ("keys/s", "rs_keys_s", ",.0f"),
    ("raw SCAN ms p50", "raw_p50_ms", ",.1f"), ("p50 rs/raw", "ratio_p50", ".2f"),
    ("SCANs rs", "rs_round_trips", ",.0f"), ("SCANs raw", "raw_round_trips", ",.0f"),
]
PROC_COLS: list[Column] = [
    ("processes", "procs", "d"), ("rs put/s", "rs_put_ops_s", ",.0f"),
    ("raw SET/s", "raw_set_ops_s", ",.0f"), ("put rs/raw", "put_ratio", ".2f"),
    ("rs get/s", "rs_get_ops_s", ",.0f"), ("raw GET/s", "raw_get_ops_s", ",.0f"),
    ("get rs/raw", "get_ratio", ".2f"), ("rt put", "rs_put_round_trips", ".2f"),
    ("rt get", "rs_get_round_trips", ".2f"),
]
# fmt: on


def report(curves: dict[str, list[Row]], args: argparse.Namespace) -> None:
    hist = [r for r in curves["history"] if "history" in r]
    shown = [
        {**r, "rt": "/".join(f"{r[f'{v}_round_trips']:.0f}" for v in ("save_all", "latest_all"))}
        for r in hist
    ]
    title = "2a. save / latest of a 1 KB state vs earlier saves (p50 µs; 'vs 10': over 10 saves)"
    harness.print_table(HISTORY_COLS, shown, title)
    print("keep=N: the history really holds N checkpoints; keep=10: the default cap (the")
    print("  history holds the newest 10 of N). chat store latest: RedisChatStore.get_messages")
    print("  of N messages (it can only read them all). 'vs 10': p50 over the p50 of a task with")
    print("  10 earlier saves, measured in the same ABBA blocks. With keep=10 the lists after N")
    print("  saves are those after 10 (only the seqs differ), so its 'vs 10' is this run's noise.")
    title = "2b. restore (newest checkpoint + deltas logged since) vs number of deltas"
    harness.print_table(DELTA_COLS, curves["deltas"], title)
    print("raw: LINDEX 0 + LRANGE of the log in one pipeline, the same merge patches applied.")
    ids_rows = [
        {
            **r,
            **{
                f"{s}_{q}_ms": r[f"{s}_{q}_us"] / 1000
                for s in ("rs", "raw")
                for q in ("p50", "p99")
            },
        }
        for r in curves["ids"]
    ]
    title = "2c. ids(): list every user record (SCAN COUNT 1000) vs number of records"
    harness.print_table(IDS_COLS, ids_rows, title)
    print("SCANs: round trips per listing. SCAN walks the whole keyspace (db keys), not only")
    print("  the collection's records.")
    title = "2d. throughput vs concurrent processes (each on its own key; 1 KB values)"
    harness.print_table(PROC_COLS, curves["processes"], title)
    print(
        f"ops/s: calls of all processes / wall time from the first start to the last end;"
        f" {'100' if args.quick else '2,000'} calls per process, 2 blocks per side (ABBA)."
    )


def round_trip_failures(curves: dict[str, list[Row]]) -> list[str]:
    """Curve points where a redistate call took other than one round trip."""
    bad = []
    for r in curves["history"]:
        for v in ("save_all", "save_cap", "latest_all", "latest_cap"):
            if "history" in r and abs(r[f"{v}_round_trips"] - 1) > 0.005:
                bad.append(f"{v} after {r['history']:,} saves: {r[f'{v}_round_trips']:.3f} rt")
    for r in curves["deltas"]:
        if abs(r["rs_round_trips"] - 1) > 0.005:
            bad.append(f"restore with {r['deltas']} deltas: {r['rs_round_trips']:.3f} rt")
    for r in curves["processes"]:
        for job, promised in (("rs_put", 1), ("rs_get", 1)):
            if abs(r[f"{job}_round_trips"] - promised) > 0.005:
                bad.append(f"{job} with {r['procs']} processes: {r[f'{job}_round_trips']:.3f} rt")
    return bad


# --- plots ---------------------------------------------------------------------------------


def plot(curves: dict[str, list[Row]], out: Path) -> list[Path]:
    """One PNG per curve under ``out``."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    paths = []
    hist = [r for r in curves["history"] if "history" in r]
    x = [r["history"] for r in hist]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label, style in (
        ("save_all", "redistate save, keep=N", "o-"),
        ("save_cap", "redistate save, keep=10 (default)", "o--"),
        ("latest_all", "redistate latest, keep=N", "s-"),
        ("latest_cap", "redistate latest, keep=10 (default)", "s--"),
        ("chat", "LlamaIndex RedisChatStore newest message", "^:"),
    ):
        ax.plot(x, [r[f"{key}_p50_us"] for r in hist], style, label=label)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="earlier saves (history length N)",
        ylabel="p50 latency per call (µs)",
        title="save / latest of a 1 KB state vs history",
    )
    paths.append(_save(fig, ax, out / "history.png"))

    d = curves["deltas"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot([r["deltas"] for r in d], [r["rs_p50_us"] for r in d], "o-", label="redistate restore")
    ax.plot(
        [r["deltas"] for r in d],
        [r["raw_p50_us"] for r in d],
        "s--",
        label="raw LINDEX + LRANGE pipeline, patches applied",
    )
    ax.set(
        xscale="symlog",
        yscale="log",
        xlabel="deltas logged since the snapshot",
        ylabel="p50 latency per restore (µs)",
        title="restore vs deltas since the snapshot",
    )
    ax.set_xticks([r["deltas"] for r in d], [f"{r['deltas']:,}" for r in d])
    paths.append(_save(fig, ax, out / "restore_deltas.png"))

    k = curves["ids"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(
        [r["keys"] for r in k], [r["rs_p50_us"] / 1000 for r in k], "o-", label="redistate ids()"
    )
    ax.plot(
        [r["keys"] for r in k],
        [r["raw_p50_us"] / 1000 for r in k],
        "s--",
        label="raw SCAN MATCH COUNT 1000",
    )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="records in the collection",
        ylabel="p50 ms per full listing",
        title="ids() vs number of keys",
    )
    paths.append(_save(fig, ax, out / "ids_keys.png"))

    p = curves["processes"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for job, label in JOBS.items():
        style = "o-" if job.startswith("rs") else "s--"
        ax.plot([r["procs"] for r in p], [r[f"{job}_ops_s"] for r in p], style, label=label)
    ax.set(
        xscale="log",
        xlabel="concurrent processes",
        ylabel="ops/s (all processes)",
        title="throughput vs concurrent processes (1 KB, own key each)",
    )
    ax.set_xticks([r["procs"] for r in p], [str(r["procs"]) for r in p])
    paths.append(_save(fig, ax, out / "throughput_processes.png"))
    return paths


def _save(fig: Any, ax: Any, path: Path) -> Path:
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
