"""LangGraph stores on one workload: RedistateStore vs InMemoryStore and SqliteStore.

    python benchmarks/langgraph_store.py [--n 2000] [--rounds 10] [--users 200]
                                          [--quick] [--url ...] [--json out]

The workload is shared user profiles: ``--users`` namespaces ``("users", "u<i>")``, each
with a ~1 KB ``profile`` and a small ``prefs`` item. The stores run in one process, in
alternating (ABBA) blocks, each op against the same data:

- RedistateStore on a redis-server 7 this script starts (loopback TCP, no persistence);
- SqliteStore (langgraph-checkpoint-sqlite) on a file in a temp dir: in-process;
- InMemoryStore: the floor, a dict in this process.

Operations: ``put`` of a profile (a random user), ``get`` of one, ``search`` of one
user's namespace (2 items), ``search`` over every user with a filter (``--users``
namespaces: the registry, then every namespace), ``list_namespaces``. Ratios are
RedistateStore / SqliteStore and / InMemoryStore (medians of per-block ratios); Redis
round trips per op are the server's ``total_reads_processed`` deltas.
"""

from __future__ import annotations

import random
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness
from _measure import progress
from harness import Clients, Column, Row, ratios
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from redistate.langgraph import RedistateStore

REDIS, SQLITE, MEMORY = "RedistateStore", "SqliteStore", "InMemoryStore"


def profile(user: int, n: int) -> dict[str, Any]:
    """A ~1 KB user profile, as agents keep them."""
    return {
        "name": f"user {user}",
        "plan": "pro" if user % 3 == 0 else "free",
        "facts": [f"fact {user}-{i}: prefers concise answers about topic {i}" for i in range(14)],
        "visits": n,
        "tool_calls": None,
    }


def fill(store: BaseStore, users: int) -> None:
    for u in range(users):
        store.put(("users", f"u{u}"), "profile", profile(u, 0))
        store.put(("users", f"u{u}"), "prefs", {"theme": "dark", "lang": "en"})


def bind(op: Callable[[BaseStore], object], store: BaseStore) -> harness.Fn:
    """``op`` on ``store``, as a call of no arguments."""
    return lambda: op(store)


def bench(clients: Clients, args: Any) -> int:
    users = 20 if args.quick else args.users
    ours = RedistateStore(clients.store)
    folder = tempfile.TemporaryDirectory(prefix="redistate-bench-")
    conn = sqlite3.connect(
        str(Path(folder.name) / "store.db"), check_same_thread=False, isolation_level=None
    )
    sqlite = SqliteStore(conn)
    sqlite.setup()
    stores: dict[str, BaseStore] = {REDIS: ours, SQLITE: sqlite, MEMORY: InMemoryStore()}
    for store in stores.values():
        fill(store, users)
    progress(f"{users} users in each store")
    rng = random.Random(7)
    ops: dict[str, Callable[[BaseStore], object]] = {
        "put profile": lambda s: s.put(
            ("users", f"u{rng.randrange(users)}"), "profile", profile(1, rng.randrange(9))
        ),
        "get profile": lambda s: s.get(("users", f"u{rng.randrange(users)}"), "profile"),
        "search one user (2 items)": lambda s: s.search(("users", f"u{rng.randrange(users)}")),
        f"search {users} users, filter": lambda s: s.search(
            ("users",), filter={"plan": "pro"}, limit=10
        ),
        "list_namespaces": lambda s: s.list_namespaces(prefix=("users",), limit=1000),
    }
    rows: list[Row] = []
    for name, op in ops.items():
        n = max(20, args.n // (20 if name.startswith("search") and "users," in name else 1))
        fns = {label: bind(op, s) for label, s in stores.items()}
        sides = harness.measure(
            fns, clients.stats, rounds=args.rounds, block=n // args.rounds or 1, warmup=args.warmup
        )
        row: Row = {"operation": name}
        for label, side in sides.items():
            row |= side.row(label + " ")
        row["vs_sqlite"] = ratios(sides[REDIS], sides[SQLITE])["ratio_p50"]
        row["vs_memory"] = ratios(sides[REDIS], sides[MEMORY])["ratio_p50"]
        rows.append(row)
        progress(f"measured {name}")
    cols: list[Column] = [("operation", "operation", "")]
    for label in stores:
        cols.append((f"{label} p50 µs", f"{label} p50_us", ",.0f"))
    cols += [
        ("rt/op", f"{REDIS} round_trips", ".2f"),
        ("rs/sqlite", "vs_sqlite", ".2f"),
        ("rs/memory", "vs_memory", ".2f"),
    ]
    harness.print_table(cols, rows, f"LangGraph stores, {users} users (p50 per op, ABBA blocks)")
    print(
        "rs/x: RedistateStore's p50 over x's, the median of per-block ratios; rt/op: round\n"
        "  trips per op read from the server (SqliteStore and InMemoryStore are in-process)."
    )
    harness.write_json(args.json, {"machine": harness.machine(clients.raw), "rows": rows})
    conn.close()
    folder.cleanup()
    worst = max(row[f"{REDIS} round_trips"] for row in rows[:2])
    return 1 if worst > 1.01 else 0  # a put and a get: one round trip each


def main() -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--users", type=int, default=200, help="namespaces of the workload")
    args = parser.parse_args()
    return harness.run(bench, args)


if __name__ == "__main__":
    sys.exit(main())
