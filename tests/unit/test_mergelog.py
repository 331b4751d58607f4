"""Patched records, the pure half: frames, folding, when to compact, the M1 header."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redistate.core.codec import JsonCodec
from redistate.core.envelope import Envelope, unpack
from redistate.core.errors import IntegrityError
from redistate.records.mergelog import (
    COMPACT_AT,
    COMPACT_EVERY,
    fold,
    frame,
    frames,
    should_compact,
)
from redistate.records.mergepatch import merge_patch

KEY = "ns:user:{u}"
CODEC = JsonCodec()
HEAD = b"1700000000123456,1700000060000,1700000000123,3,Ab9_-xYz\n"


def decode(raw: bytes) -> Any:
    return CODEC.decode(raw, KEY.encode())


def encode(value: Any) -> bytes:
    return CODEC.encode(value, KEY.encode())


# -- frames ---------------------------------------------------------------------------

# Payloads that look like frames themselves: digits and colons must not confuse the split.
tricky = st.one_of(
    st.binary(max_size=40),
    st.lists(st.sampled_from([b"0", b"1", b"9", b":", b"12:", b"0:", b"{}", b"\n"])).map(b"".join),
)


@given(st.lists(tricky, min_size=1, max_size=8))
def test_frames_split_what_frame_joined(parts: list[bytes]) -> None:
    payload = b"".join(frame(p) for p in parts)
    assert frames(KEY, payload) == parts


def test_frame_is_length_colon_bytes() -> None:
    assert frame(b"") == b"0:"
    assert frame(b'{"a":1}') == b'7:{"a":1}'
    assert frame(b"12:ab") == b"5:12:ab"
    assert frame(b"x" * 123) == b"123:" + b"x" * 123


def test_empty_frames_round_trip() -> None:
    assert frames(KEY, b"0:") == [b""]
    assert frames(KEY, b"0:0:0:") == [b"", b"", b""]
    assert frames(KEY, b"0:3:1:20:") == [b"", b"1:2", b""]


@pytest.mark.parametrize(
    "payload",
    [
        b"",  # no base frame at all
        b"abc",  # no colon
        b":abc",  # no length
        b"3",  # a length, nothing else
        b"x:abc",  # non-digit length
        b"-1:a",  # a sign is not a digit
        b"+1:a",
        b" 1:a",
        b"1 :a",
        b"10:abc",  # cut short
        b"0:5:abcd",  # the second frame cut short
        b"0:3:abcx",  # trailing bytes that are no frame
        b"0:3:abc4",  # trailing digits with no colon
        b"12345678901:x",  # a length too long to be one
        "\u0661:a".encode(),  # an Arabic-Indic digit one: not an ASCII digit
    ],
)
def test_malformed_frames_are_an_integrity_error(payload: bytes) -> None:
    with pytest.raises(IntegrityError, match="ns:user"):
        frames(KEY, payload)


@given(st.lists(st.binary(min_size=1, max_size=20), min_size=1, max_size=5), st.data())
def test_any_cut_of_valid_frames_is_refused_or_a_prefix(
    parts: list[bytes], data: st.DataObject
) -> None:
    payload = b"".join(frame(p) for p in parts)
    cut = data.draw(st.integers(min_value=0, max_value=len(payload) - 1))
    boundaries = set()
    at = 0
    for p in parts:
        at += len(frame(p))
        boundaries.add(at)
    if cut in boundaries:  # a cut at a frame boundary is well formed: the leading frames
        n = sorted(boundaries).index(cut) + 1
        assert frames(KEY, payload[:cut]) == parts[:n]
    else:
        with pytest.raises(IntegrityError):
            frames(KEY, payload[:cut])


# -- fold -----------------------------------------------------------------------------

text = st.text(alphabet=st.characters(codec="utf-8"), max_size=6)
scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
keys = st.sampled_from(["a", "b", "c", "1:", "0"])
json_values = st.recursive(
    st.one_of(st.none(), scalars),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(keys, children, max_size=4)
    ),
    max_leaves=15,
)
patches = st.one_of(st.dictionaries(keys, json_values, max_size=4), json_values)


@given(st.one_of(st.none(), json_values), st.lists(patches, max_size=8))
def test_fold_is_merge_patch_applied_in_order(base: Any, patch_list: list[Any]) -> None:
    # None stands for the empty base frame a merge writes when it creates the record.
    parts = [b"" if base is None else encode(base), *(encode(p) for p in patch_list)]
    expected: Any = {} if base is None else base
    for p in patch_list:
        expected = merge_patch(expected, p)
    assert fold(parts, decode) == expected
    # And through the stored form: the frames of a payload, then folded.
    payload = b"".join(frame(p) for p in parts)
    assert fold(frames(KEY, payload), decode) == expected


def test_fold_of_the_empty_base_is_an_empty_object() -> None:
    assert fold([b""], decode) == {}
    assert fold([b"", b'{"a":null}'], decode) == {}
    assert fold([b"", b"[1,2]"], decode) == [1, 2]
    assert fold([b'"text"', b'{"a":1}'], decode) == {"a": 1}
    assert fold([b'{"a":{"b":1,"c":2}}', b'{"a":{"b":null}}', b"null"], decode) is None


def test_fold_decodes_each_frame_once_and_in_order() -> None:
    seen: list[bytes] = []

    def spy(raw: bytes) -> Any:
        seen.append(raw)
        return decode(raw)

    parts = [b'{"a":1}', b'{"b":2}', b'{"a":null}']
    assert fold(parts, spy) == {"b": 2}
    assert seen == parts
    seen.clear()
    assert fold([b"", b'{"c":3}'], spy) == {"c": 3}
    assert seen == [b'{"c":3}']  # the empty base is {} without decoding


# -- when to compact ------------------------------------------------------------------


def test_compact_constants() -> None:
    assert (COMPACT_AT, COMPACT_EVERY) == (16, 8)


@pytest.mark.parametrize(
    ("patches", "due"),
    [
        (0, False),
        (1, False),
        (8, False),  # a multiple of 8, but under 16
        (15, False),
        (16, True),
        (17, False),
        (23, False),
        (24, True),
        (25, False),
        (32, True),
        (40, True),
        (1000, True),
        (1001, False),
    ],
)
def test_should_compact_truth_table(patches: int, due: bool) -> None:
    assert should_compact(patches) is due


@given(st.integers(min_value=0, max_value=10_000))
def test_should_compact_is_at_least_16_and_every_8th(patches: int) -> None:
    assert should_compact(patches) == (patches >= 16 and patches % 8 == 0)


# -- the M1 header --------------------------------------------------------------------


def test_unpack_m1_is_a_log() -> None:
    env = unpack(KEY, b"M1," + HEAD + b'0:7:{"a":1}')
    assert env == Envelope(
        1700000000123456, 1700000060000, 1700000000123, 3, "Ab9_-xYz", b'0:7:{"a":1}', True
    )
    assert env.log is True


def test_unpack_r1_is_not_a_log() -> None:
    env = unpack(KEY, b"R1," + HEAD + b'0:7:{"a":1}')
    assert env.log is False
    assert env.payload == b'0:7:{"a":1}'  # a plain payload is never split into frames
    assert Envelope(1, 0, 0, 1, "w", b"").log is False  # the default


@pytest.mark.parametrize("magic", [b"X1", b"M2", b"m1", b"MR", b"1M", b"M", b"RM1"])
def test_unpack_refuses_other_kinds(magic: bytes) -> None:
    with pytest.raises(IntegrityError, match="not a redistate record"):
        unpack(KEY, magic + b"," + HEAD + b"0:")


def test_an_m1_header_with_bad_fields_is_malformed() -> None:
    with pytest.raises(IntegrityError, match="malformed record header"):
        unpack(KEY, b"M1,123,0000000000000,0000000000000,1,w\n0:")
    with pytest.raises(IntegrityError, match="outside"):
        unpack(KEY, b"M1,0000000000000000,0000000000000,0000000000000,1,w\n0:")
