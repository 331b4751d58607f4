"""The pure half of records: argument checks, RecordSpec steps, DEFAULT, backoff."""

from __future__ import annotations

import datetime as dt
import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redistate.core._backoff import BASE, CAP, backoff_delay
from redistate.core.codec import JsonCodec
from redistate.core.errors import ConflictError, InvalidId, RedistateError, StateTooLarge
from redistate.core.keys import KeySpace
from redistate.core.limits import check_max_bytes
from redistate.records.spec import (
    DEFAULT,
    MAX_TTL_SECONDS,
    Default,
    Record,
    RecordDeleteReply,
    RecordPutArgs,
    RecordPutReply,
    RecordSpec,
    check_attempts,
    check_ttl,
    check_version,
    new_write_id,
    ttl_seconds,
)

MAX_BYTES_LIMIT = 512 * 1024 * 1024 - 4096


def _spec(*, ttl: float | None = None, max_bytes: int = 100, kind: str = "notes") -> RecordSpec:
    return RecordSpec(KeySpace("ns"), kind, JsonCodec(), ttl=ttl, max_bytes=max_bytes)


# -- check_ttl ---------------------------------------------------------------------


def test_ttl_none_means_no_expiry() -> None:
    assert check_ttl(None) == 0


@pytest.mark.parametrize(
    ("seconds", "ms"),
    [
        (1, 1000),
        (3600, 3_600_000),
        (1.5, 1500),
        (0.3, 300),
        (1.1, 1100),
        (0.001, 1),
        (0.0001, 1),  # rounded up, never to 0 (0 would mean "no expiry")
        (1e-300, 1),
        (1.0001, 1001),
        (2.0005, 2001),
        (MAX_TTL_SECONDS, MAX_TTL_SECONDS * 1000),
    ],
)
def test_ttl_seconds_to_milliseconds_rounded_up(seconds: float, ms: int) -> None:
    result = check_ttl(seconds)
    assert result == ms
    assert type(result) is int


@given(st.floats(min_value=1e-9, max_value=MAX_TTL_SECONDS))
def test_ttl_never_shorter_than_asked_by_a_millisecond(seconds: float) -> None:
    ms = check_ttl(seconds)
    assert ms >= 1
    assert ms >= seconds * 1000 - 1e-6 * max(1.0, seconds)
    assert ms < seconds * 1000 + 1 + 1e-6 * seconds


@pytest.mark.parametrize(("bad", "type_name"), [(True, "bool"), (False, "bool"), ("60", "str")])
def test_ttl_of_wrong_type_is_a_type_error(bad: object, type_name: str) -> None:
    with pytest.raises(TypeError, match=type_name):
        check_ttl(bad)


def test_ttl_type_error_names_the_argument() -> None:
    with pytest.raises(TypeError, match="collection ttl"):
        check_ttl([60], "collection ttl")


