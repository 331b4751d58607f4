"""Worker processes for the concurrency tests (importable under the spawn start method)."""

from __future__ import annotations

import asyncio
from typing import Any

from redistate import AsyncStore, Store


def _ops(op: str, worker: int, i: int) -> tuple[str, Any]:
    if op == "merge":
        return "merge", {f"w{worker}-{i}": i}
    return "update", lambda d: {**d, "n": d.get("n", 0) + 1, f"last{worker}": i}


def run_sync(
    url: str, namespace: str, op: str, entity: str, worker: int, n: int, barrier: Any
) -> int:
    store = Store.from_url(url, namespace=namespace)
    coll = store.users if op == "merge" else store.sessions
    barrier.wait()
    for i in range(n):
        kind, arg = _ops(op, worker, i)
        if kind == "merge":
            coll.merge(entity, arg)
        else:
            coll.update(entity, arg)
    store.close()
    return n


def run_async(
    url: str,
    namespace: str,
    op: str,
    entity: str,
    worker: int,
    n: int,
    barrier: Any,
    tasks: int = 4,
) -> int:
    async def main() -> None:
        store = AsyncStore.from_url(url, namespace=namespace)
        coll = store.users if op == "merge" else store.sessions

        async def one(task: int) -> None:
            for i in range(task, n, tasks):
                kind, arg = _ops(op, worker, i)
                if kind == "merge":
                    await coll.merge(entity, arg)
                else:
                    await coll.update(entity, arg)

        await asyncio.gather(*(one(t) for t in range(tasks)))
        await store.aclose()

    barrier.wait()
    asyncio.run(main())
    return n


def checkpoint_state(n: int) -> dict[str, Any]:
    """The state a saver writes at step n: any half-written mix would not match it."""
    # Every fifth state is large enough to be compressed: kills land in that path too.
    size = 3000 if n % 5 == 0 else n % 200
    return {"n": n, "items": [n * 7 + i for i in range(n % 40)], "text": f"step {n} " * size}


def save_checkpoints(
    url: str, namespace: str, task: str, worker: int, count: int, barrier: Any
) -> list[int]:
    """Save ``count`` checkpoints of one shared task; return the seqs this worker got."""
    store = Store.from_url(url, namespace=namespace, checkpoint_keep=10_000)
    barrier.wait()
    seqs = [store.checkpoints.save(task, {"worker": worker, "i": i}).seq for i in range(count)]
    store.close()
    return seqs


def save_until_killed(url: str, namespace: str, task: str) -> None:
    """Continue a task from its restored state, saving as fast as possible until killed."""
    import sys

    store = Store.from_url(url, namespace=namespace)
    restored = store.checkpoints.restore(task)
    n = 0 if restored is None else int(restored.state["n"]) + 1
    store.checkpoints.save(task, checkpoint_state(n))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        n += 1
        store.checkpoints.save(
            task, checkpoint_state(n), phase=f"p{n % 5}", progress=(n % 100) / 100
        )
        if n % 3 == 0:
            store.checkpoints.log(task, {"note": n})


def locked_increments(url: str, namespace: str, worker: int, count: int, barrier: Any) -> int:
    """Increment a counter with a deliberately non-atomic GET then SET, inside the lease."""
    store = Store.from_url(url, namespace=namespace)
    key = f"{namespace}:plain-counter"
    barrier.wait()
    for _ in range(count):
        with store.lock("counter", ttl=10):
            value = int(store.client.get(key) or 0)
            store.client.set(key, value + 1)
    store.close()
    return count


def hold_then_write(url: str, namespace: str) -> None:
    """Acquire the lease on "t", say so, wait for a line on stdin, then try a guarded save."""
    import sys

    from redistate import LockLost

    store = Store.from_url(url, namespace=namespace)
    lease = store.lock("t", ttl=1, renew=False).acquire()
    print(f"held {lease.fence}", flush=True)
    sys.stdin.readline()
    try:
        store.checkpoints.save("t", {"owner": "first"}, lease=lease)
        print("saved", flush=True)
    except LockLost:
        print("LockLost", flush=True)


