"""One agent worker of ``redistate demo``: ``python -m redistate.cli.demo_worker CONFIG``.

It takes unfinished tasks with ``store.task()`` (lease + restore), runs their remaining
steps (a simulated tool call each, with a little random latency, as a durable
``run.step``: a call whose result was recorded is never made again), checkpoints after
every step, and merges each finished step into a shared profile that every worker
writes. It reports what it does as JSON lines on stdout, one per event, flushed at once
so that a worker killed at any instant has told what it started.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from typing import Any

from .. import LockLost, LockTimeout, Store

__all__ = ["BOARD", "DONE", "main", "task_ids"]

DONE = "done"  # phase of a task's last checkpoint
BOARD = "demo-board"  # the user profile every worker merges its finished steps into


def task_ids(tasks: int) -> list[str]:
    return [f"task-{n}" for n in range(1, tasks + 1)]


def _say(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"e": event, **fields}) + "\n")
    sys.stdout.flush()


class Worker:
    def __init__(self, config: dict[str, Any]) -> None:
        self.id: int = config["worker"]
        self.steps: int = config["steps"]
        self.ttl: float = config["lease_ttl"]
        self.tasks = task_ids(config["tasks"])
        self.rng = random.Random(f"{config['seed']}/{self.id}")
        self.store = Store.from_url(
            config["url"],
            namespace=config["namespace"],
            timeout=5,
            server_check=config.get("server_check", "warn"),
        )

    def pending(self) -> list[str]:
        left = []
        for task in self.tasks:
            latest = self.store.checkpoints.latest(task)
            if latest is None or latest.phase != DONE:
                left.append(task)
        # Each worker starts at another place in the queue, so they spread out.
        turn = self.id % len(left) if left else 0
        return left[turn:] + left[:turn]

    def run(self) -> None:
        _say("ready", w=self.id, pid=os.getpid())
        while pending := self.pending():
            if not any(self.attempt(task, wait=0) for task in pending):
                # Every unfinished task is owned: wait for the first to be released or
                # to expire (its owner may have crashed), woken by the release.
                self.attempt(pending[0], wait=2 * self.ttl)
        _say("finished", w=self.id)
        self.store.close()

    def attempt(self, task: str, *, wait: float) -> bool:
        """Work on ``task`` if its lease can be had; False if another owner holds it."""
        try:
            with self.store.task(task, ttl=self.ttl, wait=wait) as run:
                state = run.state or {"steps": []}
                done: list[Any] = state["steps"]
                if run.checkpoint is not None and run.checkpoint.phase == DONE:
                    return True  # finished by someone else meanwhile
                _say("acquired", w=self.id, task=task, fence=run.fence, at=len(done))
                for step in range(len(done), self.steps):
                    _say("start", w=self.id, task=task, step=step, fence=run.fence)
                    last = step == self.steps - 1
                    try:
                        # Recorded by a guarded write: a paused worker's late result is
                        # refused here, before its checkpoint is even tried.
                        result = run.step(f"step-{step}", self.tool_call, task, step, run.fence)
                        done = [*done, {"worker": self.id, "fence": run.fence, "result": result}]
                        run.save(
                            {"steps": done},
                            phase=DONE if last else f"step {step + 1}",
                            progress=(step + 1) / self.steps,
                            metadata={"next": "nothing" if last else f"step {step + 2}"},
                        )
                    except LockLost:
                        _say("rejected", w=self.id, task=task, step=step, fence=run.fence)
                        raise
                    _say("saved", w=self.id, task=task, step=step, fence=run.fence)
                    self.store.users.merge(BOARD, {"steps": {f"{task}/{step}": self.id}})
                    _say("merged", w=self.id, task=task, step=step)
        except LockTimeout:
            return False
        except LockLost:
            return True  # a newer owner has the task; look for other work
        return True

    def tool_call(self, task: str, step: int, fence: int | None) -> str:
        """A simulated tool call: some latency, a result."""
        _say("call", w=self.id, task=task, step=step, fence=fence)
        time.sleep(self.rng.uniform(0.02, 0.08))
        return f"{task} step {step + 1} by worker {self.id}: {self.rng.getrandbits(32):08x}"


def _die_with_parent() -> None:
    """Let the kernel SIGKILL this worker if the demo dies (Linux), even while it is
    SIGSTOPped: no worker outlives a demo that was killed itself."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the call took effect
        os._exit(1)


def main() -> None:
    _die_with_parent()
    Worker(json.loads(sys.argv[1])).run()


if __name__ == "__main__":
    main()
