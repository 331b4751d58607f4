"""Batches: several writes of any kind in one round trip per node, each with its own
result or error (this file has a generated sync twin)."""

from __future__ import annotations

from typing import Any

import pytest

from redistate import (
    AsyncStore,
    BatchError,
    BatchNotSent,
    ConflictError,
    InvalidId,
    LockLost,
    NotReplicated,
    StateTooLarge,
)
from redistate.core.connection_async import _NO_REPLY, AsyncConnection
from redistate.core.scripts import script
from tests.conftest import Backend, _backend
from tests.proxy import FaultProxy
from tests.roundtrips import server_reads

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


async def _warm(store: AsyncStore) -> None:
    """Load every script a batch sends (a first EVALSHA costs a load) and make first
    contact, so that round trips count only the batch."""
    await store.sessions.put("warm", {})
    await store.users.merge("warm", {})
    await store.sessions.delete("warm")
    await store.checkpoints.save("warm", {})
    await store.checkpoints.log("warm", {})
    await store.events.append("warm", "warm", {})


async def test_each_write_gets_its_own_result(store: AsyncStore) -> None:
    before = await store.sessions.put("gone", {"x": 1})
    async with store.batch() as b:
        s = b.sessions.put("s1", {"n": 1}, ttl=3600)
        u = b.users.merge("u1", {"name": "Ada"})
        d = b.sessions.delete("gone", if_version=before.version)
        c = b.checkpoints.save("t1", {"step": 1}, phase="plan")
        log = b.checkpoints.log("t1", {"extra": True})
        e1 = b.events.append("t1", "started", {"by": "me"})
        e2 = b.events.append("t1", "done", {"ok": True})
        notes = b.records(store.collection("notes")).put("n1", [1, 2])
        with pytest.raises(BatchNotSent, match="not yet"):
            s.result()
    assert len(b) == 8 and all(p.done and p.error is None for p in (s, u, d, c, log, e1, e2))
    got = await store.sessions.get("s1")
    assert got is not None and got.version == s.result().version and got.data == {"n": 1}
    assert s.result().expires_at is not None
    assert u.result().data == {"name": "Ada"}
    assert d.result() is True and await store.sessions.get("gone") is None
    assert c.result().state == {"step": 1} and c.result().phase == "plan"
    assert log.result() == 1
    restored = await store.checkpoints.restore("t1")
    assert restored is not None and restored.state == {"step": 1, "extra": True}
    # Two appends to one entity in one batch: chained in order.
    assert (e1.result().seq, e2.result().seq) == (1, 2)
    assert (await store.events.verify("t1")).ok
    assert [ev.type for ev in await store.events.read("t1")] == ["started", "done"]
    assert notes.result().data == [1, 2]
    # The store knows the chain's end: the next append is not a conflict.
    assert (await store.events.append("t1", "later", {})).seq == 3


async def test_a_conflict_in_the_middle_does_not_stop_the_others(store: AsyncStore) -> None:
    first = await store.sessions.put("s2", {"v": 1})
    await store.sessions.put("s2", {"v": 2})  # first.version is stale now
    with pytest.raises(BatchError) as caught:
        async with store.batch() as b:
            a = b.sessions.put("s1", {"n": 1})
            stale = b.sessions.put("s2", {"v": 3}, if_version=first.version)
            c = b.checkpoints.save("t1", {"n": 1})
    error = caught.value
    assert [(at, kind) for at, kind, _ in error.failures] == [(1, "sessions.put")]
    assert isinstance(error.exceptions[0], ConflictError)
    assert "1 of 3 batched writes failed" in str(error)
    with pytest.raises(ConflictError):
        stale.result()
    assert isinstance(stale.error, ConflictError)
    assert a.result().data == {"n": 1} and c.result().state == {"n": 1}
    got = await store.sessions.get("s2")
    assert got is not None and got.data == {"v": 2}  # the stale write changed nothing


