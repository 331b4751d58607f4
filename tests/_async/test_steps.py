"""Durable steps (run.step) on every backend (this file has a generated sync twin): a
recorded result is returned, never recomputed; interrupted and failed steps are told
apart; a stale owner's record is refused; records live and die with their task."""

from __future__ import annotations

import os
from typing import Any

import pytest

from redistate import (
    AsyncStore,
    CodecError,
    EncryptedCodec,
    IntegrityError,
    InvalidId,
    LockLost,
    StateTooLarge,
    StepFailed,
    StepInterrupted,
)
from tests.conftest import Backend
from tests.roundtrips import server_reads

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


class Crash(BaseException):
    """The process dies inside fn: nothing after it runs (not an Exception, so the
    runner records no failure, as with SIGKILL)."""


class Tool:
    """A tool whose calls are counted: the side effect durable steps must not repeat."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    async def __call__(self, query: str, *, n: int = 1) -> Any:
        self.calls.append(query)
        return {"hits": [query] * n, "tuple": (1, 2)}


async def test_a_recorded_result_is_returned_and_the_tool_not_called_again(
    store: AsyncStore,
) -> None:
    tool = Tool()
    async with store.task("t1") as run:
        first = await run.step("search", tool, "redis", n=2)
        assert first == {"hits": ["redis", "redis"], "tuple": [1, 2]}  # as a resume sees it
        assert await run.step("search", tool, "other") == first  # same run: recorded
    async with store.task("t1") as again:
        assert await again.step("search", tool, "redis", n=2) == first
        steps = await again.steps()
    assert tool.calls == ["redis"]
    assert [(s.name, s.status, s.idempotent) for s in steps] == [("search", "done", True)]
    assert steps[0].fence is not None and steps[0].seconds is not None
    assert steps[0].result == first


async def test_an_interrupted_step_reruns_only_if_idempotent(store: AsyncStore) -> None:
    tool = Tool()

    async def crash(query: str) -> None:
        tool.calls.append(query)
        raise Crash

    with pytest.raises(Crash):
        async with store.task("t1") as run:
            first_fence = run.fence
            await run.step("pay", crash, "invoice-1", idempotent=False)
    async with store.task("t1") as run:
        with pytest.raises(StepInterrupted) as caught:
            await run.step("pay", tool, "invoice-1", idempotent=False)
        assert caught.value.name == "pay" and caught.value.fence == first_fence
        assert caught.value.started_at is not None
        assert "never completed" in str(caught.value)
        handoff = await store.checkpoints.handoff("t1")
        assert "- Interrupted step: pay (started " in handoff
        assert tool.calls == ["invoice-1"]  # not called a second time
        # A person checked the payment did not happen: run it as idempotent.
        assert await run.step("pay", tool, "invoice-1") == {"hits": ["invoice-1"], "tuple": [1, 2]}
    assert "- Last completed step: pay (" in await store.checkpoints.handoff("t1")
    assert tool.calls == ["invoice-1", "invoice-1"]


async def test_a_failure_is_recorded_and_raised_again_on_resume(store: AsyncStore) -> None:
    calls: list[int] = []

    async def flaky() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("quota exceeded for key 42")
        return 7

    async with store.task("t1") as run:
        with pytest.raises(ValueError, match="quota exceeded"):
            await run.step("fetch", flaky)
        with pytest.raises(StepFailed) as caught:  # the same run, later
            await run.step("fetch", flaky)
    assert (caught.value.name, caught.value.type) == ("fetch", "ValueError")
    assert caught.value.message == "quota exceeded for key 42"
    async with store.task("t1") as run:
        with pytest.raises(StepFailed, match="failed earlier with ValueError"):
            await run.step("fetch", flaky)
        assert await run.step("fetch", flaky, retry_failed=True) == 7
    assert len(calls) == 2
    (step,) = await store.checkpoints.steps("t1")
    assert (step.status, step.result, step.error) == ("done", 7, None)


async def test_a_stale_owners_result_is_refused(store: AsyncStore, backend: Backend) -> None:
    tool = Tool()
    # The stale run caught its LockLost inside: its exit does not raise it again.
    async with store.task("t1", ttl=30) as stale:
        await stale.lease._abandon()  # as if its lease ran out while it was paused
        async with store.task("t1", ttl=30) as owner:
            new = await owner.step("search", tool, "new")
            assert new == {"hits": ["new"], "tuple": [1, 2]}
            with pytest.raises(LockLost, match=f"taken over by fence {owner.fence}"):
                await stale.step("search", tool, "old")
            with pytest.raises(LockLost):
                await stale.step("other", tool, "old", idempotent=False)  # its marker
    (step,) = await store.checkpoints.steps("t1")
    assert step.result == {"hits": ["new"], "tuple": [1, 2]}  # the owner's, kept
    assert step.fence is not None


async def test_a_lease_known_lost_never_calls_the_tool(store: AsyncStore) -> None:
    """Once the renewal has seen a newer owner, the step fails before calling fn."""
    tool = Tool()
    async with store.task("t1", ttl=30) as run:
        run.lease.lost.set()  # what the renewal does when an extend is refused
        with pytest.raises(LockLost, match=r"'t1' .* was lost.*: step 'pay' was not run"):
            await run.step("pay", tool, "card-1")
    assert tool.calls == []


async def test_handoff_names_the_failed_step(store: AsyncStore) -> None:
    async def boom() -> None:
        raise RuntimeError("card declined")

    async with store.task("t1") as run:
        await run.step("search", Tool(), "q")
        with pytest.raises(RuntimeError):
            await run.step("pay", boom)
    handoff = await store.checkpoints.handoff("t1")
    assert "- Last completed step: search (" in handoff
    assert "- Failed step: pay (RuntimeError, started " in handoff


async def test_step_records_expire_and_go_with_their_task(backend: Backend, namespace: str) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace, task_ttl=600)
    raw = backend.raw()
    key = store.keys.task_steps("t1")
    try:
        async with store.task("t1") as run:
            await run.step("a", Tool(), "x")
            assert 0 < raw.pttl(key) <= 600_000  # the task's TTL, before any checkpoint
            await store.checkpoints.save("t1", {"n": 1}, ttl=60)
            assert 0 < raw.pttl(key) <= 60_000  # a save moves every key of the task
            await run.step("b", Tool(), "y")
            assert 0 < raw.pttl(key) <= 60_000  # and a step follows the checkpoints
            await store.checkpoints.log("t1", {"m": 2}, ttl=None)
            assert raw.pttl(key) == -1
        assert await store.checkpoints.delete("t1")
        assert raw.exists(key) == 0
        # A task with a delta log and no checkpoint: the records take the log's expiry.
        async with store.task("t2") as run:
            await run.log(
                {"n": 1},
            )
            await store.checkpoints.log("t2", {"m": 1}, ttl=None)  # the log lives on
            await run.step("c", Tool(), "z", idempotent=False)
            assert raw.pttl(store.keys.task_steps("t2")) == -1
            await store.checkpoints.log("t2", {"m": 2}, ttl=3600)
            await run.step("d", Tool(), "z")
            assert 3_000_000 < raw.pttl(store.keys.task_steps("t2")) <= 3_600_000
    finally:
        raw.close()
        await store.aclose()


async def test_bad_input_records_nothing(store: AsyncStore, backend: Backend) -> None:
    raw = backend.raw()
    key = store.keys.task_steps("t1")
    try:
        async with store.task("t1") as run:
            for bad in ("", 7, "x" * 600):
                with pytest.raises(InvalidId):
                    await run.step(bad, Tool(), "q")  # type: ignore[arg-type]
            assert raw.exists(key) == 0

            async def unserialisable() -> Any:
                return {"when": object()}

            with pytest.raises(CodecError):
                await run.step("odd", unserialisable)
            # Its effect happened: the failure is recorded, so a retry is never silent.
            (step,) = await run.steps()
            assert (step.status, step.error and step.error[0]) == ("failed", "CodecError")
            with pytest.raises(StepFailed, match="CodecError"):
                await run.step("odd", unserialisable)
    finally:
        raw.close()


async def test_results_are_encrypted_and_bound_to_their_step(
    backend: Backend, namespace: str
) -> None:
    store = AsyncStore(
        backend.async_client(),
        namespace=namespace,
        codec=EncryptedCodec({"k1": os.urandom(32)}, primary="k1"),
    )
    raw = backend.raw()
    key = store.keys.task_steps("t1")
    try:
        async with store.task("t1") as run:
            await run.step("a", Tool(), "zebra-secret-99")
            await run.step("b", Tool(), "other")
        stored = raw.hgetall(key)
        assert b"zebra-secret" not in b"".join(stored.values())
        raw.hset(key, "b", stored[b"a"])  # a's record copied onto b
        with pytest.raises(IntegrityError):
            await store.checkpoints.steps("t1")
    finally:
        raw.close()
        await store.aclose()


async def test_round_trips_per_step(server_store: AsyncStore, server_backend: Backend) -> None:
    """An idempotent step is one round trip (its result); one that is not, two (its
    start marker, then its result); a recorded one, none."""
    raw = server_backend.raw()
    try:
        async with server_store.task("t1") as run:
            counts = []
            for name, idempotent in (("a", True), ("b", False), ("a", True)):
                before = server_reads(raw)
                await run.step(name, Tool(), "q", idempotent=idempotent)
                counts.append(server_reads(raw) - before - 1)  # minus the INFO itself
    finally:
        raw.close()
    assert counts == [1, 2, 0]


async def test_a_resent_step_record_is_reported_as_made(
    store: AsyncStore, backend: Backend, namespace: str
) -> None:
    """The reply of a step's record is lost and, before the resend, another owner took
    the task: the resend finds its own record and reports the step done."""
    from tests._async.test_resends import LostReplies

    other = AsyncStore(backend.async_client(), namespace=namespace)
    taken: list[Any] = []

    async def take_over() -> None:
        await run.lease._abandon()
        taken.append(await other.lock("t1", ttl=30).acquire())

    lost = LostReplies(store.client, store._conn._verb.upper(), between=take_over)
    try:
        # The stale run caught its LockLost inside: its exit does not raise it again.
        async with store.task("t1", ttl=30) as run:
            lost.arm()
            assert await run.step("a", Tool(), "q") == {"hits": ["q"], "tuple": [1, 2]}
            assert lost.lost == 1 and taken
            with pytest.raises(LockLost):  # a new record of the stale owner: refused
                await run.step("b", Tool(), "q")
        (step,) = await store.checkpoints.steps("t1")
        assert step.name == "a" and step.status == "done"
        await taken[0].release()
    finally:
        await other.aclose()


async def test_a_result_over_max_bytes_is_refused_and_not_recorded(
    backend: Backend, namespace: str
) -> None:
    store = AsyncStore(backend.async_client(), namespace=namespace, checkpoint_max_bytes=1000)
    raw = backend.raw()
    try:
        async with store.task("t1") as run:

            async def big() -> str:
                return "x" * 2000

            with pytest.raises(StateTooLarge) as caught:
                await run.step("big", big)
            assert (caught.value.size, caught.value.limit) == (2002, 1000)
            (step,) = await run.steps()
            assert (step.status, step.error and step.error[0]) == ("failed", "StateTooLarge")
            assert raw.hlen(store.keys.task_steps("t1")) == 1
    finally:
        raw.close()
        await store.aclose()