def append_tag(collection: Any, record: str, tag: str) -> Any:
    """A read-modify-write that a duplicate or a lost update would show: append ``tag``
    to the record's list."""

    def add(data: dict[str, Any]) -> dict[str, Any]:
        return {"tags": [*data.get("tags", []), tag]}

    return collection.update(record, add)


def append_writes(
    url: str,
    namespace: str,
    worker: int,
    count: int,
    records: int,
    progress: Any,
    timeout: float = 2.0,
    durability: str = "async",
    faulted: Any = None,
    enough: Any = None,
    felt: Any = None,
) -> dict[str, Any]:
    """Append tags to shared lists (read-modify-write updates, the kind a duplicate
    would show) while faults are injected; set ``progress`` a quarter of ``count`` in.

    With ``faulted`` and ``enough`` (events), go on past ``count`` until ``enough`` is
    set, and set it after 200 writes made once ``faulted`` was: so writes follow every
    fault, however fast the machine. With ``felt`` too, set it once this store has
    resent a call, and hold ``enough`` back until some writer has: a fault that only
    sometimes lands on a call in flight (a killed connection) is then always felt.

    Returns the tags acknowledged, those whose write raised StoreUnavailable (or
    NotReplicated), and the store's resend counters.
    """
    from redistate import NotReplicated, StoreUnavailable

    store = Store.from_url(url, namespace=namespace, timeout=timeout, durability=durability)  # type: ignore[arg-type]
    acknowledged: list[str] = []
    failed: list[str] = []
    after = -1  # writes since the fault was seen
    felt_here = enough_here = False
    i = -1
    while True:
        i += 1
        if i >= count and (enough is None or enough.is_set()):
            break
        if faulted is not None and after < 0 and i % 10 == 0 and faulted.is_set():
            after = 0
        if after >= 0:
            after += 1
            if felt is not None and not felt_here and store._conn.resends:
                felt_here = True
                felt.set()
            if not enough_here and after >= 200 and (felt is None or felt.is_set()):
                enough_here = True
                enough.set()
        if i >= 20 * count:
            break  # the fault was never felt: the caller's assertion says so
        tag = f"{worker}:{i}"
        try:
            append_tag(store.users, f"r{i % records}", tag)
            acknowledged.append(tag)
        except (StoreUnavailable, NotReplicated):
            failed.append(tag)
        if i == count // 4:
            progress.set()
    conn = store._conn
    store.close()
    return {
        "acknowledged": acknowledged,
        "failed": failed,
        "resends": conn.resends,
        "recovered": conn.recovered,
    }


def append_events(
    url: str, namespace: str, entity: str, worker: int, count: int, barrier: Any
) -> list[int]:
    """Append ``count`` events to one shared chain; return the positions they got."""
    store = Store.from_url(url, namespace=namespace)
    barrier.wait()
    seqs = [store.events.append(entity, "updated", {f"w{worker}-{i}": i}).seq for i in range(count)]
    store.close()
    return seqs


def memory_churn(url: str, namespace: str, worker: int, rounds: int, barrier: Any) -> int:
    """LangGraph store puts to namespaces this worker empties and fills again (racing a
    sweeper that forgets empty ones), and to one namespace every worker writes."""
    from redistate.langgraph import RedistateStore

    store = Store.from_url(url, namespace=namespace)
    memory = RedistateStore(store)
    barrier.wait()
    for i in range(rounds):
        churned = ("churn", f"w{worker}", f"n{i % 4}")
        memory.put(churned, "k", {"i": i})
        memory.delete(churned, "k")  # empty now: a sweep may be forgetting it
        memory.put(churned, "k", {"i": i})  # so this put must enter it again
        memory.put(("shared",), f"w{worker}", {"i": i})
    store.close()
    return rounds


def memory_sweeper(url: str, namespace: str, stop: Any, barrier: Any) -> int:
    """Sweeps the LangGraph store until ``stop`` is set; how many namespaces it forgot."""
    from redistate.langgraph import RedistateStore

    store = Store.from_url(url, namespace=namespace)
    memory = RedistateStore(store)
    barrier.wait()
    forgotten = 0
    while not stop.is_set():
        forgotten += memory.sweep().forgotten
    store.close()
    return forgotten


