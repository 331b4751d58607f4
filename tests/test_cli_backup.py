"""``redistate export`` / ``import``, driven as a user would: in subprocesses, on every
backend a subprocess can reach (the embedded fakeredis one is in-process: there the
same functions are called directly)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pytest

from redistate import RedistateError, Store
from redistate.admin.backup_format import BadFile, Entity
from redistate.admin.backup_lines import import_call
from redistate.core.keys import KeySpace
from tests.backup_edits import Lines, edit_line
from tests.cli import run
from tests.conftest import Backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

# Redis and Valkey keep whole ms, as the clock readings here do: their bounds below are
# exact. fakeredis keeps float seconds and rounds PTTL to the nearest ms: the rounding of
# each reading and of each export/import step adds up to at most this much.
ROUNDING_MS = 3


class Ttl(NamedTuple):
    """A PTTL reply and the wall clock (ms since the epoch) just before and after it."""

    sent_ms: int
    pttl: int
    read_ms: int


# Key relative to the namespace -> (type, value, Ttl, or -1 for no expiry).
Snapshot = dict[str, tuple[str, Any, "Ttl | int"]]


def summary(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The --json summary a command printed (its only stdout line)."""
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(lines[0])
    return result


class Cli:
    """export / import on one backend: the CLI in a subprocess, or for the in-process
    embedded backend the functions the CLI calls."""

    def __init__(self, backend: Backend, namespace: str) -> None:
        self.backend = backend
        self.namespace = namespace

    def store(self, namespace: str | None = None) -> Store:
        return Store(self.backend.sync_client(), namespace=namespace or self.namespace)

    def export(self, path: Path) -> dict[str, Any]:
        if self.backend.remote:
            url = ["--url", self.backend.url, "--namespace", self.namespace]
            done = run(*url, "export", "--out", str(path), "--json")
            assert done.returncode == 0, done.stderr
            return summary(done)
        with self.store() as store, open(path, "wb") as sink:
            return store.admin.export(sink).as_dict()

    def import_(
        self, path: Path, *, namespace: str | None = None, force: bool = False
    ) -> tuple[int, dict[str, Any], str]:
        """(exit code, summary, stderr)."""
        if self.backend.remote:
            target = ["--namespace", namespace] if namespace else []
            flags = ["--force"] if force else []
            done = run("--url", self.backend.url, *target, "import", str(path), "--json", *flags)
            return done.returncode, summary(done), done.stderr
        with self.store() as store:
            report = store.admin.import_file(path, namespace=namespace, force=force)
        refused = report.refused_count or report.failed_count
        return (1 if refused and not force else 0), report.as_dict(), ""


def seed(store: Store) -> None:
    """Every kind of state: sessions with TTLs, users and a collection without, tasks
    with several checkpoints and a delta log (one with only a log, one with a TTL),
    fence counters, a held lease and write memories (neither is exported)."""
    store.sessions.put("s1", {"turn": 1}, ttl=600)
    store.sessions.put("s1", {"turn": 2}, ttl=600)  # leaves a write memory
    store.sessions.put("odd {id}*?", {"turn": 3, "ü": "ß"}, ttl=300)
    store.users.put("u1", {"lang": "zh", "big": 2**60})
    store.users.merge("u1", {"tz": "Asia/Shanghai"})
    store.collection("notes").put("n1", ["a", {"b": None}])
    for step in range(4):
        store.checkpoints.save("t1", {"step": step}, phase=f"p{step}", progress=step / 4)
    store.checkpoints.log("t1", {"extra": 1})
    store.checkpoints.log("t1", {"extra": 2})
    store.checkpoints.log("t2", {"only": "a log"})
    store.checkpoints.save("t3", {"x": 1}, ttl=900)
    for _ in range(3):
        store.lock("t1", ttl=30, renew=False).acquire().release()
    store.lock("t3", ttl=60, renew=False).acquire()  # held: not exported


def _positions(index: dict[bytes, bytes]) -> list[tuple[bytes, int]]:
    """A task's checkpoint id index as where it puts each id (an import rebuilds it
    with other push numbers for the same positions)."""
    head = int(index.pop(b":head").split(b",", 1)[0])
    return sorted((name, head - int(p)) for name, p in index.items())


