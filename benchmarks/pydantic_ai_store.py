"""Pydantic AI conversation stores on one workload: RedistateConversationStore vs
pydantic-ai's InMemoryConversationStore.

    python benchmarks/pydantic_ai_store.py [--turns 100] [--n 200] [--rounds 4]
                                           [--quick] [--url ...] [--json out]

One conversation holds ``--turns`` turns (a request with a user prompt of 160 chars and
a response with a text of about 430, as a model run adds them), and 99 more of 2 turns
each share its scope; the stores run in one process and one event loop, in alternating
(ABBA) blocks:

- RedistateConversationStore over an AsyncStore on a redis-server 7 this script starts
  (loopback TCP, no persistence), with a TTL, as a deployment sets one;
- InMemoryConversationStore: the floor, dicts in this process.

Operations: ``save`` of one more turn to a conversation the caller loaded (each store
keeps it and extends it, so its revision stays the stored one; it is another of the
scope's conversations, and the big one keeps ``--turns`` turns), ``load`` of the big
conversation, messages and all, ``list_conversations`` of the scope's 100. Ratios are
redistate's p50 over the in-memory store's (medians of per-block ratios); reads per op
are the server's ``total_reads_processed`` deltas: one per round trip.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import harness
from _measure import ms_columns, progress, store_rows
from harness import Clients
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationStore, InMemoryConversationStore
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from redistate import AsyncStore
from redistate.pydantic_ai import RedistateConversationStore

REDIS, MEMORY = "redistate", "InMemoryConversationStore"
SCOPE, BIG, WRITTEN = "bench", "big", "c01"
AT = datetime(2026, 12, 4, 10, 0, tzinfo=timezone.utc)
PROMPT = (
    "Summarise the open incidents on the payments cluster, say which one should page "
    "on-call first and why, and draft a short status note for the customers affected. "
)
ANSWER = (
    "Three incidents are open. The card-authorisation latency alert should page first: "
    "p99 has been over two seconds for twenty minutes and checkout retries are climbing. "
    "The settlement batch delay can wait for business hours, and the webhook backlog is "
    "draining on its own. Status note: some card payments are slower than usual; no "
    "payment was lost, and we expect normal service within the hour. We will post again "
    "by 11:00 UTC. "
)
Op = Callable[["Side"], Awaitable[object]]


def turn(n: int) -> list[ModelMessage]:
    """Turn ``n``: a request with a user prompt of 160 chars and a model's text response."""
    return [
        ModelRequest(parts=[UserPromptPart(f"[{n}] {PROMPT}"[:160], timestamp=AT)], timestamp=AT),
        ModelResponse(
            parts=[TextPart(f"[{n}] {ANSWER}")],
            usage=RequestUsage(input_tokens=120 + 40 * n, output_tokens=110),
            model_name="bench-model",
            provider_name="bench",
            finish_reason="stop",
            timestamp=AT,
        ),
    ]


@dataclass
class Side:
    """A store, the conversation its saves extend (as the caller loaded it), and the
    turns they add, built before the timed calls."""

    store: ConversationStore
    writing: Conversation
    turns: deque[list[ModelMessage]]


async def fill(store: ConversationStore, turns: int) -> None:
    big = Conversation(conversation_id=BIG)
    for n in range(turns):  # a save per turn, as the agent ran them
        big.messages.extend(turn(n))
        await store.save(big, scope=SCOPE)
    for c in range(1, 100):
        small = Conversation(conversation_id=f"c{c:02d}")
        for n in range(2):
            small.messages.extend(turn(n))
            await store.save(small, scope=SCOPE)


def ops() -> dict[str, Op]:
    async def save(s: Side) -> object:
        s.writing.messages.extend(s.turns.popleft())
        return await s.store.save(s.writing, scope=SCOPE)

    async def load(s: Side) -> object:
        return await s.store.load(BIG)

    async def listing(s: Side) -> object:
        return await s.store.list_conversations(scope=SCOPE, limit=100)

    return {
        "save (1 turn)": save,
        "load": load,
        "list_conversations (100)": listing,
    }


def bench(clients: Clients, args: Any) -> int:
    turns = 20 if args.quick else args.turns
    block = max(1, args.n // args.rounds)
    loop = asyncio.new_event_loop()
    with contextlib.ExitStack() as stack:
        stack.callback(loop.close)
        store = AsyncStore.from_url(clients.url, namespace=clients.namespace)
        stack.callback(lambda: loop.run_until_complete(store.aclose()))
        stores: dict[str, ConversationStore] = {
            REDIS: RedistateConversationStore(store, ttl=30 * 86400),
            MEMORY: InMemoryConversationStore(),
        }
        sides: dict[str, Side] = {}
        for label, s in stores.items():
            loop.run_until_complete(fill(s, turns))
            loaded = loop.run_until_complete(s.load(WRITTEN, scope=SCOPE))
            assert loaded is not None, label
            start = len(loaded.messages) // 2
            pending = deque(turn(n) for n in range(start, start + args.warmup + args.n))
            sides[label] = Side(s, loaded, pending)
            progress(f"{turns} turns and 99 conversations in {label}")
        rows = store_rows(
            loop,
            ops(),
            sides,
            clients.stats,
            rounds=args.rounds,
            sizes=lambda name: (block, args.warmup),
            ratios_to={"vs_memory": (REDIS, MEMORY)},
        )
        for label, side in sides.items():  # every save stuck: the saved turns read back
            again = loop.run_until_complete(side.store.load(WRITTEN))
            assert again is not None and again.messages == side.writing.messages, label
    cols = ms_columns(list(sides), rows)
    cols += [("reads/op", f"{REDIS} round_trips", ".2f"), ("rs/memory", "vs_memory", ".2f")]
    title = f"Pydantic AI conversation stores, a conversation of {turns} turns"
    harness.print_table(cols, rows, title)
    print(
        "rs/memory: redistate's p50 over InMemoryConversationStore's, the median of\n"
        "  per-block ratios; reads/op: the server's read events per op, one per round\n"
        "  trip. The in-memory store keeps deep copies of the records and messages in\n"
        "  this process (no sharing between processes, no TTL)."
    )
    harness.write_json(args.json, {"machine": harness.machine(clients.raw), "rows": rows})
    # A save reads the record (pydantic-ai's revision check), then writes: two round
    # trips; a load reads the record, then the whole history in one script: two.
    trips = [row[f"{REDIS} round_trips"] for row in rows[:2]]
    return 1 if any(t > 2.01 for t in trips) else 0


def main() -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--turns", type=int, default=100, help="turns of the big conversation")
    parser.set_defaults(n=200, rounds=4, warmup=20)
    args = parser.parse_args()
    return harness.run(bench, args)


if __name__ == "__main__":
    sys.exit(main())
