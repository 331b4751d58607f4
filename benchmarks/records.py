"""Records benchmark: redistate vs a hand-written redis-py + orjson client, 1 KB values.

    python benchmarks/records.py [--n 5000] [--rounds 10] [--url redis://...] [--json out.json]

Without ``--url`` a private ``redis-server`` (from PATH) is started on a free loopback
port and stopped at the end. Both sides run on the same server in the same process, in
alternating blocks (ABBA order), so machine noise hits both alike; ratios are medians of
per-block ratios. Round trips per operation are server-side counts: ``total_reads_processed``
deltas (one read per request; a script's inner commands are not requests). ``INFO
commandstats`` deltas (minus INFO) are shown too: they also count commands run inside Lua,
so they are "server commands per op", not round trips. Exits 1 if redistate needs more
round trips than the targets (1; 2 for update; merge 1, +1 in 16 to fold patches back).
Latency ratios are only printed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import harness
import orjson
import redis
from harness import Clients, Column, Row, Side, ratios

from redistate import RetryPolicy, Store
from redistate.records.mergelog import COMPACT_AT

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
class Op:
    name: str
    rs: Callable[[], object]
    raw: Callable[[], object]
    target: float  # round trips per op redistate must not exceed


def build_ops(store: Store, plain: Store, raw: redis.Redis, prefix: str) -> list[Op]:
    """The operations; raw keys are ``<prefix>:raw:*`` (cleaned up with the namespace).
    ``plain`` is a store that never retries, so remembers no write ids: the put it
    measures shows what the write-id memory costs (RELIABILITY.md)."""
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
        Op("put, retries off", lambda: plain.sessions.put("s-put-plain", data, ttl=TTL_S),
           lambda: raw.set(rk["put"], orjson.dumps(data), px=TTL_MS), 1),
        Op("get", lambda: sessions.get("s-get"),
           lambda: orjson.loads(cast(bytes, raw.get(rk["get"]))), 1),
        Op("conditional put", rs_cas, raw_cas_op, 1),
        Op("merge", lambda: users.merge("u-merge", patch),
           lambda: raw_update(rk["merge"], 0, merge), 1 + 1 / COMPACT_AT),
        Op("update", lambda: sessions.update("s-update", bump),
           lambda: raw_update(rk["update"], TTL_MS, bump), 2),
        Op("get(touch)", lambda: sessions.get("s-get", touch=True),
           lambda: orjson.loads(cast(bytes, raw.getex(rk["get"], px=TTL_MS))), 1),
    ]
    # fmt: on


def summarize(op: Op, sides: dict[str, Side], n: int) -> Row:
    row: Row = {"operation": op.name}
    for name, side in sides.items():
        row |= side.row(f"{name}_")
        row[f"{name}_server_cmds"] = side.commands / len(side.samples)
    row |= ratios(sides["rs"], sides["raw"])
    row["target_round_trips"] = op.target
    row["n"] = n
    return row


# fmt: off
COLS: list[Column] = [
    ("operation", "operation", ""), ("rs ops/s", "rs_ops_s", ",.0f"),
    ("p50 µs", "rs_p50_us", ".0f"), ("p99 µs", "rs_p99_us", ".0f"),
    ("raw ops/s", "raw_ops_s", ",.0f"), ("raw p50", "raw_p50_us", ".0f"),
    ("raw p99", "raw_p99_us", ".0f"), ("ratio p50", "ratio_p50", ".2f"),
    ("ratio mean", "ratio_mean", ".2f"), ("rt/op rs", "rs_round_trips", ".2f"),
    ("rt/op raw", "raw_round_trips", ".2f"), ("srv cmds rs/raw", "server_cmds", ""),
]
# fmt: on


def report(rows: list[Row], info: dict[str, Any]) -> None:
    # One column shows both sides' server commands; the pair exists only for display.
    shown = [
        {**r, "server_cmds": f"{r['rs_server_cmds']:.1f}/{r['raw_server_cmds']:.1f}"} for r in rows
    ]
    harness.print_table(COLS, shown)
    print("\n" + ", ".join(f"{k}={v}" for k, v in info.items()))
    print("rt/op: requests the server read per op; srv cmds: commandstats calls incl. inside Lua")
    print("targets: get/put ratio <= 1.25 (not enforced); round trips 1 (update 2; merge 1.06)")


def memory_per_record(store: Store, raw: redis.Redis, prefix: str) -> dict[str, int]:
    """Bytes Redis holds for one 1 KB session, against the same JSON under SET PX."""
    data = value_1k()
    store.sessions.put("memory-probe", data, ttl=TTL_S)
    raw.set(f"{prefix}:raw:{{memory-probe}}", orjson.dumps(data), px=TTL_MS)
    ours = int(cast(int, raw.memory_usage(store.keys.record("session", "memory-probe"), samples=0)))
    theirs = int(cast(int, raw.memory_usage(f"{prefix}:raw:{{memory-probe}}", samples=0)))
    return {"redistate": ours, "raw": theirs, "overhead": ours - theirs}


def bench(c: Clients, args: argparse.Namespace) -> int:
    address = c.raw.get_connection_kwargs()
    plain = Store(
        redis.Redis(host=address["host"], port=address["port"], socket_timeout=5.0),
        namespace=c.namespace,
        retry=RetryPolicy(attempts=1),
    )
    ops = build_ops(c.store, plain, c.raw, c.namespace)
    block = max(1, args.n // args.rounds)
    rows = []
    for op in ops:
        fns = {"rs": op.rs, "raw": op.raw}
        sides = harness.measure(fns, c.stats, rounds=args.rounds, block=block, warmup=args.warmup)
        rows.append(summarize(op, sides, block * args.rounds))
        print(f"  measured {op.name}", file=sys.stderr)
    plain.close()
    info = harness.machine(c.raw)
    report(rows, info)
    memory = memory_per_record(c.store, c.raw, c.namespace)
    print(
        f"memory per 1 KB session (MEMORY USAGE): redistate {memory['redistate']} B, "
        f"raw SET PX {memory['raw']} B, envelope overhead {memory['overhead']} B"
    )
    harness.write_json(args.json, {"machine": info, "results": rows, "memory": memory})
    over = [r for r in rows if r["rs_round_trips"] > r["target_round_trips"] + 0.005]
    for r in over:
        print(f"FAIL {r['operation']}: {r['rs_round_trips']:.3f} round trips/op "
              f"(target {r['target_round_trips']})", file=sys.stderr)  # fmt: skip
    return 1 if over else 0


def main() -> int:
    return harness.run(bench, harness.parser(__doc__).parse_args())


if __name__ == "__main__":
    sys.exit(main())
