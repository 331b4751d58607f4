"""What the ACL check every script starts with costs the server.

The same scripts sent as shipped (the generated ``redis.acl_check_cmd`` prelude, then
the libraries and the script) and without the prelude, alternating in rounds on one
server, as the default user (all keys) and as the least-privilege user ``redistate acl``
prints (key patterns: the check looks at them too). Server µs per EVALSHA from INFO
commandstats (it includes the commands the script runs). Redis 7 and Valkey 9, each a
private server started for the run.

    python benchmarks/acl_check.py [--calls 5000] [--rounds 4]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from redistate import Store
from redistate.cli.acl import setuser
from redistate.core.scripts import _acl_prelude, script
from redistate.records.spec import new_write_id

# The same server fixture the tests use (free loopback port, no persistence).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.servers import redis_binary, running, valkey_binary

PASSWORD = "bench"


def _usec(stats: redis.Redis) -> tuple[int, int]:
    found = stats.info("commandstats").get("cmdstat_evalsha", {})
    return int(found.get("calls", 0)), int(found.get("usec", 0))


def _record_put(client: redis.Redis, source: str) -> Callable[[int], Any]:
    """A put of a 1 KB value to record ``i`` (new key each call: the create path)."""
    spec = Store(client, namespace="bench").sessions.spec
    sha = client.script_load(source)
    payload = spec.encode(spec.key("x"), {"blob": "x" * 1000})

    def call(i: int) -> Any:
        key = spec.key(f"s{i % 1000}")
        keys, _ = spec.guarded_keys(f"s{i % 1000}", key, None)
        args = spec.put_args(None, 60_000, new_write_id(), payload, memory_ms=31_000)
        return client.evalsha(sha, len(keys), *keys, *args.argv())

    return call


def measure(binary: str, calls: int, rounds: int) -> list[tuple[str, str, float, float]]:
    rows: list[tuple[str, str, float, float]] = []
    with running(binary) as server:
        admin = server.client()
        version = str(admin.info("server").get("valkey_version") or admin.info()["redis_version"])
        command: Any = admin.execute_command
        command(*setuser("bench", "bench").replace("<password>", PASSWORD).split())
        users = {
            "default user": redis.Redis(port=server.port),
            "least privilege": redis.Redis(port=server.port, username="bench", password=PASSWORD),
        }
        shipped = script("record_put").source
        bare = shipped[len(_acl_prelude("record_put")) :]
        for who, client in users.items():
            variants = {
                "with check": _record_put(client, shipped),
                "no check": _record_put(client, bare),
            }
            totals = {name: [0, 0] for name in variants}
            for _ in range(rounds):
                for name, call in variants.items():
                    calls0, usec0 = _usec(admin)
                    for i in range(calls):
                        call(i)
                    calls1, usec1 = _usec(admin)
                    totals[name][0] += calls1 - calls0
                    totals[name][1] += usec1 - usec0
            per = {name: usec / n for name, (n, usec) in totals.items()}
            rows.append((version, who, per["no check"], per["with check"]))
        for client in users.values():
            client.close()
        admin.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000, help="calls per variant per round")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    print("server | user | µs/EVALSHA record_put without check | with check | added")
    for binary in (redis_binary(), valkey_binary()):
        for version, who, without, with_check in measure(binary, args.calls, args.rounds):
            print(
                f"{version} | {who} | {without:.2f} | {with_check:.2f} | "
                f"{with_check - without:+.2f} ({(with_check / without - 1) * 100:+.0f}%)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
