"""LangGraph checkpointers on one graph workload: RedisStateSaver vs PostgresSaver and SqliteSaver.

    python benchmarks/savers.py [--n 2000] [--runs 1000] [--rounds 10] [--pg CONNINFO]
                                   [--quick] [--url ...] [--json out]

The workload: a StateGraph of 6 nodes in a chain, no LLM. Each node appends ~1 KB of text
to a list channel (the last 6 are kept, so a run on a new thread grows it 1 → 6 KB) and
bumps a counter. The savers, in one process, in alternating (ABBA) blocks:

- RedisStateSaver on a redis-server 7 this script starts (loopback TCP, no persistence);
- PostgresSaver (langgraph-checkpoint-postgres) on the PostgreSQL at 127.0.0.1:5432, in a
  schema of its own (created, ``.setup()``, dropped after), connected as its
  ``from_conn_string`` does (autocommit, prepare_threshold=0, dict rows);
- SqliteSaver on a file in a temp dir (WAL, as its setup sets): in-process, no network;
- InMemorySaver: the floor, a dict in this process.

1. graph run: ``invoke(..., durability="sync")`` on a new thread each run.
2. saver primitives on a thread with history (5 runs: 40 checkpoints; ``--quick``: 2):
   ``get_tuple`` latest, ``put`` (a 6 KB list value and the counter, chained on the last
   put), ``put_writes`` (two writes, a new task each call), ``list(limit=10)``.
3. resume: ``graph.get_state`` of a finished thread.
4. async graph run: ``ainvoke``, RedisStateSaver (AsyncStore) vs AsyncPostgresSaver,
   AsyncSqliteSaver (aiosqlite) and InMemorySaver.

Ratios are saver / PostgresSaver: medians of per-block ratios. Redis round trips per
operation are the server's ``total_reads_processed`` deltas. Exits 1 if a Redis put,
put_writes or get_tuple takes more than one; 2 if PostgreSQL cannot be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata as md
import itertools
import os
import random
import sqlite3
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Annotated, Any, TypedDict

import aiosqlite
import harness
import psycopg
from _measure import async_block, progress
from harness import Block, Clients, Column, Fn, Row, Side, pct, ratios
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointMetadata, copy_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from psycopg.rows import DictRow, dict_row

from redistate import AsyncStore
from redistate.langgraph import RedisStateSaver

NODES = 6
TEXT_BYTES = 1024
REDIS, POSTGRES, SQLITE, MEMORY = "RedisStateSaver", "PostgresSaver", "SqliteSaver", "InMemorySaver"
ASYNC = {REDIS: REDIS, POSTGRES: "AsyncPostgresSaver", SQLITE: "AsyncSqliteSaver", MEMORY: MEMORY}
CHECKED = ("get_tuple latest", "put", "put_writes")  # one script each: exit 1 above one
MAX_ROUND_TRIPS = 1.005  # a rare split read of a 6 KB request is not a second request
PG_USERS = ("postgres", "root")
PG_DEFAULT = "host=127.0.0.1 port=5432 dbname=test connect_timeout=5 user={user}"

WORDS = ["agent", "plan", "tool", "call", "result", "user", "search", "page", "summary",
         "draft", "review", "step", "file", "patch", "test", "retry", "answer"]  # fmt: skip


def texts() -> list[str]:
    """One ~1 KB text per node, the same every run (the nodes cost nothing else)."""
    out = []
    for i in range(NODES):
        rng = random.Random(i)
        words = " ".join(rng.choice(WORDS) for _ in range(TEXT_BYTES // 3))
        out.append(f"node {i}: {words}"[:TEXT_BYTES])
    return out


TEXTS = texts()


def window(old: list[str], new: list[str]) -> list[str]:
    """The list channel's reducer: append, keeping the last NODES entries."""
    return (old + new)[-NODES:]


class State(TypedDict):
    log: Annotated[list[str], window]
    count: int


