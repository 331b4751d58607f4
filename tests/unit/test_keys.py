"""KeySpace and id escaping: every key shape, hash tags, validation (no server)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from redis.crc import key_slot

from redistate.core.errors import InvalidId
from redistate.core.keys import (
    MAX_ID_BYTES,
    RESERVED_KINDS,
    KeySpace,
    check_kind,
    escape_id,
    unescape_id,
)

SPECIAL_ID = "a{b}*?[]\\%c d:é"
SPECIAL_ESCAPED = "a%7Bb%7D%2A%3F%5B%5D%5C%25c d:é"
GLOB_AND_TAG_CHARS = set("{}*?[]\\")


def _truncate_utf8(text: str, limit: int = MAX_ID_BYTES) -> str:
    return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


# Valid UTF-8 text of 1..512 bytes, including multi-byte and astral characters and
# the characters that have to be escaped.
valid_ids = (
    st.text(
        st.one_of(st.characters(codec="utf-8"), st.sampled_from("%{}*?[]\\:")),
        min_size=1,
        max_size=MAX_ID_BYTES,
    )
    .map(_truncate_utf8)
    .filter(bool)
)


def _hash_tag(key: str) -> str:
    start = key.index("{")
    return key[start + 1 : key.index("}", start + 1)]


def _all_entity_keys(ks: KeySpace, entity_id: str) -> list[str]:
    return [
        ks.record("session", entity_id),
        ks.record("notes", entity_id),
        ks.task(entity_id),
        ks.task_log(entity_id),
        ks.lock(entity_id),
        ks.fence(entity_id),
    ]


# -- snapshots ---------------------------------------------------------------------


def test_key_shapes_plain_id_default_namespace() -> None:
    ks = KeySpace()
    assert ks.namespace == "redistate"
    assert ks.record("session", "s1") == "redistate:session:{s1}"
    assert ks.record("user", "u1") == "redistate:user:{u1}"
    assert ks.record("notes", "t1") == "redistate:notes:{t1}"
    assert ks.record_pattern("session") == "redistate:session:{*}"
    assert ks.task("t1") == "redistate:task:{t1}"
    assert ks.task_log("t1") == "redistate:task:{t1}:log"
    assert ks.lock("t1") == "redistate:lock:{t1}"
    assert ks.fence("t1") == "redistate:fence:{t1}"
    assert ks.namespace_pattern() == "redistate:*"


def test_key_shapes_plain_id_custom_namespace() -> None:
    ks = KeySpace("my.app-v2")
    assert ks.record("notes", "t1") == "my.app-v2:notes:{t1}"
    assert ks.record_pattern("notes") == "my.app-v2:notes:{*}"
    assert ks.task("t1") == "my.app-v2:task:{t1}"
    assert ks.task_log("t1") == "my.app-v2:task:{t1}:log"
    assert ks.lock("t1") == "my.app-v2:lock:{t1}"
    assert ks.fence("t1") == "my.app-v2:fence:{t1}"
    assert ks.namespace_pattern() == "my.app-v2:*"


def test_key_shapes_special_id() -> None:
    ks = KeySpace("ns")
    assert escape_id(SPECIAL_ID) == SPECIAL_ESCAPED
    assert ks.record("notes", SPECIAL_ID) == "ns:notes:{a%7Bb%7D%2A%3F%5B%5D%5C%25c d:é}"
    assert ks.record_pattern("notes") == "ns:notes:{*}"
    assert ks.task(SPECIAL_ID) == "ns:task:{a%7Bb%7D%2A%3F%5B%5D%5C%25c d:é}"
    assert ks.task_log(SPECIAL_ID) == "ns:task:{a%7Bb%7D%2A%3F%5B%5D%5C%25c d:é}:log"
    assert ks.lock(SPECIAL_ID) == "ns:lock:{a%7Bb%7D%2A%3F%5B%5D%5C%25c d:é}"
    assert ks.fence(SPECIAL_ID) == "ns:fence:{a%7Bb%7D%2A%3F%5B%5D%5C%25c d:é}"
    assert ks.namespace_pattern() == "ns:*"


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("plain", "plain"),
        ("%", "%25"),
        ("%7B", "%257B"),  # an already-escaped-looking id is escaped again
        ("{", "%7B"),
        ("}", "%7D"),
        ("*", "%2A"),
        ("?", "%3F"),
        ("[", "%5B"),
        ("]", "%5D"),
        ("\\", "%5C"),
        ("a:b c/é😀", "a:b c/é😀"),  # everything else is kept as is
    ],
)
def test_escape_each_special_character(raw: str, escaped: str) -> None:
    assert escape_id(raw) == escaped
    assert unescape_id(escaped) == raw


# -- properties --------------------------------------------------------------------


@given(valid_ids)
def test_escape_unescape_round_trip(entity_id: str) -> None:
    escaped = escape_id(entity_id)
    assert unescape_id(escaped) == entity_id


@given(valid_ids)
def test_escaped_ids_carry_no_tag_or_glob_characters(entity_id: str) -> None:
    assert not GLOB_AND_TAG_CHARS & set(escape_id(entity_id))


@given(valid_ids, valid_ids)
def test_distinct_ids_map_to_distinct_keys(a: str, b: str) -> None:
    assume(a != b)
    ks = KeySpace("ns")
    assert escape_id(a) != escape_id(b)
    for key_a, key_b in zip(_all_entity_keys(ks, a), _all_entity_keys(ks, b), strict=True):
        assert key_a != key_b


@given(valid_ids)
def test_hash_tag_is_the_escaped_id_and_all_keys_share_a_slot(entity_id: str) -> None:
    ks = KeySpace("ns")
    keys = _all_entity_keys(ks, entity_id)
    for key in keys:
        assert _hash_tag(key) == escape_id(entity_id)
    assert len({key_slot(key.encode("utf-8")) for key in keys}) == 1


@given(valid_ids)
def test_record_id_inverts_record(entity_id: str) -> None:
    ks = KeySpace("ns")
    key = ks.record("notes", entity_id)
    assert ks.record_id("notes", key) == entity_id
    assert ks.record_id("notes", key.encode("utf-8")) == entity_id


# -- id validation -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "type_name"),
    [(5, "int"), (b"s1", "bytes"), (None, "NoneType"), (1.5, "float")],
)
def test_non_str_id_is_invalid(bad: object, type_name: str) -> None:
    with pytest.raises(InvalidId) as info:
        escape_id(bad)
    message = str(info.value)
    assert type_name in message
    assert repr(bad) in message
    with pytest.raises(InvalidId):
        KeySpace().record("notes", bad)  # type: ignore[arg-type]


def test_empty_id_is_invalid() -> None:
    with pytest.raises(InvalidId, match="empty"):
        escape_id("")
    ks = KeySpace()
    for build in (ks.task, ks.task_log, ks.lock, ks.fence):
        with pytest.raises(InvalidId):
            build("")


def test_invalid_id_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        escape_id("")


@pytest.mark.parametrize("entity_id", ["x" * 512, "中" * 170 + "xx", "😀" * 128])
def test_exactly_512_bytes_is_accepted(entity_id: str) -> None:
    assert len(entity_id.encode("utf-8")) == 512
    assert unescape_id(escape_id(entity_id)) == entity_id
    assert KeySpace().lock(entity_id) == "redistate:lock:{" + entity_id + "}"


@pytest.mark.parametrize("entity_id", ["x" * 513, "中" * 171, "x" * 511 + "é", "😀" * 129])
def test_over_512_bytes_is_invalid(entity_id: str) -> None:
    size = len(entity_id.encode("utf-8"))
    assert size > 512
    with pytest.raises(InvalidId) as info:
        escape_id(entity_id)
    message = str(info.value)
    assert str(size) in message
    assert "512" in message
    with pytest.raises(InvalidId):
        KeySpace().task(entity_id)


def test_171_chinese_characters_are_513_bytes_and_rejected() -> None:
    entity_id = "中" * 171
    assert len(entity_id) == 171
    with pytest.raises(InvalidId, match=r"513 bytes.*512"):
        escape_id(entity_id)


@pytest.mark.parametrize("entity_id", ["\ud800", "a\udfffb", "\udc80" * 3])
def test_lone_surrogates_are_invalid(entity_id: str) -> None:
    with pytest.raises(InvalidId) as info:
        escape_id(entity_id)
    assert "UTF-8" in str(info.value)
    assert repr(entity_id)[:20] in str(info.value)


# -- namespaces and kinds ----------------------------------------------------------


@pytest.mark.parametrize("namespace", ["a", "redistate", "my.app-v2", "A-Z_0-9", "n" * 64])
def test_valid_namespaces(namespace: str) -> None:
    ks = KeySpace(namespace)
    assert ks.namespace == namespace
    assert ks.lock("x") == f"{namespace}:lock:{{x}}"


@pytest.mark.parametrize(
    "namespace",
    ["", "n" * 65, "a b", "a{b", "a}b", "a*", "a?", "a[b]", "a\\b", "é", "a\n", 5, None, b"ns"],
)
def test_invalid_namespaces(namespace: object) -> None:
    with pytest.raises(InvalidId, match="namespace"):
        KeySpace(namespace)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["a", "notes", "my_notes-2", "a" * 64, *sorted(RESERVED_KINDS)])
def test_valid_kinds(kind: str) -> None:
    assert check_kind(kind) == kind
    assert KeySpace("ns").record(kind, "x") == f"ns:{kind}:{{x}}"


@pytest.mark.parametrize(
    "kind", ["", "Notes", "1notes", "_notes", "-notes", "a" * 65, "a b", "a:b", "a*", "a{b}", "é"]
)
def test_invalid_kinds(kind: str) -> None:
    with pytest.raises(InvalidId) as info:
        check_kind(kind)
    assert repr(kind) in str(info.value)
    ks = KeySpace("ns")
    with pytest.raises(InvalidId):
        ks.record(kind, "x")
    with pytest.raises(InvalidId):
        ks.record_pattern(kind)


@pytest.mark.parametrize("kind", [5, None, b"notes"])
def test_non_str_kinds_are_invalid(kind: object) -> None:
    with pytest.raises(InvalidId):
        check_kind(kind)  # type: ignore[arg-type]


def test_reserved_kinds() -> None:
    assert {"session", "user", "task", "lock", "fence"} <= RESERVED_KINDS


# -- record_id ---------------------------------------------------------------------


def test_record_id_of_special_id() -> None:
    ks = KeySpace("ns")
    assert ks.record_id("notes", "ns:notes:{a%7Bb%7D%2A%3F%5B%5D%5C%25c d:é}") == SPECIAL_ID


@pytest.mark.parametrize(
    "key",
    [
        "other:notes:{a}",  # another namespace
        "ns:session:{a}",  # another kind
        "ns:notes:a",  # no hash tag
        "ns:notes:{a",
        "ns:notes:a}",
        "ns:notes:{a}:log",  # a part key, not a record
        "ns:task:{a}:log",
        "ns:lock:{a}",
        "ns:notes",
        "",
        b"other:notes:{a}",
    ],
)
def test_record_id_rejects_foreign_keys(key: str | bytes) -> None:
    # As a str and as the bytes SCAN returns (a shorter path for ids with nothing escaped).
    for form in {key, key.encode() if isinstance(key, str) else key}:
        with pytest.raises(InvalidId):
            KeySpace("ns").record_id("notes", form)


@pytest.mark.parametrize(
    "key",
    [
        "ns:notes:{}",  # empty id
        "ns:notes:{a}:{b}",  # unescaped braces inside the tag
        "ns:notes:{a}}",
        "ns:notes:{a*b}",  # unescaped glob character
        "ns:notes:{%ZZ}",  # '%' that is not an escape produced by escape_id
        b"ns:notes:{\xff}",  # not UTF-8
    ],
)
def test_record_id_rejects_keys_the_scan_pattern_matches_but_record_never_builds(
    key: str | bytes,
) -> None:
    # Every one of these matches record_pattern("notes") == "ns:notes:{*}", so a SCAN for
    # ids() returns them if they exist; record_id must refuse them, not invent an id.
    for form in {key, key.encode() if isinstance(key, str) else key}:
        with pytest.raises(InvalidId):
            KeySpace("ns").record_id("notes", form)


def test_record_id_of_bytes_refuses_an_id_over_the_limit() -> None:
    ks = KeySpace("ns")
    at_limit = "a" * 512
    assert ks.record_id("notes", ks.record("notes", at_limit).encode()) == at_limit
    with pytest.raises(InvalidId):
        ks.record_id("notes", b"ns:notes:{" + b"a" * 513 + b"}")


def test_a_namespace_cannot_contain_a_colon() -> None:
    # "app" would otherwise be a prefix of namespace "app:v2"'s keys.
    with pytest.raises(InvalidId, match="namespace"):
        KeySpace("app:v2")
