"""Bad input across the public API: refused with the documented error, a message that
names the bad value (or its type) and the limit, and nothing in the namespace changed.

Every case runs on every backend against a namespace seeded with a session, users, a
collection record, two checkpoint histories (one with a delta), and a held lease. The
namespace is snapshotted (DUMP bytes and whether each key has a TTL) before and after the
failing call. Most cases go through the sync Store; a smaller set through AsyncStore.
"""

from __future__ import annotations

import enum
import inspect
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from redistate import (
    AsyncCollection,
    AsyncLease,
    AsyncStore,
    CodecError,
    Collection,
    ConflictError,
    InvalidId,
    Lease,
    LockLost,
    RedistateError,
    StateTooLarge,
    Store,
)
from redistate.core._io import AwaitableInSync
from redistate.core._ttl import MAX_TTL_SECONDS
from redistate.core.codec import MAX_DEPTH
from redistate.core.keys import MAX_ID_BYTES
from tests.conftest import REST_BACKENDS, Backend, _backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

MAX_BYTES = 4096  # the store's max_bytes (sessions, users)
NOTES_MAX = 512  # the "notes" collection's own max_bytes
CP_MAX = 4096  # checkpoint_max_bytes
TTL_LIMIT = str(MAX_TTL_SECONDS)

Snapshot = dict[bytes, tuple[bytes, bool]]
ParameterSet = Any  # what pytest.param returns


def snapshot(raw: Any, namespace: str) -> Snapshot:
    """Every key of the namespace: its DUMP bytes and whether it has a TTL."""
    keys = sorted(raw.scan_iter(match=f"{namespace}:*", count=1000))
    pipe = raw.pipeline(transaction=False)
    for key in keys:
        pipe.dump(key)
        pipe.pttl(key)
    replies = pipe.execute()
    return {key: (replies[2 * i], replies[2 * i + 1] > 0) for i, key in enumerate(keys)}


SEEDED_KEYS = {
    "session:{s1}",
    "user:{u1}",
    "user:{l1}",
    "notes:{n1}",
    "task:{t1}",
    "task:{t1}:ids",
    "task:{t1}:log",
    "task:{l1}",
    "task:{l1}:ids",
    "lock:{l1}",
    "fence:{l1}",
}


def deep(levels: int) -> dict[str, Any]:
    """``levels`` nested dicts: ``deep(1) == {}``, ``deep(2) == {"d": {}}``."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"d": value}
    return value


class Ratio(float, enum.Enum):
    UNKNOWN = math.nan  # orjson writes an enum's value: this one would become null


# -- the sync world -----------------------------------------------------------------


@dataclass
class World:
    store: Store
    notes: Collection
    lease: Lease  # held on "l1"
    raw: Any
    namespace: str


def _store(client: Any, namespace: str, cls: Any = Store) -> Any:
    return cls(
        client,
        namespace=namespace,
        max_bytes=MAX_BYTES,
        checkpoint_max_bytes=CP_MAX,
        checkpoint_max_deltas=1,  # t1's log is full: one more delta is refused
        checkpoint_keep=5,
    )


def _seeded(backend: Backend, namespace: str) -> World:
    store: Store = _store(backend.sync_client(), namespace)
    notes = store.collection("notes", ttl=600, max_bytes=NOTES_MAX)
    store.sessions.put("s1", {"turn": 1})
    store.users.put("u1", {"name": "ada", "n": 1})
    store.users.merge("u1", {"prefs": {"lang": "zh"}})
    notes.put("n1", [1, 2, 3])
    cps = store.checkpoints
    cps.save("t1", {"done": []}, phase="plan", progress=0.1, metadata={"next": "search"})
    cps.save("t1", {"done": ["plan"]}, phase="search", progress=0.2)
    cps.log("t1", {"last_tool": "search"})
    lease = store.lock("l1", ttl=600, renew=False).acquire()
    store.users.put("l1", {"owner": lease.fence}, lease=lease)
    cps.save("l1", {"step": 1}, lease=lease)
    return World(store, notes, lease, backend.raw(), namespace)


def _close(w: World) -> None:
    w.lease.release()
    w.store.close()
    w.raw.close()


@pytest.fixture
def world(backend: Backend, namespace: str) -> Iterator[World]:
    """A seeded namespace of this test's own (for tests that write)."""
    w = _seeded(backend, namespace)
    yield w
    _close(w)


@pytest.fixture(scope="module", params=REST_BACKENDS)
def shared_world(request: pytest.FixtureRequest) -> Iterator[World]:
    """One seeded namespace per backend for the bulk of the cases, which must not change
    it (each case checks that for itself): seeding per case would cost most of the run."""
    backend = _backend(str(request.param), request)
    w = _seeded(backend, f"t{uuid.uuid4().hex[:12]}")
    yield w
    w.lease.release()
    keys = list(w.raw.scan_iter(match=f"{w.namespace}:*", count=1000))
    if keys and backend.remote:
        w.raw.delete(*keys)
    w.store.close()
    w.raw.close()


def test_the_seeded_namespace_is_what_the_cases_expect(world: World) -> None:
    snap = snapshot(world.raw, world.namespace)
    prefix = f"{world.namespace}:"
    names = {k.decode().removeprefix(prefix): ttl for k, (_, ttl) in snap.items()}
    assert set(names) >= SEEDED_KEYS  # (plus whatever bookkeeping keys writes leave)
    with_ttl = {name for name in SEEDED_KEYS if names[name]}
    # The fence key lives as long as its lease.
    assert with_ttl == {"session:{s1}", "notes:{n1}", "lock:{l1}", "fence:{l1}"}


def test_the_snapshot_sees_every_kind_of_change(world: World) -> None:
    """The check the cases rely on is not vacuous: a rewrite of the same data (new
    version), a TTL removed, a list trimmed and a key deleted all show."""
    before = snapshot(world.raw, world.namespace)
    world.store.users.put("u1", world.store.users.get("u1").data)  # type: ignore[union-attr]
    after_put = snapshot(world.raw, world.namespace)
    assert after_put != before
    world.store.sessions.touch("s1", ttl=None)
    after_touch = snapshot(world.raw, world.namespace)
    key = f"{world.namespace}:session:{{s1}}".encode()
    assert after_put[key][0] != after_touch[key][0]  # the header's expiry field
    assert (after_put[key][1], after_touch[key][1]) == (True, False)
    world.store.checkpoints.save("t1", {}, keep=1)  # trims the history, drops the log
    after_save = snapshot(world.raw, world.namespace)
    assert f"{world.namespace}:task:{{t1}}:log".encode() not in after_save
    assert after_save != after_touch


