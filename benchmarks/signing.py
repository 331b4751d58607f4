"""Keyed integrity: what HMAC-SHA-256 seals cost against the unkeyed digests.

    python benchmarks/signing.py [--n 2000] [--rounds 6] [--quick] [--url ...] [--json out]

The same 1 KB value through a store with ``signing=SigningKeys(...)`` and one without,
on one server, in ABBA blocks: session put/get and merge, event append, checkpoint
save/latest/restore, and ``verify`` of a 1,000-event chain. Ratios are signed/unsigned.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import harness
from harness import Clients, Column, Row
from records import value_1k

from redistate import SigningKeys, Store

COLS: list[Column] = [
    ("operation", "operation", ""),
    ("signed p50 µs", "signed_p50_us", ".1f"),
    ("unsigned p50 µs", "plain_p50_us", ".1f"),
    ("p50 signed/unsigned", "ratio_p50", ".3f"),
    ("mean signed/unsigned", "ratio_mean", ".3f"),
]


def _url(c: Clients) -> str:
    kwargs = c.raw.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}/{kwargs.get('db', 0)}"


def seals(c: Clients, args: argparse.Namespace) -> list[Row]:
    signing = SigningKeys({"s1": os.urandom(32)}, primary="s1")
    signed = Store.from_url(_url(c), namespace=c.namespace, signing=signing)
    plain = c.store
    value = value_1k()
    for s, tag in ((signed, "s"), (plain, "p")):
        s.sessions.put(f"{tag}-get", value)
        s.checkpoints.save(f"{tag}-cp", value)
        for n in range(1000):
            s.events.append(f"{tag}-chain", "updated", {"n": n})
    ops: dict[str, tuple[Any, Any]] = {
        "session put": (
            lambda: signed.sessions.put("s-put", value),
            lambda: plain.sessions.put("p-put", value),
        ),
        "session get": (
            lambda: signed.sessions.get("s-get"),
            lambda: plain.sessions.get("p-get"),
        ),
        "session merge": (
            lambda: signed.sessions.merge("s-merge", {"n": 1}),
            lambda: plain.sessions.merge("p-merge", {"n": 1}),
        ),
        "event append": (
            lambda: signed.events.append("s-ev", "updated", value),
            lambda: plain.events.append("p-ev", "updated", value),
        ),
        "checkpoint save": (
            lambda: signed.checkpoints.save("s-save", value),
            lambda: plain.checkpoints.save("p-save", value),
        ),
        "checkpoint latest": (
            lambda: signed.checkpoints.latest("s-cp"),
            lambda: plain.checkpoints.latest("p-cp"),
        ),
        "checkpoint restore": (
            lambda: signed.checkpoints.restore("s-cp"),
            lambda: plain.checkpoints.restore("p-cp"),
        ),
    }
    block = max(1, args.n // args.rounds)
    try:
        rows: list[Row] = [
            harness.compare(
                name,
                ("signed_", a),
                ("plain_", b),
                c.stats,
                rounds=args.rounds,
                block=block,
                warmup=args.warmup,
            )
            for name, (a, b) in ops.items()
        ]
        verify = harness.compare(
            "verify 1,000 events",
            ("signed_", lambda: signed.events.verify("s-chain")),
            ("plain_", lambda: plain.events.verify("p-chain")),
            c.stats,
            rounds=args.rounds,
            block=max(1, args.n // args.rounds // 200),
            warmup=2,
        )
        rows.append(verify)
    finally:
        signed.close()
    return rows


def bench(c: Clients, args: argparse.Namespace) -> int:
    rows = seals(c, args)
    harness.print_table(COLS, rows, "HMAC-SHA-256 seals (SigningKeys) vs unkeyed digests, 1 KB")
    harness.write_json(args.json, {"machine": harness.machine(c.raw), "signing": rows})
    return 0


def main() -> int:
    return harness.run(bench, harness.parser(__doc__).parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
