"""OpenTelemetry traces and metrics of redistate's operations (``pip install
'redistate[otel]'``): ``instrument()`` turns them on for every store of the process;
the code is redistate/core/telemetry.py."""

from .core.telemetry import DURATION_BUCKETS, METRICS, instrument, instrumented, uninstrument

__all__ = ["DURATION_BUCKETS", "METRICS", "instrument", "instrumented", "uninstrument"]
