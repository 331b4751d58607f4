"""LangGraph on redistate: a graph's process is SIGKILLed mid-run; a new process resumes
it from the saver, and the nodes that had finished do not run again.

python examples/langgraph_resume.py     # a local server is started (redistate[embedded])
REDISTATE_URL=redis://localhost:6379/0 python examples/langgraph_resume.py
"""

from __future__ import annotations

import contextlib
import operator
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

from redistate.langgraph import RedisStateSaver

NODES = ["outline", "research", "draft", "review", "publish"]
THREAD = {"configurable": {"thread_id": "report-7"}}


class Report(TypedDict):
    done: Annotated[list[str], operator.add]  # each node appends its name
    ran_in: Annotated[list[int], operator.add]  # and the pid of the process it ran in


def node(name: str) -> Any:
    def run(state: Report) -> dict[str, Any]:
        print(f"entering {name}", flush=True)
        if name == "draft" and os.environ.get("HANG_IN_DRAFT"):
            sys.stdin.read()  # a long tool call: the parent kills us here
        return {"done": [name], "ran_in": [os.getpid()]}

    return run


def build(saver: RedisStateSaver) -> Any:
    graph = StateGraph(Report)
    for name in NODES:
        graph.add_node(name, node(name))
    for a, b in zip([START, *NODES], [*NODES, END], strict=True):
        graph.add_edge(a, b)
    return graph.compile(checkpointer=saver)


def worker(url: str, first: bool) -> None:
    saver = RedisStateSaver.from_url(url, namespace="lg-example")
    graph = build(saver)
    # The first run starts the graph; the second resumes it (input None: continue
    # from the thread's last checkpoint). durability="sync": each step is saved before
    # the next one starts (LangGraph's default saves in the background).
    graph.invoke({"done": [], "ran_in": []} if first else None, THREAD, durability="sync")
    saver.close()


@contextlib.contextmanager
def server() -> Iterator[str]:
    url = os.environ.get("REDISTATE_URL")
    if url:
        yield url
        return
    from redistate.cli._embedded import embedded_url

    with embedded_url() as found:
        yield found


def main() -> None:
    with server() as url:
        saver = RedisStateSaver.from_url(url, namespace="lg-example")
        saver.delete_thread("report-7")  # a fresh run each time
        me = [sys.executable, __file__, "--worker", url]

        env = {**os.environ, "HANG_IN_DRAFT": "1"}
        first = subprocess.Popen([*me, "first"], env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert first.stdout is not None
        for line in first.stdout:
            print(f"process 1: {line.strip()}")
            if line.strip() == "entering draft":
                os.kill(first.pid, signal.SIGKILL)
                break
        first.wait()
        print(f"process 1 killed by SIGKILL (exit {first.returncode})")
        state = build(saver).get_state(THREAD)
        print(f"saved before the kill: {state.values['done']}, next: {list(state.next)}")

        second = subprocess.run([*me, "resume"], capture_output=True, text=True, check=True)
        for line in second.stdout.splitlines():
            print(f"process 2: {line}")
        final = build(saver).get_state(THREAD).values
        print(f"finished: {final['done']}")
        runs = {pid: [n for n, p in zip(final["done"], final["ran_in"], strict=True) if p == pid]
                for pid in dict.fromkeys(final["ran_in"])}  # fmt: skip
        for i, names in enumerate(runs.values(), 1):
            print(f"nodes of process {i}: {names}")
        print(f"each node once: {sorted(final['done']) == sorted(NODES)}")
        saver.delete_thread("report-7")
        saver.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], sys.argv[3] == "first")
    else:
        main()
