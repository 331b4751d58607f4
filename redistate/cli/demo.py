"""``redistate demo``: agent workers crash and stall, and no work or write is lost.

Starts worker processes (see demo_worker.py) that share a queue of tasks. While they
work, the demo SIGKILLs one mid-step (a replacement starts, as an orchestrator would
restart it) and SIGSTOPs another mid-step until a colleague has taken over its task
after its lease expired, then SIGCONTs it: its late write must be refused. At the end
it reads the state back and checks the invariants; exit code 0 only if all held.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import IO, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table

from .. import RedistateError, Store
from ..leases.spec import holder_fence
from ._app import app
from ._output import out
from .demo_ledger import Check, Ledger
from .demo_worker import BOARD, task_ids

DEMO_NAMESPACE = "demo"
MARKER = ("demo", "run")  # (collection, id) of the record that marks a demo namespace


@dataclass
class Proc:
    """A worker process and what the demo did to it."""

    id: int
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    buffer: bytes = b""
    state: str = "starting"
    task: str | None = None  # the task it last started a step in
    step: int = -1

    @property
    def pid(self) -> int:
        return self.process.pid


@dataclass
class Plan:
    """When to strike: seeded, so a run can be repeated."""

    kill_step: int
    stop_step: int
    killed: Proc | None = None
    stopped: Proc | None = None
    stopped_task: str | None = None
    stopped_fence: int | None = None
    resumed: bool = False
    notes: list[str] = field(default_factory=list)


@app.command()
def demo(
    ctx: typer.Context,
    workers: int = typer.Option(3, min=2, max=32, help="agent worker processes"),
    tasks: int = typer.Option(6, min=1, max=100, help="tasks in the shared queue"),
    steps: int = typer.Option(8, min=4, max=100, help="steps (tool calls) per task"),
    seed: int = typer.Option(7, help="seeds the latencies and when the faults strike"),
    lease_ttl: float = typer.Option(
        2.0, min=0.5, max=30, help="seconds a crashed worker's task stays locked"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON only"),
) -> None:
    """The crash-and-resume demo: workers share tasks, one is SIGKILLed, one SIGSTOPped;
    every task still completes, once, with nothing lost."""
    context = ctx.obj
    if not context.namespace_given:
        context.namespace = DEMO_NAMESPACE
    store: Store = context.store
    _clear(store)
    store.collection(MARKER[0]).put(MARKER[1], {"workers": workers, "seed": seed})
    rng = random.Random(seed)
    plan = Plan(kill_step=rng.randint(1, steps - 3), stop_step=rng.randint(1, steps - 3))
    ledger = Ledger(task_ids(tasks), steps)
    config = {
        "url": context.url,
        "server_check": context.server_check,  # off for the CLI's own server
        "namespace": context.namespace,
        "tasks": tasks,
        "steps": steps,
        "seed": seed,
        "lease_ttl": lease_ttl,
    }
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="redistate-demo-") as logs:
        runner = Runner(store, config, logs, ledger, plan, quiet=as_json)
        runner.run(workers, deadline=started + 60 + tasks * steps * 0.5 + 10 * lease_ttl)
    took = time.monotonic() - started
    checks = _verdict(store, ledger, took)
    ok = all(check.ok is not False for check in checks)
    if as_json:
        summary = {
            "ok": ok,
            **{check.key: check.number for check in checks},
            "failed": [check.name for check in checks if check.ok is False],
            "events": plan.notes,
        }
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        out.print()
        out.print(_summary(checks))
        out.print("Look into what it left:")
        for command in ("ls tasks", "checkpoints task-1", "handoff task-1"):
            out.print(f"  redistate --namespace {context.namespace} {command}", highlight=False)
    if not ok:
        raise RedistateError("demo: an invariant did not hold (see the summary)")


class Runner:
    """Runs the workers, reads their events, strikes when the plan says."""

    def __init__(
        self,
        store: Store,
        config: dict[str, Any],
        logs: str,
        ledger: Ledger,
        plan: Plan,
        *,
        quiet: bool,
    ) -> None:
        self.store = store
        self.config, self.logs, self.ledger, self.plan = config, logs, ledger, plan
        self.quiet = quiet
        self.procs: list[Proc] = []
        self.selector = selectors.DefaultSelector()

    def spawn(self) -> Proc:
        worker = len(self.procs) + 1
        log = open(os.path.join(self.logs, f"worker-{worker}.log"), "w+b")  # noqa: SIM115
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "redistate.cli.demo_worker",
                json.dumps({**self.config, "worker": worker}),
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            bufsize=0,
            start_new_session=True,  # a Ctrl-C reaches the demo, which stops the workers
        )
        proc = Proc(worker, process, log)
        self.procs.append(proc)
        assert process.stdout is not None
        self.selector.register(process.stdout, selectors.EVENT_READ, proc)
        return proc

    def run(self, workers: int, deadline: float) -> None:
        try:
            live = Live(self.view(), console=out, refresh_per_second=8)
            with contextlib.nullcontext() if self.quiet else live:
                self.live = live
                for _ in range(workers):
                    self.spawn()
                while self.selector.get_map():
                    if time.monotonic() > deadline:
                        raise RedistateError("demo: the workers did not finish in time")
                    for key, _ in self.selector.select(timeout=0.2):
                        self.read(key.data)
                    if not self.quiet:
                        live.update(self.view())
        finally:
            for proc in self.procs:
                if proc.process.poll() is None:
                    os.kill(proc.pid, signal.SIGCONT)  # a stopped process cannot die
                    proc.process.kill()
                proc.process.wait()
                proc.log.close()

    def read(self, proc: Proc) -> None:
        assert proc.process.stdout is not None
        chunk = os.read(proc.process.stdout.fileno(), 65536)
        if not chunk:
            self.selector.unregister(proc.process.stdout)
            code = proc.process.wait()
            if proc.state not in ("killed", "finished"):
                proc.log.seek(0)
                why = proc.log.read().decode(errors="replace").strip().splitlines()
                raise RedistateError(
                    f"demo: worker {proc.id} exited with {code}: {why[-1] if why else '?'}"
                )
            return
        proc.buffer += chunk
        *lines, proc.buffer = proc.buffer.split(b"\n")
        for line in lines:
            self.handle(proc, json.loads(line))

    def handle(self, proc: Proc, event: dict[str, Any]) -> None:
        self.ledger.apply(event)
        kind = event["e"]
        if kind == "ready":
            proc.state = "working"
        elif kind == "finished":
            proc.state = "finished"
        elif kind == "start":
            proc.task, proc.step = event["task"], event["step"]
            self.strike(proc, event)
        elif kind == "acquired":
            self.maybe_resume(event)
        elif kind == "rejected":
            self.note(
                f"worker {proc.id}'s late write of {event['task']} step {event['step'] + 1} "
                f"(fence {event['fence']}) was rejected: a newer owner holds the task"
            )

    def strike(self, proc: Proc, event: dict[str, Any]) -> None:
        plan = self.plan
        if plan.killed is None and event["step"] == plan.kill_step:
            os.kill(proc.pid, signal.SIGKILL)
            proc.state, plan.killed = "killed", proc
            self.ledger.orphan(proc.id, "orphaned")
            self.ledger.interrupted.append(f"SIGKILL w{proc.id}")
            self.note(
                f"SIGKILL worker {proc.id} (pid {proc.pid}) during {event['task']} step "
                f"{event['step'] + 1}; worker {len(self.procs) + 1} starts in its place"
            )
            self.spawn()
        elif (
            plan.killed is not None
            and plan.stopped is None
            and proc is not plan.killed
            and event["step"] >= plan.stop_step
            and event["step"] <= self.ledger.steps - 2  # a later save must follow
        ):
            os.kill(proc.pid, signal.SIGSTOP)
            _, status = os.waitpid(proc.pid, os.WUNTRACED)  # returns once it is stopped
            if not os.WIFSTOPPED(status):
                return  # it had exited: nothing to stop
            # The event may be stale: the worker may have finished that task meanwhile.
            # Stopped, it can no longer release the lease; if it still holds it, the
            # task is stuck with it until the lease expires, as intended.
            held = holder_fence(self.store.client.get(self.store.keys.lock(event["task"])))
            if held != event["fence"]:
                os.kill(proc.pid, signal.SIGCONT)  # too late; strike at a later step
                return
            proc.state, plan.stopped = "stopped", proc
            plan.stopped_task, plan.stopped_fence = event["task"], event["fence"]
            self.ledger.orphan(proc.id, "stalled")
            self.ledger.interrupted.append(f"SIGSTOP w{proc.id}")
            self.note(
                f"SIGSTOP worker {proc.id} (pid {proc.pid}) during {event['task']} step "
                f"{event['step'] + 1}: its lease will expire while it sleeps"
            )

    def maybe_resume(self, event: dict[str, Any]) -> None:
        plan = self.plan
        if (
            plan.stopped is not None
            and not plan.resumed
            and event["task"] == plan.stopped_task
            and event["fence"] > (plan.stopped_fence or 0)
        ):
            os.kill(plan.stopped.pid, signal.SIGCONT)
            plan.resumed, plan.stopped.state = True, "working"
            self.note(
                f"worker {event['w']} took over {event['task']} (fence {event['fence']}); "
                f"SIGCONT worker {plan.stopped.id}"
            )
        elif event.get("at", 0) > 0:
            self.note(
                f"worker {event['w']} resumes {event['task']} at step {event['at'] + 1} "
                f"(fence {event['fence']})"
            )

    def note(self, text: str) -> None:
        self.plan.notes.append(text)
        if not self.quiet:
            self.live.console.print(f"[bold]•[/] {text}")

    def view(self) -> Any:
        if self.quiet:
            return Group()
        table = Table(title="tasks", title_justify="left", expand=False)
        for column in ("task", "progress", "steps", "owner", "fence", "status"):
            table.add_column(column)
        for task, view in self.ledger.view.items():
            bar = ProgressBar(total=self.ledger.steps, completed=view.saved, width=24)
            owner = "-" if view.owner is None else f"worker {view.owner}"
            table.add_row(
                task,
                bar,
                f"{view.saved}/{self.ledger.steps}",
                owner,
                "-" if view.fence is None else str(view.fence),
                view.status,
            )
        workers = Table(title="workers", title_justify="left")
        for column in ("worker", "pid", "state", "last step"):
            workers.add_column(column)
        for proc in self.procs:
            last = "-" if proc.task is None else f"{proc.task} step {proc.step + 1}"
            workers.add_row(str(proc.id), str(proc.pid), proc.state, last)
        return Group(table, workers)


def _clear(store: Store) -> None:
    """Empty the demo's namespace, refusing one that holds anything but a demo's keys."""
    keys = [found.key for found in store.admin.scan()]
    if keys and store.collection(MARKER[0]).get(MARKER[1]) is None:
        raise RedistateError(
            f"namespace {store.keys.namespace!r} holds {len(keys)} keys that are not a "
            "demo's; choose another --namespace"
        )
    raw: Any = store.client
    for key in keys:
        raw.delete(key)  # one key a command: fine on a cluster


def _verdict(store: Store, ledger: Ledger, took: float) -> list[Check]:
    states: dict[str, Any] = {}
    complete: dict[str, bool] = {}
    for task in ledger.tasks:
        restored = store.checkpoints.restore(task)
        if restored is not None:
            states[task], complete[task] = restored.state, restored.complete
    board = store.users.get(BOARD)
    steps = board.data.get("steps", {}) if board is not None else {}
    recorded: dict[tuple[str, int], int] = {}
    for task in ledger.tasks:
        for step in store.checkpoints.steps(task):
            recorded[(task, int(step.name.removeprefix("step-")))] = step.fence or 0
    return ledger.verdict(states, complete, steps, took, recorded)


def _summary(checks: list[Check]) -> Table:
    table = Table(title="summary", title_justify="left")
    table.add_column("", no_wrap=True)
    table.add_column("measured", no_wrap=True)
    table.add_column("invariant")
    for check in checks:
        mark = {True: "[green]✓[/]", False: "[red]✗[/]", None: ""}[check.ok]
        table.add_row(check.name, check.value, f"{mark} {check.rule}".strip())
    return table
