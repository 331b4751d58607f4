"""The demo's verdict fails when an invariant is broken (not only passes when all hold)."""

from __future__ import annotations

from typing import Any

from redistate.cli.demo_ledger import Check, Ledger


def run_two_steps(ledger: Ledger, task: str, worker: int, fence: int) -> None:
    ledger.apply({"e": "acquired", "w": worker, "task": task, "fence": fence, "at": 0})
    for step in range(2):
        ledger.apply({"e": "start", "w": worker, "task": task, "step": step, "fence": fence})
        ledger.apply({"e": "saved", "w": worker, "task": task, "step": step, "fence": fence})
        ledger.apply({"e": "merged", "w": worker, "task": task, "step": step})


def state(*fences: int) -> dict[str, Any]:
    return {"steps": [{"fence": f, "worker": 1, "result": "r"} for f in fences]}


def failed(checks: list[Check]) -> set[str]:
    return {c.key for c in checks if c.ok is False}


def board(*tasks: str) -> dict[str, int]:
    return {f"{t}/{s}": 1 for t in tasks for s in range(2)}


def test_all_invariants_hold_on_a_clean_run() -> None:
    ledger = Ledger(["a", "b"], steps=2)
    run_two_steps(ledger, "a", 1, 1)
    run_two_steps(ledger, "b", 2, 1)
    checks = ledger.verdict(
        {"a": state(1, 1), "b": state(1, 1)}, {"a": True, "b": True}, board("a", "b"), 1.0
    )
    assert failed(checks) == set()
    numbers = {c.key: c.number for c in checks}
    assert numbers["tasks_completed"] == 2 and numbers["steps_executed"] == 4
    assert numbers["lost_updates"] == 0 and numbers["steps_redone"] == 0
    assert ledger.view["a"].status == "done" and ledger.view["a"].saved == 2


def test_an_acknowledged_save_overwritten_or_missing_is_a_lost_update() -> None:
    ledger = Ledger(["a"], steps=2)
    run_two_steps(ledger, "a", 1, 1)
    overwritten = ledger.verdict({"a": state(1, 2)}, {"a": True}, board("a"), 1.0)
    assert failed(overwritten) == {"lost_updates"}
    short = ledger.verdict({"a": state(1)}, {"a": True}, board("a"), 1.0)
    assert failed(short) == {"lost_updates", "tasks_completed"}
    unmerged = ledger.verdict({"a": state(1, 1)}, {"a": True}, {"a/0": 1}, 1.0)
    assert failed(unmerged) == {"lost_updates"}


def test_a_step_redone_more_than_once_per_crash_fails() -> None:
    ledger = Ledger(["a"], steps=2)
    run_two_steps(ledger, "a", 1, 1)
    for _ in range(2):
        ledger.apply({"e": "start", "w": 2, "task": "a", "step": 1, "fence": 2})
    ledger.interrupted.append("SIGKILL worker 1 in a")
    checks = ledger.verdict({"a": state(1, 1)}, {"a": True}, board("a"), 1.0)
    assert ledger.redone() == 2 and failed(checks) == {"steps_redone"}


def test_a_stalled_worker_whose_late_write_was_not_refused_fails() -> None:
    ledger = Ledger(["a"], steps=2)
    run_two_steps(ledger, "a", 1, 1)
    ledger.interrupted.append("SIGSTOP worker 1 in a")
    checks = ledger.verdict({"a": state(1, 1)}, {"a": True}, board("a"), 1.0)
    assert failed(checks) == {"stale_writes_rejected"}
    ledger.apply({"e": "rejected", "w": 1, "task": "a", "step": 1, "fence": 1})
    assert failed(ledger.verdict({"a": state(1, 1)}, {"a": True}, board("a"), 1.0)) == set()


def test_a_damaged_or_missing_history_fails() -> None:
    ledger = Ledger(["a", "b"], steps=2)
    run_two_steps(ledger, "a", 1, 1)
    checks = ledger.verdict({"a": state(1, 1)}, {"a": False}, board("a"), 1.0)
    assert failed(checks) == {"tasks_completed", "checkpoints_intact"}


def test_orphan_marks_the_tasks_a_worker_held() -> None:
    ledger = Ledger(["a", "b"], steps=4)
    ledger.apply({"e": "acquired", "w": 3, "task": "b", "fence": 5, "at": 1})
    assert ledger.orphan(3, "orphaned") == "b" and ledger.view["b"].status == "orphaned"
    assert ledger.orphan(9, "stalled") is None


def test_a_tool_call_made_again_after_its_result_was_recorded_fails_the_demo() -> None:
    ledger = Ledger(["a"], 2)
    run_two_steps(ledger, "a", 1, 1)
    for step in range(2):
        ledger.apply({"e": "call", "w": 1, "task": "a", "step": step, "fence": 1})
    # A crash in the window: the call by the old owner (fence 1) was never recorded and
    # the new owner (fence 2) made and recorded it: allowed.
    ledger.apply({"e": "call", "w": 2, "task": "a", "step": 1, "fence": 2})
    recorded = {("a", 0): 1, ("a", 1): 2}
    checks = ledger.verdict({"a": state(1, 2)}, {"a": True}, board("a"), 1.0, recorded)
    assert "tool_calls_repeated" not in failed(checks)
    # A new owner calling a step whose result fence 1 had recorded: a repeat.
    ledger.apply({"e": "call", "w": 3, "task": "a", "step": 0, "fence": 3})
    checks = ledger.verdict({"a": state(1, 2)}, {"a": True}, board("a"), 1.0, recorded)
    assert ledger.repeated(recorded) == 1
    assert "tool_calls_repeated" in failed(checks)
