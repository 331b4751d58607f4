"""Audit events and encryption at rest: what they cost.

    python benchmarks/events.py [--n 2000] [--rounds 6] [--quick] [--url ...] [--json out]

1. ``events.append`` of a 1 KB payload (one writer, its chain end remembered) against a
   raw XADD of the same bytes, in ABBA blocks: the chain's price per append.
2. ``verify`` and ``fold`` against the number of events in the chain (100 … 10,000;
   ``--quick``: 100 and 1,000): events/s, which must stay flat (both are one pass).
3. Encryption: session put/get and checkpoint save/latest of 1 KB through
   ``EncryptedCodec`` (AES-256-GCM) against the same store with plain JSON, as ratios.

Round trips per append are the server's ``total_reads_processed`` deltas; the run exits
1 if an append of the one writer takes more than one.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import harness
import orjson
from harness import Clients, Column, Row, ratios
from records import value_1k

from redistate import EncryptedCodec, Store

LENGTHS = (100, 1_000, 10_000)


def appends(c: Clients, args: argparse.Namespace) -> Row:
    value = value_1k()
    raw_key = f"{c.namespace}:raw-events"
    data = orjson.dumps(value)
    c.store.events.append("bench", "warm", value)  # learns the chain's end
    sides = harness.measure(
        {
            "rs": lambda: c.store.events.append("bench", "updated", value),
            "raw": lambda: c.raw.xadd(raw_key, {"p": data}),
        },
        c.stats,
        rounds=args.rounds,
        block=max(1, args.n // args.rounds),
        warmup=args.warmup,
    )
    return {
        "operation": "append 1 KB",
        **sides["rs"].row("rs_"),
        **sides["raw"].row("raw_"),
        **ratios(sides["rs"], sides["raw"]),
    }


def chain_lengths(c: Clients, lengths: tuple[int, ...]) -> list[Row]:
    rows: list[Row] = []
    value = {"step": 0, "text": "x" * 200}
    made = 0
    for length in lengths:
        entity = f"chain-{length}"
        for i in range(length):
            c.store.events.append(entity, "updated", {**value, "step": i, f"k{i % 50}": i})
        made += length
        t0 = time.perf_counter()
        check = c.store.events.verify(entity)
        verify_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        c.store.events.fold(entity)
        fold_s = time.perf_counter() - t0
        assert check.ok and check.count == length
        rows.append(
            {
                "events": length,
                "verify_ms": verify_s * 1000,
                "verify_per_s": length / verify_s,
                "fold_ms": fold_s * 1000,
                "fold_per_s": length / fold_s,
            }
        )
    return rows


def encryption(c: Clients, args: argparse.Namespace) -> list[Row]:
    codec = EncryptedCodec({"k1": os.urandom(32)}, primary="k1")
    sealed = Store.from_url(_url(c), namespace=c.namespace, codec=codec)
    value = value_1k()
    plain = c.store
    sealed.sessions.put("enc-get", value)
    plain.sessions.put("plain-get", value)
    sealed.checkpoints.save("enc-cp", value)
    plain.checkpoints.save("plain-cp", value)
    ops: dict[str, tuple[Any, Any]] = {
        "session put": (
            lambda: sealed.sessions.put("enc-put", value),
            lambda: plain.sessions.put("plain-put", value),
        ),
        "session get": (
            lambda: sealed.sessions.get("enc-get"),
            lambda: plain.sessions.get("plain-get"),
        ),
        "checkpoint save": (
            lambda: sealed.checkpoints.save("enc-save", value),
            lambda: plain.checkpoints.save("plain-save", value),
        ),
        "checkpoint latest": (
            lambda: sealed.checkpoints.latest("enc-cp"),
            lambda: plain.checkpoints.latest("plain-cp"),
        ),
    }
    block = max(1, args.n // args.rounds)
    try:
        rows: list[Row] = [
            harness.compare(
                name,
                ("enc_", enc),
                ("json_", clear),
                c.stats,
                rounds=args.rounds,
                block=block,
                warmup=args.warmup,
            )
            for name, (enc, clear) in ops.items()
        ]
    finally:
        sealed.close()
    return rows


def _url(c: Clients) -> str:
    """The server the run's clients use (the harness starts one on loopback TCP)."""
    kw = c.raw.connection_pool.connection_kwargs
    return f"redis://{kw['host']}:{kw['port']}/{kw.get('db', 0)}"


APPEND_COLS: list[Column] = [
    ("operation", "operation", ""), ("rs ops/s", "rs_ops_s", ",.0f"),
    ("rs p50 µs", "rs_p50_us", ".0f"), ("raw XADD ops/s", "raw_ops_s", ",.0f"),
    ("raw p50 µs", "raw_p50_us", ".0f"), ("p50 rs/raw", "ratio_p50", ".2f"),
    ("rt/op rs", "rs_round_trips", ".2f"),
]  # fmt: skip
CHAIN_COLS: list[Column] = [
    ("events", "events", ",d"), ("verify ms", "verify_ms", ",.1f"),
    ("verify events/s", "verify_per_s", ",.0f"), ("fold ms", "fold_ms", ",.1f"),
    ("fold events/s", "fold_per_s", ",.0f"),
]  # fmt: skip
ENC_COLS: list[Column] = [
    ("operation", "operation", ""), ("encrypted p50 µs", "enc_p50_us", ".0f"),
    ("JSON p50 µs", "json_p50_us", ".0f"), ("p50 encrypted/JSON", "ratio_p50", ".2f"),
    ("mean encrypted/JSON", "ratio_mean", ".2f"), ("rt/op", "enc_round_trips", ".2f"),
]  # fmt: skip


def bench(c: Clients, args: argparse.Namespace) -> int:
    info = harness.machine(c.raw)
    append = appends(c, args)
    harness.print_table(APPEND_COLS, [append], "1. append vs raw XADD (one writer)")
    lengths = LENGTHS[:2] if args.quick else LENGTHS
    chains = chain_lengths(c, lengths)
    harness.print_table(CHAIN_COLS, chains, "2. verify and fold vs events in the chain")
    enc = encryption(c, args)
    harness.print_table(ENC_COLS, enc, "3. AES-256-GCM (EncryptedCodec) vs plain JSON, 1 KB")
    print("\n" + ", ".join(f"{k}={v}" for k, v in info.items()))
    harness.write_json(args.json, {"append": append, "chains": chains, "encryption": enc})
    if append["rs_round_trips"] > 1.005:
        print(f"FAIL append: {append['rs_round_trips']:.3f} round trips", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    return harness.run(bench, harness.parser(__doc__).parse_args())


if __name__ == "__main__":
    sys.exit(main())
