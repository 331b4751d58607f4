"""Where a put's time goes: the same 1 KB value through less and less machinery.

From ``Store.sessions.put`` down to a raw ``SET PX``: the script called by hand (no
store code around it), without its write memory, a script that only SETs (the cost of
EVALSHA itself). Each side's server time per call is read from INFO commandstats.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis
from harness import Block, sync_block

from redistate import Store
from redistate.core.envelope import frame, tail
from redistate.core.scripts import script
from redistate.records.spec import new_write_id

__all__ = ["SERVER_CALLS", "server_us", "variants"]

SERVER_CALLS = 2000  # calls per side for the server-time reading
_ONLY_SET = "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1"


Calls = list[tuple[str, Callable[[], Any]]]


def _calls(store: Store, raw: redis.Redis, value: Any, ttl_s: int) -> Calls:
    spec = store.sessions.spec
    key = spec.key("s-apart")
    keys, _ = spec.guarded_keys("s-apart", key, None)
    payload = spec.encode(key, value)
    put_sha = raw.script_load(script("record_put").source)
    set_sha = raw.script_load(_ONLY_SET)
    memory_ms = store.sessions._conn.memory_ms
    framed = frame(tail(spec.schema, "w"), payload)
    ttl_ms = ttl_s * 1000

    def by_hand(memory: int) -> Callable[[], Any]:
        def call() -> Any:
            args = spec.put_args(None, ttl_ms, new_write_id(), payload, memory_ms=memory)
            return raw.evalsha(put_sha, 3, *keys, *args.argv())

        return call

    return [
        ("redistate Store", lambda: store.sessions.put("s-apart", value, ttl=ttl_s)),
        ("record_put by hand", by_hand(memory_ms)),
        ("record_put by hand, no write memory", by_hand(0)),
        ("a script that only SETs", lambda: raw.evalsha(set_sha, 1, f"{key}-set", framed, ttl_ms)),
        ("raw SET PX", lambda: raw.set(f"{key}-raw", framed, px=ttl_ms)),
    ]


def variants(
    store: Store, raw: redis.Redis, value: Any, ttl_s: int
) -> tuple[list[tuple[str, Block]], Calls]:
    """The timed blocks (redistate first) and the plain calls behind them."""
    calls = _calls(store, raw, value, ttl_s)
    return [(label, sync_block(call)) for label, call in calls], calls


def server_us(stats: redis.Redis, calls: Calls) -> dict[str, float]:
    """Server µs per call of each side (commandstats usec of its top-level command,
    which includes the commands a script runs), from SERVER_CALLS untimed calls."""

    def usec(command: str) -> tuple[int, int]:
        found = stats.info("commandstats").get(f"cmdstat_{command}", {})
        return int(found.get("calls", 0)), int(found.get("usec", 0))

    out: dict[str, float] = {}
    for label, call in calls:
        # The store runs record_put as a function (FCALL); the by-hand rows by EVALSHA.
        command = {"raw SET PX": "set", "redistate Store": "fcall"}.get(label, "evalsha")
        calls0, usec0 = usec(command)
        for _ in range(SERVER_CALLS):
            call()
        calls1, usec1 = usec(command)
        out[label] = (usec1 - usec0) / max(1, calls1 - calls0)
    return out