def adk_appender(
    url: str, namespace: str, worker: int, sessions: int, rounds: int, barrier: Any
) -> int:
    """Appends ``rounds`` events to each of ``sessions`` ADK sessions of one user (made
    by the test), each setting a session key, a user key and an app key of its own,
    from a session object read once (stale for every append after the first)."""
    from google.adk.events.event import Event
    from google.adk.events.event_actions import EventActions

    from redistate.adk import RedistateSessionService

    async def run() -> int:
        store = AsyncStore.from_url(url, namespace=namespace)
        service = RedistateSessionService(store, ttl=600)
        held = [
            await service.get_session(app_name="chat", user_id="u", session_id=f"s{n}")
            for n in range(sessions)
        ]
        barrier.wait()
        done = 0
        for i in range(rounds):
            for session in held:
                assert session is not None
                delta = {f"w{worker}": i, f"user:w{worker}": i, f"app:w{worker}": i}
                event = Event(author=f"w{worker}", actions=EventActions(state_delta=delta))
                await service.append_event(session, event)
                done += 1
        await store.aclose()
        return done

    return asyncio.run(run())


def claude_appender(
    url: str, namespace: str, worker: int, batches: int, size: int, barrier: Any, acks: Any
) -> int:
    """Appends ``batches`` batches of ``size`` entries to one Claude Agent SDK session's
    main transcript (each entry with a uuid of its own, and a title the summary keeps
    last-wins), and one entry per batch to a subagent's transcript; puts each batch's
    number on ``acks`` once its append returned."""
    from redistate.claude import RedistateSessionStore

    async def run() -> int:
        store = AsyncStore.from_url(url, namespace=namespace)
        sessions = RedistateSessionStore(store, ttl=600)
        key: Any = {"project_key": "p", "session_id": "s"}
        sub: Any = {**key, "subpath": f"subagents/w{worker}"}
        if barrier is not None:
            barrier.wait()
        for b in range(batches):
            entries: Any = [
                {"type": "user", "uuid": f"w{worker}-{b}-{e}", "customTitle": f"w{worker}-{b}-{e}"}
                for e in range(size)
            ]
            await sessions.append(key, entries)
            await sessions.append(sub, [{"type": "x", "uuid": f"w{worker}-{b}"}])
            if acks is not None:
                acks.put((worker, b))
        await store.aclose()
        return batches

    return asyncio.run(run())


def pai_turn(worker: int, n: int) -> list[Any]:
    """One turn of a Pydantic AI conversation (a request and its response), the same
    for the same ``worker`` and ``n``, with a fixed timestamp."""
    from datetime import datetime, timezone

    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return [
        ModelRequest(parts=[UserPromptPart(f"w{worker} asks {n}", timestamp=at)]),
        ModelResponse(parts=[TextPart(f"w{worker} answer {n}")], timestamp=at),
    ]


def pai_saver(url: str, namespace: str, worker: int, turns: int, barrier: Any, acks: Any) -> int:
    """Saves a Pydantic AI conversation ``c`` that many times, one turn each, loading
    it first (a writer that resumes); with ``barrier``, one turn only, raced against
    the others after they all loaded it: returns 1 saved, 0 refused by a conflict.
    Puts each turn's number on ``acks`` once its save returned."""
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.conversation_store import ConversationConflict

    from redistate.pydantic_ai import RedistateConversationStore

    async def run() -> int:
        store = AsyncStore.from_url(url, namespace=namespace)
        conversations = RedistateConversationStore(store, ttl=600)
        saved = 0
        conversation = await conversations.load("c") or Conversation(conversation_id="c")
        start = len(conversation.messages) // 2
        for n in range(start, start + turns):
            conversation.messages.extend(pai_turn(worker, n))
            if barrier is not None:
                barrier.wait()
            try:
                await conversations.save(conversation)
            except ConversationConflict:
                continue
            saved += 1
            if acks is not None:
                acks.put((worker, n))
        await store.aclose()
        return saved

    return asyncio.run(run())
