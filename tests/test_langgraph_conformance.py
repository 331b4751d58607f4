"""LangGraph's own conformance suite for checkpointers (langgraph-checkpoint-conformance)
run against RedisStateSaver on every backend; the level must be FULL: every
capability, base and extended, detected and passing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from redistate import AsyncStore, Store
from redistate.langgraph import RedisStateSaver
from tests.conftest import Backend


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
    assert {name for name, r in report.results.items() if r.detected} == {
        c.value for c in ALL_CAPABILITIES
    }