async def test_bad_input_raises_where_it_is_queued_and_nothing_is_sent(
    store: AsyncStore,
) -> None:
    with pytest.raises(InvalidId):
        async with store.batch() as b:
            ok = b.sessions.put("fine", {"n": 1})
            b.sessions.put("", {"n": 2})
    with pytest.raises(BatchNotSent, match="the block raised"):
        ok.result()
    assert await store.sessions.get("fine") is None
    b = store.batch()
    with pytest.raises(TypeError):
        b.checkpoints.log("t", ["not", "a", "dict"])
    with pytest.raises(StateTooLarge):
        b.sessions.put("big", "x" * (2 * 1024 * 1024))
    assert len(b) == 0


async def test_an_exception_in_the_block_sends_nothing(store: AsyncStore) -> None:
    with pytest.raises(KeyError):
        async with store.batch() as b:
            p = b.sessions.put("s", {"n": 1})
            raise KeyError("the caller's own")
    with pytest.raises(BatchNotSent):
        p.result()
    assert await store.sessions.get("s") is None
    with pytest.raises(RuntimeError, match="sent already"):
        b.sessions.put("s", {})


async def test_guarded_writes_each_check_their_lease(
    store: AsyncStore, backend: Backend, namespace: str
) -> None:
    other = AsyncStore(backend.async_client(), namespace=namespace)
    try:
        held = await store.lock("t1", ttl=30, renew=False).acquire()
        lost = await store.lock("t2", ttl=30, renew=False).acquire()
        raw = backend.raw()
        try:
            raw.delete(store.keys.lock("t2"))  # expired, as it were, and taken over
        finally:
            raw.close()
        taken = await other.lock("t2", ttl=30, renew=False).acquire()
        with pytest.raises(BatchError) as caught:
            async with store.batch() as b:
                ok = b.checkpoints.save("t1", {"n": 1}, lease=held)
                refused = b.checkpoints.save("t2", {"n": 1}, lease=lost)
                rec = b.sessions.put("t1", {"n": 1}, lease=held)
        assert [kind for _, kind, _ in caught.value.failures] == ["checkpoints.save"]
        with pytest.raises(LockLost, match="t2"):
            refused.result()
        assert not lost.held and held.held
        assert ok.result().fence == held.fence and rec.result().data == {"n": 1}
        assert await store.checkpoints.latest("t2") is None
        await taken.release()
        await held.release()
    finally:
        await other.aclose()


async def test_a_batch_is_one_round_trip(server_store: AsyncStore, server_backend: Backend) -> None:
    store = server_store
    await _warm(store)
    raw = server_backend.raw()
    try:
        before = server_reads(raw)
        async with store.batch() as b:
            for n in range(4):
                b.sessions.put(f"s{n}", {"n": n})
            b.users.merge("u", {"a": 1})
            b.sessions.delete("s0")
            b.checkpoints.save("t", {"n": 1})
            b.checkpoints.log("t", {"m": 1})
            b.events.append("warm", "one", {})
            b.events.append("warm", "two", {})
        reads = server_reads(raw) - before - 1  # minus the second INFO
    finally:
        raw.close()
    assert reads == 1
    assert len(b) == 10


async def test_a_batch_is_one_round_trip_per_node_on_a_cluster(
    request: pytest.FixtureRequest, namespace: str
) -> None:
    import redis

    backend = _backend("cluster", request)
    store = AsyncStore(backend.async_client(), namespace=namespace)
    try:
        await _warm(store)
        ids = [f"s{n}" for n in range(30)]  # spread over every primary
        for id in ids:  # every node has loaded the scripts
            await store.sessions.put(id, {})
        assert backend.cluster is not None
        raws = [redis.Redis(port=node.port) for node in backend.cluster.primaries]
        try:
            # A primary also reads its replica's once-a-second REPLCONF ACK, which may
            # fall inside one measurement (it only ever adds): the least of three.
            least: list[int] = []
            for _ in range(3):
                before = [server_reads(r) for r in raws]
                async with store.batch() as b:
                    puts = [b.sessions.put(id, {"id": id}) for id in ids]
                    save = b.checkpoints.save("task", {"n": 1})
                reads = [server_reads(r) - was - 1 for r, was in zip(raws, before, strict=True)]
                least = [min(p) for p in zip(least, reads, strict=True)] if least else reads
        finally:
            for r in raws:
                r.close()
        assert least == [1, 1, 1]  # one pipeline per primary
        assert [p.result().data for p in puts] == [{"id": id} for id in ids]
        assert save.result().state == {"n": 1}
        found = await store.sessions.get_many(ids)
        assert all(r is not None and r.data == {"id": id} for id, r in found.items())
    finally:
        await store.aclose()


