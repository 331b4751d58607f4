"""A model-based test: random sequences of record operations against a dict model.

Runs on every backend. The model knows what each id holds and its version; every
operation's outcome (value, conflict, existence) must match it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from redistate import ConflictError, Store
from redistate.mergepatch import merge_patch
from tests.conftest import Backend

IDS = st.sampled_from(["a", "b{c}", "*"])
VALUES = st.dictionaries(
    st.sampled_from(["x", "y", "z"]),
    st.none() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=5) | st.lists(st.booleans()),
    max_size=3,
)


def machine_for(store: Store) -> type[RuleBasedStateMachine]:
    class Records(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model: dict[str, tuple[Any, int]] = {}
            for entity in ("a", "b{c}", "*"):
                store.users.delete(entity)

        @rule(entity=IDS, value=VALUES)
        def put(self, entity: str, value: Any) -> None:
            rec = store.users.put(entity, value)
            old = self.model.get(entity)
            assert old is None or rec.version > old[1]
            self.model[entity] = (value, rec.version)

        @rule(entity=IDS, value=VALUES, stale=st.booleans())
        def conditional_put(self, entity: str, value: Any, stale: bool) -> None:
            current = self.model.get(entity)
            expected = 0 if current is None else current[1]
            if stale:
                expected += 1
            if stale:
                with pytest.raises(ConflictError):
                    store.users.put(entity, value, if_version=expected)
            else:
                self.model[entity] = (
                    value,
                    store.users.put(entity, value, if_version=expected).version,
                )

        @rule(entity=IDS, patch=VALUES)
        def merge(self, entity: str, patch: Any) -> None:
            rec = store.users.merge(entity, patch)
            base = self.model.get(entity, ({}, 0))[0]
            assert rec.data == merge_patch(base, patch)
            self.model[entity] = (rec.data, rec.version)

        @rule(entity=IDS)
        def update(self, entity: str) -> None:
            rec = store.users.update(entity, lambda d: {**d, "n": d.get("n", 0) + 1})
            base = self.model.get(entity, ({}, 0))[0]
            assert rec.data == {**base, "n": base.get("n", 0) + 1}
            self.model[entity] = (rec.data, rec.version)

        @rule(entity=IDS, conditional=st.booleans())
        def delete(self, entity: str, conditional: bool) -> None:
            current = self.model.pop(entity, None)
            if conditional and current is not None:
                assert store.users.delete(entity, if_version=current[1]) is True
            else:
                assert store.users.delete(entity) is (current is not None)

        @invariant()
        def store_matches_model(self) -> None:
            for entity in ("a", "b{c}", "*"):
                got = store.users.get(entity)
                want = self.model.get(entity)
                if want is None:
                    assert got is None
                else:
                    assert got is not None and (got.data, got.version) == want
            assert sorted(set(store.users.ids())) == sorted(self.model)

    return Records


def test_records_behave_like_the_model(backend: Backend, namespace: str) -> None:
    store = Store(backend.sync_client(), namespace=namespace)
    run_state_machine_as_test(
        machine_for(store),
        settings=settings(
            max_examples=25,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture],
        ),
    )
    store.close()
