"""The record envelope.

``R1,<version:16>,<expires_ms:13>,<updated_ms:13>,<schema>,<write_id>\\n<payload>``
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redistate.core.envelope import Envelope, frame, tail, unpack
from redistate.core.errors import IntegrityError, RedistateError


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
    with pytest.raises(IntegrityError):  # version 0: a frame is never a stored record
        unpack("k", framed)


@given(
    st.integers(min_value=1, max_value=2**53 - 1),
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


def hdr(
    ver: str = "1795960294114192",
    exp: str = "0000000000000",
    upd: str = "1795960294114",
    schema: str = "1",
    wid: str = "w",
    end: str = "\n",
) -> bytes:
    """A stored header differing from a valid one only where a test says so."""
    return f"R1,{ver},{exp},{upd},{schema},{wid}{end}x".encode("utf-8", "surrogateescape")


def test_the_base_header_is_valid() -> None:
    # Each case below changes one thing in this header, so it fails for that reason.
    assert unpack("k", hdr()).version == 1795960294114192


@pytest.mark.parametrize(
    "raw",
    [b"R1,", hdr(end=""), hdr(end=" payload"), hdr(end="\r"), hdr(end="\r\n")],
)
def test_missing_newline_is_an_integrity_error(raw: bytes) -> None:
    with pytest.raises(IntegrityError):
        unpack("k", raw)


@pytest.mark.parametrize(
    "raw",
    [
        b"R1,1795960294114192,0000000000000,1795960294114,1\nx",  # no write id field
        b"R1,1795960294114192,0000000000000,1795960294114\nx",
        hdr(wid="w,extra"),
        hdr(wid="w,"),
        hdr(schema="1,2"),
        hdr(wid=""),
    ],
)
def test_wrong_field_count_is_an_integrity_error(raw: bytes) -> None:
    with pytest.raises(IntegrityError, match="malformed"):
        unpack("k", raw)


@pytest.mark.parametrize(
    "raw",
    [
        hdr(ver="179596029411419x"),
        hdr(exp="000000000000x"),
        hdr(upd="179596029411x"),
        hdr(schema="x"),
        hdr(ver="1795960294.14192"),
        hdr(ver="0x79596029411419"),
        hdr(ver="1795960294114e19"),
        hdr(exp=" 000000000000"),
    ],
)
def test_non_numeric_fields_are_an_integrity_error(raw: bytes) -> None:
    with pytest.raises(IntegrityError, match="malformed"):
        unpack("k", raw)


@pytest.mark.parametrize(
    "raw",
    [
        hdr(ver="-795960294114192"),
        hdr(ver="+795960294114192"),
        hdr(ver="179596029411419"),  # 15 digits
        hdr(ver="17959602941141920"),  # 17 digits
        hdr(ver="1795960_94114192"),
        hdr(exp="-000000000001"),
        hdr(upd="179596029411"),
        hdr(upd="17959602941140"),
        hdr(schema="1234567890"),
        hdr(wid="w w"),
        hdr(wid="w;x"),
        hdr(wid="w" * 33),
        hdr(ver="0000000000000000"),  # version 0: never stored (create-only relies on it)
        hdr(ver="9007199254740992"),  # 2**53: beyond what Lua's doubles hold exactly
    ],
)
def test_header_accepts_only_what_the_lua_parser_accepts(raw: bytes) -> None:
    # lua/_envelope.lua calls anything else a foreign value (the contract suite checks
    # both parsers on real servers); Python must not read a record the scripts refuse.
    with pytest.raises(IntegrityError):
        unpack("k", raw)


def test_the_widest_accepted_header() -> None:
    env = unpack("k", hdr(ver="9007199254740991", schema="123456789", wid="w" * 32))
    assert (env.version, env.schema, env.write_id) == (2**53 - 1, 123456789, "w" * 32)


def test_non_ascii_write_id_is_an_integrity_error() -> None:
    with pytest.raises(IntegrityError):
        unpack("k", hdr(wid="w\udcff\udcfe"))


def test_integrity_error_is_a_redistate_error() -> None:
    assert issubclass(IntegrityError, RedistateError)