async def test_a_dropped_reply_is_resent_and_each_write_applied_once(
    server_backend: Backend, namespace: str
) -> None:
    import redis.asyncio

    assert server_backend.server is not None
    with FaultProxy("127.0.0.1", server_backend.server.port) as proxy:
        client = redis.asyncio.Redis(host=proxy.host, port=proxy.port, socket_timeout=10)
        store = AsyncStore(client, namespace=namespace)
        try:
            await _warm(store)
            seed = await store.sessions.put("s", {"v": 0})
            last = store.keys.events("e").encode()

            def last_write(words: Any) -> bool:
                return words[0] == b"FCALL" and last in words

            proxy.drop_reply(last_write)  # every write applied, no reply read
            async with store.batch() as b:
                put = b.sessions.put("s", {"v": 1}, if_version=seed.version)
                merge = b.users.merge("u", {"n": 1})
                save = b.checkpoints.save("t", {"n": 1})
                log = b.checkpoints.log("t", {"m": 1})
                event = b.events.append("e", "once", {})
            assert proxy.dropped == 1 and store._conn.recovered == 1
            got = await store.sessions.get("s")
            assert got is not None and got.version == put.result().version  # no conflict
            assert merge.result().data == {"n": 1}
            assert len(await store.checkpoints.history("t")) == 1
            assert save.result().state == {"n": 1} and log.result() == 1
            restored = await store.checkpoints.restore("t")
            assert restored is not None and restored.state == {"n": 1, "m": 1}
            assert [e.seq for e in await store.events.read("e")] == [1]
            assert event.result().seq == 1
        finally:
            await store.aclose()


async def test_a_replicated_batch_waits_once_per_node(
    request: pytest.FixtureRequest, namespace: str
) -> None:
    backend = _backend("cluster", request)
    store = AsyncStore(backend.async_client(), namespace=namespace)
    try:
        async with store.batch(durability="replicated") as b:
            puts = [b.sessions.put(f"s{n}", {"n": n}) for n in range(10)]
            save = b.checkpoints.save("t", {"n": 1})
        assert [p.result().data for p in puts] == [{"n": n} for n in range(10)]
        assert save.result().state == {"n": 1}
    finally:
        await store.aclose()


async def test_a_replicated_batch_no_replica_confirms_fails_each_write(
    server_backend: Backend, namespace: str
) -> None:
    store = AsyncStore(server_backend.async_client(), namespace=namespace, replica_timeout=0.05)
    try:
        await store.sessions.put("s0", {"n": 0})
        seed = await store.sessions.put("s0", {"n": 0})
        with pytest.raises(BatchError) as caught:
            async with store.batch(durability="replicated") as b:
                b.sessions.put("s1", {"n": 1})
                b.sessions.put("s0", {"n": 1}, if_version=seed.version - 1)  # a conflict
        errors = [type(e) for e in caught.value.exceptions]
        assert errors == [NotReplicated, ConflictError]  # the conflict wrote nothing
        got = await store.sessions.get("s1")
        assert got is not None and got.data == {"n": 1}  # written on the primary
    finally:
        await store.aclose()


