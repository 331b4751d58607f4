"""Records benchmark: redistate vs a hand-written redis-py + orjson client, 1 KB values.

    python benchmarks/records.py [--n 5000] [--rounds 10] [--url redis://...] [--json out.json]

Without ``--url`` a private ``redis-server`` (from PATH) is started on a free loopback
port and stopped at the end. Both sides run on the same server in the same process, in
alternating blocks (ABBA order), so machine noise hits both alike; ratios are medians of
per-block ratios. Round trips per operation are server-side counts: ``total_reads_processed``
deltas (one read per request; a script's inner commands are not requests). ``INFO
commandstats`` deltas (minus INFO) are shown too: they also count commands run inside Lua,
so they are "server commands per op", not round trips. Exits 1 if redistate needs more
round trips than the targets (1; 2 for merge/update). Latency ratios are only printed.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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

TTL_S = 3600
TTL_MS = TTL_S * 1000
# Versioned CAS, the minimal "conditional write through Lua": value is b"<version>\n<json>".
CAS_LUA = """
local cur = redis.call('GET', KEYS[1])
local ver = 0
if cur then ver = tonumber(string.match(cur, '^(%d+)\\n')) end
if ver ~= tonumber(ARGV[1]) then return {0, ver} end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  redis.call('SET', KEYS[1], (ver + 1) .. '\\n' .. ARGV[3], 'PX', ttl)
else
  redis.call('SET', KEYS[1], (ver + 1) .. '\\n' .. ARGV[3])
