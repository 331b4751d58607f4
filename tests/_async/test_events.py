"""Audit events on every backend (this file has a generated sync twin): the hash chain,
concurrent appenders, folding, and every kind of tampering verify() must catch."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any, cast

import pytest

from redistate import (
    AsyncStore,
    ConflictError,
    EncryptedCodec,
    Event,
    IntegrityError,
    InvalidId,
    LockLost,
    RedistateError,
    StateTooLarge,
)
from redistate.core._io import async_join, async_spawn
from redistate.core.scripts import script
from redistate.events.spec import digest_of
from tests.conftest import Backend
from tests.roundtrips import server_reads

Entries = list[tuple[bytes, dict[bytes, bytes]]]


pytestmark = pytest.mark.over_rest  # and over Upstash's REST API (conftest)


async def appended(store: AsyncStore, entity: str = "t1") -> list[Event]:
    ev = store.events
    return [
        await ev.append(entity, "initialized", {"name": "ann", "plan": "free"}),
        await ev.append(entity, "updated", {"plan": "pro", "tags": ["a"]}),
        await ev.append(entity, "tool_called", {"tool": "search", "q": "x"}),
        await ev.append(entity, "updated", {"prefs": {"lang": "zh"}}),
        await ev.append(entity, "deleted", ["tags"]),
    ]


def entries(backend: Backend, key: str) -> Entries:
    raw = backend.raw()
    try:
        return list(raw.xrange(key, "-", "+"))
    finally:
        raw.close()


def rebuild(backend: Backend, key: str, new: Entries) -> None:
    """Replace the stream with ``new`` (explicit ids, in order): what someone with
    write access to Redis or to a backup can do."""
    raw = backend.raw()
    try:
        raw.delete(key)
        for eid, fields in new:
            raw.xadd(key, fields, id=eid)
    finally:
        raw.close()


# -- the chain -----------------------------------------------------------------------------


async def test_events_chain_and_read_back(store: AsyncStore) -> None:
    events = await appended(store)
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert events[0].prev == ""
    assert all(b.prev == a.digest for a, b in itertools.pairwise(events))
    assert len({e.digest for e in events}) == 5
    read = await store.events.read("t1")
    assert read == events  # the returned Events are what is stored
    assert await store.events.read("t1", start=events[1].id, end=events[3].id) == events[1:4]
    assert await store.events.read("nobody") == []
    check = await store.events.verify("t1")
    assert check.ok and check.count == 5 and check.first_bad is None


async def test_fold_with_the_default_reducer_and_until(store: AsyncStore) -> None:
    events = await appended(store)
    assert await store.events.fold("t1") == {
        "name": "ann",
        "plan": "pro",
        "prefs": {"lang": "zh"},
    }
    assert await store.events.fold("t1", until=events[1].id) == {
        "name": "ann",
        "plan": "pro",
        "tags": ["a"],
    }  # inclusive of that event
    assert await store.events.fold("t1", until=events[0].id) == {"name": "ann", "plan": "free"}
    ms = events[-1].id.split("-")[0]  # a time alone: every event of that millisecond
    assert await store.events.fold("t1", until=ms) == await store.events.fold("t1")
    assert await store.events.fold("nobody") == {}


async def test_fold_with_a_reducer_of_ones_own(store: AsyncStore) -> None:
    await appended(store)

    def count_types(state: Any, event: Event) -> Any:
        return {**state, event.type: state.get(event.type, 0) + 1}

    assert await store.events.fold("t1", count_types) == {
        "initialized": 1,
        "updated": 2,
        "tool_called": 1,
        "deleted": 1,
    }


async def test_a_second_store_appends_after_the_first_without_forking(
    store: AsyncStore, backend: Backend, namespace: str
) -> None:
    other = AsyncStore(backend.async_client(), namespace=namespace)
    try:
        await store.events.append("t1", "a", 1)
        await other.events.append("t1", "b", 2)  # knows nothing: learns the end, retries
        await store.events.append("t1", "c", 3)  # its remembered end is stale: retries
        await other.events.append("t1", "d", 4)
    finally:
        await other.aclose()
    assert [e.payload for e in await store.events.read("t1")] == [1, 2, 3, 4]
    assert (await store.events.verify("t1")).ok


async def test_concurrent_appenders_never_fork_the_chain(
    store: AsyncStore, backend: Backend, namespace: str
) -> None:
    stores = [store] + [AsyncStore(backend.async_client(), namespace=namespace) for _ in range(3)]
    per = 15

    def writer(s: AsyncStore, w: int) -> Callable[[], Any]:
        async def run() -> None:
            for i in range(per):
                await s.events.append("shared", "updated", {f"w{w}-{i}": i})

        return run

    handles = [async_spawn(writer(s, w), f"writer-{w}") for w, s in enumerate(stores * 2)]
    for handle in handles:
        await async_join(handle)
    for s in stores[1:]:
        await s.aclose()
    events = await store.events.read("shared")
    assert len(events) == 8 * per
    assert [e.seq for e in events] == list(range(1, 8 * per + 1))
    assert (await store.events.verify("shared")).ok
    folded = await store.events.fold("shared")
    assert len(folded) == 8 * per  # every append is in the state once


async def test_one_writer_appends_in_one_round_trip(
    server_store: AsyncStore, server_backend: Backend
) -> None:
    await server_store.events.append("t1", "warm", 0)  # learns the (empty) end
    raw = server_backend.raw()
    try:
        before = server_reads(raw)
        for i in range(20):
            await server_store.events.append("t1", "updated", {"i": i})
        reads = server_reads(raw) - before - 1  # minus the second INFO
    finally:
        raw.close()
    assert reads == 20


async def test_an_encrypted_chain_verifies_without_the_key(
    backend: Backend, namespace: str
) -> None:
    sealed = AsyncStore(
        backend.async_client(),
        namespace=namespace,
        codec=EncryptedCodec({"k1": os.urandom(32)}, primary="k1"),
    )
    blind = AsyncStore(backend.async_client(), namespace=namespace)
    try:
        await appended(sealed)
        raw = entries(backend, sealed.keys.events("t1"))
        magic = b"E1b:k1:" if backend.rest else b"E1:k1:"  # base64 over a REST API
        assert all(fields[b"p"].startswith(magic) for _, fields in raw)
        assert b"ann" not in b"".join(fields[b"p"] for _, fields in raw)
        check = await blind.events.verify("t1")  # hashes bytes: no key needed
        assert check.ok and check.count == 5
        assert (await sealed.events.fold("t1"))["name"] == "ann"
    finally:
        await sealed.aclose()
        await blind.aclose()


# -- bad input and leases ------------------------------------------------------------------


async def test_bad_input_is_refused_and_writes_nothing(store: AsyncStore, backend: Backend) -> None:
    await store.events.append("t1", "ok", 1)
    before = entries(backend, store.keys.events("t1"))
    with pytest.raises(ValueError, match="event type 'bad type' must be 1-64 chars"):
        await store.events.append("t1", "bad type", 1)
    with pytest.raises(ValueError, match="must be 1-64 chars"):
        await store.events.append("t1", "x" * 65, 1)
    with pytest.raises(InvalidId):
        await store.events.append("", "ok", 1)
    with pytest.raises(StateTooLarge):
        await store.events.append("t1", "ok", "x" * (2 * 1024 * 1024))
    with pytest.raises(TypeError):
        await store.events.append("t1", "ok", object())
    assert entries(backend, store.keys.events("t1")) == before


async def test_a_guarded_append_needs_the_lease(store: AsyncStore, backend: Backend) -> None:
    lease = await store.lock("t1", ttl=30, renew=False).acquire()
    event = await store.events.append("t1", "step", {"n": 1}, lease=lease)
    assert event.seq == 1
    await lease.release()
    taken = await store.lock("t1", ttl=30, renew=False).acquire()
    with pytest.raises(LockLost):
        await store.events.append("t1", "step", {"n": 2}, lease=lease)
    assert len(entries(backend, store.keys.events("t1"))) == 1
    await taken.release()


# -- tampering -----------------------------------------------------------------------------


def _remove(at: int) -> Callable[[Entries], Entries]:
    return lambda es: es[:at] + es[at + 1 :]


def _swap(es: Entries) -> Entries:
    """Events 2 and 3 change places; the ids stay increasing."""
    return [es[0], (es[1][0], es[2][1]), (es[2][0], es[1][1]), *es[3:]]


def _edit(field: bytes, value: bytes, redigest: bool = False) -> Callable[[Entries], Entries]:
    def edit(es: Entries) -> Entries:
        eid, fields = es[2]
        fields = {**fields, field: value}
        if redigest:  # a forger who recomputes this event's digest too
            fields[b"d"] = digest_of(
                fields[b"prev"].decode(),
                int(fields[b"n"]),
                fields[b"t"].decode(),
                int(fields[b"s"]),
                int(fields[b"at"]),
                fields[b"p"],
            ).encode()
        return [*es[:2], (eid, fields), *es[3:]]

    return edit


def _insert(es: Entries) -> Entries:
    """A copy of event 3 with another payload after it (ids renumbered to make room)."""
    forged = {**es[2][1], b"p": b'{"tool":"transfer"}'}
    fields = [f for _, f in es[:3]] + [forged] + [f for _, f in es[3:]]
    return [(f"1-{i}".encode(), f) for i, f in enumerate(fields, 1)]


TAMPERING: dict[str, tuple[Callable[[Entries], Entries], int]] = {
    # case -> (what is done to the stream, index of the first event verify must name)
    "remove the first event": (_remove(0), 0),
    "remove a middle event": (_remove(2), 2),
    "reorder two events": (_swap, 1),
    "edit a payload": (_edit(b"p", b'{"tool":"transfer"}'), 2),
    "edit a payload and its digest": (_edit(b"p", b'{"tool":"transfer"}', redigest=True), 3),
    "edit the type": (_edit(b"t", b"updated"), 2),
    "edit the time": (_edit(b"at", b"1000000000000"), 2),
    "edit the position": (_edit(b"n", b"7"), 2),
    "edit the digest": (_edit(b"d", b"0" * 64), 2),
    "drop a field": (lambda es: [*es[:2], (es[2][0], {**es[2][1]} | {b"n": b""}), *es[3:]], 2),
    "insert a forged event": (_insert, 3),
}


@pytest.mark.parametrize("case", sorted(TAMPERING))
async def test_tampering_is_detected_where_it_happened(
    store: AsyncStore, backend: Backend, case: str
) -> None:
    await appended(store)
    key = store.keys.events("t1")
    original = entries(backend, key)
    change, bad = TAMPERING[case]
    changed = change(original)
    rebuild(backend, key, changed)
    check = await store.events.verify("t1")
    assert not check.ok, case
    assert check.first_bad == changed[bad][0].decode(), (case, check.problems)
    assert check.count == len(changed) and check.problems


async def test_a_verified_chain_still_verifies_after_a_rebuild_of_the_same_entries(
    store: AsyncStore, backend: Backend
) -> None:
    """The control for the tampering cases: rebuilding changes nothing by itself."""
    await appended(store)
    key = store.keys.events("t1")
    rebuild(backend, key, entries(backend, key))
    assert (await store.events.verify("t1")).ok


# -- retention -----------------------------------------------------------------------------


async def test_trim_keeps_the_chain_verifiable_and_the_fold_complete(
    store: AsyncStore, backend: Backend
) -> None:
    events = await appended(store)
    full = await store.events.fold("t1")
    assert await store.events.trim("t1", keep=2) == 3
    assert await store.events.read("t1") == events[3:]
    check = await store.events.verify("t1")
    assert check.ok and check.count == 2
    assert await store.events.fold("t1") == full  # from the anchor's state on
    with pytest.raises(ValueError, match="were trimmed"):
        await store.events.fold("t1", until=events[1].id)
    more = await store.events.append("t1", "updated", {"plan": "team"})
    assert more.seq == 6 and more.prev == events[4].digest
    assert await store.events.trim("t1", older_than=0) == 3  # everything, even the new one
    assert await store.events.read("t1") == []
    after = await store.events.append("t1", "updated", {"n": 1})
    assert after.seq == 7 and after.prev == more.digest  # continues from the anchor
    assert (await store.events.verify("t1")).ok
    assert await store.events.fold("t1") == {**full, "plan": "team", "n": 1}
    raw = backend.raw()
    try:
        anchor_key = store.keys.events_anchor("t1")
        assert raw.hget(anchor_key, "removed") == b"6"
        for field, value in (("digest", "0" * 64), ("state", '{"admin":true}')):
            saved = raw.hget(anchor_key, field)
            raw.hset(anchor_key, field, value)  # the anchor edited: caught at the anchor
            check = await store.events.verify("t1")
            assert not check.ok and check.first_bad == "anchor", field
            assert "does not match its state digest" in check.problems[0]
            raw.hset(anchor_key, field, saved)
    finally:
        raw.close()
    assert (await store.events.verify("t1")).ok


@pytest.mark.parametrize("redigest", [False, True])
async def test_trim_refuses_to_erase_tampered_events(
    store: AsyncStore, backend: Backend, redigest: bool
) -> None:
    """Also when the edited event is the last one to go and its digest was recomputed:
    only its link to the next, kept event shows the edit."""
    await appended(store)
    key = store.keys.events("t1")
    changed = _edit(b"p", b'{"tool":"transfer"}', redigest)(entries(backend, key))
    rebuild(backend, key, changed)
    with pytest.raises(IntegrityError, match="do not verify"):
        await store.events.trim("t1", keep=2)  # removes events 1-3, the edited one last
    assert entries(backend, key) == changed  # nothing removed


async def test_trim_arguments_are_checked_first(store: AsyncStore, backend: Backend) -> None:
    await appended(store)
    before = entries(backend, store.keys.events("t1"))
    for kwargs in ({}, {"keep": 1, "older_than": 1}, {"keep": -1}, {"older_than": "1h"}):
        with pytest.raises(ValueError):
            await store.events.trim("t1", **kwargs)
    assert entries(backend, store.keys.events("t1")) == before
    assert await store.events.trim("t1", keep=10) == 0
    assert await store.events.trim("nobody", keep=0) == 0


async def test_concurrent_trims_remove_each_event_once(store: AsyncStore) -> None:
    for i in range(12):
        await store.events.append("t1", "updated", {f"k{i}": i})
    removed: list[int] = []

    def trimmer() -> Callable[[], Any]:
        async def run() -> None:
            removed.append(await store.events.trim("t1", keep=4))

        return run

    handles = [async_spawn(trimmer(), f"trim-{n}") for n in range(3)]
    for handle in handles:
        await async_join(handle)
    assert sum(removed) == 8
    check = await store.events.verify("t1")
    assert check.ok and check.count == 4
    assert len(await store.events.fold("t1")) == 12


# -- rewriting (rotate-keys, migrate) ------------------------------------------------------


def _reencrypt(codec: EncryptedCodec, key: str) -> Callable[[int, bytes], Any]:
    aad = key.encode()

    def payload(schema: int, data: bytes) -> tuple[int, bytes] | None:
        if codec.current(data):
            return None
        return schema, codec.encode(codec.decode(data, aad), aad)

    return payload


async def test_a_rewrite_reencrypts_and_recomputes_the_chain(
    backend: Backend, namespace: str
) -> None:
    k1, k2 = os.urandom(32), os.urandom(32)
    old = AsyncStore(
        backend.async_client(), namespace=namespace, codec=EncryptedCodec({"k1": k1}, "k1")
    )
    both = EncryptedCodec({"k2": k2, "k1": k1}, "k2")
    rotating = AsyncStore(backend.async_client(), namespace=namespace, codec=both)
    only_new = AsyncStore(
        backend.async_client(), namespace=namespace, codec=EncryptedCodec({"k2": k2}, "k2")
    )
    try:
        events = await appended(old)
        await old.events.append("t1", "updated", {"plan": "team"})
        assert await old.events.trim("t1", keep=3) == 3  # an anchor, encrypted with k1
        before = await old.events.read("t1")
        folded = await old.events.fold("t1")
        key = old.keys.events("t1")
        reencrypt = _reencrypt(cast(EncryptedCodec, rotating.codec), key)  # text over REST

        def anchor(data: bytes) -> bytes | None:
            fresh = reencrypt(0, data)
            return None if fresh is None else fresh[1]

        assert await rotating.events.rewrite("t1", reencrypt, anchor) == 4  # 3 + the anchor
        raw = entries(backend, key)
        magic = b"E1b:k2:" if backend.rest else b"E1:k2:"
        assert all(fields[b"p"].startswith(magic) for _, fields in raw)
        after = await only_new.events.read("t1")  # k1 is no longer needed
        assert [(e.id, e.type, e.payload, e.at, e.seq) for e in after] == [
            (e.id, e.type, e.payload, e.at, e.seq) for e in before
        ]
        assert after[0].prev == before[0].prev == events[2].digest  # from the anchor on
        assert all(a.digest != b.digest for a, b in zip(after, before, strict=True))
        assert (await only_new.events.verify("t1")).ok
        assert await only_new.events.fold("t1") == folded
        assert await rotating.events.rewrite("t1", reencrypt, anchor) == 0  # all current
        # Appenders continue the new chain, also one that remembered the old end.
        assert (await old.events.append("t1", "ok", 1)).prev == after[-1].digest
        assert (await only_new.events.verify("t1")).ok
    finally:
        for s in (old, rotating, only_new):
            await s.aclose()


async def test_a_rewrite_refuses_a_chain_that_does_not_verify(
    store: AsyncStore, backend: Backend
) -> None:
    await appended(store)
    key = store.keys.events("t1")
    tampered = _edit(b"p", b'{"tool":"transfer"}', redigest=True)(entries(backend, key))
    rebuild(backend, key, tampered)

    def bump(schema: int, data: bytes) -> tuple[int, bytes]:
        return schema, data + b" "

    with pytest.raises(IntegrityError, match="do not verify"):
        await store.events.rewrite("t1", bump)  # would launder the forgery
    assert entries(backend, key) == tampered
    assert not (await store.events.verify("t1")).ok


async def test_a_rewrite_gives_way_to_an_append_made_meanwhile(
    store: AsyncStore, backend: Backend
) -> None:
    await appended(store)
    key = store.keys.events("t1")
    raw = backend.raw()
    try:
        appends: list[Any] = []

        def bump(schema: int, data: bytes) -> tuple[int, bytes]:
            if not appends:  # another writer appends while the new chain is computed
                appends.append(raw.xadd(key, {b"n": b"6"}))
            return schema, data

        with pytest.raises(ConflictError):
            await store.events.rewrite("t1", bump)
        assert raw.exists(store.keys.events_staging("t1")) == 0
        assert len(entries(backend, key)) == 6  # the original five and the append
    finally:
        raw.close()


HEX = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("link", "ok"),
    [
        (HEX, True),
        ("k" * 32 + ":" + HEX, True),  # a seal: key id, HMAC
        ("k-1_A:" + HEX, True),
        (HEX[:63], False),
        (HEX + "0", False),
        (HEX.upper(), False),
        (HEX[:63] + "g", False),
        ("k" * 33 + ":" + HEX, False),  # key id too long
        (":" + HEX, False),  # no key id
        ("k.1:" + HEX, False),
        ("k:" + HEX + ":", False),
        ("k:" + HEX[:63], False),
        ("k:k:" + HEX, False),
    ],
)
async def test_event_append_checks_each_chain_link_whole(
    store: AsyncStore, backend: Backend, link: str, ok: bool
) -> None:
    """A digest is 64 lowercase hex digits, a seal a 1-32 character key id, ":" and
    one; anything else is refused before anything is written."""
    key = store.keys.events("t1")
    keys = (key, store.keys.events_anchor("t1"), store.keys.lock("t1"), store.keys.writes(key))
    args = ("", 1, "note", 1, 1, b"{}", link, "", "w1", 0)
    if ok:
        reply = await store.events._conn.script(script("event_append"), keys, args)
        assert int(reply[0]) == 1 and backend.raw().xlen(key) == 1
        again = (link, 2, "note", 1, 1, b"{}", HEX, "", "w2", 0)  # the link as prev
        assert int((await store.events._conn.script(script("event_append"), keys, again))[0]) == 1
    else:
        with pytest.raises(RedistateError, match="RSARG"):
            await store.events._conn.script(script("event_append"), keys, args)
        with pytest.raises(RedistateError, match="RSARG"):
            await store.events._conn.script(
                script("event_append"), keys, (link, 1, "note", 1, 1, b"{}", HEX, "", "w1", 0)
            )
        assert backend.raw().exists(key) == 0
