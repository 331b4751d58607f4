"""durability="replicated": a write returns once a replica has it, or says it may not.

On the local cluster and the Sentinel setup (each primary has a replica) and on a
standalone server (no replica: every replicated write times out).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from redistate import AsyncStore, ConflictError, NotReplicated
from redistate.core.durability import DEFAULT
from redistate.core.scripts import script
from tests.conftest import Backend, _backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


@pytest.fixture(params=["cluster", "sentinel"])
async def replicated(request: pytest.FixtureRequest, namespace: str) -> AsyncIterator[AsyncStore]:
    """A store whose writes wait for a replica, on a backend whose primaries have one."""
    backend = _backend(str(request.param), request)
    store = AsyncStore(backend.async_client(), namespace=namespace, durability="replicated")
    yield store
    await store.aclose()


async def test_replicated_writes_return_once_a_replica_has_them(replicated: AsyncStore) -> None:
    store = replicated
    rec = await store.sessions.put("s", {"n": 1})
    rec = await store.sessions.put("s", {"n": 2}, if_version=rec.version)
    merged = await store.users.merge("u", {"a": 1})
    assert merged.data == {"a": 1}
    cp = await store.checkpoints.save("t", {"n": 1})
    assert await store.checkpoints.log("t", {"m": 2}) == 1
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.checkpoint == cp and restored.state == {"n": 1, "m": 2}
    assert await store.checkpoints.delete("t") is True
    assert await store.sessions.delete("s") is True
    assert await store.sessions.get("s") is None


async def test_a_write_no_replica_confirms_raises_and_may_still_exist(
    server_backend: Backend, namespace: str
) -> None:
    # A standalone server has no replica: WAIT times out, the write stays applied.
    store = AsyncStore(
        server_backend.async_client(),
        namespace=namespace,
        durability="replicated",
        replica_timeout=0.05,
    )
    with pytest.raises(NotReplicated, match=r"0 of 1 replica.*may still exist"):
        await store.sessions.put("s", {"n": 1})
    got = await store.sessions.get("s")
    assert got is not None and got.data == {"n": 1}
    # Per call: the primary's acknowledgement is enough for this one.
    await store.sessions.put("s", {"n": 2}, durability=DEFAULT)
    with pytest.raises(NotReplicated):
        await store.checkpoints.save("t", {"n": 1})
    await store.aclose()


async def test_durability_is_per_call_too(server_backend: Backend, namespace: str) -> None:
    store = AsyncStore(server_backend.async_client(), namespace=namespace, replica_timeout=0.05)
    await store.users.put("u", {"n": 1})  # the default: the primary alone
    with pytest.raises(NotReplicated):
        await store.users.merge("u", {"m": 1}, durability="replicated")
    with pytest.raises(ValueError, match="durability must be one of"):
        await store.users.put("u", {}, durability="eventually")  # type: ignore[arg-type]
    await store.aclose()


@pytest.mark.parametrize("bad", [0, -1, float("nan"), 61, "1", True])
async def test_bad_replica_timeouts_are_refused(backend: Backend, bad: object) -> None:
    with pytest.raises((ValueError, TypeError), match="replica_timeout"):
        AsyncStore(backend.async_client(), replica_timeout=bad)  # type: ignore[arg-type]


async def test_writes_that_change_nothing_wait_for_no_replica(
    server_backend: Backend, namespace: str
) -> None:
    # No replica here: only a write that changed something can fail to be replicated.
    store = AsyncStore(
        server_backend.async_client(),
        namespace=namespace,
        durability="replicated",
        replica_timeout=0.05,
    )
    await store.sessions.put("s", {"n": 1}, durability=DEFAULT)
    with pytest.raises(ConflictError):
        await store.sessions.put("s", {"n": 2}, if_version=0)
    assert await store.sessions.delete("missing") is False
    assert await store.checkpoints.delete("no-such-task") is False
    await store.aclose()


async def test_a_recognised_resend_writes_so_that_wait_covers_the_original(
    backend: Backend, namespace: str
) -> None:
    # A resend the script recognises notes itself in the write memory: a write, after
    # the original in the replication stream, so a WAIT behind it covers both.
    store = AsyncStore(backend.async_client(), namespace=namespace)
    spec = store.sessions.spec
    key = spec.key("s")
    keys, _ = spec.guarded_keys("s", key, None)
    args = spec.put_args(None, 60_000, "w1", b"{}", memory_ms=store._conn.memory_ms).argv()
    await store._conn.script(script("record_put"), keys, args)
    raw = backend.raw()
    assert raw.zscore(store.keys.writes(key), "w1") is None  # nothing to remember yet
    reply = await store._conn.script(script("record_put"), keys, args)  # the resend
    assert int(reply[0]) == 2
    assert raw.zscore(store.keys.writes(key), "w1") is not None
    await store.aclose()


async def test_a_replica_timeout_must_be_below_the_socket_timeout(
    server_backend: Backend, namespace: str
) -> None:
    with pytest.raises(ValueError, match=r"replica_timeout 10 s must be below .* 5 s"):
        AsyncStore.from_url(
            server_backend.url, timeout=5, replica_timeout=10, durability="replicated"
        )
    # With the primary's acknowledgement as the default, only a replicated call is refused.
    store = AsyncStore.from_url(
        server_backend.url, namespace=namespace, timeout=5, replica_timeout=10
    )
    await store.sessions.put("s", {})
    with pytest.raises(ValueError, match="must be below"):
        await store.sessions.put("s", {}, durability="replicated")
    await store.aclose()
