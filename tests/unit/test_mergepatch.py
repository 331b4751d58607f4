"""RFC 7386 JSON merge patch: the RFC's examples and properties."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redistate.records.mergepatch import merge_patch

# RFC 7386, Appendix A, every row: (original, patch, result).
RFC_7386_EXAMPLES: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("original", "patch", "expected"), RFC_7386_EXAMPLES)
def test_rfc_7386_appendix_a(original: Any, patch: Any, expected: Any) -> None:
    result = merge_patch(original, patch)
    assert result == expected
    assert type(result) is type(expected)


def test_rfc_7386_section_3_example() -> None:
    target = {
        "title": "Goodbye!",
        "author": {"givenName": "John", "familyName": "Doe"},
        "tags": ["example", "sample"],
        "content": "This will be unchanged",
    }
    patch = {
        "title": "Hello!",
        "phoneNumber": "+01-123-456-7890",
        "author": {"familyName": None},
        "tags": ["example"],
    }
    assert merge_patch(target, patch) == {
        "title": "Hello!",
        "author": {"givenName": "John"},
        "tags": ["example"],
        "content": "This will be unchanged",
        "phoneNumber": "+01-123-456-7890",
    }


def test_missing_target_is_treated_as_empty_object() -> None:
    assert merge_patch(None, {"a": {"b": 1, "c": None}}) == {"a": {"b": 1}}
    assert merge_patch("scalar", {"a": 1}) == {"a": 1}
    assert merge_patch(None, {}) == {}


def test_empty_patch_keeps_an_object_target() -> None:
    assert merge_patch({"a": 1, "b": None}, {}) == {"a": 1, "b": None}


def test_removing_an_absent_key_is_a_no_op() -> None:
    assert merge_patch({"a": 1}, {"zz": None}) == {"a": 1}


def test_untouched_subtrees_are_shared_and_touched_ones_copied() -> None:
    untouched = {"deep": [1, 2]}
    touched = {"x": 1}
    target = {"keep": untouched, "change": touched}
    result = merge_patch(target, {"change": {"y": 2}})
    assert result["keep"] is untouched
    assert result["change"] is not touched
    assert touched == {"x": 1}


# -- properties --------------------------------------------------------------------

scalars = st.one_of(
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=5),
)
keys = st.text(alphabet="abcde", min_size=1, max_size=2)


def _json(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaf,
        lambda children: st.one_of(
            st.lists(children, max_size=3), st.dictionaries(keys, children, max_size=4)
        ),
        max_leaves=20,
    )


# Targets hold no nulls at all; patches use nulls freely (they mean "remove").
targets_without_null = _json(scalars)
any_json = _json(st.one_of(st.none(), scalars))
patches = st.one_of(st.dictionaries(keys, any_json, max_size=4), any_json)


def _object_nulls(value: Any, path: str = "$") -> list[str]:
    """Paths of None values held directly by objects reached through objects only.

    Lists are replaced whole by a merge patch, so their contents are not "patched".
    """
    if not isinstance(value, dict):
        return []
    found = []
    for k, v in value.items():
        if v is None:
            found.append(f"{path}.{k}")
        found.extend(_object_nulls(v, f"{path}.{k}"))
    return found


@given(targets_without_null, patches)
def test_result_never_holds_null_inside_patched_objects(target: Any, patch: Any) -> None:
    result = merge_patch(target, patch)
    if isinstance(patch, dict):
        assert _object_nulls(result) == []


def _check_applied(result: Any, patch: Any) -> None:
    """Every member of the patch is reflected in the result, recursively."""
    if not isinstance(patch, dict):
        assert result == patch
        return
    assert isinstance(result, dict)
    for k, v in patch.items():
        if v is None:
            assert k not in result
        else:
            assert k in result
            _check_applied(result[k], v)


@given(any_json, patches)
def test_every_patch_member_is_applied(target: Any, patch: Any) -> None:
    _check_applied(merge_patch(target, patch), patch)


@given(any_json, patches)
def test_target_members_not_in_the_patch_are_kept(target: Any, patch: Any) -> None:
    result = merge_patch(target, patch)
    if isinstance(target, dict) and isinstance(patch, dict):
        for k, v in target.items():
            if k not in patch:
                assert result[k] == v


@given(any_json, patches)
def test_applying_a_patch_twice_equals_applying_it_once(target: Any, patch: Any) -> None:
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once


@given(any_json, patches)
def test_inputs_are_not_mutated(target: Any, patch: Any) -> None:
    target_before = copy.deepcopy(target)
    patch_before = copy.deepcopy(patch)
    merge_patch(target, patch)
    assert target == target_before
    assert patch == patch_before


@given(any_json, patches)
def test_mutating_the_result_does_not_touch_the_target_objects(target: Any, patch: Any) -> None:
    target_before = copy.deepcopy(target)
    result = merge_patch(target, patch)
    _clear_objects(result, patch)
    assert target == target_before


def _clear_objects(result: Any, patch: Any) -> None:
    """Clear every object the patch merged into (those are new dicts, not the target's)."""
    if isinstance(result, dict) and isinstance(patch, dict):
        for k, v in patch.items():
            if k in result:
                _clear_objects(result[k], v)
        result.clear()
