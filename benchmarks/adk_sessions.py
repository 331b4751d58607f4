"""Google ADK session services on one workload: RedistateSessionService vs ADK's
RedisSessionService, DatabaseSessionService (SQLite) and InMemorySessionService.

    python benchmarks/adk_sessions.py [--sessions 10000] [--n 200] [--rounds 4]
                                      [--quick] [--url ...] [--json out]

One user of one app holds ``--sessions`` sessions, each with state in the three scopes
and two events; the services run in one process and one event loop, in alternating
(ABBA) blocks, each op against the same data:

- RedistateSessionService over an AsyncStore on a redis-server 7 this script starts
  (loopback TCP, no persistence);
- ADK's own RedisSessionService (google.adk.integrations.redis) on the same server,
  its keys under the run's namespace: one JSON string per session, listing by SCAN;
- DatabaseSessionService on a SQLite file (sqlite+aiosqlite) in a temp dir: in-process;
- InMemorySessionService: the floor, dicts in this process.

Operations: ``list_sessions`` of the user (every session, without events),
``get_session`` (state and events), ``append_event`` with a session and a ``user:``
delta, ``create_session``. Ratios are redistate's p50 over each other service's
(medians of per-block ratios); reads per op are the server's ``total_reads_processed``
deltas: one per round trip, and for a pipeline larger than the server's 16 KiB read
buffer (a listing: one script per session) one per buffer it fills. ADK's Redis
service lists the sessions with their events; the others without.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import harness
import redis.asyncio
from _measure import ms_columns, progress, store_rows
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.integrations.redis import RedisSessionService, RedisSessionServiceConfig
from google.adk.sessions import DatabaseSessionService, InMemorySessionService
from google.adk.sessions.base_session_service import BaseSessionService
from harness import Clients

from redistate import AsyncStore
from redistate.adk import RedistateSessionService

REDIS, ADK_REDIS = "redistate", "RedisSessionService"
SQL, MEMORY = "DatabaseSessionService", "InMemorySessionService"
APP, USER = "bench", "u1"
Op = Callable[[BaseSessionService], Awaitable[object]]


def event(n: int, delta: dict[str, Any]) -> Event:
    return Event(author="user", invocation_id=f"i{n}", actions=EventActions(state_delta=delta))


async def fill(service: BaseSessionService, sessions: int) -> None:
    """``sessions`` sessions of one user, each with state in every scope, two events."""
    for i in range(sessions):
        state = {"topic": f"t{i}", "user:plan": "pro", "app:model": "m1"}
        session = await service.create_session(
            app_name=APP, user_id=USER, session_id=f"s{i}", state=state
        )
        if i < 200:  # two events in the sessions the ops read and append to
            for n in range(2):
                await service.append_event(session, event(n, {"turn": n}))


def ops(sessions: int) -> dict[str, tuple[Op, int]]:
    """Each op and how many timed calls it gets relative to --n (listing is slow)."""
    counter = iter(range(10**9))

    async def list_user(s: BaseSessionService) -> object:
        found = await s.list_sessions(app_name=APP, user_id=USER)
        assert len(found.sessions) >= sessions
        return found

    async def get(s: BaseSessionService) -> object:
        return await s.get_session(app_name=APP, user_id=USER, session_id=f"s{next(counter) % 200}")

    async def append(s: BaseSessionService) -> object:
        sid = f"s{next(counter) % 200}"
        session = await s.get_session(app_name=APP, user_id=USER, session_id=sid)
        assert session is not None
        n = next(counter)
        return await s.append_event(session, event(n, {"turn": n, "user:seen": n}))

    async def create(s: BaseSessionService) -> object:
        return await s.create_session(
            app_name=APP, user_id="new", session_id=uuid.uuid4().hex, state={"a": 1}
        )

    return {
        f"list_sessions ({sessions:,} of one user)": (list_user, 0),
        "get_session (2 events)": (get, 1),
        "get_session + append_event": (append, 1),
        "create_session": (create, 1),
    }


def bench(clients: Clients, args: Any) -> int:
    sessions = 500 if args.quick else args.sessions
    loop = asyncio.new_event_loop()
    folder = tempfile.TemporaryDirectory(prefix="redistate-bench-")
    with contextlib.ExitStack() as stack:
        stack.callback(folder.cleanup)
        stack.callback(loop.close)
        store = AsyncStore.from_url(clients.url, namespace=clients.namespace)
        stack.callback(lambda: loop.run_until_complete(store.aclose()))
        sql = DatabaseSessionService(f"sqlite+aiosqlite:///{Path(folder.name) / 'adk.db'}")
        # Under the run's namespace, so the run's cleanup deletes its keys too.
        plain = redis.asyncio.Redis.from_url(clients.url, decode_responses=True)
        stack.callback(lambda: loop.run_until_complete(plain.aclose()))
        config = RedisSessionServiceConfig(key_prefix=f"{clients.namespace}:adkredis:")
        adk_redis = RedisSessionService(config, redis_client=plain)
        services: dict[str, BaseSessionService] = {
            REDIS: RedistateSessionService(store),
            ADK_REDIS: adk_redis,
            SQL: sql,
            MEMORY: InMemorySessionService(),
        }
        fill_s: dict[str, float] = {}
        for label, service in services.items():
            started = time.perf_counter()
            loop.run_until_complete(fill(service, sessions))
            fill_s[label] = time.perf_counter() - started
            progress(f"{sessions:,} sessions in {label}")
        operations = ops(sessions)

        def sizes(name: str) -> tuple[int, int]:
            # Listing returns every session: a few calls per block, not --n.
            weight = operations[name][1]
            n = args.n if weight else max(args.rounds, args.n // 50)
            return max(1, n // args.rounds), args.warmup if weight else min(args.warmup, 2)

        rows = store_rows(
            loop,
            {name: op for name, (op, _) in operations.items()},
            services,
            clients.stats,
            rounds=args.rounds,
            sizes=sizes,
            ratios_to={
                "vs_adk_redis": (REDIS, ADK_REDIS),
                "vs_sql": (REDIS, SQL),
                "vs_memory": (REDIS, MEMORY),
            },
        )
        loop.run_until_complete(sql.close())
    cols = ms_columns(list(services), rows)
    cols += [
        ("reads/op", f"{REDIS} round_trips", ".2f"),
        ("adk reads/op", f"{ADK_REDIS} round_trips", ".2f"),
        ("rs/adk", "vs_adk_redis", ".2f"),
        ("rs/sql", "vs_sql", ".2f"),
        ("rs/memory", "vs_memory", ".2f"),
    ]
    harness.print_table(cols, rows, f"ADK session services, {sessions:,} sessions of one user")
    print(
        "rs/x: redistate's p50 over x's, the median of per-block ratios; reads/op: the\n"
        "  server's read events per op, one per round trip (a listing's pipeline of one\n"
        "  script per session: one per 16 KiB); adk: ADK's RedisSessionService on the\n"
        "  same server; the SQLite and in-memory services are in-process.\n"
        "fill (create + events): "
        + ", ".join(f"{label} {seconds:.1f} s" for label, seconds in fill_s.items())
    )
    harness.write_json(
        args.json, {"machine": harness.machine(clients.raw), "rows": rows, "fill_s": fill_s}
    )
    # A get: one round trip; a get, then an append with a user: delta: three; a create
    # without shared state: two.
    trips = [row[f"{REDIS} round_trips"] for row in rows[1:4]]
    return 1 if trips[0] > 1.01 or trips[1] > 3.01 or trips[2] > 2.01 else 0


def main() -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions of the user")
    parser.set_defaults(n=200, rounds=4, warmup=20)
    args = parser.parse_args()
    return harness.run(bench, args)


if __name__ == "__main__":
    sys.exit(main())
