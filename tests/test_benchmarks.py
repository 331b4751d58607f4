"""The benchmark scripts keep working; records.py exits non-zero over its round-trip targets."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from redistate.records.mergelog import COMPACT_AT

ROOT = Path(__file__).parent.parent


def bench(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``benchmarks/<script>`` with ``args``; fails the test if it exits non-zero."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_records_benchmark_runs_and_meets_round_trip_targets() -> None:
    done = bench("records.py", "--n", "200", "--rounds", "2", "--warmup", "20")
    for op in ("put", "get", "conditional put", "merge", "update", "get(touch)"):
        assert f"\n{op} " in done.stdout


def test_checkpoints_benchmark_runs_and_meets_round_trip_targets() -> None:
    done = bench("checkpoints.py", "--quick")
    assert "after 10 vs 10,000 earlier saves" in done.stdout
    assert "vs deltas" in done.stdout


def test_checkpoint_index_benchmark_runs_in_one_round_trip_per_lookup() -> None:
    done = bench("checkpoint_index.py", "--quick")
    for op in ("get(task, id)", "save, chosen id (resend)", "save, chosen id (new)"):
        assert f"\n{op} " in done.stdout, done.stdout
    assert "vs 10 p50" in done.stdout and "server µs" in done.stdout


def test_locks_benchmark_runs_and_meets_round_trip_targets() -> None:
    done = bench("locks.py", "--quick")
    assert "hand-off" in done.stdout and "redis-py Lock" in done.stdout


def test_durability_benchmark_runs_and_keeps_replicated_writes_to_one_request() -> None:
    done = bench("durability.py", "--n", "200", "--rounds", "2", "--warmup", "20")
    for op in ("put", "merge", "checkpoint save"):
        assert f"\n{op} " in done.stdout


def test_backup_benchmark_runs_and_keeps_peak_memory_flat() -> None:
    done = bench("backup.py", "--quick")
    assert "peak memory 10,000 / 1,000 records: export" in done.stdout
    assert "import peak MiB" in done.stdout


def test_run_benchmark_quick_compares_every_peer_with_promised_round_trips(
    tmp_path: Path,
) -> None:
    """benchmarks/run.py --quick: every comparison row, the curves' PNGs, and redistate's
    round trips exactly as the design promises (counts, never times)."""
    done = bench("run.py", "--quick", "--out", str(tmp_path), timeout=600)
    operations = (
        "session put",
        "session get",
        "session put (async)",
        "session get (async)",
        "user merge, 1 process",
        "user merge, 8 processes",
        "checkpoint save",
        "checkpoint latest",
        "lock acquire+release",
    )
    for op in operations:
        assert f"\n{op} " in done.stdout, op
    peers = (
        "raw SET PX",
        "raw GET",
        "agents RedisSession add_items",
        "agents RedisSession get_items",
        "WATCH/MULTI loop",
        "naive GET+SET",
        "raw LPUSH+LTRIM pipeline",
        "raw LINDEX 0",
        "llama-index RedisChatStore",
        "redis-py Lock",
        "python-redis-lock",
        "pottery Redlock",
    )
    for peer in peers:
        assert f" {peer} |" in done.stdout, peer
    for curve in ("2a. save / latest", "2b. restore", "2c. ids()", "2d. throughput"):
        assert curve in done.stdout, curve
    assert "1e. where a session put's time goes" in done.stdout
    assert "1f. Redis memory per session" in done.stdout

    result = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    rows = [r for part in ("sessions", "merges", "checkpoints", "locks") for r in result[part]]
    measured = {(r["op"], r["side"]): r["round_trips"] for r in rows}
    promised = {
        ("session put", "redistate Store"): 1,
        ("session get", "redistate Store"): 1,
        ("session put (async)", "redistate AsyncStore"): 1,
        ("session get (async)", "redistate AsyncStore"): 1,
        ("checkpoint save", "redistate checkpoints"): 1,
        ("checkpoint latest", "redistate checkpoints"): 1,
        ("lock acquire+release", "redistate store.lock"): 2,
    }
    for key, count in promised.items():
        assert measured[key] == count, (key, measured[key])
    # One script per merge; one merge in COMPACT_AT in a row also folds the patches back.
    merge = measured[("user merge, 1 process", "redistate users.merge")]
    assert 1 < merge <= 1 + 1 / COMPACT_AT + 0.005, merge
    apart = {r["side"]: r for r in result["put_apart"]}
    # The server's own time per call: a bare SET costs less than any script, and the
    # write memory adds commands to record_put.
    assert 0 < apart["raw SET PX"]["server_us"] < apart["a script that only SETs"]["server_us"]
    assert apart["record_put by hand"]["server_us"] > apart["a script that only SETs"]["server_us"]
    assert all(r["round_trips"] == 1 for r in result["put_apart"])
    assert [r["payload"] for r in result["memory"]] == [256, 512, 900, 1000, 1024, 1100, 2048, 4096]
    assert all(r["rs_bytes"] >= r["raw_bytes"] > r["payload"] for r in result["memory"])
    lost = {r["side"]: r["lost"] for r in result["merges"] if r["procs"] > 1}
    assert lost["redistate users.merge"] == 0 and lost["WATCH/MULTI loop"] == 0
    curves = result["curves"]
    for r in (r for r in curves["history"] if "history" in r):
        for v in ("save_all", "save_cap", "latest_all", "latest_cap"):
            assert r[f"{v}_round_trips"] == 1, (v, r["history"])
    assert all(r["rs_round_trips"] == 1 for r in curves["deltas"])
    assert all(r["rs_put_round_trips"] == 1 == r["rs_get_round_trips"] for r in curves["processes"])
    assert result["round_trip_failures"] == []
    # Part 3, issue 21's table: both loopback modes (this machine has two CPUs or more),
    # every operation against its peer, and every target named with a verdict or why not.
    part = result["issue21"]
    modes = [m["mode"] for m in part["modes"]]
    if part["note"].startswith("not pinned"):  # a container refusing sched_setaffinity
        assert modes == ["as scheduled"]
    else:
        assert modes == (["apart", "one CPU"] if len(os.sched_getaffinity(0)) > 1 else ["one CPU"])
    for m in part["modes"]:
        assert f"3a [{m['mode']}]" in done.stdout and f"3c [{m['mode']}]" in done.stdout
        ops = {r["op"]: r for r in m["ops"]}
        assert set(ops) >= {"put 1 KB", "get 1 KB", "events.append", "lease pair, store.task()"}
        for op in ("put 1 KB", "get 1 KB", "checkpoints.save 1 KB", "events.append"):
            assert ops[op]["round_trips"] == 1, (m["mode"], op)
        assert ops["lease pair, renew=True"]["round_trips"] == 2
        assert ops["lease pair, store.task()"]["round_trips"] == 2
        # A script's server time shows even in a few calls (a GET's may round to 0 µs).
        assert ops["put 1 KB"]["exec_us"] > 0 and ops["events.append"]["exec_us"] > 0
        assert {r["kb"] for r in m["contended"]} == {1, 6}
        assert all(r["lost"] == 0 for r in m["contended"])
    assert part["once"]["batch"]["round_trips"] == 1  # 10 mixed writes in one request
    judged = {r["target"].split(":")[0].split(" vs")[0] for r in result["issue21_targets"]}
    for what in ("put 1 KB", "store.task() acquire+release (renews)", "10 mixed writes in a batch"):
        assert what in judged, (what, judged)
    assert "targets (issue 21), judged on this run" in done.stdout
    for png in ("history", "restore_deltas", "ids_keys", "throughput_processes"):
        assert (tmp_path / f"{png}.png").stat().st_size > 0
    assert "CPU:" in (tmp_path / "machine.txt").read_text(encoding="utf-8")


def test_events_benchmark_runs_and_appends_in_one_round_trip() -> None:
    done = bench("events.py", "--quick")
    for part in ("1. append vs raw XADD", "2. verify and fold", "3. AES-256-GCM"):
        assert part in done.stdout, part


def test_signing_benchmark_compares_every_sealed_operation() -> None:
    done = bench("signing.py", "--quick")
    assert "HMAC-SHA-256 seals" in done.stdout
    for operation in ("session merge", "event append", "checkpoint restore", "verify 1,000"):
        assert operation in done.stdout, operation


def test_langgraph_benchmark_compares_the_savers_and_keeps_redis_ops_to_one_round_trip() -> None:
    """benchmarks/savers.py --quick: every section and saver; it exits 1 if a Redis put,
    put_writes or get_tuple takes more than one round trip (and 2 without PostgreSQL)."""
    done = bench("savers.py", "--quick")
    for section in (
        "1. graph run",
        "2. saver primitives",
        "3. resume: graph.get_state",
        "4. async graph run",
        "judgement:",
    ):
        assert section in done.stdout, section
    for saver in ("RedisStateSaver", "PostgresSaver", "SqliteSaver", "AsyncPostgresSaver"):
        assert f"\n{saver} " in done.stdout or f" {saver} |" in done.stdout, saver


def test_langgraph_store_benchmark_compares_the_stores_in_the_round_trips_it_promises() -> None:
    """benchmarks/langgraph_store.py --quick: every op on the three stores; it exits 1 if
    a put or a get of RedistateStore takes more than one round trip."""
    done = bench("langgraph_store.py", "--quick")
    rows = {line.split("|")[0].strip(): line for line in done.stdout.splitlines() if "|" in line}
    for op in ("put profile", "get profile", "search one user (2 items)", "list_namespaces"):
        assert op in rows, op
    # A one-namespace search reads the registry, then the namespace: two round trips.
    assert rows["search one user (2 items)"].split("|")[4].strip() == "2.00"
    for store in ("RedistateStore", "SqliteStore", "InMemoryStore"):
        assert f"{store} p50" in done.stdout, store


def test_steps_benchmark_runs_and_keeps_its_round_trips() -> None:
    """benchmarks/steps.py --quick exits 1 if a step takes more round trips than
    promised: 1 idempotent, 2 not, 0 replayed."""
    done = bench("steps.py", "--quick")
    assert "run.step vs calling the tool directly" in done.stdout
    assert "judgement: an idempotent step adds" in done.stdout


def test_cli_startup_benchmark_prints_each_command_against_the_interpreter_baseline() -> None:
    """benchmarks/cli_startup.py --quick: a row per command, the baseline and redis-py's
    import among them (times are printed, never judged)."""
    done = bench("cli_startup.py", "--quick")
    assert "CLI start-up: wall time per command" in done.stdout
    for command in (
        "python -c pass",
        'python -c "import redis"',
        "redistate --help",
        "redistate demo --help",
        "redistate --url URL ls",
        "redistate ls (embedded)",
    ):
        assert f"\n{command} " in done.stdout, command
    assert "Where `redistate --url URL ls` goes" in done.stdout
    for step in ("redis-py", "+ typer", "+ redistate.store", "+ running ls", "+ the embedded"):
        assert f"\n{step} " in done.stdout, step
    assert "judgement: `redistate --url URL ls` takes" in done.stdout


def test_cold_start_benchmark_prints_each_line_against_python_and_redis_py() -> None:
    """benchmarks/cold_start.py --quick: imports and a fresh process's first put, each
    over the interpreter and over its redis-py counterpart, to the completed work and
    to exit (printed, never judged)."""
    done = bench("cold_start.py", "--quick")
    assert "Cold start: a fresh process each (medians)" in done.stdout
    header = next(line for line in done.stdout.splitlines() if line.startswith("line "))
    for column in ("to done ms", "over redis-py ms", "CPU over redis-py ms", "to exit over"):
        assert column in header, column
    for line in (
        "python -c pass",
        "import redis",
        "import redistate",
        "from redistate import Store, AsyncStore",
        "redis-py: first SET",
        "redistate: first put",
        "redistate: first put, server_check off",
    ):
        assert f"\n{line} " in done.stdout, line
    assert "judgement: start to first put is" in done.stdout
    assert "Spawn to exit, teardown included:" in done.stdout


def test_server_time_check_fails_a_row_far_over_its_reference(tmp_path: Path) -> None:
    # The committed reference, each redistate row made a tenth as dear in µs and in
    # "x script": a run at least a third as dear as the reference is then over the 3x
    # limit (and its 2 µs slack) in both, and says so.
    reference = json.loads((ROOT / "benchmarks" / "server_time.json").read_text())
    for rows in reference.values():
        for row in rows:
            if row["side"] == "redistate":
                row["x_script"] /= 10
                row["exec_us"] /= 10
    cheap = tmp_path / "cheap.json"
    cheap.write_text(json.dumps(reference))
    args = ["--n", "200", "--check", str(cheap), "--json", str(tmp_path / "run.json")]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "server_time.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "server time regression: Redis 7 put 1 KB" in done.stderr
    run = json.loads((tmp_path / "run.json").read_text())
    assert {r["op"] for r in run["Redis 7"]} >= {"put 1 KB", "events.append"}
    assert "write memory of one key" in done.stdout


def test_costs_benchmark_prints_each_cost_against_its_baseline() -> None:
    done = bench("costs.py", "--quick")
    for line in ("with nulls", "x MGET", "x scan_iter", "restore", "returning=False"):
        assert line in done.stdout, done.stdout
    assert done.stdout.count("x redis-py Lock") == 3


def test_batches_benchmark_runs_and_keeps_a_batch_to_one_round_trip() -> None:
    done = bench("batches.py", "--quick")
    for op in ("1 put", "10 mixed writes, batched", "100 puts, one by one"):
        assert f"\n{op} " in done.stdout


def test_server_instructions_benchmark_counts_each_script_inside_fcall(tmp_path: Path) -> None:
    """Counted by callgrind, not timed: each operation is one FCALL (two for a lease
    pair), costs more than a function that only returns, and less without the ACL
    check it runs on every call; beside the code issue 21 measured (by EVALSHA), a put
    is counted and costs the server less now."""
    spec = importlib.util.spec_from_file_location(
        "server_instructions", ROOT / "benchmarks" / "server_instructions.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "ir.json"
    done = bench(
        "server_instructions.py",
        *("--calls", "20", "--json", str(out), "--against", module.BEFORE_ISSUE_21),
        timeout=900,
    )
    assert "instructions per operation inside FCALL" in done.stdout
    for server, result in json.loads(out.read_text()).items():
        rows = {r["op"]: r for r in result["rows"]}
        bare = rows.pop("a function that only returns")["instructions"]
        assert set(rows) == {
            "put 1 KB",
            "merge 1 field, returning=False",
            "checkpoints.save 1 KB",
            "events.append",
            "lease pair, renew=False",
        }, server
        for op, row in rows.items():
            fcalls = 2 if op.startswith("lease pair") else 1
            # A brief merge folds its patches back by chance: a few calls are two.
            assert fcalls <= row["fcalls_per_op"] < fcalls + 0.5, (server, op)
            assert row["instructions"] > 3 * bare, (server, op)
        # The check's cost, told apart from the Lua collector's steps, which move one
        # row by a few thousand instructions either way (the bare function's too, and
        # events.append's 2-3% check was once outweighed): on put, and over all rows.
        assert rows["put 1 KB"]["without_acl_check"] < 0.95 * rows["put 1 KB"]["instructions"]
        assert sum(r["without_acl_check"] for r in rows.values()) < sum(
            r["instructions"] for r in rows.values()
        ), server
        # The earlier code ran each operation too (its EVALSHA counted, not 0), and its
        # put carried its libraries' definitions and a ZSCORE on every call.
        for op, row in rows.items():
            assert row["before"] > 3 * bare and row["before_commit"] == module.BEFORE_ISSUE_21
            assert row["now_over_before"] == row["instructions"] / row["before"], (server, op)
        assert rows["put 1 KB"]["now_over_before"] < 0.8, server
        assert rows["put 1 KB"]["target_over_before"] == 12 / 30
    # --check: this run against the committed reference passes; against one that makes
    # put half as dear, it fails naming put.
    run = json.loads(out.read_text())
    reference = json.loads((ROOT / "benchmarks" / "server_instructions.json").read_text())
    assert module.check(run, reference) == []
    for row in reference["Redis 7"]["rows"]:
        if row["op"] == "put 1 KB":
            row["instructions"] /= 2
    failures = module.check(run, reference)
    assert len(failures) == 1 and failures[0].startswith("Redis 7 put 1 KB:"), failures


def test_adk_sessions_benchmark_compares_the_services_in_the_round_trips_it_promises() -> None:
    """benchmarks/adk_sessions.py --quick: every op on the four services; it exits 1 if
    a get takes more than one round trip, a get and an append more than three, or a
    create more than two."""
    done = bench("adk_sessions.py", "--quick")
    lines = [line.split("|") for line in done.stdout.splitlines() if "|" in line]
    header = [cell.strip() for cell in lines[0]]
    rows = {cells[0].strip(): [c.strip() for c in cells] for cells in lines[1:]}
    for op in ("list_sessions (500 of one user)", "get_session (2 events)", "create_session"):
        assert op in rows, op
    reads, adk_reads = header.index("reads/op"), header.index("adk reads/op")
    assert rows["get_session (2 events)"][reads] == "1.00"
    assert rows["create_session"][reads] == "2.00"
    # ADK's own Redis service lists by SCAN and one GET per session.
    assert float(rows["list_sessions (500 of one user)"][adk_reads]) >= 500
    for service in ("redistate", "RedisSessionService", "DatabaseSessionService"):
        assert f"{service} p50 ms" in header, service


def test_claude_store_benchmark_appends_and_loads_in_one_round_trip() -> None:
    """benchmarks/claude_store.py --quick: both stores on every op; it exits 1 if an
    append to a known session, a resent one or a load takes more than one round trip."""
    done = bench("claude_store.py", "--quick")
    lines = [line.split("|") for line in done.stdout.splitlines() if "|" in line]
    header = [cell.strip() for cell in lines[0]]
    rows = {cells[0].strip(): [c.strip() for c in cells] for cells in lines[1:]}
    reads = header.index("reads/op")
    assert rows["append (5 lines)"][reads] == "1.00"
    assert rows["load"][reads] == "1.00"
    assert rows["list_session_summaries (100)"][reads] == "2.00"
    assert "InMemorySessionStore p50 ms" in header


def test_pydantic_ai_store_benchmark_saves_and_loads_in_two_round_trips() -> None:
    """benchmarks/pydantic_ai_store.py --quick: both stores on every op; it exits 1 if a
    save of a turn or a load takes more than two round trips (the revision check reads
    the record first)."""
    done = bench("pydantic_ai_store.py", "--quick")
    lines = [line.split("|") for line in done.stdout.splitlines() if "|" in line]
    header = [cell.strip() for cell in lines[0]]
    rows = {cells[0].strip(): [c.strip() for c in cells] for cells in lines[1:]}
    reads = header.index("reads/op")
    assert rows["save (1 turn)"][reads] == "2.00"
    assert rows["load"][reads] == "2.00"
    assert rows["list_conversations (100)"][reads] == "2.00"
    assert "InMemoryConversationStore p50 ms" in header


def test_telemetry_benchmark_reports_off_and_on_in_one_run() -> None:
    """benchmarks/telemetry.py --quick: both sides of each op, one round trip each, and
    the hooks' own cost (the script exits 1 if, off, they cost over 2% of an op)."""
    done = bench("telemetry.py", "--quick")
    lines = [line.split("|") for line in done.stdout.splitlines() if "|" in line]
    header = [cell.strip() for cell in lines[0]]
    rows = {cells[0].strip(): [c.strip() for c in cells] for cells in lines[1:]}
    for op in ("put 1 KB", "get 1 KB"):
        assert rows[op][header.index("reads/op")] == "1.00"
        assert float(rows[op][header.index("hooks off ns")].replace(",", "")) > 0
        assert rows[op][header.index("on p50 µs")] and rows[op][header.index("off/none")]


