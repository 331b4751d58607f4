"""Claude Agent SDK session stores on one workload: RedistateSessionStore vs the SDK's
InMemorySessionStore.

    python benchmarks/claude_store.py [--entries 200] [--n 200] [--rounds 4]
                                      [--quick] [--url ...] [--json out]

One session holds ``--entries`` transcript lines (about 300 bytes each, as the CLI
writes a turn); the stores run in one process and one event loop, in alternating
(ABBA) blocks:

- RedistateSessionStore over an AsyncStore on a redis-server 7 this script starts
  (loopback TCP, no persistence);
- InMemorySessionStore: the floor, a dict in this process.

Operations: ``append`` of a batch of 5 lines with uuids (the SDK's mirror sends a turn
at a time) to a session the store object knows, ``append`` of a batch sent again (every
uuid stored: nothing written), ``load`` of the session, ``list_session_summaries`` of a
project of 100 sessions. Ratios are redistate's p50 over the in-memory store's (medians
of per-block ratios); reads per op are the server's ``total_reads_processed`` deltas:
one per round trip.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import harness
from _measure import ms_columns, progress, store_rows
from claude_agent_sdk import InMemorySessionStore
from harness import Clients

from redistate import AsyncStore
from redistate.claude import RedistateSessionStore

REDIS, MEMORY = "redistate", "InMemorySessionStore"
KEY: Any = {"project_key": "bench", "session_id": "s0"}
Op = Callable[[Any], Awaitable[object]]
_ids = itertools.count()


def lines(n: int, session: str = "s0") -> list[Any]:
    """``n`` transcript lines as the CLI writes them, each with a uuid of its own."""
    out = []
    for _ in range(n):
        i = next(_ids)
        out.append(
            {
                "type": "assistant" if i % 2 else "user",
                "uuid": f"00000000-0000-4000-8000-{i:012d}",
                "sessionId": session,
                "timestamp": "2026-12-04T10:00:00.000Z",
                "cwd": "/srv/app",
                "message": {"role": "user", "content": "x" * 160},
            }
        )
    return out


async def fill(store: Any, entries: int) -> None:
    for start in range(0, entries, 50):
        await store.append(KEY, lines(min(50, entries - start)))
    for s in range(1, 100):
        key = {**KEY, "session_id": f"s{s}"}
        await store.append(key, lines(4, f"s{s}"))


def ops() -> dict[str, Op]:
    again = lines(5)

    async def append(s: Any) -> object:
        return await s.append(KEY, lines(5))

    async def resend(s: Any) -> object:
        return await s.append(KEY, again)

    async def load(s: Any) -> object:
        return await s.load(KEY)

    async def summaries(s: Any) -> object:
        return await s.list_session_summaries("bench")

    return {
        "append (5 lines)": append,
        "append sent again (5 lines)": resend,
        "load": load,
        "list_session_summaries (100)": summaries,
    }


def bench(clients: Clients, args: Any) -> int:
    entries = 50 if args.quick else args.entries
    loop = asyncio.new_event_loop()
    with contextlib.ExitStack() as stack:
        stack.callback(loop.close)
        store = AsyncStore.from_url(clients.url, namespace=clients.namespace)
        stack.callback(lambda: loop.run_until_complete(store.aclose()))
        stores: dict[str, Any] = {
            REDIS: RedistateSessionStore(store),
            MEMORY: InMemorySessionStore(),
        }
        for label, s in stores.items():
            loop.run_until_complete(fill(s, entries))
            progress(f"{entries} lines and 99 sessions in {label}")
        operations = ops()
        for s in stores.values():  # the resent batch is stored once, before the blocks
            loop.run_until_complete(operations["append sent again (5 lines)"](s))
        size = (max(1, args.n // args.rounds), args.warmup)
        rows = store_rows(
            loop,
            operations,
            stores,
            clients.stats,
            rounds=args.rounds,
            sizes=lambda name: size,
            ratios_to={"vs_memory": (REDIS, MEMORY)},
        )
    cols = ms_columns(list(stores), rows)
    cols += [("reads/op", f"{REDIS} round_trips", ".2f"), ("rs/memory", "vs_memory", ".2f")]
    title = f"Claude Agent SDK session stores, a session of {entries}+ lines"
    harness.print_table(cols, rows, title)
    print(
        "rs/memory: redistate's p50 over InMemorySessionStore's, the median of per-block\n"
        "  ratios; reads/op: the server's read events per op, one per round trip. The\n"
        "  in-memory store keeps the lines in this process (and stores a batch sent\n"
        "  again twice: it has no idempotency)."
    )
    harness.write_json(args.json, {"machine": harness.machine(clients.raw), "rows": rows})
    # An append to a session the store object knows: one round trip, and so is a load.
    trips = [row[f"{REDIS} round_trips"] for row in rows[:3]]
    return 1 if any(t > 1.01 for t in trips) else 0


def main() -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--entries", type=int, default=200, help="lines of the session")
    parser.set_defaults(n=200, rounds=4, warmup=20)
    args = parser.parse_args()
    return harness.run(bench, args)


if __name__ == "__main__":
    sys.exit(main())