async def test_lost_replies_are_resent_and_applied_once_on_every_backend(
    store: AsyncStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import redis

    real = AsyncConnection._writes
    lost: list[int] = []

    async def losing(self: AsyncConnection, calls: Any, args: Any, out: Any, replicas: Any) -> Any:
        await real(self, calls, args, out, replicas)  # every write applied
        if not lost:
            lost.append(len(out))
            out[:] = [_NO_REPLY] * len(out)  # and no reply read
            raise redis.ConnectionError("replies lost on purpose by the test")

    seed = await store.sessions.put("s", {"v": 0})
    monkeypatch.setattr(AsyncConnection, "_writes", losing)
    async with store.batch() as b:
        put = b.sessions.put("s", {"v": 1}, if_version=seed.version)
        gone = b.sessions.delete("s2")
        merge = b.users.merge("u", {"n": 1})
        save = b.checkpoints.save("t", {"n": 1})
        log = b.checkpoints.log("t", {"m": 1})
        event = b.events.append("e", "once", {})
    assert lost == [6] and store._conn.recovered == 1
    got = await store.sessions.get("s")
    assert got is not None and got.version == put.result().version and got.data == {"v": 1}
    assert gone.result() is False and merge.result().data == {"n": 1}
    assert [c.id for c in await store.checkpoints.history("t")] == [save.result().id]
    assert log.result() == 1
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.state == {"n": 1, "m": 1}
    assert [e.seq for e in await store.events.read("e")] == [event.result().seq] == [1]


@pytest.mark.parametrize("mode", ["function", "script"])
async def test_a_batch_reloads_flushed_scripts(
    server_store: AsyncStore, server_backend: Backend, mode: str
) -> None:
    """FUNCTION FLUSH (the library), or SCRIPT FLUSH for a connection that runs its
    scripts by EVALSHA: the batch loads what it lacks once and every write answers."""
    await _warm(server_store)
    server_store._conn._fcall = mode == "function"
    raw = server_backend.raw()
    try:
        raw.script_flush()
        raw.function_flush()
        raw.config_resetstat()
    finally:
        raw.close()
    async with server_store.batch() as b:
        puts = [b.sessions.put(f"s{n}", {"n": n}) for n in range(3)]
        save = b.checkpoints.save("t", {"n": 1})
    assert [p.result().data for p in puts] == [{"n": n} for n in range(3)]
    assert save.result().state == {"n": 1}
    raw = server_backend.raw()
    loads = raw.info("commandstats")[f"cmdstat_{mode}|load"]["calls"]
    raw.close()
    assert loads == (1 if mode == "function" else 2), loads  # record_put, checkpoint_save


async def test_by_evalsha_a_batch_keeps_its_order_when_one_script_is_not_loaded(
    server_store: AsyncStore, server_backend: Backend
) -> None:
    """By EVALSHA, a save whose script the server lacks, then a log of the same task
    whose script it has: were the save answered NOSCRIPT and sent again after its load,
    the log would have run first, before any checkpoint of the task. The batch loads
    what it has not seen on that server ahead of its calls, so the log follows the save."""
    server_store._conn._fcall = False
    raw = server_backend.raw()
    try:
        raw.script_flush()
        raw.script_load(script("checkpoint_log").source)
    finally:
        raw.close()
    async with server_store.batch() as b:
        save = b.checkpoints.save("ordered", {"n": 1})
        log = b.checkpoints.log("ordered", {"m": 2})
    assert save.result().state == {"n": 1}
    assert log.result() == 1
    restored = await server_store.checkpoints.restore("ordered")
    assert restored is not None and restored.state == {"n": 1, "m": 2}


async def test_a_run_batches_its_save_log_and_step_records(store: AsyncStore) -> None:
    def never(*_: Any) -> Any:
        raise AssertionError("a recorded step is not called again")

    async with store.task("t1") as run:
        async with run.batch() as b:
            c = b.run.save({"n": 1}, phase="work")
            log = b.run.log({"m": 2})
            step = b.run.record("fetch", {"hits": 3})
            note = b.sessions.put("t1", {"seen": True})
        assert c.result().state == {"n": 1} and log.result() == 1
        assert step.result() == {"hits": 3} and note.result().data == {"seen": True}
        assert run.state == {"n": 1, "m": 2} and run.checkpoint == c.result()
        assert await run.step("fetch", never) == {"hits": 3}
        async with run.batch() as b:
            again = b.run.record("fetch", {"hits": 99})  # a recorded result is final
        assert again.result() == {"hits": 3}
    async with store.task("t1") as run:
        assert run.resumed and run.state == {"n": 1, "m": 2}
        assert await run.step("fetch", never) == {"hits": 3}
    steps = await store.checkpoints.steps("t1")
    assert [(s.name, s.result) for s in steps] == [("fetch", {"hits": 3})]


async def test_a_run_batch_is_one_round_trip(
    server_store: AsyncStore, server_backend: Backend
) -> None:
    store = server_store
    await _warm(store)
    async with store.task("t1") as run:
        await run.step("warm", lambda: 0)  # loads step_record
        raw = server_backend.raw()
        try:
            before = server_reads(raw)
            async with run.batch() as b:
                b.run.save({"n": 1})
                b.run.log({"m": 1})
                b.run.record("a", 1)
                b.run.record("b", 2)
            reads = server_reads(raw) - before - 1
        finally:
            raw.close()
    assert reads == 1


async def test_a_batch_sent_inside_its_block_keeps_its_results(store: AsyncStore) -> None:
    first = await store.sessions.put("s", {"v": 1})
    await store.sessions.put("s", {"v": 2})
    with pytest.raises(BatchError):
        async with store.batch() as b:
            ok = b.sessions.put("a", {"n": 1})
            b.sessions.put("s", {"v": 3}, if_version=first.version)
            await b.send()  # raises here, inside the block
    assert ok.result().data == {"n": 1}  # still readable after the block
    async with store.batch() as b:
        pass  # an empty batch sends nothing
    assert len(b) == 0


async def test_signed_and_encrypted_writes_batch_like_single_ones(
    backend: Backend, namespace: str
) -> None:
    import os

    from redistate import EncryptedCodec, SigningKeys

    store = AsyncStore(
        backend.async_client(),
        namespace=namespace,
        codec=EncryptedCodec({"k1": os.urandom(32)}, primary="k1"),
        signing=SigningKeys({"s1": os.urandom(32)}, "s1"),
    )
    try:
        await store.checkpoints.save("t", {"n": 0})
        async with store.batch() as b:
            put = b.sessions.put("s", {"secret": 1})
            merge = b.users.merge("u", {"a": 1})
            save = b.checkpoints.save("t", {"n": 1})
            log = b.checkpoints.log("t", {"m": 1})  # sealed for the save before it: resealed
            event = b.events.append("t", "saved", {"n": 1})
        assert put.result().data == {"secret": 1} and merge.result().data == {"a": 1}
        assert log.result() == 1 and event.result().seq == 1
        restored = await store.checkpoints.restore("t")
        assert restored is not None and restored.complete
        assert restored.checkpoint == save.result() and restored.state == {"n": 1, "m": 1}
        got = await store.sessions.get("s")
        assert got is not None and got.data == {"secret": 1}
        assert (await store.events.verify("t")).ok
    finally:
        await store.aclose()


async def test_only_the_writes_without_a_reply_are_sent_again(
    store: AsyncStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import redis
    from redis.asyncio.client import Pipeline

    ids = [f"s{n}" for n in range(30)]  # on a cluster: every primary
    seeds = {id: (await store.sessions.put(id, {"v": 0})).version for id in ids}
    execute, real_writes = Pipeline.execute, AsyncConnection._writes
    dropped: list[int] = []
    unanswered: list[int] = []

    async def losing(self: Any, raise_on_error: bool = True) -> Any:
        # Its writes: by EVALSHA (over REST) a pipeline that loads scripts comes first.
        verbs = [str(args[0]).upper() for args, _ in self.command_stack]
        writes = sum(verb in ("FCALL", "EVALSHA") for verb in verbs)
        replies = await execute(self, raise_on_error=raise_on_error)
        if writes and not dropped:  # the first server's replies are lost, its writes applied
            dropped.append(writes)
            raise redis.ConnectionError("replies lost on purpose by the test")
        return replies

    async def counting(self: AsyncConnection, calls: Any, args: Any, out: Any, n: Any) -> Any:
        unanswered.append(sum(reply is _NO_REPLY for reply in out))
        return await real_writes(self, calls, args, out, n)

    monkeypatch.setattr(Pipeline, "execute", losing)
    monkeypatch.setattr(AsyncConnection, "_writes", counting)
    async with store.batch() as b:
        puts = [b.sessions.put(id, {"v": 1}, if_version=seeds[id]) for id in ids]
    assert unanswered == [30, dropped[0]]  # then only the lost server's writes
    found = await store.sessions.get_many(ids)
    for pending, record in zip(puts, found.values(), strict=True):
        assert record is not None and record.data == {"v": 1}
        assert pending.result().version == record.version  # applied once, no conflict