def snapshot(backend: Backend, namespace: str) -> Snapshot:
    """Every exported key of ``namespace``: type, value (lists whole) and its TTL (an
    import continues the TTLs, it does not restart them)."""
    raw = backend.raw()
    found: Snapshot = {}
    keys = KeySpace(namespace)
    try:
        for key in raw.scan_iter(match=f"{namespace}:*", count=1000):
            kind, _, part = keys.parse(key)
            if kind == "lock" or part == "writes":
                continue
            kind_of = raw.type(key).decode()
            if part == "index":  # not exported, rebuilt: compared by the positions it gives
                value = _positions(raw.hgetall(key))
            else:
                value = raw.get(key) if kind_of == "string" else raw.lrange(key, 0, -1)
            relative = key.decode()[len(namespace) :]
            sent_ms = time.time_ns() // 10**6
            # A fence key lives as long as its lease; an imported one until an hour after
            # the server's clock passed it (it only has to be no lower than the export's).
            pttl = -1 if kind == "fence" else int(raw.pttl(key))
            ttl = -1 if pttl == -1 else Ttl(sent_ms, pttl, time.time_ns() // 10**6)
            found[relative] = (kind_of, value, ttl)
    finally:
        raw.close()
    return found


def assert_continued(
    before: Ttl | int, after: Ttl | int, older_ms: int = 0, export_ms: int = 0
) -> None:
    """``after`` (read once an export and import are done) continues ``before`` (read
    before the export) from a file made ``older_ms`` earlier. Export and import each read
    their clock after the server's (a PTTL, an expiry set), which errs towards a later
    expiry by at most the time they took; a file from a clock ahead (``export_ms``: the
    export's run) counts no time from the export's start to its reads. So with E, E' the
    expiries, E - older_ms <= E' <= E - older_ms + export_ms + (time between the reads);
    as each PTTL is read between two clock readings:
    - the time left never grows (but by export_ms);
    - it shrank by at most the wall time between the two reads."""
    assert isinstance(before, Ttl) and isinstance(after, Ttl), (before, after)
    longest = before.pttl - older_ms + export_ms + ROUNDING_MS
    assert after.pttl <= longest, (before, after, older_ms, export_ms)
    elapsed = after.read_ms - before.sent_ms
    assert after.pttl >= before.pttl - older_ms - elapsed - ROUNDING_MS, (before, after)


def assert_same(before: Snapshot, after: Snapshot) -> None:
    assert sorted(after) == sorted(before)
    for key, (kind, value, ttl) in before.items():
        assert after[key][:2] == (kind, value), key
        if ttl == -1:
            assert after[key][2] == -1, key
        else:
            assert_continued(ttl, after[key][2])


def delete_namespace(backend: Backend, namespace: str) -> None:
    raw = backend.raw()
    try:
        for key in list(raw.scan_iter(match=f"{namespace}:*", count=1000)):
            raw.delete(key)
        assert list(raw.scan_iter(match=f"{namespace}:*")) == []
    finally:
        raw.close()


def test_round_trip_restores_every_value_version_and_ttl(
    backend: Backend, namespace: str, tmp_path: Path
) -> None:
    cli = Cli(backend, namespace)
    with cli.store() as store:
        seed(store)
        versions = {
            "s1": store.sessions.get("s1").version,  # type: ignore[union-attr]
            "u1": store.users.get("u1").version,  # type: ignore[union-attr]
        }
        restored = store.checkpoints.restore("t1")
    before = snapshot(backend, namespace)
    assert ":task:{t1}:log" in before and ":fence:{t1}" in before
    assert before[":session:{s1}"][2] != -1 and before[":user:{u1}"][2] == -1
    path = tmp_path / "backup.jsonl"

    exported = cli.export(path)
    assert exported["records"] == 4 and exported["tasks"] == 3 and exported["fences"] == 2
    assert exported["not_exported"] >= 2 and exported["unknown"] == 0  # lease, write memory
    delete_namespace(backend, namespace)
    code, imported, _ = cli.import_(path)

    assert code == 0 and imported["imported"] == 9 and imported["namespace"] == namespace
    assert_same(before, snapshot(backend, namespace))
    with cli.store() as store:
        assert store.sessions.get("s1").version == versions["s1"]  # type: ignore[union-attr]
        user = store.users.get("u1")
        assert user is not None and user.data == {"lang": "zh", "big": 2**60, "tz": "Asia/Shanghai"}
        assert store.users.get("u1").version == versions["u1"]  # type: ignore[union-attr]
        again = store.checkpoints.restore("t1")
        assert again is not None and restored is not None
        assert again.state == {"step": 3, "extra": 2} and again.deltas_applied == 2
        assert again.checkpoint == restored.checkpoint
        assert [c.seq for c in store.checkpoints.history("t1")] == [4, 3, 2, 1]
        assert store.client.exists(store.keys.lock("t3")) == 0
        # The held lease was not exported; the next holder's fence beats every earlier one.
        for task in ("t3", "t1"):
            exported_fence = int(before[f":fence:{{{task}}}"][1])
            fence = store.lock(task, ttl=5, renew=False).acquire().fence
            assert fence is not None and fence > exported_fence


def test_import_into_another_namespace(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    cli = Cli(server_backend, namespace)
    other = namespace + "-copy"
    with cli.store() as store:
        seed(store)
    before = snapshot(server_backend, namespace)
    path = tmp_path / "backup.jsonl"
    cli.export(path)
    try:
        code, imported, _ = cli.import_(path, namespace=other)
        assert code == 0 and imported["namespace"] == other and imported["imported"] == 9
        assert_same(before, snapshot(server_backend, other))
        assert_same(before, snapshot(server_backend, namespace))  # the source is untouched
        with cli.store(other) as store:
            assert store.sessions.get("odd {id}*?").data == {"turn": 3, "ü": "ß"}  # type: ignore[union-attr]
            assert store.checkpoints.restore("t2").state == {"only": "a log"}  # type: ignore[union-attr]
    finally:
        delete_namespace(server_backend, other)


def test_without_namespace_the_file_says_where_to_import(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    cli = Cli(server_backend, namespace)
    with cli.store() as store:
        store.users.put("u1", {"a": 1})
    path = tmp_path / "backup.jsonl"
    cli.export(path)
    delete_namespace(server_backend, namespace)
    done = run("--url", server_backend.url, "import", str(path))  # no --namespace
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"imported 1 entity (1 record, 0 tasks, 0 fences) into namespace {namespace!r}"
    ]
    with cli.store() as store:
        assert store.users.get("u1").data == {"a": 1}  # type: ignore[union-attr]


def test_newer_entities_are_refused_without_force_and_overwritten_with_it(
    backend: Backend, namespace: str, tmp_path: Path
) -> None:
    cli = Cli(backend, namespace)
    with cli.store() as store:
        seed(store)
        for n in range(3):
            store.checkpoints.save("t9", {"n": n})
    exported = snapshot(backend, namespace)
    path = tmp_path / "backup.jsonl"
    cli.export(path)
    with cli.store() as store:
        store.sessions.put("s1", {"turn": 99}, ttl=600)  # a newer version
        store.checkpoints.save("t3", {"x": 2})  # a newer checkpoint
        store.checkpoints.log("t1", {"extra": 3})  # same seq, one delta more
        store.users.delete("u1")  # gone: imported again
        # Deleted and started again: seq is back at 1 (the file has 3), but it is newer.
        store.checkpoints.delete("t9")
        store.checkpoints.save("t9", {"again": 1})
    newer = snapshot(backend, namespace)

    code, report, stderr = cli.import_(path)

    assert code == 1
    assert report["refused"] == 4 and report["imported"] == 4  # u1, odd, n1, t2
    assert report["fences_kept"] == 2  # equal to the file's: nothing to raise
    assert sorted(report["refused_ids"]) == ["session s1", "task t1", "task t3", "task t9"]
    if backend.remote:
        assert stderr.splitlines() == [
            "redistate: refused to overwrite 4 entities newer in the store or different from "
            "the file (--force overwrites)"
        ]
    after = snapshot(backend, namespace)
    for key in (
        ":session:{s1}",
        ":task:{t3}",
        ":task:{t3}:ids",
        ":task:{t1}:log",
        ":task:{t9}",
        ":task:{t9}:ids",
    ):
        assert after[key][:2] == newer[key][:2], key  # the refused ones are unchanged
    assert after[":user:{u1}"][:2] == exported[":user:{u1}"][:2]

    code, report, _ = cli.import_(path, force=True)

    assert code == 0 and report["refused"] == 0 and report["imported"] == 8
    assert_same(exported, snapshot(backend, namespace))
    with cli.store() as store:
        # Versions after a forced restore still never repeat: the next write is newer.
        restored = store.sessions.get("s1")
        assert restored is not None and restored.data == {"turn": 2}
        assert store.sessions.put("s1", {"turn": 3}).version > restored.version


def test_a_fence_counter_is_never_lowered(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    cli = Cli(server_backend, namespace)
    other = namespace + "-b"
    with cli.store() as store:
        for _ in range(3):
            store.lock("job", ttl=30, renew=False).acquire().release()
        exported = int(store.client.get(store.keys.fence("job")) or 0)
    path = tmp_path / "backup.jsonl"
    cli.export(path)
    try:
        with cli.store() as store:
            for _ in range(2):
                store.lock("job", ttl=30, renew=False).acquire().release()
            newer = store.client.get(store.keys.fence("job"))
        assert int(newer or 0) > exported
        for force in (False, True):
            code, report, _ = cli.import_(path, force=force)
            assert code == 0 and report["fences_kept"] == 1 and report["fences"] == 0
            with cli.store() as store:
                assert store.client.get(store.keys.fence("job")) == newer
        code, report, _ = cli.import_(path, namespace=other)  # a namespace without it
        assert code == 0 and report["fences"] == 1
        with cli.store(other) as store:
            assert int(store.client.get(store.keys.fence("job")) or 0) == exported
            fence = store.lock("job", ttl=30, renew=False).acquire().fence
            assert fence is not None and fence > exported
    finally:
        delete_namespace(server_backend, other)


def _rewrite(path: Path, edit: Any) -> Path:
    """A copy of an export whose lines (JSON objects) went through ``edit(lines)``."""
    lines: Lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    edited = edit(lines)
    out = path.with_name("edited.jsonl")
    out.write_bytes(
        b"".join(x if isinstance(x, bytes) else orjson.dumps(x) + b"\n" for x in edited)
    )
    return out


def _record_at(lines: Lines) -> int:
    """Index of the first record line (the order of a SCAN is the server's)."""
    return next(i for i, line in enumerate(lines) if line.get("kind") == "record")


def _record(**fields: Any) -> Any:
    """An edit: ``fields`` changed in the first record line."""

    def edit(lines: Lines) -> Lines:
        at = _record_at(lines)
        return [{**line, **fields} if i == at else line for i, line in enumerate(lines)]

    return edit


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# case -> (edit, the line it breaks (None: the record's; 0: no line), what stderr says)
BAD_FILES: dict[str, tuple[Any, int | None, str]] = {
    "not JSON": (lambda lines: [*lines[:2], b"{not json\n", *lines[3:]], 3, "not valid JSON"),
    "a JSON array": (lambda lines: [*lines[:2], b"[1, 2]\n", *lines[3:]], 3, "not a JSON object"),
    "no header": (lambda lines: lines[1:], 1, "not a redistate export"),
    "format version 3": (
        lambda lines: [{**lines[0], "version": 3}, *lines[1:]],
        1,
        "format version 3 is not supported (this redistate reads 1 and 2)",
    ),
    "unknown kind": (
        lambda lines: [*lines[:2], {"kind": "widget"}, *lines[3:]],
        3,
        "unknown kind 'widget'",
    ),
    "misaligned task": (
        lambda lines: [
            *lines[:2],
            {
                "kind": "task",
                "id": "t",
                "seq": 0,
                "ttl_ms": None,
                "ids": [],
                "log": [],
                "checkpoints": [_b64(b"K1,blob")],
            },
            *lines[3:],
        ],
        3,
        "1 checkpoints but 0 ids: they must align",
    ),
    "bad base64": (_record(value="***"), None, "value is not valid base64"),
    "not a record": (_record(value=_b64(b"plain text")), None, "no record header"),
    "patches cut short": (
        _record(value=_b64(b'M1,0000000000000007,0000000000000,0000000000000,1,w\n0:9:{"a":1}')),
        None,
        "patch frame cut short",
    ),
    "wrong version": (_record(version=7), None, "version 7 is not the value's own"),
    "id over the limit": (_record(id="x" * 513), None, "over the limit of 512"),
    "a kind that is no record": (_record(collection="task"), None, "not a record kind"),
    "negative ttl": (_record(ttl_ms=-5), None, "ttl_ms must be null or an int"),
    "no end line": (lambda lines: lines[:-1], 0, "no end line after line 4"),
    "a line after the end": (lambda lines: [*lines, lines[1]], 6, "a line after the end line"),
    "end count": (
        lambda lines: [*lines[:-1], {"kind": "end", "entities": 9}],
        5,
        "the end line counts 9 entities, the file holds 3",
    ),
}


# A bad or crafted file is refused by the checks import makes before it writes: client
# code, the same whatever the server. Their 31 cases (46 subprocesses) run on one server;
# import on Valkey, cluster and Sentinel is the round trips' and the other tests'.
ONE_SERVER = pytest.mark.parametrize("server_backend", ["redis7"], indirect=True)


@ONE_SERVER
@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_file_is_one_line_naming_the_line_and_imports_nothing(
    server_backend: Backend, namespace: str, tmp_path: Path, case: str
) -> None:
    path = tmp_path / "backup.jsonl"
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        store.users.put("u1", {"a": 1})
        store.sessions.put("s1", {"b": 2})
        store.lock("u1", ttl=30, renew=False).acquire().release()
        with open(path, "wb") as sink:  # in-process: the import is what is tested here
            store.admin.export(sink)
    delete_namespace(server_backend, namespace)
    edit, line, message = BAD_FILES[case]
    bad = _rewrite(path, edit)

    done = run("--url", server_backend.url, "import", str(bad))

    if line is None:
        line = 1 + _record_at([orjson.loads(x) for x in path.read_bytes().splitlines()])
    where = f"{bad}:{line}:" if line else f"{bad}:"
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"redistate: {where} ") and message in done.stderr
    assert snapshot(server_backend, namespace) == {}  # checked whole before any write


def test_an_empty_file_and_a_missing_one(server_backend: Backend, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    done = run("--url", server_backend.url, "import", str(empty))
    assert done.returncode == 1
    assert done.stderr == f"redistate: {empty}: empty file, not a redistate export\n"
    assert run("--url", server_backend.url, "import", str(tmp_path / "nope")).returncode == 2


def test_round_trip_of_more_than_a_thousand_keys(
    backend: Backend, namespace: str, tmp_path: Path
) -> None:
    cli = Cli(backend, namespace)
    with cli.store() as store:
        for i in range(1200):
            store.sessions.put(f"s{i}", {"i": i, "pad": "x" * (i % 50)}, ttl=3600)
        for i in range(300):
            store.users.put(f"u{i}", {"i": i})
        for i in range(20):
            store.checkpoints.save(f"t{i}", {"i": i})
            store.checkpoints.log(f"t{i}", {"d": i})
    before = snapshot(backend, namespace)
    assert len(before) == 1200 + 300 + 4 * 20  # a task: checkpoints, ids, index, log
    path = tmp_path / "big.jsonl"
    assert cli.export(path)["entities"] == 1520
    delete_namespace(backend, namespace)
    code, report, _ = cli.import_(path)
    assert code == 0 and report["imported"] == 1520
    assert_same(before, snapshot(backend, namespace))


@pytest.mark.parametrize("shift_ms", [400_000, -1_000_000])
def test_ttls_continue_from_the_export(
    server_backend: Backend, namespace: str, tmp_path: Path, shift_ms: int
) -> None:
    """A file exported 400 s ago: the 300 s session has expired (not imported), the 600 s
    one has about 200 s left. A file from a clock 1,000 s ahead never lengthens a TTL."""
    cli = Cli(server_backend, namespace)
    with cli.store() as store:
        store.sessions.put("short", {"a": 1}, ttl=300)
        store.sessions.put("long", {"b": 2}, ttl=600)
        store.users.put("u1", {"c": 3})
    before = snapshot(server_backend, namespace)
    path = tmp_path / "backup.jsonl"
    started = time.monotonic()
    cli.export(path)
    export_ms = int((time.monotonic() - started) * 1000) + 1
    older = _rewrite(
        path,
        lambda lines: [{**lines[0], "exported_ms": lines[0]["exported_ms"] - shift_ms}, *lines[1:]],
    )
    delete_namespace(server_backend, namespace)

    code, report, _ = cli.import_(older)

    after = snapshot(server_backend, namespace)
    assert code == 0 and after[":user:{u1}"] == before[":user:{u1}"]
    if shift_ms > 0:
        assert report["expired"] == 1 and report["imported"] == 2
        assert ":session:{short}" not in after
    else:
        assert report["expired"] == 0 and report["imported"] == 3
    for name in ("short", "long"):
        key = f":session:{{{name}}}"
        if key in after:
            ahead = export_ms if shift_ms < 0 else 0
            assert_continued(before[key][2], after[key][2], max(shift_ms, 0), ahead)


def test_a_progress_bar_on_a_terminal(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        store.users.put("u1", {"a": 1})
    path = tmp_path / "backup.jsonl"
    env = {**os.environ, "TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "COLUMNS": "120"}
    url = ["--url", server_backend.url, "--namespace", namespace]
    exported = run(*url, "export", "--out", str(path), "--json", env=env)
    assert exported.returncode == 0 and summary(exported)["records"] == 1
    assert f"export {namespace}" in exported.stderr
    imported = run(*url, "import", str(path), "--json", env=env)
    assert imported.returncode == 0 and summary(imported)["records"] == 1
    assert "import backup.jsonl" in imported.stderr and "100%" not in imported.stdout
    plain = run(*url, "import", str(path), "--json")  # not a terminal: no bar
    assert plain.returncode == 0 and plain.stderr == ""


def test_a_failed_export_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "backup.jsonl"
    done = run("--url", "redis://127.0.0.1:1/0", "export", "--out", str(path))
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "127.0.0.1:1" in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_keys_redistate_did_not_write_are_reported_and_left_out(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    raw = server_backend.raw()
    try:
        raw.set(f"{namespace}:notes:{{plain}}", b"not a record")
        raw.rpush(f"{namespace}:notes:{{list}}", b"x")
        raw.set(f"{namespace}:stray", b"x")
        with Store(server_backend.sync_client(), namespace=namespace) as store:
            store.users.put("u1", {"a": 1})
            # A record in a reserved kind that holds none: no record line (import refuses it).
            raw.set(f"{namespace}:meta:{{m}}", raw.get(store.keys.record("user", "u1")) or b"")
        path = tmp_path / "backup.jsonl"
        done = run(
            "--url", server_backend.url, "--namespace", namespace, "export", "--out", str(path)
        )
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].startswith("exported 1 entity (1 record, 0 tasks, 0 fences)")
        assert lines[1].startswith("left out 4 keys redistate does not recognise: ")
        for key in ("notes:{plain}", "notes:{list}", "stray", "meta:{m}"):
            assert f"{namespace}:{key}" in lines[1]
        assert len(path.read_bytes().splitlines()) == 3  # header, u1, end

        # An import onto a value redistate did not write fails for that entity only.
        other = namespace + "-x"
        raw.set(f"{other}:user:{{u1}}", b"foreign")
        done = run("--url", server_backend.url, "--namespace", other, "import", str(path))
        assert done.returncode == 1
        assert "failed: user u1: " in done.stdout and "is not a redistate record" in done.stdout
        assert done.stderr == "redistate: 1 entity could not be imported\n"
        assert raw.get(f"{other}:user:{{u1}}") == b"foreign"
        raw.delete(f"{other}:user:{{u1}}")
    finally:
        raw.close()


def _exported_user(store: Store, tmp_path: Path) -> Path:
    """Put one user and export the namespace to a file; the file."""
    store.users.put("u1", {"a": 1})
    path = tmp_path / "backup.jsonl"
    with open(path, "wb") as sink:
        store.admin.export(sink)
    return path


def test_in_process_a_crafted_version_raises_and_writes_nothing(tmp_path: Path) -> None:
    with Store.embedded(namespace="app") as store:
        path = _exported_user(store, tmp_path)
        bad = _rewrite(path, lambda lines: _record_version(MAX)(lines, 0))
        before = store.client.get(store.keys.record("user", "u1"))
        with pytest.raises(BadFile, match=f"^{bad}:2: user u1: version {MAX} is over the limit"):
            store.admin.import_file(bad, force=True)
        assert store.client.get(store.keys.record("user", "u1")) == before


def test_a_file_changed_between_the_two_passes_writes_no_bad_line(tmp_path: Path) -> None:
    with Store.embedded(namespace="app") as store:
        path = _exported_user(store, tmp_path)
        crafted = _rewrite(path, lambda lines: _record_version(MAX)(lines, 0)).read_bytes()
        before = store.client.get(store.keys.record("user", "u1"))
        passes: list[int] = []

        def swap_after_the_first_pass(_: int) -> None:  # called as each pass ends
            passes.append(1)
            if len(passes) == 1:
                path.write_bytes(crafted)

        with pytest.raises(BadFile, match=f"^{path}:2: user u1: version {MAX} is over"):
            store.admin.import_file(path, force=True, progress=swap_after_the_first_pass)
        assert store.client.get(store.keys.record("user", "u1")) == before


def test_in_process_a_bad_file_raises_and_writes_nothing(tmp_path: Path) -> None:
    with Store.embedded(namespace="app") as store:
        path = _exported_user(store, tmp_path)
        bad = _rewrite(path, lambda lines: [*lines[:-1], {"kind": "widget"}, lines[-1]])
        with pytest.raises(BadFile, match=f"^{bad}:3: unknown kind 'widget'"):
            store.admin.import_file(bad, namespace="other")
        assert list(store.client.scan_iter(match="other:*")) == []


@pytest.mark.parametrize("mode", ["function", "script"])
def test_scripts_flushed_during_an_import_are_loaded_again(
    server_backend: Backend,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    """The import's loads are lost three times (as if flushed right after each): the
    function library (FUNCTION LOAD), or each script (SCRIPT LOAD) for a connection that
    runs them by EVALSHA, is loaded again and every line imported."""
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        seed(store)
        path = tmp_path / "backup.jsonl"
        with open(path, "wb") as sink:
            store.admin.export(sink)
        client: Any = store.client
        client.script_flush()
        client.function_flush()
        store._conn._fcall = mode == "function"
        skipped: list[str] = []
        if mode == "script":
            load = client.script_load

            def lose_the_first_loads(source: str) -> Any:
                if len(skipped) < 3:  # the import's own loads: as if flushed right after
                    skipped.append(source)
                    return None
                return load(source)

            monkeypatch.setattr(client, "script_load", lose_the_first_loads)
        else:
            execute = client.execute_command

            def lose_the_first_function_loads(*args: Any, **options: Any) -> Any:
                if args[:2] == ("FUNCTION", "LOAD") and len(skipped) < 3:
                    skipped.append(args[2])
                    return None
                return execute(*args, **options)

            monkeypatch.setattr(client, "execute_command", lose_the_first_function_loads)
        report = store.admin.import_file(path, force=True)
    assert len(skipped) == 3 and sum(report.imported.values()) == 7 and report.failed == []


def test_events_and_framework_keys_are_exported_not_left_out(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    """Audit events, LangGraph threads and Agents SDK sessions are in format 2: the
    export counts each as an entity, and recognises every key."""
    import asyncio

    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import empty_checkpoint

    from redistate import AsyncStore
    from redistate.agents import RedistateSession
    from redistate.langgraph import RedisStateSaver

    with Store(server_backend.sync_client(), namespace=namespace) as store:
        store.users.put("u1", {"a": 1})
        store.events.append("t1", "initialized", {"a": 1})
        store.events.append("t1", "updated", {"b": 2})
        config: RunnableConfig = {"configurable": {"thread_id": "th1", "checkpoint_ns": ""}}
        RedisStateSaver(store).put(config, empty_checkpoint(), {"run_id": "r1"}, {})

    async def add() -> None:
        async with AsyncStore(server_backend.async_client(), namespace=namespace) as astore:
            await RedistateSession("s1", store=astore).add_items(
                [{"role": "user", "content": "hi"}]
            )

    asyncio.run(add())
    path = tmp_path / "backup.jsonl"
    done = run("--url", server_backend.url, "--namespace", namespace, "export", "--out", str(path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(
        "exported 4 entities (1 record, 0 tasks, 0 fences, 1 event stream, "
        "1 Agents SDK session, 1 LangGraph thread)"
    ), lines
    assert not any("does not recognise" in line for line in lines), lines
    assert "left out 2 keys a restore does not need or rebuilds" in lines[-1]  # two memories


# -- crafted or damaged files: every line is checked against the store first ----------

HOUR_US = 3600 * 10**6


def _server_us(backend: Backend) -> int:
    raw = backend.raw()
    try:
        seconds, micros = raw.time()
        return int(seconds) * 10**6 + int(micros)
    finally:
        raw.close()


def _dump(backend: Backend, namespace: str) -> dict[bytes, tuple[bytes, bool]]:
    """Every key of ``namespace`` (leases and write memories too): DUMP, and whether it
    expires."""
    raw = backend.raw()
    try:
        keys = list(raw.scan_iter(match=f"{namespace}:*", count=1000))
        return {k: (raw.dump(k), raw.pttl(k) != -1) for k in keys}
    finally:
        raw.close()


def assert_import_refused(
    backend: Backend, namespace: str, path: Path, edit: Any, label: str, message: str
) -> None:
    """``path`` edited by ``edit(lines, now_us)`` is refused by ``redistate import``,
    with and without --force: one line on stderr naming the changed line, ``label`` and
    ``message``, and nothing in the namespace changed (live records and leases too)."""
    bad = _rewrite(path, lambda lines: edit(lines, _server_us(backend)))
    pairs = zip(path.read_bytes().splitlines(), bad.read_bytes().splitlines(), strict=True)
    line = 1 + next(n for n, (a, b) in enumerate(pairs) if a != b)
    before = _dump(backend, namespace)

    for force in ([], ["--force"]):
        done = run("--url", backend.url, "import", str(bad), *force)

        assert done.returncode == 1 and done.stdout == "", done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert done.stderr.startswith(f"redistate: {bad}:{line}: {label}"), done.stderr
        assert message in done.stderr, done.stderr
        assert _dump(backend, namespace) == before


def _versioned(value: bytes, version: int) -> bytes:
    """A record envelope with its version field replaced."""
    return value[:3] + b"%016d" % version + value[19:]


def _blob(checkpoint_id: str, state: bytes) -> bytes:
    """A checkpoint blob whose digest matches ``state`` (whatever it is)."""
    meta = orjson.dumps({"id": checkpoint_id}, option=orjson.OPT_SORT_KEYS)
    digest = hashlib.sha256(meta + b"\n" + state).hexdigest().encode()
    return b"K1,%s,-\n%s\n%s" % (digest, meta, state)


def _record_version(version: Any) -> Any:
    def change(line: dict[str, Any], now_us: int) -> dict[str, Any]:
        wanted = version(now_us) if callable(version) else version
        value = _versioned(base64.b64decode(line["value"]), wanted)
        return {**line, "value": _b64(value), "version": wanted}

    return edit_line("record", "u1", change)


def _record_value(payload: bytes, head: bytes = b"R1") -> Any:
    def change(line: dict[str, Any], now_us: int) -> dict[str, Any]:
        value = base64.b64decode(line["value"])
        return {**line, "value": _b64(head + value[2 : value.index(b"\n") + 1] + payload)}

    return edit_line("record", "u1", change)


def _fence(value: Any) -> Any:
    return edit_line("fence", "job", lambda line, now: {**line, "fence": value(now)})


def _task(change: Any) -> Any:
    """An edit of task t1's lists: ``change(checkpoints, ids, log, now_us)`` (bytes,
    newest first) returns them changed; seq follows the ids."""

    def edit_task(line: dict[str, Any], now_us: int) -> dict[str, Any]:
        parts = [[base64.b64decode(x) for x in line[n]] for n in ("checkpoints", "ids", "log")]
        blobs, ids, log = change(*parts, now_us)
        seqs = [int(e.split(b",")[0]) for e in ids]
        names = ("checkpoints", "ids", "log")
        encoded = {n: [_b64(x) for x in p] for n, p in zip(names, (blobs, ids, log), strict=True)}
        return {**line, **encoded, "seq": max(seqs, default=0)}

    return edit_line("task", "t1", edit_task)


def _entry(entry: bytes, field: int, value: int) -> bytes:
    parts = entry.split(b",")
    parts[field] = b"%016d" % value if field == 0 else b"%d" % value
    return b",".join(parts)


def _first_entry(field: int, value: Any) -> Any:
    def change(blobs: list[bytes], ids: list[bytes], log: list[bytes], now: int) -> Any:
        return blobs, [_entry(ids[0], field, value(now)), *ids[1:]], log

    return _task(change)


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]


def _undecodable_checkpoint(
    blobs: list[bytes], ids: list[bytes], log: list[bytes], now: int
) -> Any:
    checkpoint_id = ids[0].split(b",")[3].decode()
    return [_blob(checkpoint_id, b"\xff not JSON"), *blobs[1:]], ids, log


def _undecodable_delta(blobs: list[bytes], ids: list[bytes], log: list[bytes], now: int) -> Any:
    head, _, _ = log[0].partition(b"\n")
    body = b"\xff not JSON"
    return blobs, ids, [head + b"\n" + hashlib.sha256(body).hexdigest().encode() + b"\n" + body]


def _delta_time(blobs: list[bytes], ids: list[bytes], log: list[bytes], now: int) -> Any:
    head, newline, rest = log[0].partition(b"\n")
    late = b"%013d" % (now // 1000 + 2 * HOUR_US // 1000)
    return blobs, ids, [head[:-13] + late + newline + rest]


MAX = 2**53 - 1
# case -> (edit(lines, server µs), the entity the line holds, what stderr says)
CRAFTED: dict[str, tuple[Any, str, str]] = {
    "record version 2**53-1": (_record_version(MAX), "user u1", f"version {MAX} is over the limit"),
    "record version 2 h ahead": (
        _record_version(lambda now: now + 2 * HOUR_US),
        "user u1",
        "is over the limit",
    ),
    "record payload not JSON": (
        _record_value(b"\xff not JSON"),
        "user u1",
        "value does not decode with the store's codec",
    ),
    "record patch not JSON": (
        _record_value(b'7:{"a":1}3:xyz', b"M1"),
        "user u1",
        "value does not decode with the store's codec",
    ),
    "record in a reserved kind": (
        edit_line("record", "u1", lambda line, now: {**line, "collection": "meta"}),
        "",
        "collection 'meta' is not a record kind",
    ),
    "fence 2**53-1": (_fence(lambda now: MAX), "fence job", f"fence {MAX} is over the limit"),
    "fence 2 h ahead": (_fence(lambda now: now + 2 * HOUR_US), "fence job", "is over the limit"),
    "checkpoint edited": (
        _task(lambda b, i, log, now: ([_flip(b[0], len(b[0]) - 2), *b[1:]], i, log)),
        "task t1",
        "does not match its SHA-256 digest",
    ),
    "checkpoint state not JSON": (_task(_undecodable_checkpoint), "task t1", "does not decode"),
    "checkpoint seq 2**53-1": (
        _first_entry(0, lambda now: MAX),
        "task t1",
        f"ids[0] seq {MAX} is over the limit {MAX - 1}",
    ),
    "checkpoint time 2 h ahead": (
        _first_entry(1, lambda now: now // 1000 + 2 * HOUR_US // 1000),
        "task t1",
        "created_ms",
    ),
    "checkpoint fence 2**53": (_first_entry(2, lambda now: MAX + 1), "task t1", "fence"),
    "delta edited": (
        _task(lambda b, i, log, now: (b, i, [_flip(log[0], len(log[0]) - 2)])),
        "task t1",
        "log[0] is damaged",
    ),
    "delta not JSON": (_task(_undecodable_delta), "task t1", "log[0] is damaged"),
    "delta time 2 h ahead": (_task(_delta_time), "task t1", "log[0] time (ms)"),
}


def _live_namespace(store: Store, path: Path) -> None:
    """Live state (records, a task with a log, a fence, a held lease, write memories),
    exported to ``path``."""
    store.users.put("u1", {"a": 1})
    store.users.put("u1", {"a": 2})  # a write memory
    store.sessions.put("s1", {"b": 2})
    for step in range(2):
        store.checkpoints.save("t1", {"step": step})
    store.checkpoints.log("t1", {"extra": 1})
    store.lock("job", ttl=30, renew=False).acquire().release()
    with open(path, "wb") as sink:
        store.admin.export(sink)
    store.lock("held", ttl=600, renew=False).acquire()


@ONE_SERVER
@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_line_is_named_and_nothing_is_imported(
    server_backend: Backend, namespace: str, tmp_path: Path, case: str
) -> None:
    path = tmp_path / "backup.jsonl"
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        _live_namespace(store, path)
        store.users.put("u1", {"a": 3})  # the live record: newer than the file's
    edit, label, message = CRAFTED[case]
    assert_import_refused(server_backend, namespace, path, edit, label, message)


def test_a_limit_names_the_value_and_the_bound(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    path = tmp_path / "backup.jsonl"
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        _live_namespace(store, path)
    before = _dump(server_backend, namespace)
    bad = _rewrite(path, lambda lines: _fence(lambda now: MAX)(lines, 0))

    done = run("--url", server_backend.url, "import", str(bad))

    limit = int(done.stderr.split("over the limit ")[1].split(":")[0])
    assert done.returncode == 1 and f"fence {MAX} is over the limit {limit}: " in done.stderr
    assert "plus 3600 s" in done.stderr and limit < MAX  # the server's clock + 1 h
    assert _dump(server_backend, namespace) == before


def test_versions_and_fences_within_the_allowance_import(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    """A file from a server whose clock ran ahead (less than the allowance) imports; the
    next write goes past its version; a fence of 10**14 is stored exactly and leases on
    its name go on (the issue's crafted file broke every later lease)."""
    path = tmp_path / "backup.jsonl"
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        _live_namespace(store, path)
    delete_namespace(server_backend, namespace)
    ahead = _server_us(server_backend) + HOUR_US // 2
    edited = _rewrite(
        path,
        lambda lines: _fence(lambda now: 10**14)(_record_version(ahead)(lines, 0), 0),
    )

    code, report, _ = Cli(server_backend, namespace).import_(edited)

    assert code == 0 and report["imported"] == 4, report
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        user = store.users.get("u1")
        assert user is not None and user.version == ahead
        assert store.users.put("u1", {"a": 9}).version == ahead + 1
        assert store.client.get(store.keys.fence("job")) == b"100000000000000"
        # Every later lease on that name still works, its fence above the imported one.
        fences: list[int] = []
        for _ in range(2):
            lease = store.lock("job", ttl=30, renew=False).acquire()
            fences.append(lease.fence or 0)
            lease.release()
        assert 10**14 < fences[0] < fences[1], fences


def test_an_encrypted_file_needs_the_stores_keys(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    from redistate.core.encryption import EncryptedCodec

    key = os.urandom(32)
    codec = EncryptedCodec({"k1": key}, primary="k1")
    path = tmp_path / "backup.jsonl"
    with Store(server_backend.sync_client(), namespace=namespace, codec=codec) as store:
        store.users.put("u1", {"secret": 1})
        store.checkpoints.save("t1", {"step": 1})
        with open(path, "wb") as sink:
            store.admin.export(sink)
    delete_namespace(server_backend, namespace)
    other = base64.b64encode(os.urandom(32)).decode()
    url = ["--url", server_backend.url, "--namespace", namespace]

    for env in ({}, {"REDISTATE_KEYS": f"k1={other}"}):  # no keys, another key
        done = run(*url, "import", str(path), env={**os.environ, **env})
        # The record or the task line, whichever the scan put first.
        problems = ("does not decode", "does not authenticate")
        assert done.returncode == 1 and any(p in done.stderr for p in problems), done.stderr
        assert _dump(server_backend, namespace) == {}
    keys = {"REDISTATE_KEYS": f"k1={base64.b64encode(key).decode()}"}
    done = run(*url, "import", str(path), "--json", env={**os.environ, **keys})
    assert done.returncode == 0 and summary(done)["imported"] == 2, done.stderr


def test_an_imported_fence_expires_after_the_clock_passed_it(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    """Fences are max(last + 1, server µs): an imported fence key is needed only until
    the clock passes it, and kept the allowance after that, never for good. The script
    refuses a fence too far ahead by itself too (a caller that skips the file check)."""
    path = tmp_path / "backup.jsonl"
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        _live_namespace(store, path)
    delete_namespace(server_backend, namespace)
    ahead = _server_us(server_backend) + HOUR_US // 2
    code, report, _ = Cli(server_backend, namespace).import_(
        _rewrite(path, lambda lines: _fence(lambda now: ahead)(lines, 0))
    )
    assert code == 0 and report["fences"] == 1
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        key = store.keys.fence("job")
        assert store.client.get(key) == b"%d" % ahead
        # Half an hour until the clock passes it, then the allowance (1 h): 1.5 h at most.
        assert 3600 * 1000 < store.client.pttl(key) <= 5400 * 1000
        entity = Entity("fence", "", "job", None, (b"%d" % (ahead + HOUR_US),))
        with pytest.raises(
            RedistateError, match=r"RSARG fence \d+ is more than 3600000 ms past the server clock"
        ):
            store._conn.script(*import_call(store.keys, entity, 0, False))
        assert store.client.get(key) == b"%d" % ahead


def test_a_signed_file_needs_the_stores_signing_keys(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    """Sealed payloads are checked like a read checks them: under other signing keys a
    record or checkpoint does not authenticate, and nothing is imported."""
    from redistate.core.signing import SigningKeys

    key = os.urandom(32)
    signing = SigningKeys({"s1": key}, primary="s1")
    path = tmp_path / "backup.jsonl"
    with Store(server_backend.sync_client(), namespace=namespace, signing=signing) as store:
        store.users.put("u1", {"a": 1})
        store.users.merge("u1", {"b": 2})  # a patched record: each frame sealed
        store.checkpoints.save("t1", {"step": 1})
        store.checkpoints.log("t1", {"step": 2})
        with open(path, "wb") as sink:
            store.admin.export(sink)
    delete_namespace(server_backend, namespace)
    url = ["--url", server_backend.url, "--namespace", namespace]

    other = {"REDISTATE_SIGNING_KEYS": f"s1={base64.b64encode(os.urandom(32)).decode()}"}
    done = run(*url, "import", str(path), env={**os.environ, **other})
    assert done.returncode == 1 and "does not authenticate" in done.stderr, done.stderr
    assert _dump(server_backend, namespace) == {}
    keys = {"REDISTATE_SIGNING_KEYS": f"s1={base64.b64encode(key).decode()}"}
    done = run(*url, "import", str(path), "--json", env={**os.environ, **keys})
    assert done.returncode == 0 and summary(done)["imported"] == 2, done.stderr
    with Store(server_backend.sync_client(), namespace=namespace, signing=signing) as store:
        assert store.users.get("u1").data == {"a": 1, "b": 2}  # type: ignore[union-attr]
        restored = store.checkpoints.restore("t1")
        assert restored is not None and restored.complete and restored.state == {"step": 2}
