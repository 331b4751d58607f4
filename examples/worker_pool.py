"""A worker pool: four processes drain twelve tasks; each task is done exactly once.

Each worker walks the task ids and takes a task with ``store.task(tid, wait=0)``: one
held by another worker raises LockTimeout and is skipped, to be tried again later with
a short wait. One worker is SIGKILLed half way through a task: its lease expires and
another worker takes the task over, without calling the step the dead one finished.
One tool fails once: its failure is recorded (StepFailed on resume) and retried.

python examples/worker_pool.py     # a local server is started (redistate[embedded])
REDISTATE_URL=redis://localhost:6379/0 python examples/worker_pool.py
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import os
import signal
import tempfile
from collections.abc import Iterator
from typing import Any

from redistate import LockLost, LockTimeout, StepFailed, Store

NAMESPACE = "pool-example"
TASKS = [f"task-{i:02d}" for i in range(1, 13)]
WORKERS = 4
LEASE_TTL = 3.0  # seconds: how long a dead worker's task stays blocked (renewed every 1 s)
TRANSIENT = {"ConnectionError", "TimeoutError"}  # failures worth calling the tool again for
FLAKY = "task-07"  # its fetch fails the first time it is called


def tool_log(path: str, line: str) -> None:
    # One write per line to a file opened O_APPEND: lines of several processes never mix.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


def fetch(log: str, tid: str) -> dict[str, Any]:
    """A tool with an effect worth doing once (think: a paid API call)."""
    with open(log) as f:
        tried_before = any(line.startswith(f"{tid} fetch") for line in f)
    if tid == FLAKY and not tried_before:
        tool_log(log, f"{tid} fetch failed {os.getpid()}")
        raise ConnectionError("upstream reset the connection")
    tool_log(log, f"{tid} fetch ok {os.getpid()}")
    return {"task": tid, "words": 100 + int(tid[-2:])}


def summarise(log: str, page: dict[str, Any]) -> str:
    tool_log(log, f"{page['task']} summarise ok {os.getpid()}")
    return f"{page['task']}: {page['words']} words"


def work(store: Store, log: str, tid: str, worker: int, *, wait: float, crash: Any) -> None:
    """Run one task unless it is finished; LockTimeout if another worker holds it."""
    with store.task(tid, ttl=LEASE_TTL, wait=wait) as run:  # LockTimeout: someone has it
        if run.state.get("done"):
            return  # finished by another worker before we got here
        if run.checkpoint is not None:
            phase = run.checkpoint.phase
            print(f"{tid}: worker {worker} resumes after phase {phase!r}", flush=True)
        try:
            page = run.step("fetch", fetch, log, tid)
        except StepFailed as exc:  # the tool raised in an earlier attempt
            if exc.type not in TRANSIENT:
                raise
            print(f"{tid}: {exc}; calling it again", flush=True)
            page = run.step("fetch", fetch, log, tid, retry_failed=True)
        run.save({"page": page}, phase="fetched")
        if crash is not None:  # dies holding the lease, its fetch recorded
            crash.set()
            os.kill(os.getpid(), signal.SIGKILL)
        summary = run.step("summarise", summarise, log, page)
        run.save({"page": page, "summary": summary, "done": True}, phase="done")


def worker_main(url: str, log: str, worker: int, crashed: Any) -> None:
    crash = crashed if worker == 0 else None  # worker 0 dies in the first task it runs
    if crash is None:
        crashed.wait()  # the others start once it is dying with task-01's lease held
    store = Store.from_url(url, namespace=NAMESPACE)
    start = worker * len(TASKS) // WORKERS  # start apart: less contention on the first ids
    pending = TASKS[start:] + TASKS[:start]
    wait = 0.0  # first pass: take only what is free
    while pending:
        left = []
        for tid in pending:
            try:
                work(store, log, tid, worker, wait=wait, crash=crash)
            except (LockTimeout, LockLost):
                left.append(tid)  # another worker holds it (now): come back later
            except ConnectionError as exc:  # recorded as the step's failure
                print(f"{tid}: worker {worker}: fetch raised {exc!r}", flush=True)
                left.append(tid)
        pending = left
        # Later passes wait for a holder to finish or for its lease to expire: no polling.
        wait = 2 * LEASE_TTL
    store.close()


@contextlib.contextmanager
def server() -> Iterator[str]:
    """REDISTATE_URL, or a local server: several processes need a real one."""
    url = os.environ.get("REDISTATE_URL")
    if url:
        yield url
        return
    from redistate.cli._embedded import embedded_url

    with embedded_url() as found:
        yield found


def main() -> None:
    with server() as url, tempfile.TemporaryDirectory() as scratch:
        store = Store.from_url(url, namespace=NAMESPACE)
        for tid in TASKS:
            store.checkpoints.delete(tid)  # a fresh run each time
        log = os.path.join(scratch, "tool-calls.log")
        open(log, "w").close()

        ctx = multiprocessing.get_context("spawn")  # a fresh interpreter per worker
        crashed = ctx.Event()
        procs = [ctx.Process(target=worker_main, args=(url, log, n, crashed))
                 for n in range(WORKERS)]  # fmt: skip
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        print("worker exit codes:", [p.exitcode for p in procs])

        with open(log) as f:
            calls = [line.split() for line in f]
        ok = collections.Counter((tid, step) for tid, step, outcome, _ in calls if outcome == "ok")
        done = [tid for tid in TASKS if (r := store.checkpoints.restore(tid)) and r.state["done"]]
        print(f"tasks done: {len(done)} of {len(TASKS)}")
        failed = sum(outcome == "failed" for _, _, outcome, _ in calls)
        print(f"tool calls: {len(calls)}, failed and retried: {failed}")
        print(f"tool calls repeated: {sum(n - 1 for n in ok.values())}")
        print(f"every step ran once: {set(ok.values()) == {1} and len(ok) == 2 * len(TASKS)}")
        summary = store.checkpoints.restore(TASKS[-1])
        print("last summary:", summary.state["summary"] if summary else None)
        for tid in TASKS:
            store.checkpoints.delete(tid)
        store.close()


if __name__ == "__main__":
    main()
