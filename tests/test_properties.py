"""Property tests through a real store: any JSON value survives put/get, checkpoints and
merge exactly — compared strictly (types, the sign of zero), not with ``==`` — and merge
patches agree with an independent RFC 7386 reference written here from the RFC's
pseudo-code (not redistate.records.mergepatch)."""

from __future__ import annotations

import copy
import math
from functools import reduce
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from redistate import CodecError, Store
from redistate.core.codec import MAX_DEPTH
from tests.conftest import Backend
from tests.unit.test_mergepatch import RFC_7386_EXAMPLES

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

# -- strict equality and the reference merge ----------------------------------------------


def same(a: Any, b: Any) -> bool:
    """JSON equality without Python's leniency: 1 != 1.0 != True, -0.0 != 0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def test_same_is_strict() -> None:
    assert same({"a": [1, -0.0, None]}, {"a": [1, -0.0, None]})
    assert not same(1, 1.0) and not same(1, True) and not same(0.0, -0.0)
    assert not same([1], [1, 2]) and not same({"a": 1}, {"b": 1}) and not same([], {})


_ABSENT = object()


def rfc7386(target: Any, patch: Any) -> Any:
    """RFC 7386, section 2, line by line; returns a new document, shares nothing.

    define MergePatch(Target, Patch):
      if Patch is an Object:
        if Target is not an Object:
          Target = {} # Ignore the contents and set it to an empty Object
        for each Name/Value pair in Patch:
          if Value is null:
            if Name exists in Target:
              remove the Name/Value pair from Target
          else:
            Target[Name] = MergePatch(Target[Name], Value)
        return Target
      else:
        return Patch
    """
    if type(patch) is not dict:
        return copy.deepcopy(patch)
    doc: dict[str, Any] = copy.deepcopy(target) if type(target) is dict else {}
    for name, value in patch.items():
        if value is None:
            doc.pop(name, None)  # "if Name exists in Target: remove" it
        else:
            doc[name] = rfc7386(doc.get(name, _ABSENT), value)
    return doc


RFC_EXAMPLES = RFC_7386_EXAMPLES  # Appendix A, shared with the unit tests


@pytest.mark.parametrize(("original", "patch", "result"), RFC_EXAMPLES)
def test_the_reference_passes_the_rfc_examples(original: Any, patch: Any, result: Any) -> None:
    assert same(rfc7386(original, patch), result)


@pytest.mark.parametrize(
    ("original", "patch", "result"), RFC_EXAMPLES, ids=[str(i) for i in range(len(RFC_EXAMPLES))]
)
def test_store_merge_passes_the_rfc_examples(
    backend: Backend, namespace: str, original: Any, patch: Any, result: Any
) -> None:
    store = Store(backend.sync_client(), namespace=namespace)
    store.users.put("u", original)
    assert same(store.users.merge("u", patch).data, result)
    got = store.users.get("u")
    assert got is not None and same(got.data, result)
    store.close()


# -- strategies --------------------------------------------------------------------------

EDGE_FLOATS = [
    -0.0,
    0.0,
    5e-324,  # the smallest subnormal
    -5e-324,
    2.225073858507201e-308,  # the largest subnormal
    2.2250738585072014e-308,  # the smallest normal
    1.7976931348623157e308,
    -1.7976931348623157e308,
    0.1,
    1e16,
    2.0**53 + 2,
]
EDGE_INTS = [0, -1, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, -(2**63), -(2**63) + 1]
ASTRAL = st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF, exclude_categories=["Cs"])
texts = st.text(max_size=12) | st.text(ASTRAL, max_size=4) | st.sampled_from(["", "\x00", "é"])
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.sampled_from(EDGE_INTS)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(EDGE_FLOATS)
    | texts
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=20,
)
objects = st.dictionaries(texts, json_values, max_size=5)

SETTINGS = settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


# -- round trips -------------------------------------------------------------------------


@SETTINGS
@given(value=json_values, entity=st.text(min_size=1, max_size=30))
@example(value=EDGE_FLOATS, entity="floats")
@example(value=EDGE_INTS, entity="ints")
@example(value={"\U0001f600": "\U0010ffff\x00", "": [[], {}]}, entity="\U0001f600")
def test_any_json_value_round_trips(
    backend: Backend, namespace: str, value: Any, entity: str
) -> None:
    store = Store(backend.sync_client(), namespace=namespace)
    rec = store.users.put(entity, value)
    assert rec.data is value  # put returns what it was given
    got = store.users.get(entity)
    assert got is not None and same(got.data, value)
    assert (got.version, got.expires_at) == (rec.version, rec.expires_at)
    saved = store.checkpoints.save(entity, value)
    restored = store.checkpoints.restore(entity)
    assert restored is not None and same(restored.state, value)
    latest = store.checkpoints.latest(entity)
    assert latest is not None and latest.id == saved.id and same(latest.state, value)
    store.close()


def nest(depth: int, shape: int, leaf: Any) -> Any:
    """``depth`` containers around ``leaf``; bit i of ``shape`` picks list or dict at level i."""
    value = leaf
    for level in range(depth):
        value = [value] if shape >> level & 1 else {"k": value}
    return value


@settings(SETTINGS, max_examples=30)
@given(
    depth=st.integers(1, MAX_DEPTH + 20),
    shape=st.integers(0, 2 ** (MAX_DEPTH + 20) - 1),
    leaf=scalars | st.just([]) | st.just({}),
)
@example(depth=MAX_DEPTH, shape=0, leaf={})  # {} is a container too: MAX_DEPTH + 1 levels
@example(depth=MAX_DEPTH - 1, shape=0, leaf={})  # exactly MAX_DEPTH levels
@example(depth=MAX_DEPTH, shape=-1, leaf=1)
@example(depth=MAX_DEPTH + 1, shape=0, leaf=1)
def test_nesting_up_to_the_documented_depth_round_trips_and_deeper_is_refused(
    backend: Backend, namespace: str, depth: int, shape: int, leaf: Any
) -> None:
    """MAX_DEPTH (254) levels of containers are stored exactly; one more is a CodecError
    that names the limit, and nothing is written."""
    store = Store(backend.sync_client(), namespace=namespace)
    value = nest(depth, shape, leaf)
    levels = depth + (1 if isinstance(leaf, list | dict) else 0)
    if levels <= MAX_DEPTH:
        store.users.put("deep", value)
        got = store.users.get("deep")
        assert got is not None and same(got.data, value)
    else:
        store.users.put("deep", "before")
        with pytest.raises(CodecError, match=f"nesting deeper than {MAX_DEPTH} levels"):
            store.users.put("deep", value)
        got = store.users.get("deep")
        assert got is not None and got.data == "before"
    store.close()


# -- merge patch through the store -------------------------------------------------------

# Patches reuse the target's keys often, so that they merge into (and delete) existing
# members rather than only add new ones.
keys = st.sampled_from(["a", "b", "c", "\U0001f600"]) | texts
patch_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=3),
    max_leaves=12,
)
patches = st.dictionaries(keys, patch_values, max_size=4) | patch_values
targets = st.dictionaries(keys, patch_values, max_size=4) | json_values


@SETTINGS
@given(target=targets, patch=patches)
@example(target={"a": {"b": 1, "c": [1]}}, patch={"a": {"b": None, "c": {"d": -0.0}}})
@example(target={"a": 1}, patch=None)
@example(target=[1, 2], patch={"a": None})
def test_merge_through_the_store_matches_the_reference(
    backend: Backend, namespace: str, target: Any, patch: Any
) -> None:
    store = Store(backend.sync_client(), namespace=namespace)
    store.users.put("u", target)
    want = rfc7386(target, patch)
    rec = store.users.merge("u", patch)
    assert same(rec.data, want)
    got = store.users.get("u")
    assert got is not None and same(got.data, want)
    assert got.version == rec.version
    store.close()


@settings(SETTINGS, max_examples=30)
@given(patches=st.lists(patches, min_size=1, max_size=4))
def test_a_sequence_of_merges_on_a_new_record_folds_like_the_reference(
    backend: Backend, namespace: str, patches: list[Any]
) -> None:
    """A merge into an absent record starts from {}; each next one from the last result."""
    store = Store(backend.sync_client(), namespace=namespace)
    store.users.delete("u")
    for patch in patches:
        store.users.merge("u", patch)
    got = store.users.get("u")
    assert got is not None and same(got.data, reduce(rfc7386, patches, {}))
    store.close()


@settings(SETTINGS, max_examples=30)
@given(state=objects, deltas=st.lists(st.dictionaries(keys, patch_values), max_size=4))
def test_checkpoint_deltas_replay_like_the_reference(
    backend: Backend, namespace: str, state: Any, deltas: list[dict[str, Any]]
) -> None:
    """restore() = the checkpoint's state with every delta logged after it merged in."""
    store = Store(backend.sync_client(), namespace=namespace)
    store.checkpoints.save("t", state)
    for delta in deltas:
        store.checkpoints.log("t", delta)
    restored = store.checkpoints.restore("t")
    assert restored is not None and restored.complete
    assert restored.deltas_applied == len(deltas)
    assert same(restored.state, reduce(rfc7386, deltas, state))
    store.close()