def step(state: State) -> dict[str, Any]:
    return {"log": [TEXTS[state["count"] % NODES]], "count": state["count"] + 1}


def build(saver: BaseCheckpointSaver[Any]) -> Any:
    """The chain START → n0 → … → n5 → END, compiled with ``saver``."""
    builder = StateGraph(State)
    names = [f"n{i}" for i in range(NODES)]
    for name in names:
        builder.add_node(name, step)
    for a, b in zip([START, *names], [*names, END], strict=True):
        builder.add_edge(a, b)
    return builder.compile(checkpointer=saver)


INPUT: State = {"log": [], "count": 0}


def thread(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def check_run(result: Any) -> None:
    """Every saver must have run the same graph to the end."""
    if result["count"] != NODES or len(result["log"]) != NODES:
        raise RuntimeError(f"unexpected final state: count={result['count']}")


# --- PostgreSQL -------------------------------------------------------------------------


class Unreachable(RuntimeError):
    """No PostgreSQL to compare with: the run fails, it is never skipped."""


@dataclass
class Postgres:
    conninfo: str  # without the schema
    schema: str
    conn: psycopg.Connection[DictRow]  # the sync saver's, search_path set to the schema
    version: str


def search_path(schema: str) -> str:
    """libpq options: the saver's tables go to (and are found in) ``schema``."""
    return f"-c search_path={schema}"


def pg_connect(conninfo: str, options: str = "") -> psycopg.Connection[DictRow]:
    # The options PostgresSaver.from_conn_string uses.
    return psycopg.Connection.connect(
        conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row, options=options
    )


@contextlib.contextmanager
def postgres(conninfo: str | None) -> Iterator[Postgres]:
    """A fresh schema on the server (dropped after, also after a failure).

    Raises:
        Unreachable: no server, or none of the users may connect.
    """
    tries = [conninfo] if conninfo else [PG_DEFAULT.format(user=u) for u in PG_USERS]
    errors = []
    admin = None
    for info in tries:
        try:
            admin = pg_connect(info)
            conninfo = info
            break
        except psycopg.OperationalError as e:
            errors.append(f"{info}: {str(e).strip()}")
    if admin is None or conninfo is None:
        raise Unreachable("; ".join(errors))
    schema = f"bench_langgraph_{os.getpid()}"  # concurrent runs never share tables
    try:
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")  # a stale run's, same pid
        admin.execute(f"CREATE SCHEMA {schema}")
        conn = pg_connect(conninfo, search_path(schema))
        pg = Postgres(conninfo, schema, conn, show(admin, "server_version"))
        try:
            yield pg
        finally:
            pg.conn.close()
    finally:
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.close()


def show(conn: psycopg.Connection[DictRow], setting: str) -> str:
    row = conn.execute(f"SHOW {setting}").fetchone()
    return "?" if row is None else str(row[setting])


def pg_settings(conn: psycopg.Connection[DictRow]) -> dict[str, str]:
    """The settings that decide what a commit costs."""
    return {f"pg_{n}": show(conn, n) for n in ("fsync", "synchronous_commit", "shared_buffers")}


# --- measurements -----------------------------------------------------------------------


def graph_runs(graph: Any, prefix: str) -> Fn:
    """A full run on a new thread per call."""
    ids = itertools.count()

    def run() -> None:
        graph.invoke(INPUT, thread(f"{prefix}{next(ids)}"), durability="sync")

    return run


def async_runs(graph: Any, prefix: str) -> Callable[[], Awaitable[None]]:
    ids = itertools.count()

    async def run() -> None:
        await graph.ainvoke(INPUT, thread(f"{prefix}{next(ids)}"), durability="sync")

    return run


def seed(graph: Any, history: int) -> None:
    """The threads the primitives read and write: ``history`` runs on one, one on others."""
    for thread_id, runs in (("history", history), ("done", 1), ("puts", 1), ("writes", 1)):
        for _ in range(runs):
            check_run(graph.invoke(INPUT, thread(thread_id), durability="sync"))


def latest(saver: BaseCheckpointSaver[Any], thread_id: str) -> Any:
    found = saver.get_tuple(thread(thread_id))
    if found is None:
        raise RuntimeError(f"{type(saver).__name__}: thread {thread_id!r} has no checkpoint")
    return found


def getter(saver: BaseCheckpointSaver[Any]) -> Fn:
    return partial(saver.get_tuple, thread("history"))


def putter(saver: BaseCheckpointSaver[Any]) -> Fn:
    """Each call puts a checkpoint after the last one: the list and the counter changed."""
    last = latest(saver, "puts")
    config: RunnableConfig = last.config
    checkpoint = last.checkpoint
    counter = itertools.count(last.metadata["step"] + 1)

    def put() -> None:
        nonlocal config, checkpoint
        at = next(counter)
        checkpoint = copy_checkpoint(checkpoint)
        checkpoint["id"] = str(uuid6(clock_seq=at))
        checkpoint["ts"] = datetime.now(timezone.utc).isoformat()
        versions = checkpoint["channel_versions"]
        new = {ch: saver.get_next_version(versions.get(ch), None) for ch in ("log", "count")}
        versions.update(new)
        checkpoint["channel_values"]["count"] = at
        metadata: CheckpointMetadata = {"source": "loop", "step": at, "parents": {}}
        config = saver.put(config, checkpoint, metadata, new)

    return put


def writer(saver: BaseCheckpointSaver[Any]) -> Fn:
    """Each call stores a new task's two writes on one checkpoint."""
    config = latest(saver, "writes").config
    writes = [("log", [TEXTS[0]]), ("count", NODES + 1)]
    return lambda: saver.put_writes(config, writes, str(uuid.uuid4()), "bench")


def lister(saver: BaseCheckpointSaver[Any]) -> Fn:
    config = thread("history")
    if len(list(saver.list(config, limit=10))) != 10:
        raise RuntimeError(f"{type(saver).__name__}: the history thread has under 10")
    return lambda: list(saver.list(config, limit=10))


def rows(operation: str, sides: dict[str, Side], names: dict[str, str] | None = None) -> list[Row]:
    """One row per saver (``names`` relabels them): latency, ratios to PostgresSaver,
    Redis round trips."""
    base = sides[POSTGRES]
    out: list[Row] = []
    for key, side in sides.items():
        s = sorted(side.samples)
        out.append(
            {
                "operation": operation,
                "saver": (names or {}).get(key, key),
                "p50_us": pct(s, 0.50),
                "p95_us": pct(s, 0.95),
                "mean_us": sum(s) / len(s) / 1000,
                "ops_s": len(s) / (side.elapsed_ns / 1e9),
                **ratios(side, base),
                "round_trips": side.reads / len(s) if key == REDIS else None,
            }
        )
    return out


def measure(fns: dict[str, Fn], c: Clients, args: argparse.Namespace, n: int) -> dict[str, Side]:
    block = max(1, n // args.rounds)
    return harness.measure(fns, c.stats, rounds=args.rounds, block=block, warmup=args.warmup)


def async_section(
    c: Clients, args: argparse.Namespace, url: str, pg: Postgres, tmp: Path
) -> list[Row]:
    loop = asyncio.new_event_loop()
    with contextlib.ExitStack() as stack:
        stack.callback(loop.close)
        astore = AsyncStore.from_url(url, namespace=c.namespace)
        stack.callback(lambda: loop.run_until_complete(astore.aclose()))
        apg = loop.run_until_complete(
            psycopg.AsyncConnection.connect(
                pg.conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row,
                options=search_path(pg.schema),
            )
        )  # fmt: skip
        stack.callback(lambda: loop.run_until_complete(apg.close()))
        asq = loop.run_until_complete(aiosqlite.connect(tmp / "async.sqlite"))
        stack.callback(lambda: loop.run_until_complete(asq.close()))

        async def make() -> dict[str, BaseCheckpointSaver[Any]]:
            # The async savers remember the running loop: made inside it.
            return {
                REDIS: RedisStateSaver(c.store, async_store=astore),
                POSTGRES: AsyncPostgresSaver(apg),
                SQLITE: AsyncSqliteSaver(asq),
                MEMORY: InMemorySaver(),
            }

        savers = loop.run_until_complete(make())
        blocks: dict[str, Block] = {}
        for key, saver in savers.items():
            graph = build(saver)
            check_run(
                loop.run_until_complete(graph.ainvoke(INPUT, thread("check"), durability="sync"))
            )
            blocks[key] = async_block(loop, async_runs(graph, "arun-"))
        sides = harness.abba(
            blocks,
            c.stats,
            rounds=args.rounds,
            block=max(1, args.runs // args.rounds),
            warmup=graph_warmup(args),
        )
        return rows("ainvoke", sides, ASYNC)


def graph_warmup(args: argparse.Namespace) -> int:
    return max(2, int(args.warmup) // 10)  # a run costs tens of primitive calls' time


def server_url(c: Clients, args: argparse.Namespace) -> str:
    return str(args.url) if args.url else c.url


# --- report -----------------------------------------------------------------------------

COLS: list[Column] = [
    ("saver", "saver", ""), ("p50 µs", "p50_us", ",.0f"), ("p95 µs", "p95_us", ",.0f"),
    ("ops/s", "ops_s", ",.0f"), ("p50 / Postgres", "ratio_p50", ".2f"),
    ("mean / Postgres", "ratio_mean", ".2f"), ("Redis rt/op", "round_trips", ".2f"),
]  # fmt: skip
OP_COLS: list[Column] = [("operation", "operation", ""), *COLS]
TITLES = {
    "graph_run": "1. graph run: invoke, 6 nodes, durability='sync', a new thread per run",
    "primitives": "2. saver primitives on a thread with history",
    "get_state": "3. resume: graph.get_state of a finished thread",
    "async_graph_run": "4. async graph run: ainvoke, durability='sync', a new thread per run",
}


def ratio(found: list[Row], operation: str, saver: str = REDIS) -> float:
    """The p50 ratio to PostgresSaver of one row."""
    row = next(r for r in found if r["operation"] == operation and r["saver"] == saver)
    return float(row["ratio_p50"])


def judgement(result: dict[str, Any]) -> str:
    run, prims, state = result["graph_run"], result["primitives"], result["get_state"]
    rt = next(r["round_trips"] for r in run if r["saver"] == REDIS)
    ops = ("get_tuple latest", "put", "put_writes", "list(limit=10)")
    parts = ", ".join(f"{op} {ratio(prims, op):.2f}x" for op in ops)
    return (
        f"judgement: a graph run on RedisStateSaver takes {ratio(run, 'invoke'):.2f}x "
        f"PostgresSaver's p50 ({rt:.0f} Redis round trips per run; SqliteSaver, in-process, "
        f"{ratio(run, 'invoke', SQLITE):.2f}x; InMemorySaver "
        f"{ratio(run, 'invoke', MEMORY):.2f}x); ainvoke "
        f"{ratio(result['async_graph_run'], 'ainvoke'):.2f}x; {parts}; get_state "
        f"{ratio(state, 'get_state'):.2f}x. PostgreSQL and SQLite commit to disk (fsync) "
        "here, the Redis server runs without persistence."
    )


def versions() -> dict[str, str]:
    names = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres",
             "langgraph-checkpoint-sqlite", "psycopg", "aiosqlite")  # fmt: skip
    return {n: md.version(n) for n in names}


def bench(c: Clients, args: argparse.Namespace, pg: Postgres) -> int:
    info: dict[str, Any] = {**harness.machine(c.raw), **versions(), "postgres": pg.version}
    info.update(pg_settings(pg.conn))
    url = server_url(c, args)
    history = 2 if args.quick else 5
    with tempfile.TemporaryDirectory(prefix="bench-langgraph-") as tmp, contextlib.closing(
        sqlite3.connect(Path(tmp) / "sync.sqlite", check_same_thread=False)
    ) as sq:  # fmt: skip
        pg_saver = PostgresSaver(pg.conn)
        pg_saver.setup()
        sq_saver = SqliteSaver(sq)
        sq_saver.setup()
        info["sqlite"] = sqlite3.sqlite_version
        info["sqlite_journal_mode"] = sq.execute("PRAGMA journal_mode").fetchone()[0]
        info["sqlite_synchronous"] = sq.execute("PRAGMA synchronous").fetchone()[0]
        savers: dict[str, BaseCheckpointSaver[Any]] = {
            REDIS: RedisStateSaver(c.store), POSTGRES: pg_saver,
            SQLITE: sq_saver, MEMORY: InMemorySaver(),
        }  # fmt: skip
        graphs = {key: build(saver) for key, saver in savers.items()}
        for graph in graphs.values():
            seed(graph, history)
        result: dict[str, Any] = {}

        progress("1. graph runs")
        sides = harness.measure(
            {key: graph_runs(graph, "run-") for key, graph in graphs.items()},
            c.stats,
            rounds=args.rounds,
            block=max(1, args.runs // args.rounds),
            warmup=graph_warmup(args),
        )
        result["graph_run"] = rows("invoke", sides)

        result["primitives"] = []
        makers: dict[str, Callable[[BaseCheckpointSaver[Any]], Fn]] = {
            "get_tuple latest": getter,
            "put": putter,
            "put_writes": writer,
            "list(limit=10)": lister,
        }
        for operation, make in makers.items():
            progress(f"2. {operation}")
            sides = measure({key: make(s) for key, s in savers.items()}, c, args, args.n)
            result["primitives"] += rows(operation, sides)

        progress("3. get_state")
        fns: dict[str, Fn] = {
            key: partial(graph.get_state, thread("done")) for key, graph in graphs.items()
        }
        for graph in graphs.values():
            check_run(graph.get_state(thread("done")).values)
        result["get_state"] = rows("get_state", measure(fns, c, args, args.n))

        progress("4. ainvoke")
        result["async_graph_run"] = async_section(c, args, url, pg, Path(tmp))

    for part, title in TITLES.items():
        cols = OP_COLS if part == "primitives" else COLS
        harness.print_table(cols, result[part], title)
    print("\n" + judgement(result))
    print("\n" + ", ".join(f"{k}={v}" for k, v in info.items()))
    failures = [
        f"{r['operation']}: {r['round_trips']:.3f} round trips"
        for r in result["primitives"]
        if r["saver"] == REDIS and r["operation"] in CHECKED
        and r["round_trips"] > MAX_ROUND_TRIPS
    ]  # fmt: skip
    workload = {"nodes": NODES, "text_bytes": TEXT_BYTES, "history_runs": history,
                "runs": args.runs, "n": args.n, "rounds": args.rounds}  # fmt: skip
    harness.write_json(
        args.json,
        {**result, "workload": workload, "machine": info, "round_trip_failures": failures},
    )
    for failure in failures:
        print(f"FAIL RedisStateSaver {failure}", file=sys.stderr)
    return 1 if failures else 0


def main() -> int:
    p = harness.parser(__doc__)
    p.add_argument("--runs", type=int, default=1000, help="timed graph runs per saver")
    p.add_argument("--pg", help="libpq conninfo of the PostgreSQL to use (default: local)")
    p.set_defaults(n=2000)
    args = harness.quick(p.parse_args())
    if args.quick:
        args.runs = 20
    try:
        with postgres(args.pg) as pg:
            return harness.run(partial(bench, pg=pg), args)
    except Unreachable as e:
        print(
            f"FAIL: PostgreSQL cannot be reached ({e}). This benchmark compares against "
            "PostgresSaver and does not skip it: start PostgreSQL on 127.0.0.1:5432 (trust "
            "auth, database test) or pass --pg CONNINFO.",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
