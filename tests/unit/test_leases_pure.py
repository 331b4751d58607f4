"""The pure half of leases: what an acquire that reads sends and makes of its reply."""

from __future__ import annotations

import pytest

from redistate.leases.spec import LockAcquireReply, reading_args


def test_reads_become_keys_and_one_spec_each() -> None:
    reads = [("LRANGE", "a", 0, 0), ("HGETALL", "b"), ("LRANGE", "c", 0, -1)]
    assert reading_args(reads) == (("a", "b", "c"), ("0:0", "h", "0:-1"))
    assert reading_args([]) == ((), ())


@pytest.mark.parametrize(
    "command",
    [("GET", "a"), ("LRANGE", "a", 0), ("HGETALL", "a", "f"), ("LRANGE", "a", "x", 1)],
)
def test_a_read_it_cannot_make_is_refused_naming_it(command: tuple[object, ...]) -> None:
    with pytest.raises(ValueError):
        reading_args([command])


def test_the_reads_are_kept_only_from_a_reply_that_took_the_lease() -> None:
    taken = LockAcquireReply.parse([1, 7, 30000, [[b"x"], [b"f", b"v"]]])
    assert taken.acquired and taken.fence == 7 and taken.reads == [[b"x"], [b"f", b"v"]]
    assert LockAcquireReply.parse([1, 7, 30000]).reads is None
    held = LockAcquireReply.parse([0, 1200])
    assert not held.acquired and held.remaining_ms == 1200 and held.reads is None
