"""Client-side costs, each beside its baseline in the same run (best of several timeit
repeats; ratios travel between machines, µs do not).

    python benchmarks/costs.py [--quick]

- encoding agent state with nulls in it: JsonCodec vs ``orjson.dumps``, 1.7 / 17 / 172 KB;
- ``get_many`` of ten 1 KB sessions vs a raw MGET;
- ``ids()`` over 20,000 sessions vs a raw ``scan_iter``;
- ``restore`` of a 113 KB checkpoint with one delta (µs);
- ``merge`` into a 100 KB vs a 1 KB record, returning the value and not;
- an uncontended lock pair: ``store.lock`` with and without renewal and ``store.task()``
  vs redis-py's Lock.

A private ``redis-server`` from PATH on a free loopback port, persistence off.
"""

from __future__ import annotations

import argparse
import functools
import sys
import timeit
from collections.abc import Callable
from itertools import count
from pathlib import Path
from typing import Any

import orjson
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from server_time import lock_pairs

from redistate import Store
from redistate.core.codec import JsonCodec
from tests.servers import redis_binary, running


def best_us(fn: Callable[[], Any], number: int, repeat: int = 5) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def turns(n: int) -> dict[str, Any]:
    """Agent state as it is: messages with null fields."""
    message = {"role": "assistant", "content": "hello " * 10, "tool_calls": None, "meta": None}
    return {"messages": [{**message, "n": i} for i in range(n)], "summary": None}


def encoding(scale: int) -> list[dict[str, Any]]:
    """JsonCodec.encode over orjson.dumps of agent state with nulls, at three sizes."""
    codec, out = JsonCodec(), []
    for n in (10, 100, 1000):
        value = turns(n)
        base = best_us(functools.partial(orjson.dumps, value), 200 // scale)
        ours = best_us(functools.partial(codec.encode, value), 200 // scale)
        size = len(orjson.dumps(value)) / 1000
        line = f"encode {size:6.1f} KB with nulls  {ours / base:6.2f}x orjson.dumps"
        out.append({"kb": size, "us": ours, "orjson_us": base, "ratio": ours / base, "line": line})
    return out


def profiles(store: Store) -> Callable[[str, bool], Callable[[], object]]:
    """User records "small" (10 fields, ~1 KB) and "big" (1,000 fields, ~100 KB), and a
    maker of one-fact merges into either, returning the merged value or not."""
    n = count()
    for size, label in ((10, "small"), (1000, "big")):
        store.users.put(label, {f"f{i}": "x" * 100 for i in range(size)})

    def merging(label: str, returning: bool) -> Callable[[], object]:
        return lambda: store.users.merge(label, {"n": next(n)}, returning=returning)

    return merging


def server_side(store: Store, raw: redis.Redis, scale: int) -> list[str]:
    out = []
    value = {"a": "x" * 1000}
    ids = [f"s{i}" for i in range(10)]
    for i in ids:
        store.sessions.put(i, value)
    keys = [store.keys.record("session", i) for i in ids]
    ours = best_us(lambda: store.sessions.get_many(ids), 500 // scale)
    base = best_us(lambda: raw.mget(keys), 500 // scale)
    out.append(f"get_many of 10 x 1 KB           {ours / base:6.2f}x MGET ({ours:.0f} µs)")

    pipe = raw.pipeline(transaction=False)
    for k in range(20_000 // scale):
        pipe.set(store.keys.record("note", f"user-{k}"), b"x")
    pipe.execute()
    notes = store.collection("note")
    pattern = store.keys.record_pattern("note")
    listed = best_us(lambda: sum(1 for _ in notes.ids()), 3, 3)
    scanned = best_us(lambda: sum(1 for _ in raw.scan_iter(match=pattern, count=1000)), 3, 3)
    out.append(f"ids() over {20_000 // scale:,} keys          {listed / scanned:6.2f}x scan_iter")

    state = {"messages": [{"content": "x" * 100, "i": i, "m": {"a": None}} for i in range(700)]}
    store.checkpoints.save("t", state)
    store.checkpoints.log("t", {"step": 2})
    us = best_us(lambda: store.checkpoints.restore("t"), 50 // scale)
    out.append(f"restore {len(orjson.dumps(state)) / 1000:.0f} KB + 1 delta          {us:7.0f} µs")

    merging = profiles(store)
    for returning in (True, False):
        small = best_us(merging("small", returning), 200 // scale)
        big = best_us(merging("big", returning), 200 // scale)
        out.append(f"merge 100 KB vs 1 KB, returning={returning!s:5} {big / small:6.2f}x")

    pairs = lock_pairs(store, raw)
    base = best_us(pairs.pop("redis-py Lock"), 300 // scale)
    for label, fn in pairs.items():
        us = best_us(fn, 300 // scale)
        out.append(f"lock pair {label:<12}          {us / base:6.2f}x redis-py Lock")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls (a smoke test)")
    scale = 10 if parser.parse_args().quick else 1
    lines = [row["line"] for row in encoding(scale)]
    with running(redis_binary()) as server:
        url = f"redis://127.0.0.1:{server.port}/0"
        raw = redis.Redis.from_url(url)
        store = Store.from_url(url, namespace="costs")
        try:
            lines += server_side(store, raw, scale)
        finally:
            store.close()
            raw.close()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