@dataclass(frozen=True)
class Case:
    call: Callable[[World], object]
    error: type[BaseException]
    needles: tuple[str, ...]


def case(
    name: str, call: Callable[[World], object], error: type[BaseException], *needles: str
) -> ParameterSet:
    return pytest.param(Case(call, error, needles), id=name)


def vcase(
    name: str,
    op: Callable[[World, Any], object],
    value: Any,
    error: type[BaseException],
    *needles: str,
) -> ParameterSet:
    """A case that passes ``value`` to ``op``."""
    return case(name, lambda w: op(w, value), error, *needles)


def check_error(exc: BaseException, error: type[BaseException], needles: tuple[str, ...]) -> None:
    assert type(exc) is error, f"{type(exc).__name__} is not exactly {error.__name__}: {exc}"
    message = str(exc)
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    if isinstance(exc, StateTooLarge):
        assert exc.size > exc.limit
        assert str(exc.size) in message and str(exc.limit) in message


# -- ids ----------------------------------------------------------------------------

BAD_IDS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "empty": ("", ("empty",)),
    "10KB": ("x" * 10240, ("10240 bytes", f"limit of {MAX_ID_BYTES}")),
    "lone-surrogate": ("\ud800", (repr("\ud800"), "UTF-8")),
    "int": (1, ("got int",)),
    "None": (None, ("got NoneType",)),
    "bytes": (b"x", ("got bytes", "b'x'")),
}

RecordOp = Callable[[Any, Any, World], object]
RECORD_OPS: dict[str, RecordOp] = {
    "get": lambda c, i, w: c.get(i),
    "get-touch": lambda c, i, w: c.get(i, touch=True, ttl=60),
    "put": lambda c, i, w: c.put(i, {"a": 1}),
    "put-if_version": lambda c, i, w: c.put(i, {"a": 1}, if_version=0),
    "update": lambda c, i, w: c.update(i, lambda d: d),
    "merge": lambda c, i, w: c.merge(i, {"a": 1}),
    "touch": lambda c, i, w: c.touch(i, ttl=60),
    "delete": lambda c, i, w: c.delete(i),
    "delete-if_version": lambda c, i, w: c.delete(i, if_version=1),
    "delete-lease": lambda c, i, w: c.delete(i, lease=w.lease),
    "ttl": lambda c, i, w: c.ttl(i),
}
COLLECTIONS: dict[str, Callable[[World], Collection]] = {
    "users": lambda w: w.store.users,
    "sessions": lambda w: w.store.sessions,
    "notes": lambda w: w.notes,
}

TaskOp = Callable[[World, Any], object]
TASK_OPS: dict[str, TaskOp] = {
    "checkpoints.save": lambda w, t: w.store.checkpoints.save(t, {"a": 1}),
    "checkpoints.log": lambda w, t: w.store.checkpoints.log(t, {"a": 1}),
    "checkpoints.latest": lambda w, t: w.store.checkpoints.latest(t),
    "checkpoints.history": lambda w, t: w.store.checkpoints.history(t, limit=2),
    "checkpoints.get": lambda w, t: w.store.checkpoints.get(t, "c1"),
    "checkpoints.restore": lambda w, t: w.store.checkpoints.restore(t),
    "checkpoints.handoff": lambda w, t: w.store.checkpoints.handoff(t),
    "checkpoints.delete": lambda w, t: w.store.checkpoints.delete(t),
    "checkpoints.delete-lease": lambda w, t: w.store.checkpoints.delete(t, lease=w.lease),
    "lock": lambda w, t: w.store.lock(t, ttl=10),
    "task": lambda w, t: w.store.task(t, ttl=10),
}


def _record_id_case(coll: str, op: str, bad: str) -> ParameterSet:
    get_coll, run, (value, needles) = COLLECTIONS[coll], RECORD_OPS[op], BAD_IDS[bad]
    return case(f"{coll}.{op}-id={bad}", lambda w: run(get_coll(w), value, w), InvalidId, *needles)


def _task_id_case(op: str, bad: str) -> ParameterSet:
    run, (value, needles) = TASK_OPS[op], BAD_IDS[bad]
    return case(f"{op}-id={bad}", lambda w: run(w, value), InvalidId, *needles)


ID_CASES = [
    *(_record_id_case("users", op, bad) for op in RECORD_OPS for bad in BAD_IDS),
    *(
        _record_id_case(coll, op, bad)
        for coll in ("sessions", "notes")
        for op in RECORD_OPS
        for bad in ("lone-surrogate", "int")
    ),
    *(_task_id_case(op, bad) for op in TASK_OPS for bad in BAD_IDS),
]

BAD_CHECKPOINT_IDS: dict[str, tuple[Any, str]] = {
    "empty": ("", "''"),
    "space": ("a b", "'a b'"),
    "65-chars": ("x" * 65, "x" * 65),
    "brace": ("a{b}", "'a{b}'"),
    "lone-surrogate": ("\ud800", repr("\ud800")),
    "int": (1, " 1 "),
}
CHECKPOINT_ID_OPS: dict[str, TaskOp] = {
    "checkpoints.save-checkpoint_id": lambda w, c: w.store.checkpoints.save(
        "t1", {}, checkpoint_id=c
    ),
    "checkpoints.get-checkpoint_id": lambda w, c: w.store.checkpoints.get("t1", c),
    "checkpoints.log-delta_id": lambda w, c: w.store.checkpoints.log("l1", {}, delta_id=c),
}


def _checkpoint_id_case(op: str, bad: str) -> ParameterSet:
    run, (value, needle) = CHECKPOINT_ID_OPS[op], BAD_CHECKPOINT_IDS[bad]
    return case(f"{op}={bad}", lambda w: run(w, value), InvalidId, needle, "1-64 chars")


CHECKPOINT_ID_CASES = [
    _checkpoint_id_case(op, bad) for op in CHECKPOINT_ID_OPS for bad in BAD_CHECKPOINT_IDS
]

# -- values -------------------------------------------------------------------------

_list_cycle: list[Any] = []
_list_cycle.append(_list_cycle)
_dict_cycle: dict[str, Any] = {}
_dict_cycle["self"] = _dict_cycle
P = "$.a.b[0]"


def _wrap(bad: Any) -> dict[str, Any]:
    return {"a": {"b": [bad]}}


