"""What the tests of redistate.telemetry read spans and metrics with: the SDK's in-memory
span exporter and metric reader, installed by the ``seen`` fixture."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from redistate.telemetry import instrument, uninstrument

__all__ = ["Seen", "watch"]


@dataclass
class Seen:
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer: TracerProvider

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        found = list(self.spans.get_finished_spans())
        return [s for s in found if name is None or s.name == name]

    def points(self, metric: str) -> list[Any]:
        """Every data point of ``metric`` collected so far."""
        data = self.reader.get_metrics_data()
        out: list[Any] = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for found in scope.metrics:
                    if found.name == metric:
                        out += list(found.data.data_points)
        return out

    def total(self, metric: str, **labels: Any) -> float:
        """A counter's sum (a histogram's count) over the points with ``labels``."""
        total = 0.0
        for point in self.points(metric):
            if all(point.attributes.get(k) == v for k, v in labels.items()):
                total += point.count if hasattr(point, "bucket_counts") else point.value
        return total


@contextlib.contextmanager
def watch() -> Iterator[Seen]:
    """Telemetry on, into an in-memory exporter and reader, for the block."""
    spans = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    instrument(tracer_provider=tracer, meter_provider=MeterProvider(metric_readers=[reader]))
    try:
        yield Seen(spans, reader, tracer)
    finally:
        uninstrument()