def _fresh() -> Any:
    spec = importlib.util.spec_from_file_location("_fresh", ROOT / "benchmarks" / "_fresh.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_fresh_run_is_timed_to_its_done_line_wherever_its_own_output_ends() -> None:
    """The start-up benchmarks' timer: the done time comes from the DONE line even when
    the code printed without a newline before it or an atexit handler prints after it;
    it lies between spawn and exit."""
    fresh = _fresh()
    env = dict(os.environ)
    codes = (
        "pass",
        "print('x', end='')",
        "import atexit; atexit.register(print, 'fresh-run-done at exit')",
    )
    for code in codes:
        run = fresh.run_once([sys.executable, "-c", code + fresh.DONE], env, done=True)
        assert 0 < run.done < run.wall, code
        assert run.done_cpu > 0, code
    plain = fresh.run_once([sys.executable, "-c", "pass"], env)
    assert plain.done is None and plain.done_cpu is None


def test_a_fresh_run_without_its_done_line_stops_the_benchmark() -> None:
    fresh = _fresh()
    for code in ("pass", "print('fresh-run-done 1')", "print('fresh-run-done 1 x')"):
        with pytest.raises(SystemExit, match="printed no fresh-run-done line"):
            fresh.run_once([sys.executable, "-c", code], dict(os.environ), done=True)
