"""The pure half of erasure: an index entry's keys come from the kind registry."""

from __future__ import annotations

import pytest

from redistate.core import kinds
from redistate.core.errors import IntegrityError, InvalidId
from redistate.core.keys import KeySpace
from redistate.records.erasure import entity_keys, entry, owner

KEYS = KeySpace("ns")


def test_each_registered_kind_names_every_key_of_its_entity() -> None:
    for kind in kinds.KINDS:
        if not kind.registered:
            continue
        name = "notes" if kind.key == kinds.ANY else kind.key
        assert owner(name) is kind
        data, memory = entity_keys(KEYS, entry(name, "a"))
        sharing = [k for k in kinds.KINDS if k.key == kind.key]
        every = [
            key
            for k in sharing
            for part, key in zip(k.parts, k.keys_of(KEYS, "a", collection=name), strict=True)
            if part not in k.erase_keeps  # no user data, part of a protocol (a tomb)
        ]
        assert sorted(data + memory) == sorted(every)
        # The write memory is kept apart only where there is a main key it belongs to.
        # (A kind whose writes are recognised otherwise, by a unique revision, has none.)
        assert memory == ([KEYS.writes(kind.key_of(KEYS, "a", "", name))]
                          if "" in kind.parts and kinds.WRITES in kind.parts
                          else [])  # fmt: skip


def test_a_store_namespaces_sweep_tomb_is_left_by_erasure() -> None:
    data, memory = entity_keys(KEYS, entry(kinds.MEMORY_KEY, "users.u1"))
    assert KEYS.memory("users.u1", "tomb") not in data + memory
    assert data == [KEYS.memory("users.u1"), KEYS.memory("users.u1", "exp")]


def test_a_tasks_keys_include_its_step_records() -> None:
    data, _ = entity_keys(KEYS, entry(kinds.TASK_KEY, "t"))
    assert KEYS.task_steps("t") in data and set(KEYS.task_keys("t")) <= set(data)


@pytest.mark.parametrize(
    "item", ["", "nocolon", "user:u1", "lock:x", "fence:x", "meta:x", "Bad:x", "session:"]
)
def test_an_entry_redistate_did_not_write_is_an_integrity_error(item: str) -> None:
    with pytest.raises(IntegrityError, match="not one redistate wrote"):
        entity_keys(KEYS, item)


def test_an_entry_validates_its_id() -> None:
    with pytest.raises(InvalidId):
        entry(kinds.SESSION_KEY, "")
