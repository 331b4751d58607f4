"""Leases renewed inline (``renew="inline"``): each guarded write extends the lease in
its own script, and nothing runs in the background, as a serverless function needs
(frozen between invocations, no thread runs). A writer keeps its lease; a frozen one
loses it and its next write is refused; two invocations of one event do its work once.
Real servers, real processes and signals (tests/inline_worker.py)."""

from __future__ import annotations

import signal
import subprocess
from typing import Any

import pytest

from redistate import Store
from tests import spawn
from tests.conftest import Backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


def _worker(url: str, namespace: str, mode: str, event: str) -> subprocess.Popen[bytes]:
    return spawn.module("inline_worker", url, namespace, mode, event)


def test_each_guarded_write_extends_the_lease_on_the_server(
    backend: Backend, namespace: str
) -> None:
    """The server's TTL of the lock key goes back to the lease's after a guarded write;
    a lease renewed by a renewer (or not at all) is left as it was."""
    with Store(backend.sync_client(), namespace=namespace) as store:
        raw = backend.raw()
        try:
            for renew, extended in (("inline", True), (False, False)):
                lease = store.lock(f"t-{renew}", ttl=60, renew=renew).acquire()
                raw.pexpire(lease.key, 5000)  # as if most of the TTL had passed
                store.checkpoints.save(f"t-{renew}", {"n": 1}, lease=lease)
                left = raw.pttl(lease.key)
                assert (left > 30_000) is extended, (renew, left)
                lease.release()
        finally:
            raw.close()


def test_bad_renew_values_are_refused_naming_the_value(backend: Backend, namespace: str) -> None:
    with Store(backend.sync_client(), namespace=namespace) as store:
        for bad in ("yes", 1, None, "INLINE"):
            with pytest.raises(ValueError, match="renew must be True, False or 'inline'"):
                store.lock("t1", renew=bad)  # type: ignore[arg-type]


def test_a_writer_keeps_its_lease_by_writing_with_no_renewer(
    backend: Backend, namespace: str
) -> None:
    """No renewal task or thread exists for the lease: it is held only because each
    write renewed it (the lease's own local deadline moves with each write too)."""
    with Store(backend.sync_client(), namespace=namespace) as store:
        lease = store.lock("t1", ttl=60, renew="inline").acquire()
        deadline = lease._valid_until
        assert store._conn.renewals is None  # no renewer was ever made
        store.checkpoints.save("t1", {"n": 1}, lease=lease)
        assert lease._valid_until is not None and deadline is not None
        assert lease._valid_until >= deadline
        assert lease.held
        lease.release()


def test_a_frozen_holder_loses_its_lease_and_its_next_write_is_refused(
    server_backend: Backend, namespace: str
) -> None:
    """SIGSTOP between two guarded writes, past the lease's TTL; another owner takes the
    lease; SIGCONT: the second write is refused, the new owner's data stay."""
    raw = server_backend.raw()
    lock = f"{namespace}:lock:{{job}}"
    # The server says when it expires the lease (keyspace notifications, this
    # server's own: the tests' servers are theirs).
    raw.config_set("notify-keyspace-events", "Ex")
    expiries = raw.pubsub()
    expiries.subscribe("__keyevent@0__:expired")
    worker = _worker(server_backend.url, namespace, "pause", "job")
    try:
        assert spawn.line(worker) == "saved"
        worker.send_signal(signal.SIGSTOP)  # frozen: nothing renews the lease
        while True:
            message = expiries.get_message(timeout=60)
            assert message is not None, "the frozen holder's lease never expired"
            if message["type"] == "message" and message["data"] == lock.encode():
                break
        with Store.from_url(server_backend.url, namespace=namespace) as store:
            successor = store.lock("job", ttl=30, renew="inline").acquire()
            store.checkpoints.save("job", {"write": "successor"}, lease=successor)
            worker.send_signal(signal.SIGCONT)
            spawn.send(worker)
            assert spawn.line(worker) == "LockLost"
            found = store.checkpoints.latest("job")
            assert found is not None and found.state == {"write": "successor"}
            successor.release()
    finally:
        worker.send_signal(signal.SIGCONT)
        worker.kill()
        worker.wait()
        expiries.close()
        raw.config_set("notify-keyspace-events", "")
        raw.close()


@pytest.mark.parametrize("run", range(3))
def test_two_invocations_of_one_event_do_its_work_once(
    server_backend: Backend, namespace: str, run: int
) -> None:
    """An event delivered twice, the two handlers started together: one does the work;
    the other finds it done or is refused the lease. The effect happened once."""
    event = f"evt-{run}"
    workers = [_worker(server_backend.url, namespace, "handle", event) for _ in range(2)]
    try:
        for worker in workers:
            spawn.send(worker)
        outcomes = sorted(spawn.line(w) for w in workers)
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    assert outcomes.count("did") == 1, outcomes
    assert set(outcomes) <= {"did", "found done", "refused"}, outcomes
    raw: Any = server_backend.raw()
    try:
        assert raw.llen(f"{namespace}:effects:{{{event}}}") == 1
    finally:
        raw.close()


def test_a_resend_found_before_the_fence_check_renews_nothing(
    backend: Backend, namespace: str
) -> None:
    """A save of a checkpoint id already stored returns before the fence check: the
    server's lease is not extended, so neither is the local deadline."""
    with Store(backend.sync_client(), namespace=namespace) as store:
        raw = backend.raw()
        try:
            lease = store.lock("t1", ttl=60, renew="inline").acquire()
            store.checkpoints.save("t1", {"n": 1}, checkpoint_id="c1", lease=lease)
            raw.pexpire(lease.key, 5000)
            before = lease._valid_until
            store.checkpoints.save("t1", {"n": 1}, checkpoint_id="c1", lease=lease)
            assert raw.pttl(lease.key) <= 5000  # not renewed: the guard never ran
            assert lease._valid_until == before
            lease.release()
        finally:
            raw.close()


def test_a_write_queued_before_an_extend_never_shortens_the_lease(
    backend: Backend, namespace: str
) -> None:
    """A batch queued under a 1 s lease, sent after extend(ttl=60): the write's own
    renewal (to 1 s) must not cut the server's lease below what the client believes."""
    with Store(backend.sync_client(), namespace=namespace) as store:
        raw = backend.raw()
        try:
            lease = store.lock("t1", ttl=1, renew="inline").acquire()
            with store.batch() as batch:
                batch.checkpoints.save("t1", {"n": 1}, lease=lease)
                lease.extend(ttl=60)
            assert raw.pttl(lease.key) > 30_000
            assert raw.pttl(store.keys.fence("t1")) > 30_000
            lease.release()
        finally:
            raw.close()


def test_a_guarded_write_keeps_the_fence_key_as_long_as_the_lease(
    backend: Backend, namespace: str
) -> None:
    with Store(backend.sync_client(), namespace=namespace) as store:
        raw = backend.raw()
        try:
            lease = store.lock("t1", ttl=60, renew="inline").acquire()
            raw.pexpire(store.keys.fence("t1"), 5000)
            store.checkpoints.save("t1", {"n": 1}, lease=lease)
            assert raw.pttl(store.keys.fence("t1")) > 30_000
            lease.release()
        finally:
            raw.close()