BAD_VALUES: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "nan": (_wrap(math.nan), (P, "float nan")),
    "inf": (_wrap(math.inf), (P, "float inf")),
    "-inf": (_wrap(-math.inf), (P, "float -inf")),
    "int-2**64": (_wrap(2**64), (P, str(2**64), "64-bit")),
    "int-below-int64": (_wrap(-(2**63) - 1), (P, str(-(2**63) - 1), "64-bit")),
    "object": (_wrap(object()), (P, "builtins.object")),
    "bytes": (_wrap(b"x"), (P, "builtins.bytes")),
    "complex": (_wrap(1j), (P, "builtins.complex")),
    "set-with-nan": (_wrap({math.nan}), (P, "float nan")),
    "enum-nan": (_wrap(Ratio.UNKNOWN), (P, "float nan")),
    "lone-surrogate-str": (_wrap("ok\ud800"), (P, repr("\ud800"), "surrogate")),
    "int-key": (_wrap({1: "x"}), (f"{P}[1]", "dict key of type int")),
    "None-key": (_wrap({None: "x"}), (f"{P}[None]", "dict key of type NoneType")),
    "tuple-key": (_wrap({(1, 2): "x"}), (f"{P}[(1, 2)]", "dict key of type tuple")),
    "lone-surrogate-key": (_wrap({"\udfff": 1}), (repr("\udfff"), "surrogate")),
    "list-cycle": ({"a": _list_cycle}, ("$.a[0][0]", f"{MAX_DEPTH} levels", "cycle")),
    "dict-cycle": ({"a": _dict_cycle}, ("$.a.self.self", f"{MAX_DEPTH} levels", "cycle")),
    f"{MAX_DEPTH + 1}-levels": (deep(MAX_DEPTH + 1), ("$.d.d.d", f"{MAX_DEPTH} levels")),
    "1000-levels": (deep(1000), ("$.d.d.d", f"{MAX_DEPTH} levels")),
}

ValueOp = Callable[[World, Any], object]
VALUE_OPS: dict[str, ValueOp] = {
    "users.put": lambda w, v: w.store.users.put("u1", v),
    "sessions.put-if_version": lambda w, v: w.store.sessions.put("s1", v, if_version=1),
    "notes.put-new": lambda w, v: w.notes.put("n2", v),
    "users.update": lambda w, v: w.store.users.update("u1", lambda d: v),
    "users.merge": lambda w, v: w.store.users.merge("u1", v),
    "checkpoints.save-state": lambda w, v: w.store.checkpoints.save("t1", v),
    "checkpoints.save-metadata": lambda w, v: w.store.checkpoints.save("t1", {}, metadata=v),
    "checkpoints.log": lambda w, v: w.store.checkpoints.log("l1", v),
}


def _value_case(op: str, bad: str) -> ParameterSet:
    run, (value, needles) = VALUE_OPS[op], BAD_VALUES[bad]
    return case(f"{op}-value={bad}", lambda w: run(w, value), CodecError, *needles)


VALUE_CASES = [_value_case(op, bad) for op in VALUE_OPS for bad in BAD_VALUES]

# -- sizes --------------------------------------------------------------------------


def _text(size: int) -> dict[str, str]:
    """A dict whose JSON is exactly ``size`` bytes."""
    return {"x": "a" * (size - 8)}


