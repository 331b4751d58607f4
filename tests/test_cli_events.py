"""``redistate events ENTITY`` on real servers."""

from __future__ import annotations

import json

from redistate import Store
from tests.cli import run
from tests.conftest import Backend


def test_events_lists_the_chain_and_fails_when_it_is_broken(
    server_backend: Backend, namespace: str
) -> None:
    store = Store(server_backend.sync_client(), namespace=namespace)
    store.events.append("t1", "initialized", {"plan": "free"})
    middle = store.events.append("t1", "updated", {"plan": "pro"})
    store.events.append("t1", "tool_called", {"tool": "refund", "amount": 20})
    args = ["--url", server_backend.url, "--namespace", namespace, "events"]

    done = run(*args, "t1", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["seq"] for r in rows] == [1, 2, 3]
    assert [r["type"] for r in rows] == ["initialized", "updated", "tool_called"]
    assert rows[2]["payload"] == {"tool": "refund", "amount": 20}  # an object, not a string
    table = run(*args, "t1")
    assert table.returncode == 0 and "chain verified" in table.stdout

    store._conn.client.xdel(store.keys.events("t1"), middle.id)  # someone removes one
    broken = run(*args, "t1")
    assert broken.returncode == 1
    assert "events of 't1' do not verify: first bad" in broken.stderr
    assert "an event was removed or reordered" in broken.stderr
    missing = run(*args, "nobody")
    assert missing.returncode == 1 and "no events of 'nobody'" in missing.stderr
    store.close()
