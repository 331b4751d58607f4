"""The record envelope.

``R1,<version:16>,<expires_ms:13>,<updated_ms:13>,<schema>,<write_id>\\n<payload>``
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redistate.envelope import Envelope, frame, tail, unpack
from redistate.errors import IntegrityError, RedistateError


def rec(version: int, expires: int, updated: int, schema: int, wid: str) -> bytes:
    """A stored header with the fixed field widths the scripts write."""
    return f"R1,{version:016d},{expires:013d},{updated:013d},{schema},{wid}\n".encode()


def test_unpack_well_formed_value() -> None:
    raw = b'R1,1700000000123456,1700000060000,1700000000123,3,Ab9_-xYz\n{"a":1}'
    env = unpack("ns:notes:{a}", raw)
    assert env == Envelope(
        version=1700000000123456,
        expires_ms=1700000060000,
        updated_ms=1700000000123,
        schema=3,
        write_id="Ab9_-xYz",
        payload=b'{"a":1}',
    )
    assert type(env.write_id) is str
    assert type(env.payload) is bytes


def test_unpack_no_expiry_and_empty_payload() -> None:
    env = unpack("k", rec(7, 0, 5, 1, "w"))
    assert env == Envelope(7, 0, 5, 1, "w", b"")


def test_an_empty_write_id_is_not_a_record() -> None:
    with pytest.raises(IntegrityError):
        unpack("k", rec(7, 0, 5, 1, ""))


def test_payload_may_contain_newlines_and_commas() -> None:
    payload = b'{"text":"a,b\\nc"}\n,R1,9,9,9,9,x\n\n'
    env = unpack("k", rec(2, 0, 1, 1, "w") + payload)
    assert env.payload == payload
    assert env.version == 2
    assert env.write_id == "w"


def test_envelope_is_immutable() -> None:
    env = unpack("k", rec(1, 0, 0, 1, "w") + b"x")
    with pytest.raises(AttributeError):
        env.version = 2  # type: ignore[misc]


def test_frame_is_what_the_write_script_expects() -> None:
    assert tail(3, "Ab9_-xYz") == b"3,Ab9_-xYz\n"
    framed = frame(tail(3, "Ab9_-xYz"), b'{"a":1}')
    assert framed == b'R1,0000000000000000,0000000000000,0000000000000,3,Ab9_-xYz\n{"a":1}'
    assert unpack("k", framed) == Envelope(0, 0, 0, 3, "Ab9_-xYz", b'{"a":1}')


@given(
    st.integers(min_value=0, max_value=10**16 - 1),
    st.integers(min_value=0, max_value=10**13 - 1),
    st.integers(min_value=0, max_value=10**13 - 1),
    st.integers(min_value=0, max_value=10**6),
    st.text(alphabet="abcXYZ0189_-", min_size=1, max_size=16),
    st.binary(max_size=64),
)
def test_unpack_reads_every_field_back(
    version: int, expires: int, updated: int, schema: int, write_id: str, payload: bytes
) -> None:
    raw = rec(version, expires, updated, schema, write_id) + payload
    assert unpack("k", raw) == Envelope(version, expires, updated, schema, write_id, payload)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b'{"a":1}',
        b"R2,1,0,0,1,w\nx",  # another format version
        b"r1,1,0,0,1,w\nx",
        b"R1;1,0,0,1,w\nx",
        b" R1,1,0,0,1,w\nx",
        b"1,0,0,1,w\nx",
        b"\nR1,1,0,0,1,w\nx",
    ],
)
def test_missing_magic_is_an_integrity_error(raw: bytes) -> None:
    with pytest.raises(IntegrityError) as info:
        unpack("ns:notes:{a}", raw)
    assert "ns:notes:{a}" in str(info.value)


@pytest.mark.parametrize(
    "raw", [b"R1,", b"R1,1,0,0,1,w", b"R1,1,0,0,1,w payload", b"R1,1,0,0,1,w\r"]
)
def test_missing_newline_is_an_integrity_error(raw: bytes) -> None:
    with pytest.raises(IntegrityError):
        unpack("k", raw)


@pytest.mark.parametrize(
    "raw",
    [
        b"R1,\nx",
        b"R1,1\nx",
        b"R1,1,0\nx",
        b"R1,1,0,0\nx",
        b"R1,1,0,0,1\nx",  # no write id field at all
        b"R1,1,0,0,1,w,extra\nx",
        b"R1,1,0,0,1,w,\nx",
        b"R1,1,0,0,1,,,\nx",
    ],
)
def test_wrong_field_count_is_an_integrity_error(raw: bytes) -> None:
    with pytest.raises(IntegrityError, match="malformed"):
        unpack("k", raw)


@pytest.mark.parametrize(
    "raw",
    [
        b"R1,x,0,0,1,w\nx",
        b"R1,1,x,0,1,w\nx",
        b"R1,1,0,x,1,w\nx",
        b"R1,1,0,0,x,w\nx",
        b"R1,,0,0,1,w\nx",
        b"R1,1.5,0,0,1,w\nx",
        b"R1,0x10,0,0,1,w\nx",
        b"R1,1e3,0,0,1,w\nx",
    ],
)
def test_non_numeric_fields_are_an_integrity_error(raw: bytes) -> None:
    with pytest.raises(IntegrityError, match="malformed"):
        unpack("k", raw)


@pytest.mark.parametrize(
    "raw",
    [
        b"R1,-5,0,0,1,w\nx",
        b"R1,+5,0,0,1,w\nx",
        b"R1, 5,0,0,1,w\nx",
        b"R1,5 ,0,0,1,w\nx",
        b"R1,1_0,0,0,1,w\nx",
        b"R1,1,-1,0,1,w\nx",
        b"R1,1,0,0,1,w w\nx",
        b"R1,1,0,0,1,w;x\nx",
    ],
)
def test_header_accepts_only_what_the_lua_parser_accepts(raw: bytes) -> None:
    # lua/_envelope.lua reads '^(%d+),(%d+),(%d+),(%d+),([%w_-]*)$' and calls anything
    # else a foreign value; Python must not read a record the scripts refuse to touch.
    with pytest.raises(IntegrityError):
        unpack("k", raw)


def test_non_ascii_write_id_is_an_integrity_error() -> None:
    with pytest.raises(IntegrityError):
        unpack("k", b"R1,1,0,0,1,\xff\xfe\nx")


def test_integrity_error_is_a_redistate_error() -> None:
    assert issubclass(IntegrityError, RedistateError)
