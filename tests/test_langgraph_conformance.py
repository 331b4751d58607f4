"""LangGraph's own conformance suite for checkpointers (langgraph-checkpoint-conformance)
run against RedisStateSaver on every backend; the level must be FULL: every
capability, base and extended, detected and passing. A newer suite than the one
installed may know more capabilities; the delta channel history one, where the
installed suite has it, must be among those detected."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Iterable
from enum import Enum

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES, Capability

from redistate import AsyncStore, Store
from redistate.langgraph import RedisStateSaver
from tests.conftest import Backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


@pytest.mark.parametrize("flavour", ["async", "sync"])
def test_the_conformance_suite_reports_full(
    backend: Backend, namespace: str, flavour: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``async``: an AsyncStore (native async methods); ``sync``: a Store, whose async
    methods run the sync ones in a thread — the suite calls only the async ones."""

    @checkpointer_test(name=f"RedisStateSaver[{backend.name}, {flavour}]")
    async def saver() -> AsyncGenerator[RedisStateSaver, None]:
        store: Store | AsyncStore
        if flavour == "async":
            store = AsyncStore(backend.async_client(), namespace=namespace)
        else:
            store = Store(backend.sync_client(), namespace=namespace)
        yield RedisStateSaver(store)
        if isinstance(store, AsyncStore):
            await store.aclose()
        else:
            store.close()

    report = asyncio.run(validate(saver))
    report.print_report()
    summary = report.to_dict()
    with capsys.disabled():  # the report summary, in the CI log
        levels = {name: r["tests_passed"] for name, r in summary["results"].items()}
        print(f"\n{saver.name}: {summary['conformance_level']} {json.dumps(levels)}")
    failures = [f for r in report.results.values() for f in r.failures]
    assert report.conformance_level() == "FULL", failures
    detected = {name for name, r in report.results.items() if r.detected}
    assert detected >= {c.value for c in ALL_CAPABILITIES}, detected
    assert detected >= required_capabilities(), detected


# The capability newer suites (LangGraph's repository) have for delta channel history.
DELTA_HISTORY = "delta_channel_history"


def required_capabilities(known: Iterable[Enum] = Capability) -> set[str]:
    """Beyond ALL_CAPABILITIES: the delta channel history one, if the suite knows it."""
    return {str(c.value) for c in known if c.value == DELTA_HISTORY}


def test_a_suite_that_has_the_delta_history_capability_requires_it() -> None:
    """A suite detects a capability by an override of its async method: one that has
    the delta channel history capability requires it, and finds the override."""
    newer = Enum("newer", {"PUT": "put", "DELTA_CHANNEL_HISTORY": DELTA_HISTORY})
    assert required_capabilities(newer) == {DELTA_HISTORY}
    assert required_capabilities() <= {DELTA_HISTORY}  # the installed one's, if it has it
    for name in ("aget_delta_channel_history", "get_delta_channel_history"):
        assert getattr(RedisStateSaver, name) is not getattr(BaseCheckpointSaver, name)