SIZE_CASES = [
    case(
        "users.put-over-max_bytes",
        lambda w: w.store.users.put("u1", _text(MAX_BYTES + 1)),
        StateTooLarge,
        f"is {MAX_BYTES + 1} bytes",
        f"limit of {MAX_BYTES} bytes",
        "user:{u1}",
    ),
    case(
        "sessions.put-new-over-max_bytes",
        lambda w: w.store.sessions.put("s2", _text(MAX_BYTES * 3)),
        StateTooLarge,
        f"is {MAX_BYTES * 3} bytes",
        f"limit of {MAX_BYTES} bytes",
    ),
    case(
        "notes.put-over-its-own-max_bytes",
        lambda w: w.notes.put("n1", _text(NOTES_MAX + 1)),
        StateTooLarge,
        f"is {NOTES_MAX + 1} bytes",
        f"limit of {NOTES_MAX} bytes",
    ),
    case(
        "users.update-result-over-max_bytes",
        lambda w: w.store.users.update("u1", lambda d: {**d, **_text(MAX_BYTES)}),
        StateTooLarge,
        f"limit of {MAX_BYTES} bytes",
    ),
    case(
        "users.merge-patch-over-max_bytes",
        lambda w: w.store.users.merge("u1", _text(MAX_BYTES + 100)),
        StateTooLarge,
        f"limit of {MAX_BYTES} bytes",
    ),
    case(
        "users.merge-result-over-max_bytes",  # the patch alone fits, the merged record not
        lambda w: w.store.users.merge("u1", _text(MAX_BYTES - 10)),
        StateTooLarge,
        f"limit of {MAX_BYTES} bytes",
    ),
    case(
        "checkpoints.save-state-over-max_bytes",
        lambda w: w.store.checkpoints.save("t1", _text(CP_MAX + 1)),
        StateTooLarge,
        f"limit of {CP_MAX} bytes",
    ),
    case(
        "checkpoints.save-metadata-over-max_bytes",
        lambda w: w.store.checkpoints.save("t1", {}, metadata=_text(CP_MAX + 1)),
        StateTooLarge,
        f"limit of {CP_MAX} bytes",
    ),
    case(
        "checkpoints.save-state-and-metadata-over-max_bytes",
        lambda w: w.store.checkpoints.save(
            "t1", _text(CP_MAX // 2 + 10), metadata=_text(CP_MAX // 2 + 10)
        ),
        StateTooLarge,
        f"limit of {CP_MAX} bytes",
    ),
    case(
        "checkpoints.log-delta-over-max_bytes",
        lambda w: w.store.checkpoints.log("l1", _text(CP_MAX + 1)),
        StateTooLarge,
        f"is {CP_MAX + 1} bytes",
        f"limit of {CP_MAX} bytes",
    ),
    case(
        "checkpoints.log-to-a-full-log",  # checkpoint_max_deltas=1 and t1 holds one
        lambda w: w.store.checkpoints.log("t1", {"a": 1}),
        RedistateError,
        "task:{t1}:log",
        "holds 1 deltas",
    ),
]

# -- TTLs ---------------------------------------------------------------------------

BAD_TTLS: dict[str, tuple[Any, type[Exception], tuple[str, ...]]] = {
    "-1": (-1, ValueError, ("got -1", TTL_LIMIT)),
    "0": (0, ValueError, ("got 0", TTL_LIMIT)),
    "-0.5": (-0.5, ValueError, ("got -0.5", TTL_LIMIT)),
    "nan": (math.nan, ValueError, ("got nan", TTL_LIMIT)),
    "inf": (math.inf, ValueError, ("got inf", TTL_LIMIT)),
    "-inf": (-math.inf, ValueError, ("got -inf", TTL_LIMIT)),
    "100y+1s": (MAX_TTL_SECONDS + 1, ValueError, (f"got {MAX_TTL_SECONDS + 1}", TTL_LIMIT)),
    "10**30": (10**30, ValueError, (f"got {10**30}", TTL_LIMIT)),
    "True": (True, TypeError, ("got bool",)),
    "str": ("60", TypeError, ("got str",)),
    "list": ([60], TypeError, ("got list",)),
}

TtlOp = Callable[[World, Any], object]
TTL_OPS: dict[str, TtlOp] = {
    "sessions.put": lambda w, t: w.store.sessions.put("s1", {}, ttl=t),
    "users.put-new": lambda w, t: w.store.users.put("u2", {}, ttl=t),
    "users.update": lambda w, t: w.store.users.update("u1", lambda d: d, ttl=t),
    "users.merge": lambda w, t: w.store.users.merge("u1", {"a": 1}, ttl=t),
    "sessions.touch": lambda w, t: w.store.sessions.touch("s1", ttl=t),
    "users.touch": lambda w, t: w.store.users.touch("u1", ttl=t),
    "sessions.get-touch": lambda w, t: w.store.sessions.get("s1", touch=True, ttl=t),
    "checkpoints.save": lambda w, t: w.store.checkpoints.save("t1", {}, ttl=t),
    "checkpoints.log": lambda w, t: w.store.checkpoints.log("l1", {}, ttl=t),
    "lock": lambda w, t: w.store.lock("u1", ttl=t),
    "task": lambda w, t: w.store.task("u1", ttl=t),
    "lease.extend": lambda w, t: w.lease.extend(t),
    "collection": lambda w, t: w.store.collection("notes", ttl=t),
    "Store-session_ttl": lambda w, t: Store(w.store.client, session_ttl=t),
    "Store-task_ttl": lambda w, t: Store(w.store.client, task_ttl=t),
}


def _ttl_case(op: str, bad: str) -> ParameterSet:
    run, (value, error, needles) = TTL_OPS[op], BAD_TTLS[bad]
    return case(f"{op}-ttl={bad}", lambda w: run(w, value), error, *needles)


TTL_CASES = [
    *(_ttl_case(op, bad) for op in TTL_OPS for bad in BAD_TTLS),
    case(
        "users.touch-without-a-ttl",
        lambda w: w.store.users.touch("u1"),
        ValueError,
        "'user' has no TTL",
        "ttl=",
    ),
    case(
        "users.get-touch-without-a-ttl",
        lambda w: w.store.users.get("u1", touch=True),
        ValueError,
        "'user' has no TTL",
    ),
    case(
        "lock-ttl=None",
        lambda w: w.store.lock("u1", ttl=None),  # type: ignore[arg-type]
        ValueError,
        "needs a ttl",
    ),
    case(
        "task-ttl=None",
        lambda w: w.store.task("u1", ttl=None),  # type: ignore[arg-type]
        ValueError,
        "needs a ttl",
    ),
    case("lease.extend-ttl=0", lambda w: w.lease.extend(0), ValueError, "got 0", TTL_LIMIT),
]

# -- versions, counts and other arguments -------------------------------------------


def _bad(value: object) -> Any:
    """The calls below are wrong on purpose: let them past the type checker."""
    return value


WAIT_OPS: dict[str, Callable[[World, Any], object]] = {
    "lock": lambda w, v: w.store.lock("u1", wait=v),
    "task": lambda w, v: w.store.task("u1", wait=v),
}

ARGUMENT_CASES = [
    # compare-and-set versions
    case(
        "put-if_version=str",
        lambda w: w.store.users.put("u1", {}, if_version=_bad("1")),
        TypeError,
        "if_version",
        "got str",
    ),
    case(
        "put-if_version=float",
        lambda w: w.store.users.put("u1", {}, if_version=_bad(1.0)),
        TypeError,
        "if_version",
        "got float",
    ),
    case(
        "put-if_version=True",
        lambda w: w.store.users.put("u1", {}, if_version=_bad(True)),
        TypeError,
        "if_version",
        "got bool",
    ),
    case(
        "put-if_version=-1",
        lambda w: w.store.users.put("u1", {}, if_version=-1),
        ValueError,
        "got -1",
        "2**63-1",
    ),
    case(
        "put-if_version=2**63",
        lambda w: w.store.users.put("u1", {}, if_version=2**63),
        ValueError,
        f"got {2**63}",
        "2**63-1",
    ),
    case(
        "delete-if_version=0",
        lambda w: w.store.users.delete("u1", if_version=0),
        ValueError,
        "got 0",
        "between 1 and",
    ),
    case(
        "delete-if_version=str",
        lambda w: w.store.users.delete("u1", if_version=_bad("1")),
        TypeError,
        "got str",
    ),
    case(
        "delete-if_version=-1",
        lambda w: w.store.users.delete("u1", if_version=-1),
        ValueError,
        "got -1",
    ),
    # stale versions: refused by the script, after the round trip
    case(
        "put-if_version=stale",
        lambda w: w.store.users.put("u1", {}, if_version=1),
        ConflictError,
        "user:{u1}",
        "expected version 1",
    ),
    case(
        "put-if_version=0-on-existing",
        lambda w: w.store.users.put("u1", {}, if_version=0),
        ConflictError,
        "create-only",
    ),
    case(
        "sessions.put-if_version=stale",
        lambda w: w.store.sessions.put("s1", {}, if_version=1, ttl=None),
        ConflictError,
        "session:{s1}",
    ),
    case(
        "delete-if_version=stale",
        lambda w: w.store.users.delete("u1", if_version=1),
        ConflictError,
        "expected version 1",
    ),
    case(
        "delete-if_version-of-missing",
        lambda w: w.store.users.delete("u9", if_version=5),
        ConflictError,
        "no record",
    ),
    # update
    case(
        "update-attempts=0",
        lambda w: w.store.users.update("u1", lambda d: d, attempts=0),
        ValueError,
        "got 0",
        "10000",
    ),
    case(
        "update-attempts=True",
        lambda w: w.store.users.update("u1", lambda d: d, attempts=_bad(True)),
        ValueError,
        "got True",
    ),
    case(
        "update-attempts=str",
        lambda w: w.store.users.update("u1", lambda d: d, attempts=_bad("3")),
        ValueError,
        "got '3'",
    ),
    case(
        "update-fn-not-callable",
        lambda w: w.store.users.update("u1", _bad(5)),
        TypeError,
        "'int'",
    ),
    case(
        "update-fn-coroutine-on-sync-store",
        lambda w: w.store.users.update("u1", _coroutine_fn),
        AwaitableInSync,  # a TypeError
        "AsyncStore",
    ),
    # checkpoints
    case("save-keep=0", lambda w: w.store.checkpoints.save("t1", {}, keep=0), ValueError, "got 0"),
    case(
        "save-keep=True",
        lambda w: w.store.checkpoints.save("t1", {}, keep=_bad(True)),
        ValueError,
        "keep",
        "got True",
    ),
    case(
        "save-keep=100001",
        lambda w: w.store.checkpoints.save("t1", {}, keep=100_001),
        ValueError,
        "got 100001",
        "100000",
    ),
    case(
        "save-keep=str",
        lambda w: w.store.checkpoints.save("t1", {}, keep=_bad("3")),
        ValueError,
        "got '3'",
    ),
    case(
        "history-limit=-1",
        lambda w: w.store.checkpoints.history("t1", limit=-1),
        ValueError,
        "limit",
        "got -1",
    ),
    case(
        "history-limit=str",
        lambda w: w.store.checkpoints.history("t1", limit=_bad("1")),
        ValueError,
        "got '1'",
    ),
    case(
        "history-limit=True",
        lambda w: w.store.checkpoints.history("t1", limit=_bad(True)),
        ValueError,
        "got True",
    ),
    case(
        "history-limit=float",
        lambda w: w.store.checkpoints.history("t1", limit=_bad(1.5)),
        ValueError,
        "got 1.5",
    ),
    *(
        vcase(
            f"save-progress={name}",
            lambda w, p: w.store.checkpoints.save("t1", {}, progress=p),
            p,
            ValueError,
            "progress",
            "0 to 1",
            f"got {p!r}",
        )
        for name, p in [
            ("2.0", 2.0),
            ("-0.1", -0.1),
            ("nan", math.nan),
            ("inf", math.inf),
            ("True", True),
            ("str", "0.5"),
        ]
    ),
    case(
        "save-phase=int",
        lambda w: w.store.checkpoints.save("t1", {}, phase=_bad(1)),
        TypeError,
        "phase",
        "got int",
    ),
    case(
        "save-phase=bytes",
        lambda w: w.store.checkpoints.save("t1", {}, phase=_bad(b"x")),
        TypeError,
        "phase",
        "got bytes",
    ),
    case(
        "save-phase=lone-surrogate",
        lambda w: w.store.checkpoints.save("t1", {}, phase="plan\ud800"),
        ValueError,
        "phase",
        repr("plan\ud800"),
    ),
    case(
        "save-metadata=list",
        lambda w: w.store.checkpoints.save("t1", {}, metadata=_bad([1])),
        TypeError,
        "metadata",
        "got list",
    ),
    case(
        "save-metadata=str",
        lambda w: w.store.checkpoints.save("t1", {}, metadata=_bad("x")),
        TypeError,
        "metadata",
        "got str",
    ),
    case(
        f"save-metadata-{MAX_DEPTH}-levels",  # fine as a value, one level too deep as meta
        lambda w: w.store.checkpoints.save("t1", {}, metadata=deep(MAX_DEPTH)),
        CodecError,
        "metadata",
        f"{MAX_DEPTH - 1} levels",
    ),
    *(
        vcase(
            f"log-delta={name}",
            lambda w, d: w.store.checkpoints.log("l1", d),
            d,
            TypeError,
            "delta must be a dict",
            f"got {type(d).__name__}",
        )
        for name, d in [("list", [1]), ("None", None), ("str", "x"), ("int", 3)]
    ),
    # leases and waits
    *(
        vcase(f"{what}-wait={name}", f, v, ValueError, "wait", f"got {v!r}")
        for what, f in WAIT_OPS.items()
        for name, v in [("-1", -1), ("nan", math.nan), ("str", "1"), ("True", True)]
    ),
    case(
        "lock.acquire-already-held",
        lambda w: w.lease.acquire(),
        RuntimeError,
        "'l1'",
        "already held",
    ),
    case(
        "lock-on_lost-not-callable",
        lambda w: w.store.lock("u1", on_lost=_bad(1)),
        TypeError,
        "on_lost",
        "int",
    ),
]


async def _async_identity(data: Any) -> Any:
    return data


def _coroutine_fn(data: Any) -> Any:
    return _async_identity(data)


# -- leases on guarded writes ---------------------------------------------------------

GuardedOp = Callable[[World, Any, str], object]
GUARDED_OPS: dict[str, GuardedOp] = {
    "users.put": lambda w, lease, i: w.store.users.put(i, {}, lease=lease),
    "users.update": lambda w, lease, i: w.store.users.update(i, lambda d: d, lease=lease),
    "users.merge": lambda w, lease, i: w.store.users.merge(i, {"a": 1}, lease=lease),
    "sessions.touch": lambda w, lease, i: w.store.sessions.touch(i, lease=lease),
    "sessions.get-touch": lambda w, lease, i: w.store.sessions.get(i, touch=True, lease=lease),
    "users.delete": lambda w, lease, i: w.store.users.delete(i, lease=lease),
    "checkpoints.save": lambda w, lease, i: w.store.checkpoints.save(i, {}, lease=lease),
    "checkpoints.log": lambda w, lease, i: w.store.checkpoints.log(i, {}, lease=lease),
    "checkpoints.delete": lambda w, lease, i: w.store.checkpoints.delete(i, lease=lease),
}
_ENTITY = {"users": "u1", "sessions": "s1", "checkpoints": "t1"}


def _stale_lease(w: World) -> Lease:
    """A lease object on "l1" whose value is not the lock's: the script refuses it.
    Within its local deadline, as if acquired a moment ago: nothing refuses it before
    the round trip."""
    stale = w.store.lock("l1", ttl=60, renew=False)
    stale.fence = w.lease.fence
    stale._valid_until = time.monotonic() + 60
    return stale


def _guarded_cases(op: str) -> list[ParameterSet]:
    run = GUARDED_OPS[op]
    entity = _ENTITY[op.split(".")[0]]
    return [
        case(
            f"{op}-lease-for-another-id",
            lambda w: run(w, w.lease, entity),
            ValueError,
            "'l1'",
            repr(entity),
        ),
        case(
            f"{op}-lease=str",
            lambda w: run(w, "l1", entity),
            TypeError,
            "lease",
            "got str",
        ),
        case(
            f"{op}-lease-not-acquired",
            lambda w: run(w, w.store.lock(entity, ttl=60), entity),
            LockLost,
            repr(entity),
            "not held",
        ),
        case(
            f"{op}-lease-of-another-namespace",
            lambda w: run(w, Store(w.store.client, namespace="other").lock(entity), entity),
            ValueError,
            "namespace",
            "other:lock:",
        ),
        case(  # refused inside the write script, after the round trip
            f"{op}-stale-lease",
            lambda w: run(w, _stale_lease(w), "l1"),
            LockLost,
            "lock:{l1}",
        ),
    ]


LEASE_CASES = [c for op in GUARDED_OPS for c in _guarded_cases(op)]

# -- construction ---------------------------------------------------------------------


def _store_case(name: str, error: type[Exception], *needles: str, **options: Any) -> ParameterSet:
    return case(f"Store-{name}", lambda w: Store(w.store.client, **options), error, *needles)


CONSTRUCTION_CASES = [
    _store_case("namespace=colon", InvalidId, "'a:b'", "1-64 chars", namespace="a:b"),
    _store_case("namespace=empty", InvalidId, "''", namespace=""),
    _store_case("namespace=65-chars", InvalidId, "x" * 65, "1-64", namespace="x" * 65),
    _store_case("namespace=glob", InvalidId, "'ns*'", namespace="ns*"),
    _store_case("namespace=None", InvalidId, "None", namespace=None),
    _store_case("namespace=int", InvalidId, "namespace 1 ", namespace=1),
    _store_case("max_bytes=0", ValueError, "max_bytes", "got 0", max_bytes=0),
    _store_case("max_bytes=-1", ValueError, "got -1", max_bytes=-1),
    _store_case("max_bytes=True", ValueError, "got True", max_bytes=True),
    _store_case("max_bytes=str", ValueError, "got '1'", max_bytes="1"),
    _store_case("max_bytes=float", ValueError, "got 1.5", max_bytes=1.5),
    _store_case("max_bytes=1TiB", ValueError, str(2**40), "536866816", max_bytes=2**40),
    _store_case("update_attempts=0", ValueError, "got 0", "10000", update_attempts=0),
    _store_case("update_attempts=True", ValueError, "got True", update_attempts=True),
    _store_case("checkpoint_keep=0", ValueError, "keep", "got 0", checkpoint_keep=0),
    _store_case("checkpoint_keep=True", ValueError, "got True", checkpoint_keep=True),
    _store_case("checkpoint_keep=100001", ValueError, "100000", checkpoint_keep=100_001),
    _store_case("checkpoint_max_bytes=0", ValueError, "got 0", checkpoint_max_bytes=0),
    _store_case("checkpoint_max_bytes=True", ValueError, "got True", checkpoint_max_bytes=True),
    _store_case("checkpoint_max_bytes=1TiB", ValueError, str(2**40), checkpoint_max_bytes=2**40),
    _store_case("checkpoint_compress_above=-1", ValueError, "got -1", checkpoint_compress_above=-1),
    _store_case(
        "checkpoint_compress_above=True", ValueError, "got True", checkpoint_compress_above=True
    ),
    _store_case("checkpoint_max_deltas=0", ValueError, "got 0", checkpoint_max_deltas=0),
    _store_case("codec=object", TypeError, "codec", "object", codec=object()),
    _store_case("codec=str", TypeError, "codec", "str", codec="json"),
    *(
        vcase(
            f"collection-name={label}",
            lambda w, n: w.store.collection(n),
            n,
            InvalidId,
            repr(n),
        )
        for label, n in [
            ("empty", ""),
            ("upper", "Notes"),
            ("colon", "a:b"),
            ("glob", "a*"),
            ("brace", "a{b}"),
            ("65-chars", "x" * 65),
            ("int", 1),
            ("None", None),
        ]
    ),
    *(
        vcase(
            f"collection-name=reserved-{n}",
            lambda w, n: w.store.collection(n),
            n,
            InvalidId,
            repr(n),
            "reserved",
        )
        for n in ("session", "user", "task", "lock", "fence")
    ),
    *(
        vcase(
            f"collection-max_bytes={label}",
            lambda w, v: w.store.collection("notes", max_bytes=v),
            v,
            ValueError,
            "max_bytes",
            f"got {v!r}",
        )
        for label, v in [("0", 0), ("-1", -1), ("True", True), ("float", 1.5), ("str", "64")]
    ),
]

SYNC_CASES = [
    *ID_CASES,
    *CHECKPOINT_ID_CASES,
    *VALUE_CASES,
    *SIZE_CASES,
    *TTL_CASES,
    *ARGUMENT_CASES,
    *LEASE_CASES,
    *CONSTRUCTION_CASES,
]


@pytest.mark.parametrize("bad", SYNC_CASES)
def test_bad_input_is_refused_and_changes_nothing(shared_world: World, bad: Case) -> None:
    world = shared_world
    before = snapshot(world.raw, world.namespace)
    with pytest.raises(bad.error) as info:
        bad.call(world)
    check_error(info.value, bad.error, bad.needles)
    assert snapshot(world.raw, world.namespace) == before


def test_bad_input_inside_a_task_run_changes_nothing(world: World) -> None:
    with world.store.task("t1", ttl=30) as run:
        assert run.state == {"done": ["plan"], "last_tool": "search"}
        before = snapshot(world.raw, world.namespace)
        with pytest.raises(CodecError, match=r"\$\.a\.b\[0\]: float nan"):
            run.save(_wrap(math.nan))
        with pytest.raises(ValueError, match="progress"):
            run.save({}, progress=1.5)
        with pytest.raises(TypeError, match="got list"):
            run.log(_bad([1]))
        with pytest.raises(RedistateError, match="holds 1 deltas"):
            run.log({"a": 1})  # the log is full
        assert snapshot(world.raw, world.namespace) == before
        assert run.state == {"done": ["plan"], "last_tool": "search"}


# -- what looks odd but is valid ------------------------------------------------------

ODD_IDS = ["{", "}", "{}", "*", "?", "[a]", "\\", "%", "%7B", "a:b", "\x00", "\U0001f600", " "]


def test_odd_but_valid_ids_are_kept_apart(world: World) -> None:
    """Hash-tag and glob characters are escaped: every odd id gets a key of its own,
    inside the namespace, with exactly one hash tag."""
    for i, entity in enumerate(ODD_IDS):
        world.store.users.put(entity, {"i": i})
        world.store.checkpoints.save(entity, {"i": i})
        with world.store.lock(entity, ttl=10, wait=0) as lease:
            world.store.users.merge(entity, {"fence": lease.fence}, lease=lease)
    for i, entity in enumerate(ODD_IDS):
        got = world.store.users.get(entity)
        assert got is not None and got.data["i"] == i
        restored = world.store.checkpoints.restore(entity)
        assert restored is not None and restored.state == {"i": i}
    assert sorted(world.store.users.ids()) == sorted([*ODD_IDS, "u1", "l1"])
    for key in snapshot(world.raw, world.namespace):
        text = key.decode("utf-8")
        assert text.startswith(f"{world.namespace}:")
        assert text.count("{") == 1 and text.count("}") == 1, text
        assert not any(c in text for c in "*?[]\\"), text


def _nested_list(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


ACCEPTED = {
    "int64-bounds": {"lo": -(2**63), "hi": 2**64 - 1},
    f"{MAX_DEPTH}-levels-of-dicts": deep(MAX_DEPTH),
    f"{MAX_DEPTH}-levels-of-lists": _nested_list(MAX_DEPTH),
    "negative-zero-and-subnormals": [-0.0, 5e-324, 2.2250738585072014e-308],
    "astral-and-nul": {"\U0001f600": "\x00\U0010ffff"},
    "empty-containers": {"l": [], "d": {}},
}


@pytest.mark.parametrize("value", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_edge_values_within_the_limits_are_accepted_exactly(world: World, value: Any) -> None:
    world.store.users.put("u1", value)
    got = world.store.users.get("u1")
    assert got is not None and got.data == value
    assert repr(got.data) == repr(value)  # -0.0 stays -0.0, [] stays []
    world.store.checkpoints.save("t1", value)
    restored = world.store.checkpoints.restore("t1")
    assert restored is not None and repr(restored.state) == repr(value)


def test_sets_and_tuples_are_stored_as_lists(world: World) -> None:
    """Documented on JsonCodec: sets (sorted) and tuples in, plain JSON lists out."""
    world.store.users.put("u1", {"s": {3, 1, 2}, "t": (1, "a")})
    got = world.store.users.get("u1")
    assert got is not None and got.data == {"s": [1, 2, 3], "t": [1, "a"]}


def test_exactly_max_bytes_is_accepted_and_one_more_refused(world: World) -> None:
    world.store.users.put("u1", _text(MAX_BYTES))
    world.notes.put("n1", _text(NOTES_MAX))
    with pytest.raises(StateTooLarge) as info:
        world.notes.put("n1", _text(NOTES_MAX + 1))
    assert (info.value.size, info.value.limit) == (NOTES_MAX + 1, NOTES_MAX)


# -- from_url -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timeout", "error"),
    [
        (-1, ValueError),
        (0, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        ("5", TypeError),
        (True, TypeError),
    ],
    ids=["-1", "0", "nan", "inf", "str", "True"],
)
def test_from_url_refuses_a_bad_timeout_up_front(
    server_backend: Backend, namespace: str, timeout: Any, error: type[Exception]
) -> None:
    """A bad timeout must fail at construction naming it, not at the first call with
    a socket error ("Timeout value out of range") that names nothing."""
    with pytest.raises(error) as info:
        Store.from_url(server_backend.url, namespace=namespace, timeout=timeout).close()
    assert "timeout" in str(info.value) and repr(timeout) in str(info.value)


@pytest.mark.parametrize(
    ("options", "error", "needle"),
    [
        ({"namespace": "a b"}, InvalidId, "'a b'"),
        ({"max_bytes": 0}, ValueError, "got 0"),
        ({"session_ttl": -5}, ValueError, "got -5"),
        ({"checkpoint_keep": 0}, ValueError, "got 0"),
        ({"update_attempts": -1}, ValueError, "got -1"),
    ],
    ids=["namespace", "max_bytes", "session_ttl", "checkpoint_keep", "update_attempts"],
)
def test_from_url_refuses_bad_store_options(
    server_backend: Backend, options: dict[str, Any], error: type[Exception], needle: str
) -> None:
    with pytest.raises(error, match=needle):
        Store.from_url(server_backend.url, **options)


# -- the async API ----------------------------------------------------------------------


@dataclass
class AsyncWorld:
    store: AsyncStore
    notes: AsyncCollection
    lease: AsyncLease  # held on "l1"
    raw: Any
    namespace: str


@pytest.fixture
async def aworld(backend: Backend, namespace: str) -> AsyncIterator[AsyncWorld]:
    store: AsyncStore = _store(backend.async_client(), namespace, AsyncStore)
    notes = store.collection("notes", ttl=600, max_bytes=NOTES_MAX)
    await store.sessions.put("s1", {"turn": 1})
    await store.users.put("u1", {"name": "ada", "n": 1})
    await store.users.merge("u1", {"prefs": {"lang": "zh"}})
    await notes.put("n1", [1, 2, 3])
    cps = store.checkpoints
    await cps.save("t1", {"done": []}, phase="plan", progress=0.1, metadata={"next": "search"})
    await cps.save("t1", {"done": ["plan"]}, phase="search", progress=0.2)
    await cps.log("t1", {"last_tool": "search"})
    lease = await store.lock("l1", ttl=60, renew=False).acquire()
    await store.users.put("l1", {"owner": lease.fence}, lease=lease)
    await cps.save("l1", {"step": 1}, lease=lease)
    raw = backend.raw()
    yield AsyncWorld(store, notes, lease, raw, namespace)
    await lease.release()
    await store.aclose()
    raw.close()


@dataclass(frozen=True)
class AsyncCase:
    call: Callable[[AsyncWorld], object]  # a coroutine, or raises when called
    error: type[BaseException]
    needles: tuple[str, ...]


def acase(
    name: str, call: Callable[[AsyncWorld], object], error: type[BaseException], *needles: str
) -> ParameterSet:
    return pytest.param(AsyncCase(call, error, needles), id=name)


async def _nan_later(data: Any) -> Any:
    return {**data, "x": math.nan}


AsyncOp = Callable[[AsyncWorld, Any], object]


def avcase(
    name: str, op: AsyncOp, value: Any, error: type[BaseException], *needles: str
) -> ParameterSet:
    return acase(name, lambda w: op(w, value), error, *needles)


ASYNC_ID_OPS: dict[str, AsyncOp] = {
    "users.get": lambda w, i: w.store.users.get(i),
    "users.put": lambda w, i: w.store.users.put(i, {}),
    "users.merge": lambda w, i: w.store.users.merge(i, {"a": 1}),
    "users.delete": lambda w, i: w.store.users.delete(i, if_version=1),
    "checkpoints.save": lambda w, t: w.store.checkpoints.save(t, {}),
    "checkpoints.log": lambda w, t: w.store.checkpoints.log(t, {}),
    "checkpoints.restore": lambda w, t: w.store.checkpoints.restore(t),
    "checkpoints.delete": lambda w, t: w.store.checkpoints.delete(t),
    "lock": lambda w, t: w.store.lock(t),
    "task": lambda w, t: w.store.task(t),
}
ASYNC_VALUE_OPS: dict[str, AsyncOp] = {
    "users.put": lambda w, v: w.store.users.put("u1", v),
    "users.merge": lambda w, v: w.store.users.merge("u1", v),
    "checkpoints.save": lambda w, v: w.store.checkpoints.save("t1", v),
    "checkpoints.log": lambda w, v: w.store.checkpoints.log("l1", v),
}
ASYNC_TTL_OPS: dict[str, AsyncOp] = {
    "sessions.put": lambda w, t: w.store.sessions.put("s1", {}, ttl=t),
    "sessions.touch": lambda w, t: w.store.sessions.touch("s1", ttl=t),
    "checkpoints.save": lambda w, t: w.store.checkpoints.save("t1", {}, ttl=t),
    "lease.extend": lambda w, t: w.lease.extend(t),
}


def _astale_lease(w: AsyncWorld) -> AsyncLease:
    stale = w.store.lock("l1", ttl=60, renew=False)
    stale.fence = w.lease.fence
    stale._valid_until = time.monotonic() + 60  # as in _stale_lease
    return stale


ASYNC_CASES = [
    *(
        avcase(f"{op}-id={bad}", f, v, InvalidId, *needles)
        for op, f in ASYNC_ID_OPS.items()
        for bad, (v, needles) in BAD_IDS.items()
        if bad in (("empty", "10KB", "lone-surrogate", "None") if "users" in op else ("bytes",))
    ),
    *(
        avcase(f"{op}-value={bad}", f, v, CodecError, *needles)
        for op, f in ASYNC_VALUE_OPS.items()
        for bad, (v, needles) in BAD_VALUES.items()
        if bad in ("nan", "int-2**64", "int-key", "dict-cycle", f"{MAX_DEPTH + 1}-levels")
    ),
    acase(
        "users.update-coroutine-returning-nan",
        lambda w: w.store.users.update("u1", _nan_later),
        CodecError,
        "$.x: float nan",
    ),
    acase(
        "users.put-over-max_bytes",
        lambda w: w.store.users.put("u1", _text(MAX_BYTES + 1)),
        StateTooLarge,
        f"limit of {MAX_BYTES} bytes",
    ),
    acase(
        "checkpoints.save-over-max_bytes",
        lambda w: w.store.checkpoints.save("t1", _text(CP_MAX + 1)),
        StateTooLarge,
        f"limit of {CP_MAX} bytes",
    ),
    *(
        avcase(f"{op}-ttl={bad}", f, v, error, *needles)
        for op, f in ASYNC_TTL_OPS.items()
        for bad, (v, error, needles) in BAD_TTLS.items()
        if bad in ("-1", "nan", "100y+1s", "True")
    ),
    acase(
        "put-if_version=str",
        lambda w: w.store.users.put("u1", {}, if_version=_bad("1")),
        TypeError,
        "got str",
    ),
    acase(
        "put-if_version=stale",
        lambda w: w.store.users.put("u1", {}, if_version=1),
        ConflictError,
        "expected version 1",
    ),
    acase(
        "delete-if_version=stale",
        lambda w: w.store.users.delete("u1", if_version=1),
        ConflictError,
        "expected version 1",
    ),
    acase(
        "save-keep=0",
        lambda w: w.store.checkpoints.save("t1", {}, keep=0),
        ValueError,
        "got 0",
    ),
    acase(
        "save-progress=2.0",
        lambda w: w.store.checkpoints.save("t1", {}, progress=2.0),
        ValueError,
        "got 2.0",
    ),
    acase(
        "history-limit=-1",
        lambda w: w.store.checkpoints.history("t1", limit=-1),
        ValueError,
        "got -1",
    ),
    acase(
        "log-to-a-full-log",
        lambda w: w.store.checkpoints.log("t1", {"a": 1}),
        RedistateError,
        "holds 1 deltas",
    ),
    acase("lock-wait=-1", lambda w: w.store.lock("u1", wait=-1), ValueError, "got -1"),
    acase(
        "users.put-lease-for-another-id",
        lambda w: w.store.users.put("u1", {}, lease=w.lease),
        ValueError,
        "'l1'",
        "'u1'",
    ),
    acase(
        "checkpoints.log-lease-for-another-id",
        lambda w: w.store.checkpoints.log("t1", {}, lease=w.lease),
        ValueError,
        "'t1'",
    ),
    acase(
        "users.merge-stale-lease",
        lambda w: w.store.users.merge("l1", {"a": 1}, lease=_astale_lease(w)),
        LockLost,
        "lock:{l1}",
    ),
    acase(
        "checkpoints.save-stale-lease",
        lambda w: w.store.checkpoints.save("l1", {}, lease=_astale_lease(w)),
        LockLost,
        "lock:{l1}",
    ),
    acase(
        "lock.acquire-already-held",
        lambda w: w.lease.acquire(),
        RuntimeError,
        "already held",
    ),
    acase(
        "collection-reserved",
        lambda w: w.store.collection("user"),
        InvalidId,
        "reserved",
    ),
    acase(
        "AsyncStore-max_bytes=True",
        lambda w: AsyncStore(w.store.client, max_bytes=True),
        ValueError,
        "got True",
    ),
]


@pytest.mark.parametrize("bad", ASYNC_CASES)
async def test_bad_input_through_async_store_changes_nothing(
    aworld: AsyncWorld, bad: AsyncCase
) -> None:
    before = snapshot(aworld.raw, aworld.namespace)
    with pytest.raises(bad.error) as info:
        result = bad.call(aworld)
        if inspect.isawaitable(result):
            await result
    check_error(info.value, bad.error, bad.needles)
    assert snapshot(aworld.raw, aworld.namespace) == before
