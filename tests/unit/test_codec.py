"""JsonCodec: exact round trips, rich inputs out as plain JSON, errors with paths."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
import uuid
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from redistate.core.codec import Codec, JsonCodec, to_json_value
from redistate.core.errors import CodecError, RedistateError

CODEC = JsonCodec()


def _round_trip(value: Any, codec: JsonCodec = CODEC) -> Any:
    data = codec.encode(value, b"ctx")
    assert isinstance(data, bytes)
    return codec.decode(data, b"ctx")


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(st.text(), children, max_size=5)
    ),
    max_leaves=30,
)


# -- exact round trips -------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [0, 1, -1, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, -(2**63), -(2**63) + 1, -(2**53) - 1],
)
def test_integer_round_trip_is_exact(value: int) -> None:
    back = _round_trip(value)
    assert type(back) is int
    assert back == value
    assert _round_trip({"n": value}) == {"n": value}


@given(st.integers(min_value=-(2**63), max_value=2**64 - 1))
def test_integers_in_64_bit_range_round_trip(value: int) -> None:
    back = _round_trip([value])
    assert back == [value]
    assert type(back[0]) is int


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_finite_floats_round_trip_exactly(value: float) -> None:
    back = _round_trip({"f": value})["f"]
    assert type(back) is float
    assert back == value
    assert math.copysign(1.0, back) == math.copysign(1.0, value)  # -0.0 stays -0.0


@pytest.mark.parametrize("value", [0.1, 1e-310, 1.7976931348623157e308, -0.0, 5e-324, 1.0])
def test_float_edge_cases_round_trip(value: float) -> None:
    back = _round_trip(value)
    assert type(back) is float
    assert back == value
    assert math.copysign(1.0, back) == math.copysign(1.0, value)


@pytest.mark.parametrize(
    "value",
    ["", "plain", "中文", "émoji 😀 and 𝄞 and 🧑‍🚀", "\u0000nul\u001f", "line\nbreak\t\"'\\"],
)
def test_unicode_round_trip(value: str) -> None:
    assert _round_trip(value) == value
    assert _round_trip({value: value}) == {value: value}


@given(st.text())
def test_any_text_round_trips(value: str) -> None:
    assert _round_trip({"k": value, value: [value]}) == {"k": value, value: [value]}


def test_empty_list_and_empty_dict_stay_distinct() -> None:
    assert _round_trip([]) == []
    assert type(_round_trip([])) is list
    assert type(_round_trip({})) is dict
    assert _round_trip({"l": [], "d": {}}) == {"l": [], "d": {}}
    back = _round_trip({"l": [], "d": {}})
    assert type(back["l"]) is list
    assert type(back["d"]) is dict


def test_nested_nulls_survive() -> None:
    value = {"a": None, "b": [None, {"c": None}], "d": {"e": {"f": None}}}
    assert _round_trip(value) == value
    assert _round_trip(None) is None
    assert _round_trip([None]) == [None]


@given(json_values)
def test_json_values_round_trip(value: Any) -> None:
    assert _round_trip(value) == value


@given(json_values)
def test_sorted_codec_round_trips_and_is_canonical(value: Any) -> None:
    codec = JsonCodec(sort_keys=True)
    assert _round_trip(value, codec) == value
    assert codec.encode(value) == codec.encode(_round_trip(value))


def test_sort_keys_option() -> None:
    assert JsonCodec(sort_keys=True).encode({"b": 1, "a": {"d": 2, "c": 3}}) == (
        b'{"a":{"c":3,"d":2},"b":1}'
    )
    assert JsonCodec().encode({"b": 1, "a": 2}) == b'{"b":1,"a":2}'


def test_booleans_stay_booleans() -> None:
    back = _round_trip([True, False, 1, 0])
    assert back == [True, False, 1, 0]
    assert [type(v) for v in back] == [bool, bool, int, int]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinities_are_refused_not_stored_as_null(bad: float) -> None:
    with pytest.raises(CodecError, match=r"\$\.a\[1\]\.b: float"):
        JsonCodec().encode({"a": [None, {"b": bad}]})


class _EqualsRaises:
    """A value whose ``==`` raises, serialised through the ``default`` hook."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def model_dump(self, mode: str) -> Any:
        return self.inner

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparing me")

    __hash__ = None  # type: ignore[assignment]


@pytest.mark.parametrize(
    "holder",
    [
        lambda bad: ({"a": None}, (None, bad)),  # a tuple reads back as a list: the walk
        lambda bad: {"when": dt.date(2024, 1, 2), "x": [None, bad]},  # a date: a string
        lambda bad: {"a": None, "b": _EqualsRaises({"c": bad})},  # comparing raises
    ],
)
@pytest.mark.parametrize("bad", [math.nan, -math.inf])
def test_a_nan_is_found_where_the_value_does_not_read_back_equal(holder: Any, bad: float) -> None:
    with pytest.raises(CodecError, match="float"):
        JsonCodec().encode(holder(bad))


