"""Checkpoint helpers that need no server: defaults, blobs, handoff edge cases."""

from __future__ import annotations

import pytest

from redistate import Store
from redistate.checkpoints.spec import (
    CheckpointSpec,
    Restored,
    handoff,
    new_checkpoint_id,
)
from redistate.core.codec import JsonCodec
from redistate.core.errors import InvalidId, StateTooLarge
from redistate.core.keys import KeySpace
from redistate.core.limits import check_keep


def test_the_issue_defaults() -> None:
    spec = Store.embedded().checkpoints.spec
    assert (spec.keep, spec.ttl_ms, spec.max_bytes, spec.compress_above, spec.max_deltas) == (
        10,
        0,
        16 * 1024 * 1024,
        16 * 1024,
        1000,
    )


def test_sixteen_mib_is_the_default_limit() -> None:
    spec = CheckpointSpec(KeySpace("ns"), JsonCodec())
    spec.blob("k", "id", "x" * (16 * 1024 * 1024 - 200), None, None, None)  # fits
    with pytest.raises(StateTooLarge) as info:
        spec.blob("k", "id", "x" * (16 * 1024 * 1024), None, None, None)
    assert info.value.limit == 16 * 1024 * 1024


def test_checkpoint_ids_sort_by_time() -> None:
    ids = [new_checkpoint_id() for _ in range(50)]
    assert ids == sorted(ids) and len(set(ids)) == 50


@pytest.mark.parametrize("bad", [0, -1, 100_001, 1.5, True, "10"])
def test_keep_is_validated(bad: object) -> None:
    with pytest.raises(ValueError, match="keep"):
        check_keep(bad)


def test_a_bad_checkpoint_id_is_refused() -> None:
    store = Store.embedded()
    for bad in ("", "a b", "x" * 65, "é"):
        with pytest.raises(InvalidId, match="checkpoint id"):
            store.checkpoints.save("t", {}, checkpoint_id=bad)


def test_handoff_of_an_unreadable_task() -> None:
    text = handoff("t", Restored({}, None, 0, ("cp-9",), complete=False))
    lines = text.splitlines()
    assert 5 <= len(lines) <= 15
    assert "- Checkpoint: none readable" in lines
    assert "- Warning: skipped damaged entries: cp-9" in lines