@pytest.mark.parametrize(
    ("bad", "shown"),
    [
        (0, "0"),
        (0.0, "0.0"),
        (-1, "-1"),
        (-0.5, "-0.5"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        (math.nan, "nan"),
        (MAX_TTL_SECONDS + 1, str(MAX_TTL_SECONDS + 1)),
        (MAX_TTL_SECONDS + 0.5, repr(MAX_TTL_SECONDS + 0.5)),
        (1e300, "1e+300"),
    ],
)
def test_ttl_out_of_range_is_a_value_error_naming_the_value(bad: float, shown: str) -> None:
    with pytest.raises(ValueError) as info:
        check_ttl(bad)
    assert shown in str(info.value)
    assert str(MAX_TTL_SECONDS) in str(info.value)


def test_ttl_int_too_large_for_a_float_is_a_value_error() -> None:
    with pytest.raises(ValueError) as info:
        check_ttl(10**400)
    assert "ttl" in str(info.value)


# -- check_version -----------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 1_700_000_000_000_000, 2**63 - 1])
def test_valid_versions(version: int) -> None:
    assert check_version(version) == version


def test_zero_version_can_be_refused() -> None:
    assert check_version(1, allow_zero=False) == 1
    with pytest.raises(ValueError, match="between 1 and"):
        check_version(0, allow_zero=False)


@pytest.mark.parametrize(("bad", "type_name"), [(True, "bool"), ("1", "str"), (1.0, "float")])
def test_version_of_wrong_type_is_a_type_error(bad: object, type_name: str) -> None:
    with pytest.raises(TypeError, match=type_name):
        check_version(bad)


@pytest.mark.parametrize("bad", [-1, 2**63, 2**64])
def test_version_out_of_range_is_a_value_error(bad: int) -> None:
    with pytest.raises(ValueError, match=str(bad)):
        check_version(bad)


# -- check_attempts / check_max_bytes ----------------------------------------------


@pytest.mark.parametrize("attempts", [1, 2, 10_000])
def test_valid_attempts(attempts: int) -> None:
    assert check_attempts(attempts) == attempts


@pytest.mark.parametrize("bad", [0, -1, 10_001, True, "3", 2.0, None])
def test_invalid_attempts(bad: object) -> None:
    with pytest.raises(ValueError) as info:
        check_attempts(bad)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("max_bytes", [1, 64_000, MAX_BYTES_LIMIT])
def test_valid_max_bytes(max_bytes: int) -> None:
    assert check_max_bytes(max_bytes) == max_bytes


@pytest.mark.parametrize("bad", [0, -1, True, "100", 100.0, None, MAX_BYTES_LIMIT + 1, 2**64])
def test_invalid_max_bytes(bad: object) -> None:
    with pytest.raises(ValueError) as info:
        check_max_bytes(bad)
    assert str(bad) in str(info.value)


# -- ttl_seconds -------------------------------------------------------------------


def test_ttl_seconds_from_pttl() -> None:
    assert ttl_seconds(-2) is None
    assert ttl_seconds(-1) == math.inf
    assert ttl_seconds(0) == 0.0
    assert ttl_seconds(1500) == 1.5
    assert ttl_seconds(1) == 0.001


# -- DEFAULT -----------------------------------------------------------------------


def test_default_is_a_singleton_with_a_short_repr() -> None:
    assert Default() is DEFAULT
    assert Default() is Default()
    assert repr(DEFAULT) == "DEFAULT"
    assert isinstance(DEFAULT, Default)


# -- RecordSpec --------------------------------------------------------------------


def test_record_spec_validates_up_front() -> None:
    with pytest.raises(InvalidId):
        _spec(kind="Bad Kind")
    with pytest.raises(ValueError, match="collection ttl"):
        _spec(ttl=0)
    with pytest.raises(ValueError, match="max_bytes"):
        _spec(max_bytes=0)


def test_record_spec_key_and_ttl() -> None:
    spec = _spec(ttl=60)
    assert spec.ttl_ms == 60_000
    assert spec.key("a{b") == "ns:notes:{a%7Bb}"
    assert spec.write_ttl(DEFAULT, keep_default=False) == (60_000, False)
    assert spec.write_ttl(DEFAULT, keep_default=True) == (60_000, True)
    assert spec.write_ttl(None, keep_default=True) == (0, False)
    assert spec.write_ttl(2.5, keep_default=True) == (2500, False)
    assert _spec(ttl=None).write_ttl(DEFAULT, keep_default=False) == (0, False)
    assert spec.touch_ttl(DEFAULT) == 60_000
    assert spec.touch_ttl(None) == 0
    with pytest.raises(ValueError, match="no TTL to slide"):
        _spec(ttl=None).touch_ttl(DEFAULT)
    with pytest.raises(ValueError):
        spec.write_ttl(-1, keep_default=False)


def test_encode_within_the_limit() -> None:
    spec = _spec(max_bytes=10)
    assert spec.encode("ns:notes:{a}", "x" * 8) == b'"xxxxxxxx"'  # exactly 10 bytes


def test_encode_over_the_limit_raises_state_too_large() -> None:
    spec = _spec(max_bytes=10)
    with pytest.raises(StateTooLarge) as info:
        spec.encode("ns:notes:{a}", "x" * 9)
    err = info.value
    assert err.size == 11
    assert err.limit == 10
    assert err.key == "ns:notes:{a}"
    assert "11" in str(err)
    assert "10" in str(err)
    assert isinstance(err, RedistateError)


def test_state_too_large_counts_encoded_bytes_not_characters() -> None:
    spec = _spec(max_bytes=10)
    with pytest.raises(StateTooLarge) as info:
        spec.encode("ns:notes:{a}", "中" * 3)  # 9 bytes + 2 quotes
    assert info.value.size == 11


def test_put_args() -> None:
    spec = _spec()
    zeroed = b"R1,0000000000000000,0000000000000,0000000000000,"
    args = spec.put_args(None, 0, "wid", b"{}")
    assert args == RecordPutArgs(None, 0, zeroed + b"1,wid\n{}", b"1,wid\n", False, "", 0)
    assert args.argv() == ("", 0, zeroed + b"1,wid\n{}", b"1,wid\n", 0, "", 0)
    args = spec.put_args(0, 5000, "wid", b"[]", keep=True, memory_ms=26000)
    assert args.argv() == (0, 5000, zeroed + b"1,wid\n[]", b"1,wid\n", 1, "", 26000)


def test_written_reply() -> None:
    spec = _spec()
    fields = b"0000000000000042,1700000000000,1699999999000"
    rec = spec.written("a", "ns:notes:{a}", {"x": 1}, None, RecordPutReply.parse(fields))
    assert rec == Record(
        "a", {"x": 1}, 42, dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc)
    )
    resent = spec.written("a", "k", {"x": 1}, 3, RecordPutReply.parse([2, 43, 0, 7]))  # resent
    assert resent.version == 43 and resent.expires_at is None