def test_values_that_do_not_read_back_equal_still_encode() -> None:
    value = {"t": (1, None), "when": WHEN, "o": _EqualsRaises({"n": None, "f": 0.5})}
    assert orjson.loads(JsonCodec().encode(value)) == {
        "t": [1, None],
        "when": "2024-01-02T03:04:05+00:00",
        "o": {"n": None, "f": 0.5},
    }


def test_nulls_next_to_finite_floats_are_fine() -> None:
    assert _round_trip({"a": None, "b": [0.5, None]}) == {"a": None, "b": [0.5, None]}


@pytest.mark.parametrize("depth", [255, 2000])
def test_too_deep_or_cyclic_values_are_codec_errors(depth: int) -> None:
    deep: list[Any] = []
    cur = deep
    for _ in range(depth):
        cur.append([])
        cur = cur[0]
    with pytest.raises(CodecError, match="nesting deeper"):
        JsonCodec().encode(deep)
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(CodecError, match="reference cycle"):
        JsonCodec().encode(cyclic)


def test_unsupported_containers_inside_a_value_name_their_path() -> None:
    import collections
    import types

    point = collections.namedtuple("point", "x")
    with pytest.raises(CodecError, match=r"\$\.p\[0\]: .*point"):
        JsonCodec().encode({"p": [point(1)]})
    with pytest.raises(CodecError, match=r"\$\.m: .*mappingproxy"):
        JsonCodec().encode({"m": types.MappingProxyType({})})


# -- rich inputs come back as plain JSON -------------------------------------------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    x: int
    y: float
    label: str | None = None


@dataclasses.dataclass
class Shape:
    name: str
    points: list[Point]
    color: Color


class Profile(BaseModel):
    name: str
    when: dt.datetime
    tags: list[str]
    ident: uuid.UUID
    level: Level
    nested: dict[str, Any] = {}


UID = uuid.UUID("12345678-1234-5678-1234-567812345678")
WHEN = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


def test_dataclass_becomes_a_dict() -> None:
    shape = Shape("tri", [Point(1, 2.5), Point(3, 4.0, "c")], Color.BLUE)
    assert _round_trip(shape) == {
        "name": "tri",
        "points": [{"x": 1, "y": 2.5, "label": None}, {"x": 3, "y": 4.0, "label": "c"}],
        "color": "blue",
    }


def test_aware_datetime_becomes_iso_string() -> None:
    assert _round_trip(WHEN) == "2024-01-02T03:04:05+00:00"
    plus_eight = dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=dt.timezone(dt.timedelta(hours=8)))
    assert _round_trip({"t": plus_eight}) == {"t": "2024-01-02T03:04:05.123456+08:00"}
    assert dt.datetime.fromisoformat(_round_trip(plus_eight)) == plus_eight


def test_dates_and_times() -> None:
    assert _round_trip(dt.date(2024, 2, 29)) == "2024-02-29"
    assert _round_trip(dt.time(13, 14, 15)) == "13:14:15"


def test_uuid_becomes_string() -> None:
    assert _round_trip(UID) == "12345678-1234-5678-1234-567812345678"
    assert _round_trip({"id": UID}) == {"id": str(UID)}


def test_enums_become_their_values() -> None:
    assert _round_trip([Color.RED, Level.HIGH]) == ["red", 2]
    assert type(_round_trip(Level.HIGH)) is int


def test_pydantic_model_becomes_plain_json() -> None:
    model = Profile(
        name="ada", when=WHEN, tags=["x", "y"], ident=UID, level=Level.LOW, nested={"k": [1]}
    )
    assert _round_trip(model) == {
        "name": "ada",
        "when": "2024-01-02T03:04:05Z",
        "tags": ["x", "y"],
        "ident": str(UID),
        "level": 1,
        "nested": {"k": [1]},
    }
    assert _round_trip({"profiles": [model]}) == {"profiles": [_round_trip(model)]}


def test_tuples_and_sets_become_lists() -> None:
    assert _round_trip((1, "a", None)) == [1, "a", None]
    assert _round_trip({"s": {3, 1, 2}}) == {"s": [1, 2, 3]}
    assert _round_trip(frozenset({"b", "a"})) == ["a", "b"]


