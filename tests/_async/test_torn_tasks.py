"""A torn task: one of its two lists evicted (or lost). restore skips what cannot be
paired and says so; the next save repairs the task; history is never stuck."""

from __future__ import annotations

import pytest

from redistate import AsyncStore, IntegrityError
from tests.conftest import Backend

pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


async def test_the_id_list_lost_restore_skips_and_the_next_save_repairs(
    store: AsyncStore, backend: Backend
) -> None:
    saved = [await store.checkpoints.save("t", {"i": i}) for i in range(3)]
    await store.checkpoints.log("t", {"d": 1})
    backend.raw().delete(store.keys.task_ids("t"))
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.torn and not restored.complete
    # Every blob is named by the id its metadata holds; the delta followed one of them.
    assert restored.checkpoint is None and restored.skipped[:3] == tuple(
        c.id for c in reversed(saved)
    )
    with pytest.raises(IntegrityError, match="torn"):
        await store.checkpoints.history("t")
    after = await store.checkpoints.save("t", {"i": 3})
    assert after.seq == 1  # no entry survived: nothing to continue from
    history = await store.checkpoints.history("t")
    assert [c.state for c in history] == [{"i": 3}]
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.complete and not restored.torn
    assert restored.state == {"i": 3}
    assert await store.checkpoints.save("t", {"i": 4}) is not None
    assert [c.seq for c in await store.checkpoints.history("t")] == [2, 1]


async def test_the_checkpoint_list_lost_restore_skips_and_seq_goes_on(
    store: AsyncStore, backend: Backend
) -> None:
    saved = [await store.checkpoints.save("t", {"i": i}) for i in range(3)]
    backend.raw().delete(store.keys.task("t"))
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.torn and not restored.complete
    assert restored.checkpoint is None and restored.state == {}
    assert restored.skipped == tuple(c.id for c in reversed(saved))
    with pytest.raises(IntegrityError, match="torn"):
        await store.checkpoints.history("t")
    after = await store.checkpoints.save("t", {"i": 3})
    assert after.seq == saved[-1].seq + 1 == 4  # from the surviving ids: never backwards
    assert after.parent_id == saved[-1].id
    history = await store.checkpoints.history("t")
    assert [(c.seq, c.state) for c in history] == [(4, {"i": 3})]
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.complete and restored.state == {"i": 3}


async def test_a_tear_followed_by_saves_of_older_code_is_trimmed_to_the_sound_pairs(
    store: AsyncStore, backend: Backend
) -> None:
    """Lists of unequal length, both non-empty (a tear, then pushes to both): the pairs
    at the head were pushed together, so they are kept; the rest is trimmed."""
    for i in range(3):
        await store.checkpoints.save("t", {"i": i})
    raw = backend.raw()
    raw.delete(store.keys.task_ids("t"))
    newest = await store.checkpoints.save("t", {"i": 3})  # repairs: ids gone, blobs kept
    raw.rpush(store.keys.task("t"), b"an orphan blob")  # torn again, at the tail
    restored = await store.checkpoints.restore("t")
    assert restored is not None and restored.complete and restored.state == {"i": 3}
    after = await store.checkpoints.save("t", {"i": 4})
    assert after.seq == newest.seq + 1
    assert raw.llen(store.keys.task("t")) == raw.llen(store.keys.task_ids("t")) == 2
    assert [c.state for c in await store.checkpoints.history("t")] == [{"i": 4}, {"i": 3}]
