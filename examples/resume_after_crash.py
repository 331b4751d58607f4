"""Checkpoints: a task that survives a crash and resumes where it stopped.

python examples/resume_after_crash.py                      # embedded, no server needed
"""

from __future__ import annotations

import os

from redistate import Store

url = os.environ.get("REDISTATE_URL")
store = (
    Store.from_url(url, namespace="cp-example") if url else Store.embedded(namespace="cp-example")
)
STEPS = ["search", "read", "plan", "write", "test", "review"]


def run(crash_at: int | None) -> None:
    restored = store.checkpoints.restore("report-42")
    state = restored.state if restored else {"done": []}
    print(f"starting with {len(state['done'])} steps done")
    for i, step in enumerate(STEPS):
        if step in state["done"]:
            continue  # finished before the crash: not redone
        if i == crash_at:
            raise RuntimeError(f"crashed during {step}")
        state = {"done": [*state["done"], step]}
        store.checkpoints.save(
            "report-42", state, phase=step, progress=(i + 1) / len(STEPS),
            metadata={"next": STEPS[i + 1] if i + 1 < len(STEPS) else "ship it"},
        )  # fmt: skip
        store.checkpoints.log("report-42", {"last_tool": f"{step}-tool"})


try:
    run(crash_at=3)  # the first instance dies half way
except RuntimeError as exc:
    print("instance 1:", exc)
run(crash_at=None)  # a new instance restores and finishes
print(store.checkpoints.handoff("report-42"))
store.checkpoints.delete("report-42")
store.close()
