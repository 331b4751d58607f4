"""Worker processes for run.py's multi-process parts: contended merges, throughput.

Workers are started once and kept: each holds a sync ``Store`` and a raw redis-py client
and runs jobs the coordinator sends over its pipe. A job runs in two steps, so that
process start-up, imports and connecting are never timed: the worker prepares (connects,
seeds its key, makes one untimed call) and says ``ready``; when every worker of the job
is ready the coordinator reads the server's counters and says ``go``; each worker makes
``n`` timed calls and sends its samples. ``time.perf_counter_ns`` is the system-wide
monotonic clock on Linux, so start and end times compare across processes.

The merge jobs add one fact per call to one shared user record (``{"w<k>-<i>": 1}``),
so the facts missing from the final record are the lost updates.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, cast

import orjson
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from redistate import Store
from redistate.records.mergepatch import merge_patch

READY_TIMEOUT_S = 120.0  # spawning 16 interpreters on 2 busy cores takes a while
JOB_TIMEOUT_S = 900.0

Op = Callable[[int], object]  # one timed call, given the call's index


@dataclass
class Ctx:
    """What a worker holds across jobs."""

    store: Store
    raw: redis.Redis
    namespace: str
    index: int

    def raw_key(self, key: str) -> str:
        return f"{self.namespace}:raw:{{{key}}}"


def _value_1k() -> dict[str, Any]:
    """The same 1 KB session value as records.value_1k (not imported: its module
    imports the benchmark harness, which a worker does not need)."""
    data: dict[str, Any] = {"turn": 0, "role": "assistant", "tags": ["a", "b"], "text": ""}
    data["text"] = "x" * (1024 - len(orjson.dumps(data)))
    return data


def watch_merge(client: redis.Redis, key: str, patch: dict[str, Any]) -> None:
    """The textbook WATCH/MULTI loop (redis-py ``transaction``): WATCH, GET, merge in
    Python, MULTI SET EXEC; on a conflict (WatchError) start again at once."""

    def apply(pipe: Any) -> None:
        current = pipe.get(key)
        data = orjson.loads(current) if current else {}
        pipe.multi()
        pipe.set(key, orjson.dumps(merge_patch(data, patch)))

    client.transaction(apply, key)


def naive_merge(client: redis.Redis, key: str, patch: dict[str, Any]) -> None:
    """GET, merge in Python, SET: what loses updates under contention."""
    current = cast("bytes | None", client.get(key))
    data = orjson.loads(current) if current else {}
    client.set(key, orjson.dumps(merge_patch(data, patch)))


def _job(ctx: Ctx, job: str, key: str) -> Op:
    """Prepare ``job`` (untimed) and return its timed call."""
    w, users, sessions, raw = ctx.index, ctx.store.users, ctx.store.sessions, ctx.raw
    value, own, raw_own = _value_1k(), f"{key}-{w}", ctx.raw_key(f"{key}-{w}")
    ttl_ms = 3600 * 1000
    if job == "rs_merge":
        users.merge(f"{key}-warm", {"warm": w})
        return lambda i: users.merge(key, {f"w{w}-{i}": 1})
    if job == "rs_merge_nr":  # a caller that does not ask for the merged value
        users.merge(f"{key}-warm", {"warm": w}, returning=False)
        return lambda i: users.merge(key, {f"w{w}-{i}": 1}, returning=False)
    if job == "watch_merge":
        watch_merge(raw, ctx.raw_key(f"{key}-warm"), {"warm": w})
        return lambda i: watch_merge(raw, ctx.raw_key(key), {f"w{w}-{i}": 1})
    if job == "naive_merge":
        naive_merge(raw, ctx.raw_key(f"{key}-warm"), {"warm": w})
        return lambda i: naive_merge(raw, ctx.raw_key(key), {f"w{w}-{i}": 1})
    if job == "rs_put":
        sessions.put(own, value)
        return lambda i: sessions.put(own, value)
    if job == "raw_set":
        raw.set(raw_own, orjson.dumps(value), px=ttl_ms)
        return lambda i: raw.set(raw_own, orjson.dumps(value), px=ttl_ms)
    if job == "rs_get":
        sessions.put(own, value)
        sessions.get(own)
        return lambda i: sessions.get(own)
    if job == "raw_get":
        raw.set(raw_own, orjson.dumps(value), px=ttl_ms)
        return lambda i: orjson.loads(cast(bytes, raw.get(raw_own)))
    raise ValueError(f"unknown job {job!r}")


def worker(conn: Connection, url: str, namespace: str, index: int) -> None:
    """A worker process's main loop: jobs until None."""
    opts: dict[str, Any] = {"socket_timeout": 5.0, "socket_connect_timeout": 5.0}
    ctx = Ctx(
        Store.from_url(url, namespace=namespace),
        redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **opts),
        namespace,
        index,
    )
    conn.send("up")
    try:
        while (msg := conn.recv()) is not None:
            job, key, n = msg
            try:
                op = _job(ctx, job, key)
                conn.send("ready")
                if conn.recv() != "go":
                    break  # the coordinator gave up (None): stop
                clock, out = time.perf_counter_ns, []
                start = clock()
                for i in range(n):
                    t0 = clock()
                    op(i)
                    out.append(clock() - t0)
                conn.send(("done", start, clock(), out))
            except Exception:
                conn.send(("error", traceback.format_exc()))
    finally:
        ctx.store.close()
        ctx.raw.close()


