"""Property tests through a real store: any JSON value survives put/get and merge exactly."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from redistate import Store
from redistate.mergepatch import merge_patch
from tests.conftest import Backend

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
objects = st.dictionaries(st.text(max_size=8), json_values, max_size=5)

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(value=json_values, entity=st.text(min_size=1, max_size=30))
def test_any_json_value_round_trips(
    backend: Backend, namespace: str, value: Any, entity: str
) -> None:
    store = Store(backend.sync_client(), namespace=namespace)
    rec = store.users.put(entity, value)
    got = store.users.get(entity)
    assert got == rec
    assert got is not None and got.data == value
    store.close()


@SETTINGS
@given(target=objects, patch=objects)
def test_merge_through_the_store_matches_the_pure_merge(
    backend: Backend, namespace: str, target: Any, patch: Any
) -> None:
    store = Store(backend.sync_client(), namespace=namespace)
    store.users.put("u", target)
    rec = store.users.merge("u", patch)
    got = store.users.get("u")
    assert got is not None and got.data == merge_patch(target, patch)
    assert got.version == rec.version
    store.close()
