"""KeySpace.parse: every key the builders make splits back into (kind, id, part)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redistate.core.errors import InvalidId
from redistate.core.keys import MAX_ID_BYTES, KeySpace, escape_id


def _truncate_utf8(text: str, limit: int = MAX_ID_BYTES) -> str:
    return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


valid_ids = (
    st.text(
        st.one_of(st.characters(codec="utf-8"), st.sampled_from("%{}*?[]\\:")),
        min_size=1,
        max_size=MAX_ID_BYTES,
    )
    .map(_truncate_utf8)
    .filter(bool)
)
kinds = st.from_regex(r"[a-z][a-z0-9_-]{0,63}", fullmatch=True)

KS = KeySpace("app")


def _built(ks: KeySpace, entity_id: str) -> dict[str, tuple[str, str, str]]:
    """Every key shape the builders make for ``entity_id``, and what parse must say."""
    record = ks.record("notes", entity_id)
    return {
        ks.record("session", entity_id): ("session", entity_id, ""),
        record: ("notes", entity_id, ""),
        ks.writes(record): ("notes", entity_id, "writes"),
        ks.task(entity_id): ("task", entity_id, ""),
        ks.task_ids(entity_id): ("task", entity_id, "ids"),
        ks.task_log(entity_id): ("task", entity_id, "log"),
        ks.writes(ks.task(entity_id)): ("task", entity_id, "writes"),
        ks.lock(entity_id): ("lock", entity_id, ""),
        ks.lock_wake(entity_id): ("lock", entity_id, "wake"),
        ks.fence(entity_id): ("fence", entity_id, ""),
    }


@pytest.mark.parametrize("entity_id", ["t1", "a{b}*?[]\\%c d:é", "x:{y}:log", "%7B", "🙂"])
def test_every_built_key_parses_back(entity_id: str) -> None:
    for key, expected in _built(KS, entity_id).items():
        assert KS.parse(key) == expected
        assert KS.parse(key.encode("utf-8")) == expected


@given(entity_id=valid_ids, kind=kinds)
def test_parse_inverts_the_builders_for_any_id_and_kind(entity_id: str, kind: str) -> None:
    key = KS.record(kind, entity_id)
    assert KS.parse(key) == (kind, entity_id, "")
    assert KS.parse(KS.writes(key)) == (kind, entity_id, "writes")
    for key, expected in _built(KS, entity_id).items():
        assert KS.parse(key) == expected


def test_a_namespace_that_is_a_prefix_of_another_does_not_match_its_keys() -> None:
    other = KeySpace("app2")
    with pytest.raises(InvalidId, match="namespace 'app'"):
        KS.parse(other.record("session", "s1"))
    with pytest.raises(InvalidId):
        other.parse(KS.record("session", "s1"))


@pytest.mark.parametrize(
    "key",
    [
        "app",
        "app:",
        "app:session",
        "app:session:s1",  # no hash tag
        "app:session:{}",  # empty id
        "app::{s1}",  # empty kind
        "app:Session:{s1}",  # a kind is lowercase
        "app:a:b:{s1}",  # ':' inside a kind
        "app:session:{s1",  # tag never closed
        "app:session:{s1}x",  # junk after the tag
        "app:session:{s1}:",  # empty part
        "app:session:{s1}:Log",
        "app:session:{s1}:log:more",
        "app:session:{a%7bb}",  # lowercase escape: not how escape_id writes it
        "app:session:{a%41}",  # an escape of a character that is never escaped
        "app:session:{a*b}",  # a glob character left unescaped
        "other:session:{s1}",
        b"app:session:{\xff}",  # not UTF-8
        "app:session:{" + "x" * (MAX_ID_BYTES + 1) + "}",  # id over the limit
    ],
)
def test_foreign_and_malformed_keys_are_refused(key: str | bytes) -> None:
    with pytest.raises(InvalidId, match="is not a redistate key in namespace 'app'"):
        KS.parse(key)


def test_an_id_at_the_size_limit_parses() -> None:
    entity_id = "é" * (MAX_ID_BYTES // 2)
    assert KS.parse(KS.record("user", entity_id)) == ("user", entity_id, "")
    assert escape_id(entity_id) == entity_id
