"""Export and import of RedistateStore namespaces (the ``memory`` kind): items come back
with their times, their lifetimes and what was left of their TTLs; a newer stored item
refuses the namespace unless forced; the registry is rebuilt by announcing each
namespace, again when a sweep was forgetting it; a hostile line changes nothing."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from redistate import Store
from redistate.admin.backup_format import BadFile
from redistate.langgraph import RedistateStore
from tests.conftest import Backend, raw_keys

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

Line = dict[str, Any]


@pytest.fixture
def target(backend: Backend, namespace: str) -> Iterator[Store]:
    """A second store on the backend: where files are imported."""
    other = Store(backend.sync_client(), namespace=f"{namespace}b")
    yield other
    keys = raw_keys(backend, other.keys.namespace)
    if keys:
        raw = backend.raw()
        raw.delete(*keys)
        raw.close()
    other.close()


def export(store: Store, path: Path) -> list[Line]:
    with open(path, "wb") as sink:
        store.admin.export(sink)
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def rewrite(path: Path, lines: list[Line]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


def expiry(store: Store, nsid: str, key: str) -> float | None:
    """When the server will drop an item (its score in the namespace's exp zset)."""
    score = store._conn.idempotent("ZSCORE", store.keys.memory(nsid, "exp"), key)
    return None if score is None else float(score)


def test_items_come_back_with_their_times_lifetimes_and_ttls(
    stores: tuple[Store, Any], target: Store, tmp_path: Path
) -> None:
    source, _ = stores
    memory = RedistateStore(source)
    memory.put(("users", "u1"), "profile", {"name": "Ada"}, ttl=10)
    memory.put(("users", "u1"), "prefs", {"tone": "dry"})
    memory.put(("users", "u2"), "profile", {"name": "Bo"}, ttl=1)
    memory.put(("users", "u3"), "gone", {"v": 1})
    memory.delete(("users", "u3"), "gone")  # empty and registered: nothing to export
    started = time.time_ns() // 10**6
    lines = export(source, tmp_path / "a.jsonl")
    by_id = {line["id"]: line for line in lines if line.get("kind") == "memory"}
    assert sorted(by_id) == ["users.u1", "users.u2"]
    assert by_id["users.u1"]["ttl_ms"] is None  # one item never expires: nor do its keys
    assert 0 < by_id["users.u2"]["ttl_ms"] <= 60_000

    report = source.admin.import_file(tmp_path / "a.jsonl", namespace=target.keys.namespace)
    elapsed = time.time_ns() // 10**6 - started

    assert report.imported["memory"] == 2 and not (report.refused_count or report.failed_count)
    copy = RedistateStore(target)
    for namespace, key in ((("users", "u1"), "profile"), (("users", "u1"), "prefs")):
        # refresh_ttl=False: a get renews the TTL by default, as LangGraph's stores.
        was = memory.get(namespace, key, refresh_ttl=False)
        now = copy.get(namespace, key, refresh_ttl=False)
        assert was is not None and now is not None
        assert (now.value, now.created_at, now.updated_at) == (
            was.value,
            was.created_at,
            was.updated_at,
        )
    assert copy.list_namespaces() == [("users", "u1"), ("users", "u2")]
    assert expiry(target, "users.u1", "prefs") is None
    for nsid, key in (("users.u1", "profile"), ("users.u2", "profile")):
        was_at, now_at = expiry(source, nsid, key), expiry(target, nsid, key)
        assert was_at is not None and now_at is not None
        # Continued from the export: off by at most the time export and import took
        # (times left are read, then sent, a round trip late), and whole-ms rounding.
        assert abs(now_at - was_at) <= elapsed + 1
    # The lifetime came too: a read with refresh renews the full 10 minutes.
    before = expiry(target, "users.u1", "profile")
    copy.get(("users", "u1"), "profile", refresh_ttl=True)
    renewed = expiry(target, "users.u1", "profile")
    assert before is not None and renewed is not None and renewed > before
    pttl = target._conn.idempotent("PTTL", target.keys.memory("users.u2"))
    assert 0 < pttl <= 60_000  # u2's keys expire with its only item

    # The same file again: every item is there as the file has it; nothing changes.
    again = source.admin.import_file(tmp_path / "a.jsonl", namespace=target.keys.namespace)
    assert again.imported["memory"] == 2 and not again.refused_count
    assert expiry(target, "users.u1", "profile") == renewed


def test_a_newer_stored_item_refuses_its_namespace_unless_forced(
    stores: tuple[Store, Any], tmp_path: Path
) -> None:
    source, _ = stores
    memory = RedistateStore(source)
    memory.put(("users", "u1"), "profile", {"v": 1})
    memory.put(("users", "u2"), "profile", {"v": 1})
    path = tmp_path / "a.jsonl"
    export(source, path)
    memory.put(("users", "u1"), "profile", {"v": 2})  # newer than the file's
    memory.put(("users", "u1"), "extra", {"v": 3})  # not in the file
    memory.delete(("users", "u2"), "profile")  # gone: the file brings it back

    report = source.admin.import_file(path)

    assert report.refused_count == 1 and report.refused == ["memory users.u1"]
    assert report.imported["memory"] == 1
    assert value(memory.get(("users", "u1"), "profile")) == {"v": 2}
    assert value(memory.get(("users", "u2"), "profile")) == {"v": 1}

    forced = source.admin.import_file(path, force=True)

    assert forced.imported["memory"] == 2 and not forced.refused_count
    assert value(memory.get(("users", "u1"), "profile")) == {"v": 1}
    assert value(memory.get(("users", "u1"), "extra")) == {"v": 3}  # kept: never deleted


def test_a_different_item_of_the_same_millisecond_is_not_taken_as_older(
    stores: tuple[Store, Any], tmp_path: Path
) -> None:
    """Times are whole ms, and a put right after an export can share its ms (an export
    takes under one): the file's item then differs from the stored one at the same
    time, and only --force may replace it."""
    source, _ = stores
    memory = RedistateStore(source)
    memory.put(("users", "u1"), "profile", {"v": 1})
    lines = export(source, tmp_path / "a.jsonl")
    at = next(n for n, line in enumerate(lines) if line.get("id") == "users.u1")
    item = lines[at]["items"][0]
    other = {**item, "value": base64.b64encode(b'{"v":0}').decode()}
    lines[at] = {**lines[at], "items": [other]}
    path = rewrite(tmp_path / "b.jsonl", lines)

    report = source.admin.import_file(path)

    assert report.refused == ["memory users.u1"] and not report.imported["memory"]
    assert value(memory.get(("users", "u1"), "profile")) == {"v": 1}
    forced = source.admin.import_file(path, force=True)
    assert forced.imported["memory"] == 1
    assert value(memory.get(("users", "u1"), "profile")) == {"v": 0}


def value(item: Any) -> Any:
    assert item is not None
    return item.value


def test_an_import_announces_again_when_a_sweep_was_forgetting_the_namespace(
    stores: tuple[Store, Any], target: Store, tmp_path: Path
) -> None:
    """A sweep that read generation g and found the namespace empty leaves tomb = g and
    forgets it unless announced since: an import whose announcement is not newer than
    the tomb must announce again, never write items the registry will drop."""
    source, _ = stores
    RedistateStore(source).put(("users", "u1"), "profile", {"v": 1})
    path = tmp_path / "a.jsonl"
    export(source, path)
    keys = target.keys
    counter = int(target._conn.idempotent("HINCRBY", keys.memory_names("gens"), "", 0))
    # The next announcement's generation: tombed, as if a sweep had just read it.
    target._conn.idempotent("SET", keys.memory("users.u1", "tomb"), counter + 1)

    report = source.admin.import_file(path, namespace=keys.namespace)

    assert report.imported["memory"] == 1 and not report.failed_count
    assert RedistateStore(target).list_namespaces() == [("users", "u1")]
    assert target._conn.idempotent("EXISTS", keys.memory("users.u1", "tomb")) == 0
    # A tomb no announcement outgrows: the line fails, named, and nothing is written.
    target._conn.idempotent("DEL", keys.memory("users.u1"), keys.memory("users.u1", "exp"))
    target._conn.idempotent("SET", keys.memory("users.u1", "tomb"), 10**12)

    stuck = source.admin.import_file(path, namespace=keys.namespace)

    assert stuck.failed_count == 1 and "swept from the registry 5 times" in stuck.failed[0]
    assert target._conn.idempotent("EXISTS", keys.memory("users.u1")) == 0


def _item(line: Line, **change: Any) -> Line:
    return {**line, "items": [{**line["items"][0], **change}, *line["items"][1:]]}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


HOSTILE: dict[str, tuple[Callable[[Line], Line], str]] = {
    "empty label": (lambda x: {**x, "id": "users..u1"}, "is empty"),
    "no items": (lambda x: {**x, "items": []}, "needs items"),
    "key not base64": (lambda x: _item(x, key="!!"), "items[0].key is not valid base64"),
    "key too long": (lambda x: _item(x, key=_b64(b"k" * 1025)), "the limit is 1024"),
    "key not UTF-8": (lambda x: _item(x, key=_b64(b"\xff")), "items[0].key is not UTF-8"),
    "ttl without lifetime": (lambda x: _item(x, lifetime_ms=0), "must be null"),
    "ttl over lifetime": (lambda x: _item(x, ttl_ms=10**9), "items[0].ttl_ms must be an int"),
    "negative time": (lambda x: _item(x, created_ms=-1), "items[0].created_ms must be an int"),
    "a key twice": (lambda x: {**x, "items": [x["items"][0]] * 2}, "name a key twice"),
    "line ttl not the last": (lambda x: {**x, "ttl_ms": 5}, "ttl_ms must be the last item's"),
    "time far ahead": (lambda x: _item(x, updated_ms=2**52), "is over the limit"),
    "value not the codec's": (
        lambda x: _item(x, value=_b64(b"\xff\x00")),
        "does not decode with the store's codec",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_line_is_refused_by_name_and_nothing_is_written(
    stores: tuple[Store, Any], target: Store, tmp_path: Path, backend: Backend, case: str
) -> None:
    source, _ = stores
    memory = RedistateStore(source)
    memory.put(("users", "u1"), "profile", {"v": 1}, ttl=5)
    memory.put(("users", "u2"), "profile", {"v": 2})
    lines = export(source, tmp_path / "a.jsonl")
    edit, expected = HOSTILE[case]
    at = next(n for n, line in enumerate(lines) if line.get("id") == "users.u1")
    lines[at] = edit(lines[at])
    path = rewrite(tmp_path / "b.jsonl", lines)

    with pytest.raises(BadFile) as raised:
        source.admin.import_file(path, namespace=target.keys.namespace)

    assert expected in str(raised.value)
    assert raw_keys(backend, target.keys.namespace) == []  # not even u2, nor the registry


def test_an_item_that_ran_out_since_the_export_is_not_imported(
    stores: tuple[Store, Any], target: Store, tmp_path: Path
) -> None:
    """A file exported ten minutes ago (its header moved back): the one-minute item ran
    out meanwhile, the namespace of only that item is counted expired, the rest come."""
    source, _ = stores
    memory = RedistateStore(source)
    memory.put(("users", "u1"), "short", {"v": 1}, ttl=1)
    memory.put(("users", "u1"), "long", {"v": 2}, ttl=60)
    memory.put(("users", "u2"), "short", {"v": 3}, ttl=1)
    started = time.time_ns() // 10**6
    lines = export(source, tmp_path / "a.jsonl")
    lines[0] = {**lines[0], "exported_ms": lines[0]["exported_ms"] - 600_000}
    path = rewrite(tmp_path / "b.jsonl", lines)

    report = source.admin.import_file(path, namespace=target.keys.namespace)
    elapsed = time.time_ns() // 10**6 - started

    assert report.imported["memory"] == 1 and report.expired == 1
    copy = RedistateStore(target)
    assert copy.get(("users", "u1"), "short", refresh_ttl=False) is None
    assert value(copy.get(("users", "u1"), "long", refresh_ttl=False)) == {"v": 2}
    at = expiry(target, "users.u1", "long")
    was = expiry(source, "users.u1", "long")
    # Ten minutes less, give or take the time export and import took (as above).
    assert at is not None and was is not None and abs(at - (was - 600_000)) <= elapsed + 1
    assert copy.list_namespaces() == [("users", "u1")]
