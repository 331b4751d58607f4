"""OpenTelemetry traces and metrics (redistate.telemetry) on real servers, read with the
SDK's in-memory span exporter and metric reader: one CLIENT span per operation with
the database semantic conventions' attributes (checked against the
opentelemetry-semantic-conventions constants), nested under the caller's span; a
conflict, a resend recognised by its write id, a write refused by fencing, a replayed
step and lease hand-offs each show up as their attribute and counter; off, nothing is
recorded and OpenTelemetry is not even imported."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest
import redis
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.semconv.attributes import db_attributes as db
from opentelemetry.semconv.attributes import error_attributes, server_attributes
from opentelemetry.semconv.metrics import db_metrics
from opentelemetry.trace import SpanKind, StatusCode

from redistate import AsyncStore, ConflictError, LockLost, Store
from redistate.core import telemetry as hooks
from redistate.telemetry import DURATION_BUCKETS, instrument, uninstrument
from tests.conftest import Backend
from tests.proxy import FaultProxy
from tests.telemetry import Seen

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


def test_a_put_is_one_client_span_with_the_database_conventions(
    server_backend: Backend, namespace: str, seen: Seen
) -> None:
    assert server_backend.server is not None
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        store.sessions.put("s1", {"turn": 1}, ttl=60)
        assert store.sessions.get("s1") is not None
    (put,) = seen.finished("put session")
    assert put.kind is SpanKind.CLIENT and put.status.status_code is StatusCode.UNSET
    attributes = dict(put.attributes or {})
    assert attributes[db.DB_SYSTEM_NAME] == "redis"
    assert attributes[db.DB_OPERATION_NAME] == "put"
    assert attributes[db.DB_COLLECTION_NAME] == "session"
    assert attributes[db.DB_QUERY_SUMMARY] == "put session"
    assert attributes[db.DB_NAMESPACE] == "0"  # the database index, for Redis
    assert attributes[hooks.NAMESPACE] == namespace
    assert attributes[db.DB_STORED_PROCEDURE_NAME] == "record_put"
    assert attributes[server_attributes.SERVER_ADDRESS] == "127.0.0.1"
    assert attributes[server_attributes.SERVER_PORT] == server_backend.server.port
    assert attributes[hooks.ROUND_TRIPS] == 1
    assert hooks.ENTITY_ID not in attributes  # ids are personal data: opt-in
    (get,) = seen.finished("get session")
    assert dict(get.attributes or {})[hooks.ROUND_TRIPS] == 1
    # db.client.operation.duration: seconds, the advised buckets, per operation and kind.
    points = seen.points(db_metrics.DB_CLIENT_OPERATION_DURATION)
    put_points = [p for p in points if p.attributes[db.DB_OPERATION_NAME] == "put"]
    assert len(put_points) == 1 and put_points[0].count == 1
    assert tuple(put_points[0].explicit_bounds) == DURATION_BUCKETS
    assert put_points[0].attributes[db.DB_COLLECTION_NAME] == "session"


def test_ids_only_when_asked_and_spans_nest_under_the_callers(
    backend: Backend, namespace: str, seen: Seen
) -> None:
    instrument(tracer_provider=seen.tracer, record_ids=True)
    tracer = seen.tracer.get_tracer("app")
    with Store(backend.sync_client(), namespace=namespace) as store:
        with tracer.start_as_current_span("handle request") as parent:
            store.users.merge("u1", {"lang": "zh"})

        async def handle() -> None:
            async with AsyncStore(backend.async_client(), namespace=namespace) as astore:
                with tracer.start_as_current_span("handle async") as aparent:
                    await astore.checkpoints.save("t1", {"n": 1})
                    assert aparent.get_span_context().is_valid

        asyncio.run(handle())
    (merge,) = seen.finished("merge user")
    assert merge.parent is not None and merge.parent.span_id == parent.get_span_context().span_id
    assert dict(merge.attributes or {})[hooks.ENTITY_ID] == "u1"
    (save,) = seen.finished("save task")
    (outer,) = seen.finished("handle async")
    assert save.parent is not None and save.parent.span_id == outer.context.span_id


def test_a_conflict_and_update_retries_are_attributes_and_counters(
    backend: Backend, namespace: str, seen: Seen
) -> None:
    with Store(backend.sync_client(), namespace=namespace) as store:
        rec = store.sessions.put("s1", {"n": 1})
        with pytest.raises(ConflictError):
            store.sessions.put("s1", {"n": 2}, if_version=rec.version + 1)
        other = Store(backend.sync_client(), namespace=namespace)
        calls: list[int] = []

        def bump(data: Any) -> Any:
            if not calls:  # another writer gets in between this read and its write
                other.sessions.put("s1", {"n": 10})
            calls.append(1)
            return {"n": data["n"] + 1}

        assert store.sessions.update("s1", bump).data == {"n": 11}
        other.close()
    refused = [s for s in seen.finished("put session") if s.status.status_code is StatusCode.ERROR]
    assert len(refused) == 1
    attributes = dict(refused[0].attributes or {})
    assert attributes[error_attributes.ERROR_TYPE] == "redistate.ConflictError"
    assert attributes[hooks.CONFLICT] is True
    (update,) = seen.finished("update session")
    assert dict(update.attributes or {})[hooks.UPDATE_RETRIES] == 1
    assert seen.total("redistate.conflicts", **{db.DB_OPERATION_NAME: "put"}) == 1
    assert seen.total("redistate.update.retries") == 1
    failed = seen.points(db_metrics.DB_CLIENT_OPERATION_DURATION)
    assert [p.attributes.get(error_attributes.ERROR_TYPE) for p in failed].count(
        "redistate.ConflictError"
    ) == 1


def test_a_resend_recognised_by_its_write_id_is_counted(
    server_backend: Backend, namespace: str, seen: Seen
) -> None:
    """The reply of a put is dropped after the server applied it: the put is sent
    again and the server recognises it (RESENT): one retry, one resend, one record."""
    assert server_backend.server is not None
    with FaultProxy("127.0.0.1", server_backend.server.port) as proxy:
        url = f"redis://127.0.0.1:{proxy.port}/0"
        with Store.from_url(url, namespace=namespace) as store:
            store.sessions.put("s1", {"n": 1})  # connects: the handshake is no fault target
            proxy.drop_reply(lambda words: words[0].upper() in (b"FCALL", b"EVALSHA"))
            assert store.sessions.put("s1", {"n": 2}).data == {"n": 2}
            assert proxy.dropped == 1
    first, second = seen.finished("put session")
    attributes: dict[str, Any] = dict(second.attributes or {})
    assert attributes[hooks.RESENT] is True and attributes[hooks.RETRIES] >= 1
    assert attributes[hooks.ROUND_TRIPS] == 1  # asked for once; the retry is counted apart
    assert hooks.RESENT not in dict(first.attributes or {})
    assert seen.total("redistate.resends") == 1
    assert seen.total("redistate.retries") == attributes[hooks.RETRIES]


def test_a_fenced_out_write_and_lease_hand_offs_are_counted(
    backend: Backend, namespace: str, seen: Seen
) -> None:
    with Store(backend.sync_client(), namespace=namespace) as store:
        first = store.lock("t1", ttl=30, renew=False).acquire()
        raw = backend.raw()
        raw.delete(store.keys.lock("t1"))  # expired, as it were, and taken over
        raw.close()
        second = store.lock("t1", ttl=30, renew=False).acquire()
        with pytest.raises(LockLost):
            store.checkpoints.save("t1", {"stale": True}, lease=first)
        with pytest.raises(LockLost):  # about the lease itself: no write was fenced out
            first.release()
        second.release()
    (refused,) = [s for s in seen.finished("save task") if s.status.status_code is StatusCode.ERROR]
    attributes = dict(refused.attributes or {})
    assert attributes[hooks.FENCED_OUT] is True
    assert attributes[error_attributes.ERROR_TYPE] == "redistate.LockLost"
    assert seen.total("redistate.fenced_out") == 1
    assert seen.total("redistate.lease.acquired") == 2
    assert seen.total("redistate.lease.lost") == 1
    assert seen.total("redistate.lease.wait") == 2  # one measurement per acquire
    assert seen.total("redistate.lease.hold") == 1
    assert len(seen.finished("acquire lease")) == 2 and len(seen.finished("release lease")) == 2
    # Seconds, with buckets for seconds (the SDK's defaults are for milliseconds).
    (wait,) = seen.points("redistate.lease.wait")
    assert wait.explicit_bounds[0] == 0.001 and wait.explicit_bounds[-1] == 60.0


def test_a_replayed_step_is_an_attribute_and_steps_are_counted_by_outcome(
    backend: Backend, namespace: str, seen: Seen
) -> None:
    tracer = seen.tracer.get_tracer("app")
    with Store(backend.sync_client(), namespace=namespace) as store:
        for _ in range(2):  # the second run finds the step recorded
            with store.task("t1") as run:

                def search() -> list[str]:
                    with tracer.start_as_current_span("search tool"):
                        return ["hit"]

                assert run.step("search", search) == ["hit"]
    steps = seen.finished("step task")
    assert [dict(s.attributes or {}).get(hooks.REPLAYED) for s in steps] == [None, True]
    (tool,) = seen.finished("search tool")  # the tool ran once, inside its step's span
    assert tool.parent is not None and tool.parent.span_id == steps[0].context.span_id
    assert seen.total("redistate.steps", outcome="recorded") == 1
    assert seen.total("redistate.steps", outcome="replayed") == 1
    # A step runs the caller's code: it is not a database operation's duration.
    operations = seen.points(db_metrics.DB_CLIENT_OPERATION_DURATION)
    assert "step" not in {p.attributes[db.DB_OPERATION_NAME] for p in operations}


def test_off_nothing_is_recorded_and_nothing_needs_opentelemetry(
    backend: Backend, namespace: str, seen: Seen
) -> None:
    """Off, no span; without OpenTelemetry installed (its imports refused) a store
    works and ``instrument()`` names the extra to install. (redis-py itself imports
    OpenTelemetry when it is installed, so "not imported" is checked uninstalled.)"""
    uninstrument()
    with Store(backend.sync_client(), namespace=namespace) as store:
        store.sessions.put("s1", {"n": 1})
    assert seen.finished() == []
    code = (
        "import sys\n"
        "class Uninstalled:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'opentelemetry':\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Uninstalled())\n"
        "from redistate import Store\n"
        "from redistate.telemetry import instrument\n"
        "store = Store.embedded()\n"
        "store.sessions.put('s', {'n': 1})\n"
        "assert store.sessions.get('s') is not None\n"
        "try:\n"
        "    instrument()\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "redistate.telemetry needs opentelemetry-api: pip install 'redistate[otel]'"
    )


def test_a_server_warning_and_a_full_store_are_counted(
    namespace: str, seen: Seen, caplog: pytest.LogCaptureFixture
) -> None:
    """A server of its own (a new run id: warned once, here): evicting keys, then out
    of memory under noeviction."""
    import warnings

    from redistate import RedistateWarning, StateTooLarge, StoreFull
    from tests.servers import redis_binary, start_server

    server = start_server(redis_binary(), "--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with Store.from_url(server.url, namespace=namespace) as store:
                store.sessions.get("x")
        assert [w for w in caught if issubclass(w.category, RedistateWarning)]
        assert seen.total("redistate.server_warnings", policy="allkeys-lru") == 1
        (logged,) = [r for r in caplog.records if r.__dict__.get("redistate_event")]
        assert logged.__dict__["redistate_event"] == "server_warning"
        assert logged.__dict__["redistate_policy"] == "allkeys-lru"
        assert logged.__dict__["redistate_server"] == f"127.0.0.1:{server.port}/0"
        admin = redis.Redis(port=server.port)
        admin.config_set("maxmemory-policy", "noeviction")
        admin.close()
        with Store.from_url(server.url, namespace=namespace) as store:
            with pytest.raises(StoreFull):
                for i in range(200):
                    store.sessions.put(f"s{i}", {"pad": "x" * 60_000})
            with pytest.raises(StateTooLarge):  # bad input: an error, not a full store
                store.sessions.put("big", {"pad": "x" * 2_000_000})
    finally:
        server.stop()
    (full,) = [s for s in seen.finished("put session") if dict(s.attributes or {}).get(
        error_attributes.ERROR_TYPE) == "redistate.StoreFull"]  # fmt: skip
    assert dict(full.attributes or {})["redistate.store_full"] is True
    assert dict(full.attributes or {})[db.DB_RESPONSE_STATUS_CODE] == "OOM"
    assert seen.total("redistate.store_full") == 1


def _exported_names() -> set[str]:
    """The names a Prometheus scrape gives redistate's metrics (the exporter's rule:
    dots to underscores, counters end in _total, a histogram in seconds gets _seconds
    and its _bucket/_count/_sum series), and the gauges of ``stats --prometheus``."""
    from redistate.cli.stats import GAUGES
    from redistate.telemetry import METRICS

    series = ("bucket", "count", "sum")
    names = {f"db_client_operation_duration_seconds_{s}" for s in series} | set(GAUGES)
    for name, (kind, unit, _) in METRICS.items():
        base = name.replace(".", "_")
        if kind == "counter":
            names.add(f"{base}_total")
        else:
            names |= {f"{base}{'_seconds' if unit == 's' else ''}_{s}" for s in series}
    return names


def test_a_scrape_names_the_metrics_as_the_dashboard_queries_them(
    backend: Backend, namespace: str
) -> None:
    import json
    import re
    from pathlib import Path

    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import generate_latest

    provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
    instrument(meter_provider=provider)
    try:
        with Store(backend.sync_client(), namespace=namespace) as store:
            rec = store.sessions.put("s1", {"n": 1})
            with pytest.raises(ConflictError):
                store.sessions.put("s1", {"n": 2}, if_version=rec.version + 1)
            with store.task("t1") as run:
                run.step("search", lambda: 1)
        scraped = set(re.findall(r"^([a-z_]+)\{", generate_latest().decode(), re.M))
    finally:
        uninstrument()
        provider.shutdown()  # unregisters its collector from prometheus_client's registry
    ours = {n for n in scraped if n.startswith(("redistate_", "db_client_"))}
    assert len(ours) >= 10 and ours <= _exported_names(), ours - _exported_names()
    path = Path(__file__).parent.parent / "examples" / "grafana-dashboard.json"
    dashboard = json.loads(path.read_text("utf-8"))
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\b(?:redistate|db_client)_[a-z_]+", target["expr"])
    }
    assert queried <= _exported_names(), queried - _exported_names()
    # Every metric redistate records is on the dashboard, in one series or another.
    bases = {re.sub(r"(_total|_seconds_(bucket|count|sum))$", "", n) for n in queried}
    wanted = {n.replace(".", "_") for n in hooks.METRICS} | {"db_client_operation_duration"}
    assert wanted <= bases, wanted - bases


def test_noteworthy_events_are_log_records_with_structured_fields(
    backend: Backend, namespace: str, seen: Seen, caplog: pytest.LogCaptureFixture
) -> None:
    """A lease lost and a restore that fell back past a damaged checkpoint are records
    of the "redistate" logger whose ``redistate_*`` fields say what happened; the
    damage is counted as an integrity failure too."""
    from redistate import IntegrityError

    caplog.set_level("WARNING", logger="redistate")
    with Store(backend.sync_client(), namespace=namespace) as store:
        lease = store.lock("t1", ttl=30, renew=False).acquire()
        raw = backend.raw()
        raw.delete(store.keys.lock("t1"))  # expired, as it were, and taken over
        store.lock("t1", ttl=30, renew=False).acquire()
        with pytest.raises(LockLost):
            lease.extend()
        good = store.checkpoints.save("t2", {"step": 1})
        bad = store.checkpoints.save("t2", {"step": 2})
        blob = raw.lindex(store.keys.task("t2"), 0)
        raw.lset(store.keys.task("t2"), 0, blob[:-2] + b"9}")  # the digest no longer matches
        raw.close()
        with pytest.raises(IntegrityError):  # an operation that raised it: counted too
            store.checkpoints.latest("t2")
        restored = store.checkpoints.restore("t2")
        assert restored is not None and restored.checkpoint == good
    events = {getattr(r, "redistate_event", None): r for r in caplog.records}
    lost = events["lease_lost"]
    assert lost.name == "redistate" and lost.levelname == "WARNING"
    assert (lost.__dict__["redistate_lease"], lost.__dict__["redistate_fence"]) == (
        "t1", lease.fence
    )  # fmt: skip
    fallback = events["integrity_fallback"]
    assert fallback.__dict__["redistate_task"] == "t2"
    assert fallback.__dict__["redistate_skipped"] == [bad.id]
    assert seen.total("redistate.lease.lost") == 1
    assert seen.total("redistate.integrity_failures") == 2  # latest raised, restore skipped


def test_nothing_is_printed_where_the_application_set_up_no_logging() -> None:
    code = (
        "from redistate import Store, LockLost\n"
        "store = Store.embedded()\n"
        "lease = store.lock('t', ttl=30, renew=False).acquire()\n"
        "store.client.delete(store.keys.lock('t'))\n"
        "store.lock('t', ttl=30, renew=False).acquire()\n"
        "try:\n"
        "    lease.extend()\n"
        "except LockLost:\n"
        "    print('lost')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout == "lost\n", done.stderr
    assert done.stderr == ""


def test_no_id_reaches_a_span_unless_asked(backend: Backend, namespace: str, seen: Seen) -> None:
    """Error messages name keys (and so ids): a failed operation's span keeps the error's
    class as its status and records no exception event, unless ``record_ids``."""
    with Store(backend.sync_client(), namespace=namespace) as store:
        rec = store.sessions.put("alice@example.com", {"n": 1})
        with pytest.raises(ConflictError):
            store.sessions.put("alice@example.com", {"n": 2}, if_version=rec.version + 1)
    for span in seen.finished():
        texts = [str(v) for v in dict(span.attributes or {}).values()]
        texts += [span.status.description or ""]
        texts += [str(dict(e.attributes or {})) for e in span.events]
        assert not any("alice" in t for t in texts), span.name
    (refused,) = [s for s in seen.finished() if s.status.status_code is StatusCode.ERROR]
    assert refused.status.description == "redistate.ConflictError" and not refused.events


def test_the_callers_code_inside_an_operation_is_its_own(
    backend: Backend, namespace: str, seen: Seen
) -> None:
    """What update()'s function and a step's tool do with the store are operations of
    their own (timed, counted once), their spans nested under the one running them;
    the library's own nesting (latest runs history) counts once, for the outer one."""
    with Store(backend.sync_client(), namespace=namespace) as store:
        store.users.put("u1", {"n": 1})
        rec = store.sessions.put("s1", {"n": 1})

        def read_then_bump(data: Any) -> Any:
            assert store.users.get("u1") is not None
            return {"n": data.get("n", 0) + 1}

        store.sessions.update("s1", read_then_bump)
        with store.task("t1") as run:

            def refused() -> str:
                try:
                    store.sessions.put("s1", {"n": 0}, if_version=rec.version)  # stale
                except ConflictError:
                    return "refused"
                return "written"

            assert run.step("stale write", refused) == "refused"
        store.checkpoints.save("t2", {"n": 1})
        assert store.checkpoints.latest("t2") is not None
    durations = {
        (p.attributes[db.DB_OPERATION_NAME], p.attributes[db.DB_COLLECTION_NAME]): p.count
        for p in seen.points(db_metrics.DB_CLIENT_OPERATION_DURATION)
        if error_attributes.ERROR_TYPE not in p.attributes
    }
    assert durations[("get", "user")] == 1  # inside update's function: still timed
    assert ("history", "task") not in durations and durations[("latest", "task")] == 1
    assert seen.total("redistate.conflicts") == 1  # the step's tool's, once
    (get,) = seen.finished("get user")
    (update,) = seen.finished("update session")
    assert get.parent is not None and get.parent.span_id == update.context.span_id
    (latest,) = seen.finished("latest task")
    attributes = dict(latest.attributes or {})
    assert attributes[hooks.ROUND_TRIPS] == 1  # its history's read, counted for it too