def test_to_json_value() -> None:
    value = {
        "when": WHEN,
        "id": UID,
        "color": Color.RED,
        "point": Point(1, 2.0),
        "tuple": (1, 2),
        "set": {"z", "y"},
        "model": Profile(name="n", when=WHEN, tags=[], ident=UID, level=Level.HIGH),
    }
    assert to_json_value(value) == {
        "when": "2024-01-02T03:04:05+00:00",
        "id": str(UID),
        "color": "red",
        "point": {"x": 1, "y": 2.0, "label": None},
        "tuple": [1, 2],
        "set": ["y", "z"],
        "model": {
            "name": "n",
            "when": "2024-01-02T03:04:05Z",
            "tags": [],
            "ident": str(UID),
            "level": 2,
            "nested": {},
        },
    }
    assert to_json_value([1, None, "x"]) == [1, None, "x"]


def test_to_json_value_raises_codec_error() -> None:
    with pytest.raises(CodecError, match=r"\$\.x"):
        to_json_value({"x": object()})


# -- errors ------------------------------------------------------------------------


def test_codec_error_is_a_type_error_and_a_redistate_error() -> None:
    assert issubclass(CodecError, TypeError)
    assert issubclass(CodecError, RedistateError)


def test_unserializable_value_names_type_and_path() -> None:
    with pytest.raises(CodecError) as info:
        CODEC.encode({"a": [1, object()]}, b"k")
    message = str(info.value)
    assert "$.a[1]" in message
    assert "object" in message
    assert isinstance(info.value, TypeError)


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "path", "type_name"),
    [
        (Opaque(), "$", "Opaque"),
        ({"x": {"y": Opaque()}}, "$.x.y", "Opaque"),
        ([0, [1, 2, {"z": Opaque()}]], "$[1][2].z", "Opaque"),
        ({"not an identifier": [Opaque()]}, "$['not an identifier'][0]", "Opaque"),
        ({"f": lambda: 1}, "$.f", "function"),
        ({"b": b"bytes"}, "$.b", "bytes"),
        ({"c": 1 + 2j}, "$.c", "complex"),
        ({"p": Point(1, 2.0, Opaque())}, "$.p.label", "Opaque"),  # type: ignore[arg-type]
        ((1, Opaque()), "$[1]", "Opaque"),
    ],
)
def test_unserializable_paths(value: Any, path: str, type_name: str) -> None:
    with pytest.raises(CodecError) as info:
        CODEC.encode(value, b"k")
    message = str(info.value)
    assert path in message
    assert type_name in message


@pytest.mark.parametrize(
    ("value", "path", "type_name"),
    [
        ({1: "x"}, "$[1]", "int"),
        ({"a": {None: 1}}, "$.a[None]", "NoneType"),
        ({"a": [{(1, 2): 1}]}, "$.a[0][(1, 2)]", "tuple"),
        ({"a": {2.5: 1}}, "$.a[2.5]", "float"),
    ],
)
def test_non_str_dict_keys_give_a_path(value: Any, path: str, type_name: str) -> None:
    with pytest.raises(CodecError) as info:
        CODEC.encode(value, b"k")
    message = str(info.value)
    assert path in message
    assert type_name in message
    assert "key" in message


@pytest.mark.parametrize(
    ("value", "path", "number"),
    [
        (2**64, "$", 2**64),
        ({"n": 2**64}, "$.n", 2**64),
        ({"a": [0, -(2**63) - 1]}, "$.a[1]", -(2**63) - 1),
        ({"big": [10**30]}, "$.big[0]", 10**30),
    ],
)
def test_integers_outside_64_bits_give_a_path(value: Any, path: str, number: int) -> None:
    with pytest.raises(CodecError) as info:
        CODEC.encode(value, b"k")
    message = str(info.value)
    assert path in message
    assert str(number) in message


@pytest.mark.parametrize(
    "data", [b"", b"not json", b"{", b'{"a":}', b"\xff\xfe", b"R1,1,0,0,1,w\n{}", b"[1,]"]
)
def test_decode_of_non_json_raises_codec_error(data: bytes) -> None:
    with pytest.raises(CodecError) as info:
        CODEC.decode(data, b"ns:notes:{a}")
    assert "ns:notes:{a}" in str(info.value)


# -- protocol ----------------------------------------------------------------------


def test_json_codec_satisfies_the_codec_protocol() -> None:
    assert isinstance(JsonCodec(), Codec)
    assert isinstance(JsonCodec(sort_keys=True), Codec)


def test_objects_without_encode_and_decode_are_not_codecs() -> None:
    class EncodeOnly:
        def encode(self, value: Any, context: bytes) -> bytes:
            return b""

    assert not isinstance(EncodeOnly(), Codec)
    assert not isinstance(object(), Codec)


def test_custom_codec_satisfies_the_protocol() -> None:
    class Upper:
        def encode(self, value: Any, context: bytes) -> bytes:
            return str(value).upper().encode()

        def decode(self, data: bytes, context: bytes) -> Any:
            return data.decode()

    codec: Codec = Upper()
    assert isinstance(codec, Codec)
    assert codec.decode(codec.encode("ab", b""), b"") == "AB"
