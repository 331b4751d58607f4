"""OpenTelemetry traces and metrics of what each operation meant (``redistate[otel]``).

Off until :func:`instrument` is called. Until then every hook here is one global read
and a return, and nothing of OpenTelemetry is imported: a process that never turns it
on pays nothing for it (benchmarks/telemetry.py measures it).

On, each public operation is one CLIENT span named by its ``db.query.summary`` ("put
session", "merge user", "save task", "acquire lease", "step task") with the stable
database semantic-convention attributes, and what only redistate knows as
``redistate.*`` attributes: the round trips it took, the transient retries, a resend
the server recognised, a conflict, a write refused by fencing, a replayed step. A span
nests under the caller's current span, in threads and event loops alike (OpenTelemetry's
context is a ContextVar). Entity ids are personal data: attributes only with
``record_ids=True``.

Metrics: ``db.client.operation.duration`` (seconds, the advised buckets) per operation
and kind, and the ``redistate.*`` counters and histograms in :data:`METRICS`.

The hooks (:func:`operation`, :func:`note`, :func:`trip`, :func:`event`) are called by
the records, checkpoints, leases, steps and events code and by the connection; no
other module imports OpenTelemetry.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

__all__ = [
    "DURATION_BUCKETS",
    "METRICS",
    "event",
    "instrument",
    "instrumented",
    "note",
    "operation",
    "trip",
    "uninstrument",
]

# The buckets the database semantic conventions advise for db.client.operation.duration.
DURATION_BUCKETS: Final = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0)

# Every instrument redistate records besides db.client.operation.duration:
# name -> (type, unit, description).
METRICS: Final[dict[str, tuple[str, str, str]]] = {
    "redistate.conflicts": ("counter", "{conflict}", "writes refused by a compare-and-set"),
    "redistate.update.retries": (
        "counter",
        "{retry}",
        "update() attempts made again after a conflict",
    ),
    "redistate.retries": ("counter", "{retry}", "tries sent again after a transient error"),
    "redistate.resends": (
        "counter",
        "{write}",
        "writes sent again that the server recognised by their write id",
    ),
    "redistate.fenced_out": (
        "counter",
        "{write}",
        "guarded writes refused: the lease was lost or taken over",
    ),
    "redistate.lease.acquired": ("counter", "{lease}", "leases acquired"),
    "redistate.lease.lost": ("counter", "{lease}", "leases found lost while held"),
    "redistate.lease.wait": ("histogram", "s", "time from asking for a lease to holding it"),
    "redistate.lease.hold": ("histogram", "s", "time a lease was held, to its release"),
    "redistate.steps": (
        "counter",
        "{step}",
        "durable steps by outcome: recorded, replayed, interrupted, failed, refused",
    ),
    "redistate.integrity_failures": (
        "counter",
        "{value}",
        "values whose digest or seal did not verify",
    ),
    "redistate.store_full": ("counter", "{write}", "writes the server refused: out of memory"),
    "redistate.server_warnings": (
        "counter",
        "{warning}",
        "server settings that weaken a guarantee, warned about once per server",
    ),
}

# The buckets of redistate's histograms (seconds): a lease waits from nothing to the
# holder's TTL, and is held from a step's milliseconds to an agent run's hour.
_SECONDS: Final = {
    "redistate.lease.wait": (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0),
    "redistate.lease.hold": (0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0),
}

# Span attributes of what only redistate knows.
NAMESPACE: Final = "redistate.namespace"  # the store's key namespace
ROUND_TRIPS: Final = "redistate.round_trips"
RETRIES: Final = "redistate.retries"
RESENT: Final = "redistate.resent"
CONFLICT: Final = "redistate.conflict"
FENCED_OUT: Final = "redistate.fenced_out"
REPLAYED: Final = "redistate.step.replayed"
UPDATE_RETRIES: Final = "redistate.update.retries"
ENTITY_ID: Final = "redistate.entity.id"


class _Instruments:
    """The tracer and the metric instruments, made by :func:`instrument`."""

    def __init__(
        self,
        tracer_provider: TracerProvider | None,
        meter_provider: MeterProvider | None,
        record_ids: bool,
    ) -> None:
        try:
            from opentelemetry import context, metrics, trace
        except ImportError as exc:
            raise ImportError(
                "redistate.telemetry needs opentelemetry-api: pip install 'redistate[otel]'"
            ) from exc

        from .. import __version__

        self.trace, self.context = trace, context
        self.kind = trace.SpanKind.CLIENT
        self.error = trace.StatusCode.ERROR
        self.tracer = trace.get_tracer("redistate", __version__, tracer_provider)
        meter = metrics.get_meter("redistate", __version__, meter_provider)
        self.duration = meter.create_histogram(
            "db.client.operation.duration",
            unit="s",
            description="Duration of database client operations.",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )
        self.instruments: dict[str, Any] = {}
        for name, (kind, unit, description) in METRICS.items():
            made: Any
            if kind == "counter":
                made = meter.create_counter(name, unit=unit, description=description)
            else:  # seconds: the SDK's default buckets are for milliseconds
                made = meter.create_histogram(
                    name,
                    unit=unit,
                    description=description,
                    explicit_bucket_boundaries_advisory=list(_SECONDS[name]),
                )
            self.instruments[name] = made
        self.record_ids = record_ids


_state: _Instruments | None = None
_current: ContextVar[_Operation | None] = ContextVar("redistate-operation", default=None)


def instrument(
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    record_ids: bool = False,
) -> None:
    """Turn traces and metrics on for every store of this process, through the given
    providers (OpenTelemetry's global ones by default). ``record_ids=True`` adds the
    entity id to each span (ids may be personal data).

    Raises:
        ImportError: opentelemetry-api is not installed (``pip install redistate[otel]``).
    """
    global _state
    _state = _Instruments(tracer_provider, meter_provider, record_ids)


def uninstrument() -> None:
    """Turn traces and metrics off again."""
    global _state
    _state = None


def instrumented() -> bool:
    """Whether :func:`instrument` is in effect."""
    return _state is not None


class _Nothing:
    """The operation of a process that did not turn telemetry on."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NOTHING: Final = _Nothing()


class _Operation:
    """One public operation's span and measurements (a context manager)."""

    __slots__ = (
        "_first",
        "_inner",
        "_outer",
        "_span",
        "_started",
        "_token",
        "_traced",
        "attributes",
        "metrics",
        "served",
        "state",
        "timed",
    )

    def __init__(
        self, state: _Instruments, name: str, kind: str, namespace: str, timed: bool
    ) -> None:
        self.state, self.timed, self.served = state, timed, False
        # Low cardinality: the operation and the kind (a collection's name for records);
        # no kind for one that spans many (a batch, an export).
        self.metrics: dict[str, Any] = {"db.system.name": "redis", "db.operation.name": name}
        if kind:
            self.metrics["db.collection.name"] = kind
        self.attributes: dict[str, Any] = {
            **self.metrics,
            "db.query.summary": f"{name} {kind}" if kind else name,
            NAMESPACE: namespace,
            ROUND_TRIPS: 0,
        }

    def __enter__(self) -> _Operation:
        state = self.state
        self._first = dict(self.attributes)
        # Inside another database operation (latest inside history...): its own span,
        # but the outer one is what the caller asked for, and what the metrics count.
        outer = self._outer = _current.get()
        self._inner = outer is not None and outer.timed
        self._span = state.tracer.start_span(
            self.attributes["db.query.summary"], kind=state.kind, attributes=self.attributes
        )
        self._traced = state.context.attach(state.trace.set_span_in_context(self._span))
        self._token = _current.set(self)
        self._started = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        elapsed = time.perf_counter() - self._started
        _current.reset(self._token)
        self.state.context.detach(self._traced)
        span, metrics = self._span, self.metrics
        if exc is not None:
            error = _error_type(exc)
            metrics = {**metrics, "error.type": error}
            self.attributes["error.type"] = error
            code = _status_code(exc)
            if code is not None:
                self.attributes["db.response.status_code"] = code
            outcome = _outcome(exc, self.metrics["db.operation.name"])
            if outcome is not None:
                self.attributes[outcome[0]] = True
                # Counted once, where it is first seen outside the library's own nesting
                # (a step whose tool's put was refused counts one conflict, not two).
                if not self._inner and not getattr(exc, _COUNTED, False):
                    self.state.instruments[outcome[1]].add(1, self.metrics)
                    try:
                        setattr(exc, _COUNTED, True)
                    except AttributeError:  # an exception class with __slots__
                        pass
            # The class only: messages name keys and lease names, which hold ids.
            span.set_status(self.state.error, error)
            if self.state.record_ids and isinstance(exc, Exception):
                span.record_exception(exc)
        # Only what changed since the start: the SDK checks every attribute it is given.
        first = self._first
        span.set_attributes({k: v for k, v in self.attributes.items() if first.get(k) != v})
        span.end()
        if self.timed and not self._inner:
            self.state.duration.record(elapsed, metrics)


# An exception that means an outcome redistate counts: its span attribute and counter.
_OUTCOMES: Final = {
    "ConflictError": (CONFLICT, "redistate.conflicts"),
    # pydantic-ai's own: the conversation store raises it where a record's would conflict.
    "ConversationConflict": (CONFLICT, "redistate.conflicts"),
    "LockLost": (FENCED_OUT, "redistate.fenced_out"),
    "IntegrityError": ("redistate.integrity_failure", "redistate.integrity_failures"),
    "StoreFull": ("redistate.store_full", "redistate.store_full"),
}
# Operations whose LockLost is about the lease itself, not a guarded write refused.
_LEASE_OPERATIONS: Final = frozenset({"acquire", "release", "extend"})
_COUNTED: Final = "_redistate_counted"  # set on an exception once its outcome is counted


def _outcome(exc: BaseException, operation: str) -> tuple[str, str] | None:
    name = type(exc).__name__
    if name == "LockLost" and operation in _LEASE_OPERATIONS:
        return None
    return _OUTCOMES.get(name)


# redis-py turns these error prefixes into classes and takes them off the message.
_PREFIXES: Final = {
    "OutOfMemoryError": "OOM",
    "NoPermissionError": "NOPERM",
    "NoScriptError": "NOSCRIPT",
    "ReadOnlyError": "READONLY",
    "BusyLoadingError": "LOADING",
    "ExecAbortError": "EXECABORT",
    "AskError": "ASK",
    "MovedError": "MOVED",
    "TryAgainError": "TRYAGAIN",
    "ClusterDownError": "CLUSTERDOWN",
    "AuthenticationError": "NOAUTH",
}


def _status_code(exc: BaseException) -> str | None:
    """The Redis error prefix (OOM, NOPERM, WRONGTYPE, ERR...) of the reply behind
    ``exc``, as db.response.status_code; None if no server error caused it."""
    seen: BaseException | None = exc
    for _ in range(4):  # a translated error names the redis-py one as its cause
        if seen is None:
            return None
        if type(seen).__module__.startswith("redis."):
            mro = [c.__name__ for c in type(seen).__mro__]
            known = next((_PREFIXES[n] for n in mro if n in _PREFIXES), None)
            if known is not None:
                return known
            if "ResponseError" in mro:  # the prefix is left on the message (WRONGTYPE...)
                word = str(seen).split(" ", 1)[0]
                return word if word.isupper() and word.isalpha() else "ERR"
        seen = seen.__cause__
    return None


def _error_type(exc: BaseException) -> str:
    module = type(exc).__module__
    if module.startswith("redistate."):
        module = "redistate"  # the public name: redistate.ConflictError
    return f"{module}.{type(exc).__qualname__}"


def operation(
    name: str,
    kind: str,
    namespace: str,
    entity: object = None,
    timed: bool = True,
    batch: int = 0,
) -> Any:
    """The context manager around one public operation: ``name`` ("put"), ``kind``
    (the collection or kind: "session"), the store's ``namespace``, the ``entity`` id
    (an attribute only with ``record_ids``, and only a str: an adapter passes what
    its caller gave, before checking it). ``timed=False``: an operation that runs the
    caller's code (a step), left out of db.client.operation.duration. ``batch``: how
    many writes a batch sends (``db.operation.batch.size``, set from 2 on)."""
    state = _state
    if state is None:
        return _NOTHING
    op = _Operation(state, name, kind, namespace, timed)
    if isinstance(entity, str) and state.record_ids:
        op.attributes[ENTITY_ID] = entity
    if batch > 1:
        op.attributes["db.operation.batch.size"] = batch
    return op


def trip(procedure: str | None = None, server: str | None = None) -> None:
    """One round trip of the current operation; ``procedure``: the script it ran (the
    first one names the operation's ``db.stored_procedure.name``); ``server``: the
    connection's address (``describe``), its first one the span's ``server.*``. An
    operation inside another of the library's own counts for the outer one too."""
    op = _current.get() if _state is not None else None
    while op is not None:
        attributes = op.attributes
        attributes[ROUND_TRIPS] += 1
        if procedure and "db.stored_procedure.name" not in attributes:
            attributes["db.stored_procedure.name"] = procedure
        if server and not op.served:
            op.served = True
            attributes.update(_server(server))
        op = op._outer if op._inner else None


def _server(address: str) -> dict[str, Any]:
    """``server.address``/``server.port`` and ``db.namespace`` (the database index, as
    the conventions name it for Redis) of a ``describe()`` address: ``host:port/db``
    (IPv6 too) or ``unix://path``; nothing for the embedded store, a cluster or a
    Sentinel service, whose serving node is not known here."""
    if address.startswith("unix://"):
        return {"server.address": address[len("unix://") :]}
    where, slash, db = address.rpartition("/")
    host, colon, port = where.rpartition(":")
    if not (slash and colon and port.isdigit() and db.isdigit()) or " " in where:
        return {}
    return {"server.address": host, "server.port": int(port), "db.namespace": db}


@contextlib.contextmanager
def caller() -> Iterator[None]:
    """Around the caller's own code run inside an operation (``update``'s function, a
    step's tool, ``on_lost``): the operations it makes are its own, not parts of the
    one running it (their span still nests under it)."""
    if _state is None or _current.get() is None:
        yield
        return
    token = _current.set(None)
    try:
        yield
    finally:
        _current.reset(token)


def note(attribute: str, amount: int = 1) -> None:
    """Something only redistate knows about the current operation: ``RETRIES``,
    ``RESENT``, ``UPDATE_RETRIES`` or ``REPLAYED``, each counted on its span and, where
    it has one, its metric."""
    state = _state
    if state is None:
        return
    op = _current.get()
    if op is not None:
        found = op.attributes.get(attribute, 0)
        op.attributes[attribute] = True if attribute in _FLAGS else found + amount
        labels = op.metrics
    else:
        labels = {"db.system.name": "redis"}
    metric = _NOTE_METRICS.get(attribute)
    if metric is not None:
        state.instruments[metric].add(amount, labels)


_FLAGS: Final = frozenset({RESENT, REPLAYED})
_NOTE_METRICS: Final = {
    RETRIES: "redistate.retries",
    RESENT: "redistate.resends",
    UPDATE_RETRIES: "redistate.update.retries",
}


def event(metric: str, value: float = 1, **labels: str) -> None:
    """A measurement outside any one operation's span: a lease acquired, lost or held,
    a step's outcome, a server warning (``metric`` in :data:`METRICS`)."""
    state = _state
    if state is None:
        return
    instrument = state.instruments[metric]
    attributes = {"db.system.name": "redis", **labels}
    if METRICS[metric][0] == "counter":
        instrument.add(value, attributes)
    else:
        instrument.record(value, attributes)
