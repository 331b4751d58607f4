"""What ``redistate demo`` saw its workers do, and the invariants it checks at the end.

Pure bookkeeping: events in (the workers' JSON lines), a verdict out. The final state
is read from the store by the caller and passed to :meth:`Ledger.verdict`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Check", "Ledger", "TaskView"]


@dataclass
class TaskView:
    """One task as the live display shows it."""

    saved: int = 0
    owner: int | None = None
    fence: int | None = None
    status: str = "waiting"


@dataclass(frozen=True)
class Check:
    """One line of the summary: a measured value and, if it is an invariant, whether
    it held."""

    key: str  # for --json
    number: float  # what was measured, as a number
    name: str
    value: str
    rule: str = ""
    ok: bool | None = None  # None: reported, not checked


@dataclass
class Ledger:
    tasks: list[str]
    steps: int
    view: dict[str, TaskView] = field(default_factory=dict)
    executions: Counter[tuple[str, int]] = field(default_factory=Counter)
    saves: dict[tuple[str, int], int] = field(default_factory=dict)  # acknowledged: fence
    merges: set[tuple[str, int]] = field(default_factory=set)  # acknowledged
    rejected: list[dict[str, Any]] = field(default_factory=list)
    interrupted: list[str] = field(default_factory=list)  # "SIGKILL w2", "SIGSTOP w3"
    calls: list[tuple[str, int, int]] = field(default_factory=list)  # tool calls: fence

    def __post_init__(self) -> None:
        self.view = {task: TaskView() for task in self.tasks}

    def apply(self, event: dict[str, Any]) -> None:
        kind, task = event["e"], event.get("task")
        if kind == "merged":
            self.merges.add((event["task"], event["step"]))
        elif kind == "call":
            self.calls.append((event["task"], event["step"], event.get("fence") or 0))
        elif kind == "rejected":
            self.rejected.append(event)
        if not isinstance(task, str) or task not in self.view:
            return
        view = self.view[task]
        if kind == "acquired":
            view.owner, view.fence, view.status = event["w"], event["fence"], "running"
            view.saved = event["at"]
        elif kind == "start":
            self.executions[(task, event["step"])] += 1
        elif kind == "saved":
            self.saves[(task, event["step"])] = event["fence"]
            view.saved = max(view.saved, event["step"] + 1)
            if view.saved == self.steps:
                view.status = "done"

    def orphan(self, worker: int, how: str) -> str | None:
        """Mark the tasks ``worker`` owns as orphaned; the task it was in, if any."""
        mine = None
        for task, view in self.view.items():
            if view.owner == worker and view.status == "running":
                view.status, mine = how, task
        return mine

    def redone(self) -> int:
        """Step executions beyond the first of each step: work done twice."""
        return sum(n - 1 for n in self.executions.values() if n > 1)

    def repeated(self, recorded: dict[tuple[str, int], int]) -> int:
        """Tool calls made again after the step's result was recorded: calls by an owner
        with a higher fence than the one that recorded it (durable steps: none)."""
        return sum(
            1 for task, step, fence in self.calls if fence > recorded.get((task, step), fence)
        )

    def verdict(
        self,
        states: dict[str, Any],
        complete: dict[str, bool],
        board: dict[str, Any],
        took: float,
        recorded: dict[tuple[str, int], int] | None = None,
    ) -> list[Check]:
        """The summary, from the final checkpoint states, whether each restored
        completely, the shared profile's ``steps`` and the fence that recorded each
        step's result (``run.step``)."""
        finished = [t for t, s in states.items() if _steps(s) and len(_steps(s)) == self.steps]
        lost_saves = [
            f"{task} step {step}"
            for (task, step), fence in sorted(self.saves.items())
            if _fence_at(states.get(task), step) != fence
        ]
        lost_merges = [f"{t}/{s}" for t, s in sorted(self.merges) if f"{t}/{s}" not in board]
        lost = lost_saves + lost_merges
        needed = len(self.tasks) * self.steps
        crashes = len(self.interrupted)
        stopped = any(text.startswith("SIGSTOP") for text in self.interrupted)
        executed = sum(self.executions.values())
        repeated = self.repeated(recorded or {})
        return [
            Check(
                "tasks_completed",
                len(finished),
                "tasks completed",
                f"{len(finished)}/{len(self.tasks)}",
                "every task finished",
                len(finished) == len(self.tasks),
            ),
            Check("steps_executed", executed, "steps executed", f"{executed} ({needed} needed)"),
            Check(
                "steps_redone",
                self.redone(),
                "steps redone after crashes",
                str(self.redone()),
                f"≤ 1 per crash or stall ({crashes})",
                self.redone() <= crashes,
            ),
            Check(
                "tool_calls_repeated",
                repeated,
                "tool calls repeated after a crash",
                str(repeated),
                "a recorded step never runs again",
                repeated == 0,
            ),
            Check(
                "stale_writes_rejected",
                len(self.rejected),
                "stale writes rejected by fencing",
                str(len(self.rejected)),
                "the paused worker's late write refused" if stopped else "",
                (len(self.rejected) >= 1) if stopped else None,
            ),
            Check(
                "lost_updates",
                len(lost),
                "lost updates",
                str(len(lost)),
                f"all {len(self.saves)} saves + {len(self.merges)} merges kept",
                not lost,
            ),
            Check(
                "checkpoints_intact",
                sum(complete.values()),
                "checkpoints intact",
                f"{sum(complete.values())}/{len(complete)}",
                "every digest verified",
                all(complete.values()) and len(complete) == len(self.tasks),
            ),
            Check("faults", crashes, "faults injected", ", ".join(self.interrupted) or "none"),
            Check("seconds", round(took, 2), "time taken", f"{took:.1f} s"),
        ]


def _steps(state: Any) -> list[Any]:
    steps = state.get("steps") if isinstance(state, dict) else None
    return steps if isinstance(steps, list) else []


def _fence_at(state: Any, step: int) -> int | None:
    steps = _steps(state)
    if step >= len(steps) or not isinstance(steps[step], dict):
        return None
    fence = steps[step].get("fence")
    return fence if isinstance(fence, int) else None
