"""What telemetry costs a 1 KB put and get: off (the default) against on, in one run.

    python benchmarks/telemetry.py [--n 5000] [--rounds 10] [--quick] [--url ...]

Off is the same whether or not OpenTelemetry is installed: redistate imports nothing of
it until ``redistate.telemetry.instrument()`` (tests/test_telemetry.py checks a store
with its imports refused). What off leaves in the code is its hooks: an operation's
``with telemetry.operation(...)`` and a ``telemetry.trip()`` per round trip, each a
global read and a return. There is no hook-free build to time beside it in the same
process, so the hooks are timed on their own, in a tight loop of exactly the calls a
put (a get) makes, and reported as a share of its p50: "off vs none" is the put's p50
over the same p50 less the hooks' time. Exits 1 if that is over 1.02.

On: the OpenTelemetry SDK's TracerProvider with a BatchSpanProcessor whose exporter
drops what it is given (the cost of making and queueing spans, not of shipping them)
and a MeterProvider whose reader is never collected. On and off alternate in ABBA
blocks on the same store; ratios are medians of per-block ratios.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import harness
from _measure import progress
from harness import Clients, Column, Row, ratios, sync_block
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from redistate.core import telemetry
from redistate.telemetry import instrument, uninstrument

LIMIT = 1.02  # off vs none, the bound


class Dropping(SpanExporter):
    """An exporter that takes every batch and keeps nothing."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def value_1k() -> dict[str, Any]:
    data: dict[str, Any] = {"turn": 0, "role": "assistant", "text": ""}
    data["text"] = "x" * (1024 - len(str(data)))
    return data


def hooks_ns(calls: int) -> float:
    """ns per operation of the hooks an operation of one round trip runs, off."""
    assert not telemetry.instrumented()
    best = []
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(calls):
            with telemetry.operation("put", "session", "ns", "s1"):
                telemetry.trip("record_put", "127.0.0.1:6379/0")
        best.append((time.perf_counter_ns() - start) / calls)
    return min(best)  # the least disturbed run: the hooks' own cost


def bench(clients: Clients, args: Any) -> int:
    store, value = clients.store, value_1k()
    store.sessions.put("s1", value, ttl=3600)
    tracer = TracerProvider()
    processor = BatchSpanProcessor(Dropping())
    tracer.add_span_processor(processor)
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()])

    def switched(on: bool, op: Callable[[], object]) -> Callable[[int], Any]:
        block = sync_block(op)

        def run(n: int) -> Any:
            if on:
                instrument(tracer_provider=tracer, meter_provider=meters)
            try:
                return block(n)
            finally:
                uninstrument()

        return run

    ops: dict[str, Callable[[], object]] = {
        "put 1 KB": lambda: store.sessions.put("s1", value, ttl=3600),
        "get 1 KB": lambda: store.sessions.get("s1"),
    }
    hooks = hooks_ns(20_000)
    rows: list[Row] = []
    worst = 1.0
    for name, op in ops.items():
        blocks = {"off": switched(False, op), "on": switched(True, op)}
        sides = harness.abba(
            blocks, clients.stats, rounds=args.rounds, block=args.n // args.rounds,
            warmup=args.warmup,
        )  # fmt: skip
        off_p50 = statistics.median(sides["off"].block_p50)  # ns
        none = off_p50 / (off_p50 - hooks)
        worst = max(worst, none)
        row: Row = {"operation": name}
        for label, side in sides.items():
            row |= side.row(f"{label} ")
        row["hooks_ns"] = hooks
        row["off_vs_none"] = none
        row["on_vs_off"] = ratios(sides["on"], sides["off"])["ratio_p50"]
        rows.append(row)
        progress(f"measured {name}")
    processor.shutdown()  # type: ignore[no-untyped-call]
    cols: list[Column] = [
        ("operation", "operation", ""),
        ("off p50 µs", "off p50_us", ",.1f"),
        ("on p50 µs", "on p50_us", ",.1f"),
        ("hooks off ns", "hooks_ns", ",.0f"),
        ("off/none", "off_vs_none", ".4f"),
        ("on/off", "on_vs_off", ".3f"),
        ("reads/op", "off round_trips", ".2f"),
    ]
    harness.print_table(cols, rows, "Telemetry off and on, a 1 KB session record")
    print(
        "off/none: the p50 over the p50 less the hooks' own time (timed alone, off);\n"
        "  on/off: the median of per-block p50 ratios, spans made and queued for export,\n"
        "  metrics aggregated. Off is the same with or without OpenTelemetry installed."
    )
    harness.write_json(args.json, {"machine": harness.machine(clients.raw), "rows": rows})
    return 1 if worst > LIMIT else 0


def main() -> int:
    parser = harness.parser(__doc__)
    parser.set_defaults(n=5000, rounds=10, warmup=200)
    return harness.run(bench, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