def test_written_conflict() -> None:
    with pytest.raises(ConflictError) as info:
        _spec().written("a", "ns:notes:{a}", b"1", 5, RecordPutReply.parse([0, 9, 0, 0]))
    assert (info.value.key, info.value.expected, info.value.actual) == ("ns:notes:{a}", 5, 9)


def test_record_from_stored_value() -> None:
    spec = _spec()
    assert spec.record("a", "k", None) is None
    rec = spec.record("a", "k", b'R1,0000000000000012,0000000001500,0000000000001,1,w\n["v"]')
    assert rec == Record("a", ["v"], 12, dt.datetime(1970, 1, 1, 0, 0, 1, 500_000, dt.timezone.utc))


def test_deleted_reply() -> None:
    spec = _spec()
    assert spec.deleted("k", 3, RecordDeleteReply.parse([1, 3])) is True
    with pytest.raises(ConflictError):
        spec.deleted("k", 3, RecordDeleteReply.parse([0, 4]))


def test_new_write_ids_are_unique_and_match_the_lua_pattern() -> None:
    ids = [new_write_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for wid in ids:
        assert 1 <= len(wid) <= 32
        assert all(c.isascii() and (c.isalnum() or c in "_-") for c in wid)


def test_a_forked_child_draws_its_own_write_ids() -> None:
    import os

    parent = new_write_id()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report one id and leave at once
        os.write(write, new_write_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.waitpid(pid, 0)
    os.close(read)
    assert child[:12] != parent[:12]  # a fresh random prefix, not the parent's sequence


@pytest.mark.parametrize("seed", [0, 1, 42])
def test_backoff_delay_bounds(seed: int) -> None:
    rng = random.Random(seed)
    for attempt in range(64):
        bound = min(CAP, BASE * 2**attempt)
        for _ in range(50):
            delay = backoff_delay(attempt, rng)
            assert 0.0 <= delay <= bound


@given(
    st.integers(min_value=0, max_value=10_000),
    st.floats(min_value=1e-6, max_value=1.0),
    st.floats(min_value=1e-6, max_value=10.0),
    st.integers(min_value=0, max_value=2**32),
)
def test_backoff_delay_bounds_for_any_base_and_cap(
    attempt: int, base: float, cap: float, seed: int
) -> None:
    delay = backoff_delay(attempt, random.Random(seed), base=base, cap=cap)
    assert 0.0 <= delay <= min(cap, base * 2.0 ** min(attempt, 60))


def test_backoff_delay_is_jittered_and_fills_its_range() -> None:
    rng = random.Random(7)
    delays = [backoff_delay(20, rng) for _ in range(1000)]
    assert len(set(delays)) > 900  # full jitter, not a fixed delay
    assert min(delays) < CAP * 0.1
    assert max(delays) > CAP * 0.9


def test_backoff_delay_grows_with_attempts() -> None:
    rng = random.Random(3)
    first = [backoff_delay(0, rng) for _ in range(500)]
    later = [backoff_delay(5, rng) for _ in range(500)]
    assert max(first) <= BASE
    assert max(later) > 2 * BASE
    assert sum(later) / len(later) > 4 * sum(first) / len(first)


def test_backoff_delay_is_reproducible_with_a_seed() -> None:
    a = [backoff_delay(i % 8, random.Random(99)) for i in range(20)]
    b = [backoff_delay(i % 8, random.Random(99)) for i in range(20)]
    assert a == b


def test_forked_children_do_not_back_off_in_lockstep() -> None:
    import os

    def child_delays() -> list[float]:
        return [backoff_delay(5) for _ in range(8)]

    pipes = []
    for _ in range(2):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(write, repr(child_delays()).encode())
            os._exit(0)
        os.close(write)
        pipes.append((pid, read))
    seen = []
    for pid, read in pipes:
        seen.append(os.read(read, 4096))
        os.waitpid(pid, 0)
        os.close(read)
    assert seen[0] != seen[1]
