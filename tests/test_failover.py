"""Failover during a write loop, on a local Redis Cluster and a Sentinel setup.

Four writer processes append tags to shared records (read-modify-write updates) while
a primary is failed over; afterwards every record is read back. Acknowledged writes
may be lost when a primary dies before replicating them (asynchronous replication);
none may be duplicated. Each test reports its counts in the fault table.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis.crc import key_slot

from tests.faults import FaultReport, tally
from tests.servers import (
    Cluster,
    SentinelSetup,
    Server,
    redis_binary,
    start_cluster,
    start_sentinel_setup,
)
from tests.test_faults import PROCESSES, run_writers, stored_tags

pytestmark = pytest.mark.slow

WRITES = 500  # per process at least; writers go on until 200 writes follow the fault


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A cluster of this test's own: its topology changes."""
    c = start_cluster(redis_binary())
    yield c
    c.stop()


@pytest.fixture
def sentinel() -> Iterator[SentinelSetup]:
    s = start_sentinel_setup(redis_binary())
    yield s
    s.stop()


def owner(cluster: Cluster, namespace: str, record: str) -> int:
    """Index of the primary that owns ``record``'s slot (users collection)."""
    slot = key_slot(f"{namespace}:user:{{{record}}}".encode())
    for i, node in enumerate(cluster.primaries):
        client = node.client()
        try:
            command: Any = client.execute_command
            ranges = command("CLUSTER", "SLOTS")
        finally:
            client.close()
        port = node.port
        if any(r[0] <= slot <= r[1] and int(r[2][1]) == port for r in ranges):
            return i
    raise AssertionError(f"no primary owns slot {slot}")


def wait_until(what: str, check: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {seconds} s")
        time.sleep(0.05)  # polling a failover under way, bounded by the deadline


def replication(server: Server) -> Any:
    """The server's INFO replication."""
    client = server.client()
    try:
        return client.info("replication")
    finally:
        client.close()


def role(server: Server) -> str:
    return str(replication(server)["role"])


def follows(server: Server) -> bool:
    info = replication(server)
    return bool(info["role"] == "slave" and info.get("master_link_status") == "up")


def count(fault: str, backend: str, url: str, namespace: str, results: list[Any]) -> FaultReport:
    report = tally(
        fault,
        backend,
        [t for r in results for t in r["acknowledged"]],
        stored_tags(url, namespace),
        failed=sum(len(r["failed"]) for r in results),
        resends=sum(r["resends"] for r in results),
    )
    assert report.duplicated == 0, report
    assert report.acknowledged + report.failed >= PROCESSES * WRITES
    return report


def test_a_manual_cluster_failover_mid_run(cluster: Cluster, namespace: str) -> None:
    target = owner(cluster, namespace, "r0")
    replica = cluster.replicas[target]

    def failover() -> None:
        client = replica.client()
        try:
            command: Any = client.execute_command
            command("CLUSTER", "FAILOVER")
        finally:
            client.close()
        wait_until("the replica taking over", lambda: role(replica) == "master")

    results = run_writers(cluster.url, namespace, failover, WRITES)
    report = count("CLUSTER FAILOVER (manual)", "cluster", cluster.url, namespace, results)
    # A manual failover waits for the replica to catch up: nothing acknowledged is lost.
    assert report.lost == 0, report


@pytest.mark.parametrize("durability", ["async", "replicated"])
def test_a_killed_cluster_primary_mid_run(
    cluster: Cluster, namespace: str, durability: str
) -> None:
    target = owner(cluster, namespace, "r0")
    primary, replica = cluster.primaries[target], cluster.replicas[target]

    def kill() -> None:
        primary.kill()
        wait_until("the replica being promoted", lambda: role(replica) == "master")
        # The dead node comes back, as operators bring it back, and rejoins as the new
        # primary's replica: until then a replicated write has no replica to confirm it.
        primary.restart()
        wait_until("the old primary following the new one", lambda: follows(primary))

    results = run_writers(cluster.url, namespace, kill, WRITES, durability)
    fault = f"SIGKILL of a cluster primary, {durability}"
    report = count(fault, "cluster", cluster.url, namespace, results)
    assert report.resends > 0  # the writers felt it
    if durability == "replicated":
        assert report.lost == 0, report  # acknowledged means a replica had it


@pytest.mark.parametrize("durability", ["async", "replicated"])
def test_a_sentinel_failover_mid_run(
    sentinel: SentinelSetup, namespace: str, durability: str
) -> None:
    def failover() -> None:
        client = sentinel.sentinels[0].client()
        try:
            command: Any = client.execute_command
            command("SENTINEL", "FAILOVER", sentinel.service)
        finally:
            client.close()
        wait_until("the replica taking over", lambda: role(sentinel.replica) == "master")

    results = run_writers(sentinel.url, namespace, failover, WRITES, durability)

    def settled() -> bool:
        # Every sentinel names the new primary, and the old one follows it: only then
        # is what the old primary accepted meanwhile gone for good (or kept).
        for s in sentinel.sentinels:
            client = s.client()
            try:
                address: Any = client.sentinel_get_master_addr_by_name(sentinel.service)
            finally:
                client.close()
            if int(address[1]) != sentinel.replica.port:
                return False
        return follows(sentinel.primary)

    wait_until("the sentinels agreeing and the old primary following", settled, 60)
    report = count(f"SENTINEL FAILOVER, {durability}", "sentinel", sentinel.url, namespace, results)
    if durability == "replicated":
        # Writes to the old primary, cut off from its replica until the sentinels demote
        # it, are refused (NotReplicated) instead of acknowledged and then lost.
        assert report.lost == 0, report
