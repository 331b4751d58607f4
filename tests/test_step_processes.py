"""Durable steps across real process deaths: a 20-step task is SIGKILLed 6 times at
random steps, twice at each moment, and resumed by a new process each time; a
SIGSTOPped owner's late result is refused. Every real backend, sync and async
(tests/step_worker.py is the child)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from redistate import Store
from tests.conftest import Backend, _backend
from tests.step_worker import STEPS, TASK, effects_key

ROOT = Path(__file__).parent.parent
PER_MOMENT = 2  # kills at each of the three moments (MARKS): 6 a run


@pytest.fixture(params=["redis7", "valkey9", "cluster", "sentinel"])
def real_backend(request: pytest.FixtureRequest) -> Backend:
    return _backend(str(request.param), request)


def _child(
    url: str, namespace: str, flavour: str, mode: str, hang: str = "", ttl: float = 2.0
) -> Any:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.step_worker", url, namespace, flavour, mode, hang],
        cwd=ROOT,
        env={**os.environ, "STEP_LEASE_TTL": str(ttl)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


MARKS = {"before": "calling", "after": "effect", "recorded": "recorded"}


def _kill_at(child: Any, line_wanted: str) -> list[str]:
    """Read the child's lines; SIGKILL it once it printed ``line_wanted`` (it blocks
    right after printing it, so the kill lands exactly there)."""
    seen: list[str] = []
    for line in child.stdout:
        seen.append(line.strip())
        if line.strip() == line_wanted:
            os.kill(child.pid, signal.SIGKILL)
            break
    child.wait(timeout=60)
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize("mode", ["idempotent", "not"])
def test_a_task_killed_six_times_calls_each_tool_once(
    real_backend: Backend, namespace: str, flavour: str, mode: str
) -> None:
    """Six SIGKILLs: at random steps (distinct, in order), each moment twice in a
    random order: inside the tool call before its side effect, after it (before its
    result is recorded: the window no store can close), or after the record. (Ten
    kills at a random moment each left redis7-async-idempotent with none "before".)"""
    rng = random.Random(f"{real_backend.name}-{flavour}-{mode}")
    url = real_backend.url
    moments = rng.sample(list(MARKS) * PER_MOMENT, len(MARKS) * PER_MOMENT)
    killed = sorted(rng.sample(range(STEPS), len(moments)))
    plan = list(zip(killed, moments, strict=True))
    interrupted: list[str] = []
    for step, phase in plan:
        child = _child(url, namespace, flavour, mode, hang=f"{phase}:{step}")
        seen = _kill_at(child, f"{MARKS[phase]} {step}")
        assert child.returncode == -signal.SIGKILL, (seen, child.stderr.read())
        _reap(real_backend, namespace)
        interrupted += [line for line in seen if line.startswith("interrupted")]
    last = _child(url, namespace, flavour, mode)
    out, err = last.communicate(timeout=120)
    assert last.returncode == 0, err
    interrupted += [line for line in out.splitlines() if line.startswith("interrupted")]

    effects = _effects(real_backend, namespace)
    between = [step for step, phase in plan if phase == "after"]
    twice = sorted(i for i, n in effects.items() if n > 1)
    print(f"\n{real_backend.name} {flavour} {mode}: kills at {plan}; effects per step "
          f"{dict(sorted(effects.items()))}; twice: {twice}; "
          f"{len(interrupted)} StepInterrupted")  # fmt: skip
    assert sorted(effects) == list(range(STEPS))  # every step's effect happened
    if mode == "idempotent":
        # Exactly the steps killed between their effect and their record ran twice.
        assert twice == between and max(effects.values()) <= 2
        assert not interrupted
    else:
        # Never a second call: every step killed inside its tool call (its start
        # marker recorded, its end not) raised StepInterrupted on resume, and the agent
        # settled it: it found the effect done (killed after it) or did it (before).
        inside = [step for step, phase in plan if phase != "recorded"]
        assert twice == []
        assert sorted(int(line.split()[1].removeprefix("step-")) for line in interrupted) == (
            inside
        )
    with Store(real_backend.sync_client(), namespace=namespace) as store:
        steps = {s.name: s for s in store.checkpoints.steps(TASK)}
        assert {s.status for s in steps.values()} == {"done"} and len(steps) == STEPS
        assert [steps[f"step-{i}"].result for i in range(STEPS)] == [i * 10 for i in range(STEPS)]


def _reap(backend: Backend, namespace: str) -> None:
    """What a supervisor does once it saw the process die: free its lease at once
    rather than wait out the TTL (the fence counter stays: the next owner's is higher).
    Waiting out a TTL is what the SIGSTOP test and tests/test_lease_processes.py show."""
    with Store(backend.sync_client(), namespace=namespace) as store:
        raw: Any = store.client
        raw.delete(store.keys.lock(TASK))


def _effects(backend: Backend, namespace: str) -> Counter[int]:
    """How many times each step's side effect happened (the raw list, then removed)."""
    raw = backend.raw()
    try:
        effects = Counter(int(v) for v in raw.lrange(effects_key(namespace), 0, -1))
        raw.delete(effects_key(namespace))
    finally:
        raw.close()
    return effects


@pytest.mark.slow
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_stopped_owners_late_result_is_refused(
    real_backend: Backend, namespace: str, flavour: str
) -> None:
    url = real_backend.url
    paused = _child(url, namespace, flavour, "idempotent", hang="after:3", ttl=1.0)
    seen = []
    for line in paused.stdout:
        seen.append(line.strip())
        if line.strip() == "effect 3":
            break
    os.kill(paused.pid, signal.SIGSTOP)  # inside step 3, after its effect
    os.waitpid(paused.pid, os.WUNTRACED)  # it is stopped: its lease renewal too
    try:
        # A new owner: waits for the paused one's lease to run out, then finishes.
        successor = _child(url, namespace, flavour, "idempotent")
        out, err = successor.communicate(timeout=120)
        assert successor.returncode == 0, err
        assert "finished" in out
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    late, _ = paused.communicate("go on\n", timeout=60)  # step 3 returns, too late
    assert paused.returncode == 4, late
    assert "lost: " in late and "recorded 3" not in late
    with Store(real_backend.sync_client(), namespace=namespace) as store:
        steps = store.checkpoints.steps(TASK)
        assert [s.status for s in steps] == ["done"] * STEPS
        fences = {s.fence for s in steps}
        assert len(fences) == 2  # steps 0-2 by the first owner, the rest by its successor
        step3 = next(s for s in steps if s.name == "step-3")
        assert step3.fence == max(f for f in fences if f is not None)
    effects = _effects(real_backend, namespace)
    assert effects[3] == 2 and all(effects[i] == 1 for i in range(STEPS) if i != 3)
