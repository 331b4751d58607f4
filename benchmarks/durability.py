"""Durability benchmark: what ``durability="replicated"`` (WAIT 1 behind each write) costs.

    python benchmarks/durability.py [--n 3000] [--rounds 10] [--warmup 300]

Starts a private primary and a replica of it (``redis-server --replicaof``) on free
loopback ports, and measures, in alternating ABBA blocks on the same primary: put, merge
and checkpoint save of a 1 KB state with the default durability (the primary's
acknowledgement) and with ``durability="replicated"`` (the same script and ``WAIT 1``
pipelined on one connection). Ratios are replicated / default, medians of per-block
ratios. "rt/op" is the primary's ``total_reads_processed`` delta per op: the client's
requests plus, for a replicated write, the replica's REPLCONF ACK that answers WAIT. A
replicated write is one request from the client (script and WAIT pipelined), so its
count may exceed the default's by one, the replica's ACK, and no more: exits 1 if so.
"""

from __future__ import annotations

import sys
from typing import Any

import harness
import redis
from harness import Column, Row, ratios

from redistate import Store
from tests.servers import redis_binary, start_server

STATE = {"turn": 1, "text": "x" * 980}

# fmt: off
COLS: list[Column] = [
    ("operation", "operation", ""), ("ops/s", "a_ops_s", ",.0f"), ("p50 µs", "a_p50_us", ".0f"),
    ("p99 µs", "a_p99_us", ".0f"), ("replicated ops/s", "r_ops_s", ",.0f"),
    ("repl p50", "r_p50_us", ".0f"), ("repl p99", "r_p99_us", ".0f"),
    ("ratio p50", "ratio_p50", ".2f"), ("ratio mean", "ratio_mean", ".2f"),
    ("rt/op", "a_round_trips", ".2f"), ("rt/op repl (+ACK)", "r_round_trips", ".2f"),
]
# fmt: on


def main() -> int:
    args = harness.quick(harness.parser(__doc__).parse_args())
    primary = start_server(redis_binary(), "--repl-diskless-sync-delay", "0")
    replica = start_server(
        redis_binary(),
        "--replicaof",
        "127.0.0.1",
        str(primary.port),
        "--repl-diskless-sync-delay",
        "0",
    )
    stats = redis.Redis(host="127.0.0.1", port=primary.port, socket_timeout=5)
    try:
        check: Any = replica.client()
        while check.info("replication").get("master_link_status") != "up":
            check.ping()  # the replica syncs in milliseconds; wait for the link, bounded below
        check.close()
        ns = "benchdurability"
        default = Store.from_url(primary.url, namespace=ns)
        replicated = Store.from_url(primary.url, namespace=ns, durability="replicated")
        ops = {
            "put": (
                lambda: default.sessions.put("s-a", STATE),
                lambda: replicated.sessions.put("s-r", STATE),
            ),
            "merge": (
                lambda: default.users.merge("u-a", {"turn": 2}),
                lambda: replicated.users.merge("u-r", {"turn": 2}),
            ),
            "checkpoint save": (
                lambda: default.checkpoints.save("t-a", STATE),
                lambda: replicated.checkpoints.save("t-r", STATE),
            ),
        }
        block = max(1, args.n // args.rounds)
        rows: list[Row] = []
        for name, (fast, safe) in ops.items():
            fns = {"a": fast, "r": safe}
            sides = harness.measure(fns, stats, rounds=args.rounds, block=block, warmup=args.warmup)
            row: Row = {"operation": name}
            row |= sides["a"].row("a_") | sides["r"].row("r_") | ratios(sides["r"], sides["a"])
            rows.append(row)
            print(f"  measured {name}", file=sys.stderr)
        harness.print_table(COLS, rows)
        info = harness.machine(stats)
        print("\n" + ", ".join(f"{k}={v}" for k, v in info.items()))
        print("ratio: replicated / default (WAIT 1 on a local replica, same machine)")
        default.close()
        replicated.close()
        harness.write_json(args.json, {"machine": info, "results": rows})
        over = [row for row in rows if row["r_round_trips"] > row["a_round_trips"] + 1.005]
        for row in over:
            reads = row["r_round_trips"]
            print(f"FAIL {row['operation']}: {reads:.3f} reads/op", file=sys.stderr)
        return 1 if over else 0
    finally:
        stats.close()
        replica.stop()
        primary.stop()


if __name__ == "__main__":
    sys.exit(main())