@dataclass
class Outcome:
    """One job over ``procs`` processes."""

    procs: int
    samples: list[int] = field(default_factory=list)  # ns per call, all processes
    elapsed_ns: int = 0  # first start to last end
    reads: int = 0  # server reads during the job (all processes)

    @property
    def calls(self) -> int:
        return len(self.samples)

    @property
    def ops_s(self) -> float:
        return self.calls / (self.elapsed_ns / 1e9)

    def pct_us(self, q: float) -> float:
        s = sorted(self.samples)
        return s[min(len(s) - 1, int(q * len(s)))] / 1000

    @property
    def mean_us(self) -> float:
        return statistics.fmean(self.samples) / 1000


class Pool:
    """``size`` spawned workers on one server and namespace."""

    def __init__(self, url: str, namespace: str, size: int) -> None:
        # fork: a spawned child would import run.py again as __main__, and with it the
        # peers (seconds each on two cores); the workers need none of what the parent has.
        # Only from a single-threaded parent: a thread holding a lock would leave it held.
        fork = "fork" in mp.get_all_start_methods() and threading.active_count() == 1
        ctx = mp.get_context("fork") if fork else mp.get_context("spawn")
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        for i in range(size):
            here, there = ctx.Pipe()
            proc = ctx.Process(
                target=worker, args=(there, url, namespace, i), name=f"bench-worker-{i}"
            )
            proc.daemon = True
            proc.start()
            there.close()
            self.conns.append(here)
            self.procs.append(proc)
        for conn in self.conns:
            if self._recv(conn, READY_TIMEOUT_S) != "up":
                raise RuntimeError("a benchmark worker did not start")

    def _recv(self, conn: Connection, timeout: float) -> Any:
        if not conn.poll(timeout):
            raise RuntimeError(f"a benchmark worker did not answer in {timeout:.0f} s")
        msg = conn.recv()
        if isinstance(msg, tuple) and msg[0] == "error":
            raise RuntimeError(f"benchmark worker failed:\n{msg[1]}")
        return msg

    def run(self, job: str, key: str, n: int, procs: int, stats: redis.Redis) -> Outcome:
        """``n`` calls of ``job`` in each of ``procs`` workers, started together."""
        from harness import counters

        conns = self.conns[:procs]
        for conn in conns:
            conn.send((job, key, n))
        for conn in conns:
            if self._recv(conn, READY_TIMEOUT_S) != "ready":
                raise RuntimeError("a benchmark worker was not ready")
        reads0, _ = counters(stats)
        for conn in conns:
            conn.send("go")
        done = [self._recv(conn, JOB_TIMEOUT_S) for conn in conns]
        reads1, _ = counters(stats)
        out = Outcome(procs, reads=reads1 - reads0 - 1)  # the second INFO is a read too
        for _, _, _, samples in done:
            out.samples += samples
        out.elapsed_ns = max(d[2] for d in done) - min(d[1] for d in done)
        return out

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        for proc in self.procs:
            proc.join(10)
            if proc.is_alive():
                proc.terminate()  # only our own workers, by handle
                proc.join(5)