end
return {1, ver + 1}
"""


def value_1k() -> dict[str, Any]:
    """A session-like dict whose orjson encoding is exactly 1024 bytes."""
    data: dict[str, Any] = {"turn": 0, "role": "assistant", "tags": ["a", "b"], "text": ""}
    data["text"] = "x" * (1024 - len(orjson.dumps(data)))
    assert len(orjson.dumps(data)) == 1024
    return data


@dataclass
class Side:
    """Samples of one side (redistate or raw) of one operation."""

    samples: list[int] = field(default_factory=list)  # ns per call, all blocks
    block_p50: list[float] = field(default_factory=list)
    block_mean: list[float] = field(default_factory=list)
    elapsed_ns: int = 0
    reads: int = 0  # server read events (requests) while this side ran
    commands: int = 0  # commandstats calls (incl. inside Lua, excl. INFO)


@dataclass
class Op:
    name: str
    rs: Callable[[], object]
    raw: Callable[[], object]
    target: int  # round trips per op redistate must not exceed
    sides: dict[str, Side] = field(default_factory=lambda: {"rs": Side(), "raw": Side()})


def counters(stats: redis.Redis) -> tuple[int, int]:
    """(total_reads_processed, commandstats calls excluding INFO) right now."""
    info = stats.execute_command("INFO", "stats", "commandstats")  # type: ignore[no-untyped-call]
    calls = sum(
        v["calls"] for k, v in info.items() if k.startswith("cmdstat_") and k != "cmdstat_info"
    )
    return int(info["total_reads_processed"]), int(calls)


def run_block(fn: Callable[[], object], n: int, side: Side, stats: redis.Redis) -> None:
    gc.collect()
    reads0, cmds0 = counters(stats)
    out: list[int] = []
    clock = time.perf_counter_ns
    start = clock()
    for _ in range(n):
        t0 = clock()
        fn()
        out.append(clock() - t0)
    side.elapsed_ns += clock() - start
    reads1, cmds1 = counters(stats)
    side.reads += reads1 - reads0 - 1  # the second INFO is one read too
    side.commands += cmds1 - cmds0
    side.samples += out
    side.block_p50.append(statistics.median(out))
    side.block_mean.append(statistics.fmean(out))


def build_ops(store: Store, raw: redis.Redis, prefix: str) -> list[Op]:
    """The six operations; raw keys are ``<prefix>:raw:*`` (cleaned up with the namespace)."""
    data = value_1k()
    rk = {n: f"{prefix}:raw:{n}" for n in ("put", "get", "cas", "merge", "update")}
    cas = raw.register_script(CAS_LUA)
    sessions, users = store.sessions, store.users

    def raw_cas(key: str, version: int, ttl_ms: int, value: Any) -> int:
        ok, new = cas(keys=[key], args=[version, ttl_ms, orjson.dumps(value)])
        if not ok:
            raise RuntimeError(f"raw CAS conflict on {key}")
        return int(new)

    def raw_read(key: str) -> tuple[int, Any]:
        blob = cast("bytes | None", raw.get(key))
        if blob is None:
            return 0, {}
        head, _, payload = blob.partition(b"\n")
        return int(head), orjson.loads(payload)

    def raw_update(key: str, ttl_ms: int, fn: Callable[[Any], Any]) -> int:
        version, current = raw_read(key)
        return raw_cas(key, version, ttl_ms, fn(current))

    # Seed every key so no operation measures a create.
    sessions.put("s-get", data, ttl=TTL_S)
    raw.set(rk["get"], orjson.dumps(data), px=TTL_MS)
    versions = {"rs": sessions.put("s-cas", data, ttl=TTL_S).version, "raw": 0}
    versions["raw"] = raw_cas(rk["cas"], 0, TTL_MS, data)
    users.put("u-merge", data)
    raw_cas(rk["merge"], 0, 0, data)
    sessions.put("s-update", data, ttl=TTL_S)
    raw_cas(rk["update"], 0, TTL_MS, data)

    def rs_cas() -> None:
        versions["rs"] = sessions.put("s-cas", data, ttl=TTL_S, if_version=versions["rs"]).version

    def raw_cas_op() -> None:
        versions["raw"] = raw_cas(rk["cas"], versions["raw"], TTL_MS, data)

    patch = {"prefs": {"lang": "zh"}}

    def merge(d: Any) -> Any:  # what a hand-written client does for this flat patch
        return {**d, "prefs": {**d.get("prefs", {}), **patch["prefs"]}}

    def bump(d: Any) -> Any:
        return {**d, "turn": d["turn"] + 1}

    # fmt: off
    return [
        Op("put", lambda: sessions.put("s-put", data, ttl=TTL_S),
           lambda: raw.set(rk["put"], orjson.dumps(data), px=TTL_MS), 1),
        Op("get", lambda: sessions.get("s-get"),
           lambda: orjson.loads(cast(bytes, raw.get(rk["get"]))), 1),
        Op("conditional put", rs_cas, raw_cas_op, 1),
        Op("merge", lambda: users.merge("u-merge", patch),
           lambda: raw_update(rk["merge"], 0, merge), 2),
        Op("update", lambda: sessions.update("s-update", bump),
           lambda: raw_update(rk["update"], TTL_MS, bump), 2),
        Op("get(touch)", lambda: sessions.get("s-get", touch=True),
           lambda: orjson.loads(cast(bytes, raw.getex(rk["get"], px=TTL_MS))), 1),
    ]
    # fmt: on


def pct(sorted_ns: list[int], q: float) -> float:
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))] / 1000


def median_ratio(a: list[float], b: list[float]) -> float:
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def summarize(op: Op, n: int) -> dict[str, Any]:
    row: dict[str, Any] = {"operation": op.name}
    for name, side in op.sides.items():
        s = sorted(side.samples)
        row[f"{name}_ops_s"] = len(s) / (side.elapsed_ns / 1e9)
        row[f"{name}_p50_us"], row[f"{name}_p99_us"] = pct(s, 0.50), pct(s, 0.99)
        row[f"{name}_mean_us"] = statistics.fmean(s) / 1000
        row[f"{name}_round_trips"] = side.reads / len(s)
        row[f"{name}_server_cmds"] = side.commands / len(s)
    rs, raw = op.sides["rs"], op.sides["raw"]
    row["ratio_p50"] = median_ratio(rs.block_p50, raw.block_p50)
    row["ratio_mean"] = median_ratio(rs.block_mean, raw.block_mean)
    row["target_round_trips"] = op.target
    row["n"] = n
    return row


def machine(raw: redis.Redis) -> dict[str, Any]:
    server = raw.info("server")
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


def print_table(rows: list[dict[str, Any]], info: dict[str, Any]) -> None:
    heads = ["operation", "rs ops/s", "p50 µs", "p99 µs", "raw ops/s", "raw p50", "raw p99",
             "ratio p50", "ratio mean", "rt/op rs", "rt/op raw", "srv cmds rs/raw"]  # fmt: skip
    table = [heads]
    for r in rows:
        table.append([
            r["operation"], f"{r['rs_ops_s']:,.0f}", f"{r['rs_p50_us']:.0f}",
            f"{r['rs_p99_us']:.0f}", f"{r['raw_ops_s']:,.0f}", f"{r['raw_p50_us']:.0f}",
            f"{r['raw_p99_us']:.0f}", f"{r['ratio_p50']:.2f}", f"{r['ratio_mean']:.2f}",
            f"{r['rs_round_trips']:.2f}", f"{r['raw_round_trips']:.2f}",
            f"{r['rs_server_cmds']:.1f}/{r['raw_server_cmds']:.1f}",
        ])  # fmt: skip
    widths = [max(len(row[i]) for row in table) for i in range(len(heads))]
    for i, row in enumerate(table):
        cells = [
            c.ljust(w) if j == 0 else c.rjust(w)
            for j, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print(" | ".join(cells))
        if i == 0:
            print("-+-".join("-" * w for w in widths))
    print("\n" + ", ".join(f"{k}={v}" for k, v in info.items()))
    print("rt/op: requests the server read per op; srv cmds: commandstats calls incl. inside Lua")
    print("targets: get/put ratio <= 1.25 (not enforced); round trips 1 (merge/update 2)")


def memory_per_record(store: Store, raw: redis.Redis, prefix: str) -> dict[str, int]:
    """Bytes Redis holds for one 1 KB session, against the same JSON under SET PX."""
    data = value_1k()
    store.sessions.put("memory-probe", data, ttl=TTL_S)
    raw.set(f"{prefix}:raw:{{memory-probe}}", orjson.dumps(data), px=TTL_MS)
    ours = int(cast(int, raw.memory_usage(store.keys.record("session", "memory-probe"), samples=0)))
    theirs = int(cast(int, raw.memory_usage(f"{prefix}:raw:{{memory-probe}}", samples=0)))
    return {"redistate": ours, "raw": theirs, "overhead": ours - theirs}


def bench(url: str, args: argparse.Namespace) -> int:
    namespace = f"bench{os.getpid()}"
    store = Store.from_url(url, namespace=namespace)
    opts: dict[str, Any] = {"socket_timeout": 5.0, "socket_connect_timeout": 5.0}
    raw = redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **opts)
    stats = redis.Redis.from_url(url, **opts)
    try:
        ops = build_ops(store, raw, namespace)
        block = max(1, args.n // args.rounds)
        rows = []
        for op in ops:
            for fn in (op.rs, op.raw):  # warm-up: connections, script cache, branch caches
                for _ in range(args.warmup):
                    fn()
            gc.disable()
            try:
                for i in range(args.rounds):
                    order = ("rs", "raw") if i % 2 == 0 else ("raw", "rs")
                    for name in order:
                        fn = op.rs if name == "rs" else op.raw
                        run_block(fn, block, op.sides[name], stats)
            finally:
                gc.enable()
            rows.append(summarize(op, block * args.rounds))
            print(f"  measured {op.name}", file=sys.stderr)
        info = machine(raw)
        print_table(rows, info)
        memory = memory_per_record(store, raw, namespace)
        print(
            f"memory per 1 KB session (MEMORY USAGE): redistate {memory['redistate']} B, "
            f"raw SET PX {memory['raw']} B, envelope overhead {memory['overhead']} B"
        )
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"machine": info, "results": rows, "memory": memory}, f, indent=2)
        over = [r for r in rows if r["rs_round_trips"] > r["target_round_trips"] + 0.005]
        for r in over:
            print(f"FAIL {r['operation']}: {r['rs_round_trips']:.3f} round trips/op "
                  f"(target {r['target_round_trips']})", file=sys.stderr)  # fmt: skip
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
    parser.add_argument("--url", help="use this server instead of starting one (keep it quiet)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args()
    if args.url:
        return bench(args.url, args)
    with running(redis_binary()) as server:
        url = server.url
        return bench(url, args)


if __name__ == "__main__":
    sys.exit(main())
