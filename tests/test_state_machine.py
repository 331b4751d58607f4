"""A model-based test: random sequences of record operations against a dict model.

Runs on every backend. The model knows what each id holds, its version and whether it
expires; every operation's outcome (value, version, conflict, existence, TTL) must match
it. Versions must strictly increase per id, also across delete and re-create, and a
compare-and-set must raise ConflictError exactly when the model says the version differs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from redistate import DEFAULT, ConflictError, Record, Store
from redistate.records.mergepatch import merge_patch
from tests.conftest import Backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)

ENTITIES = ("a", "b{c}", "*")
IDS = st.sampled_from(ENTITIES)
LEAVES = (
    st.none() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=5) | st.lists(st.booleans())
)
VALUES = st.dictionaries(
    st.sampled_from(["x", "y", "z"]),
    LEAVES | st.dictionaries(st.sampled_from(["x", "p"]), LEAVES, max_size=2),
    max_size=3,
)
# ttl= for writes and touches: the collection's (DEFAULT), none at all, or seconds.
TTLS = st.sampled_from([DEFAULT, None, 120])
COLLECTION_TTL = 600
# How a compare-and-set picks its expected version, relative to the model's.
EXPECTATIONS = st.sampled_from(["current", "create-only", "older", "newer", "last-deleted"])


@dataclass
class Entry:
    data: Any
    version: int
    expires: bool


def machine_for(store: Store) -> type[RuleBasedStateMachine]:
    notes = store.collection("notes", ttl=COLLECTION_TTL)

    class Records(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model: dict[str, Entry] = {}
            # The highest version ever seen per id, kept across deletes: a re-created
            # record must still get a larger one.
            self.seen: dict[str, int] = {}
            for entity in ENTITIES:
                notes.delete(entity)

        # -- helpers ----------------------------------------------------------------

        def _written(self, entity: str, rec: Record, data: Any, expires: bool) -> None:
            assert rec.id == entity
            assert rec.version > self.seen.get(entity, 0), (rec.version, self.seen)
            assert (rec.expires_at is not None) is expires
            self.seen[entity] = rec.version
            self.model[entity] = Entry(data, rec.version, expires)

        def _expected(self, entity: str, how: str) -> int:
            current = self.model.get(entity)
            version = 0 if current is None else current.version
            if how == "current":
                return version
            if how == "create-only":
                return 0
            if how == "older":
                return max(version - 1, 0)
            if how == "newer":
                return version + 1
            return self.seen.get(entity, 0)  # the version a deleted record had

        @staticmethod
        def _expires(ttl: Any) -> bool:
            return ttl is not None  # DEFAULT: the collection's TTL

        # -- rules ------------------------------------------------------------------

        @rule(entity=IDS, value=VALUES, ttl=TTLS)
        def put(self, entity: str, value: Any, ttl: Any) -> None:
            rec = notes.put(entity, value, ttl=ttl)
            assert rec.data is value  # put returns what it was given
            self._written(entity, rec, value, self._expires(ttl))

        @rule(entity=IDS, value=VALUES, how=EXPECTATIONS)
        def conditional_put(self, entity: str, value: Any, how: str) -> None:
            expected = self._expected(entity, how)
            current = self.model.get(entity)
            actual = 0 if current is None else current.version
            if expected != actual:
                with pytest.raises(ConflictError) as info:
                    notes.put(entity, value, if_version=expected)
                assert (info.value.expected, info.value.actual) == (expected, actual)
            else:
                rec = notes.put(entity, value, if_version=expected)
                self._written(entity, rec, value, True)

        @rule(entity=IDS, patch=VALUES, ttl=TTLS)
        def merge(self, entity: str, patch: Any, ttl: Any) -> None:
            rec = notes.merge(entity, patch, ttl=ttl)
            current = self.model.get(entity)
            want = merge_patch({} if current is None else current.data, patch)
            assert rec.data == want
            if ttl is not DEFAULT:
                expires = self._expires(ttl)
            else:  # the record's own TTL; the collection's when merge creates it
                expires = True if current is None else current.expires
            self._written(entity, rec, want, expires)

        @rule(entity=IDS)
        def update(self, entity: str) -> None:
            rec = notes.update(entity, lambda d: {**d, "n": d.get("n", 0) + 1})
            current = self.model.get(entity)
            base = {} if current is None else current.data
            want = {**base, "n": base.get("n", 0) + 1}
            assert rec.data == want
            self._written(entity, rec, want, True if current is None else current.expires)

        @rule(entity=IDS)
        def delete(self, entity: str) -> None:
            assert notes.delete(entity) is (self.model.pop(entity, None) is not None)

        @rule(entity=IDS, how=st.sampled_from(["current", "older", "newer", "last-deleted"]))
        def conditional_delete(self, entity: str, how: str) -> None:
            expected = max(self._expected(entity, how), 1)  # if_version=0 is not a delete
            current = self.model.get(entity)
            actual = 0 if current is None else current.version
            if expected != actual:
                with pytest.raises(ConflictError) as info:
                    notes.delete(entity, if_version=expected)
                assert (info.value.expected, info.value.actual) == (expected, actual)
            else:
                assert notes.delete(entity, if_version=expected) is True
                del self.model[entity]

        @rule(entity=IDS, ttl=TTLS, read=st.booleans())
        def touch(self, entity: str, ttl: Any, read: bool) -> None:
            current = self.model.get(entity)
            if read:
                got = notes.get(entity, touch=True, ttl=ttl)
                if current is None:
                    assert got is None
                else:
                    assert got is not None and (got.data, got.version) == (
                        current.data,
                        current.version,  # a touch is not a write: same version
                    )
                    assert (got.expires_at is not None) is self._expires(ttl)
            else:
                assert notes.touch(entity, ttl=ttl) is (current is not None)
            if current is not None:
                current.expires = self._expires(ttl)

        # -- invariants -------------------------------------------------------------

        @invariant()
        def store_matches_model(self) -> None:
            for entity in ENTITIES:
                got = notes.get(entity)
                want = self.model.get(entity)
                left = notes.ttl(entity)
                if want is None:
                    assert got is None
                    assert left is None
                else:
                    assert got is not None and (got.data, got.version) == (want.data, want.version)
                    assert (got.expires_at is not None) is want.expires
                    assert left is not None
                    if want.expires:
                        assert 0 < left <= COLLECTION_TTL
                    else:
                        assert left == math.inf
            assert sorted(set(notes.ids())) == sorted(self.model)

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