def test_the_lease_renewer_carries_no_callers_context(
    backend: Backend, namespace: str, seen: Seen
) -> None:
    """The renewal task is started inside one acquire and renews every later lease of
    the store: a loss it finds, and what on_lost then does, belong to no request."""
    from opentelemetry import trace

    tracer = seen.tracer.get_tracer("app")
    found: list[Any] = []

    stores: list[AsyncStore] = []
    handled: list[asyncio.Event] = []

    async def on_lost(lease: Any) -> None:
        found.append(trace.get_current_span())
        await stores[0].sessions.put("after", {"lost": lease.name})
        handled[0].set()

    async def run() -> None:
        async with AsyncStore(backend.async_client(), namespace=namespace) as lease_store:
            stores.append(lease_store)
            handled.append(asyncio.Event())
            with tracer.start_as_current_span("request A"):
                # Starts the renewer; a long TTL: a loaded machine's stalls must not
                # lose it before its release below.
                first = await lease_store.lock("a", ttl=30).acquire()
            with tracer.start_as_current_span("request B"):
                second = await lease_store.lock("b", ttl=1, on_lost=on_lost).acquire()
            assert second.held
            raw = backend.raw()
            raw.delete(lease_store.keys.lock("b"))  # taken away: its next renewal fails
            raw.close()
            await handled[0].wait()  # set by on_lost, once its put is made
            await first.release()

    asyncio.run(run())
    assert found and not found[0].get_span_context().is_valid  # no caller's span
    (put,) = seen.finished("put session")
    assert put.parent is None  # a root of its own, not under request A's acquire
    (a_acquire, _) = seen.finished("acquire lease")
    assert dict(a_acquire.attributes or {})[hooks.ROUND_TRIPS] == 1  # no renewal's trips
    assert [p.count for p in seen.points(db_metrics.DB_CLIENT_OPERATION_DURATION)
            if p.attributes[db.DB_OPERATION_NAME] == "put"] == [1]  # fmt: skip
