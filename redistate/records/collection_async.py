"""Versioned records over one Redis string per id (async source of truth)."""

from __future__ import annotations

import inspect
import logging
import warnings
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..core import telemetry
from ..core._backoff import backoff_delay
from ..core._io import async_resolve, async_sleep
from ..core.batching import Call, Prepared
from ..core.connection_async import AsyncConnection
from ..core.durability import Durability
from ..core.errors import ConflictError, InvalidId, RedistateError, RedistateWarning
from ..core.keys import KeySpace
from ..core.scripts import script
from .mergepatch import merge_patch
from .spec import (
    DEFAULT,
    TTL,
    Compaction,
    Record,
    RecordCompactReply,
    RecordDeleteArgs,
    RecordDeleteReply,
    RecordMergeReply,
    RecordPutReply,
    RecordSpec,
    RecordTouchArgs,
    RecordTouchReply,
    check_attempts,
    check_updated,
    check_version,
    new_write_id,
    ttl_seconds,
)

if TYPE_CHECKING:
    from .erasure import ErasureReport

__all__ = ["AsyncCollection", "AsyncUsers", "register"]

_log = logging.getLogger("redistate")

# Rounds of erasure before giving up on a user whose agents keep writing.
_ERASE_ROUNDS = 100

# Seconds a compaction may spend retrying: the merge is done, so it must not keep the
# caller waiting through an outage.
_COMPACT_BUDGET = 0.5

_PUT = script("record_put").replying(RecordPutReply.parse)
_TOUCH = script("record_touch").replying(RecordTouchReply.parse)
_DELETE = script("record_delete").replying(RecordDeleteReply.parse)
_MERGE = script("record_merge").replying(RecordMergeReply.parse)
_COMPACT = script("record_compact").replying(RecordCompactReply.parse)


class AsyncCollection:
    """Records of one kind: ``store.sessions``, ``store.users``, ``store.collection(...)``.

    TTLs: ``put`` sets the collection's TTL unless ``ttl=`` says otherwise; ``update``
    and ``merge`` keep the record's own TTL (the collection's when they create it);
    ``touch`` and ``get(touch=True)`` reset it to ``ttl=`` or the collection's TTL.
    ``ttl=None`` always means "never expires".
    """

    __slots__ = ("_conn", "attempts", "spec")

    def __init__(self, conn: AsyncConnection, spec: RecordSpec, *, attempts: int = 100) -> None:
        self._conn = conn
        self.spec = spec
        self.attempts = check_attempts(attempts)

    @property
    def name(self) -> str:
        """The key kind: ``session``, ``user`` or the collection's name."""
        return self.spec.kind

    async def get(
        self, id: str, *, touch: bool = False, ttl: TTL = DEFAULT, lease: Any = None
    ) -> Record | None:
        """The record, or None. A GET; with ``touch=True`` one script that also resets
        the TTL (sliding expiry).

        Raises:
            IntegrityError: the key holds something that is not a record.
            CodecError: the stored payload cannot be decoded.
        """
        with telemetry.operation("get", self.spec.kind, self.spec.keys.namespace, id):
            key = self.spec.key(id)
            if not touch:
                return self.spec.record(id, key, await self._conn.get(key))
            keys, guard = self.spec.guarded_keys(id, key, lease)
            args = RecordTouchArgs(self.spec.touch_ttl(ttl), True, guard)
            reply = await self._conn.script(_TOUCH, keys, args.argv(), lease=lease)
            return self.spec.touched(id, key, reply)

    async def get_many(self, ids: Iterable[str]) -> dict[str, Record | None]:
        """Each record (None where there is none), keyed by id in the order given: one
        round trip (one per node on a cluster), not one per id.

        Raises:
            InvalidId: a malformed id (before anything is read).
            IntegrityError: a key holds something that is not a record.
            CodecError: a stored payload cannot be decoded.
            TypeError: ``ids`` is a single str.
        """
        with telemetry.operation("get_many", self.spec.kind, self.spec.keys.namespace, None):
            if isinstance(ids, (str, bytes)):
                raise TypeError(f"ids must be an iterable of ids, not one {type(ids).__name__}")
            wanted = {id: self.spec.key(id) for id in ids}
            raw = await self._conn.gets(list(wanted.values()))
            return {
                id: self.spec.record(id, key, value)
                for (id, key), value in zip(wanted.items(), raw, strict=True)
            }

    async def put(
        self,
        id: str,
        data: Any,
        *,
        ttl: TTL = DEFAULT,
        if_version: int | None = None,
        lease: Any = None,
        durability: Durability | None = None,
        user: str | None = None,
    ) -> Record:
        """Write ``data`` and its TTL in one step (one script call).

        ``if_version=N`` writes only if the current version is N; 0 means create-only.
        ``lease=`` (a lease named ``id``) makes it a guarded write: refused with
        LockLost, in the same step, unless the lease still holds the lock.
        ``durability="replicated"`` returns only once a replica has the write (the
        store's setting by default; see redistate.core.durability).
        ``user=`` registers the record to that user first (one more round trip), so
        ``store.users.erase(user)`` deletes it (see redistate.records.erasure).
        The returned Record holds ``data`` as passed; ``get`` returns it decoded.

        Raises:
            ConflictError: the current version is not ``if_version``.
            StateTooLarge: the encoded value is over the collection's ``max_bytes``.
            CodecError: ``data`` is not JSON-serializable.
            LockLost: ``lease`` no longer holds the lock.
            NotReplicated: no replica confirmed a replicated write in time.
        """
        with telemetry.operation("put", self.spec.kind, self.spec.keys.namespace, id):
            key = self.spec.key(id)
            expected = None if if_version is None else check_version(if_version)
            ttl_ms, keep = self.spec.write_ttl(ttl, keep_default=False)
            replicas = self._conn.replicas(durability)
            return await self._put(id, key, data, expected, ttl_ms, keep, lease, replicas, user)

    async def _put(
        self,
        id: str,
        key: str,
        data: Any,
        expected: int | None,
        ttl_ms: int,
        keep: bool,
        lease: Any,
        replicas: int = 0,
        user: str | None = None,
    ) -> Record:
        prepared = self._put_call(id, key, data, expected, ttl_ms, keep, lease)
        if user is not None:  # after every check: bad input registers nothing
            from .erasure import entry  # erasure loads on first use: not a cold start's

            await register(self._conn, self.spec.keys, user, entry(self.spec.kind, id))
        return prepared.finish(await self._send(prepared, replicas))  # type: ignore[no-any-return]

    async def _send(self, prepared: Prepared, replicas: int) -> Any:
        """The reply of a prepared write sent alone."""
        run, keys, args, wid, lease = prepared.call
        return await self._conn.script(run, keys, args, replicas=replicas, lease=lease, wid=wid)

    def _put_call(
        self,
        id: str,
        key: str,
        data: Any,
        expected: int | None,
        ttl_ms: int,
        keep: bool,
        lease: Any,
    ) -> Prepared:
        """A put checked and encoded (the single call and a batch send it)."""
        keys, guard = self.spec.guarded_keys(id, key, lease)
        payload = self.spec.encode(key, data)
        wid = new_write_id()
        args = self.spec.put_args(
            expected,
            ttl_ms,
            wid,
            payload,
            keep=keep,
            lease=guard,
            memory_ms=self._conn.memory_ms,
            key=key,
        )

        def finish(reply: RecordPutReply) -> Record:
            return self.spec.written(id, key, data, expected, reply, ttl_ms, keep)

        return Prepared("put", Call(_PUT, keys, args.argv(), wid, lease), finish)

    def _prepare_put(
        self, id: str, data: Any, ttl: TTL, if_version: int | None, lease: Any
    ) -> Prepared:
        """:meth:`put`'s checks and call, for a batch."""
        key = self.spec.key(id)
        expected = None if if_version is None else check_version(if_version)
        ttl_ms, keep = self.spec.write_ttl(ttl, keep_default=False)
        return self._put_call(id, key, data, expected, ttl_ms, keep, lease)

    async def update(
        self,
        id: str,
        fn: Callable[[Any], Any],
        *,
        ttl: TTL = DEFAULT,
        attempts: int | None = None,
        lease: Any = None,
        durability: Durability | None = None,
    ) -> Record:
        """Read, apply ``fn`` to the data ({} if absent) and write the result back if
        nobody wrote in between; on conflict, retry with jittered backoff. ``fn`` may
        run several times, so it must not have side effects. Where the store is
        asynchronous, ``fn`` may be a coroutine function.

        Raises:
            ConflictError: still conflicting after ``attempts`` tries.
            StateTooLarge, CodecError: as for :meth:`put`; nothing is written.
            TypeError: ``fn`` returned None (``lambda d: d.update(...)`` does); nothing
                is written (``put(id, None)`` stores null on purpose).
        """
        with telemetry.operation("update", self.spec.kind, self.spec.keys.namespace, id):
            return await self._update(id, fn, ttl, attempts, lease, durability, user_fn=True)

    async def _update(
        self,
        id: str,
        fn: Callable[[Any], Any],
        ttl: TTL,
        attempts: int | None,
        lease: Any,
        durability: Durability | None,
        *,
        user_fn: bool,
    ) -> Record:
        key = self.spec.key(id)
        ttl_ms, keep = self.spec.write_ttl(ttl, keep_default=True)
        limit = self.attempts if attempts is None else check_attempts(attempts)
        replicas = self._conn.replicas(durability)
        for attempt in range(limit):
            current = self.spec.record(id, key, await self._conn.get(key))
            expected = 0 if current is None else current.version
            with telemetry.caller():  # what fn does is its own operations
                data = fn({} if current is None else current.data)
                if inspect.isawaitable(data):
                    data = await async_resolve(data)
            if user_fn:  # a merge's own fallback may fold a null patch into null
                check_updated(fn, data, key)
            try:
                return await self._put(id, key, data, expected, ttl_ms, keep, lease, replicas)
            except ConflictError:
                if attempt + 1 >= limit:
                    raise
            telemetry.note(telemetry.UPDATE_RETRIES)
            await async_sleep(backoff_delay(attempt))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def merge(
        self,
        id: str,
        patch: Any,
        *,
        ttl: TTL = DEFAULT,
        lease: Any = None,
        durability: Durability | None = None,
        returning: bool = True,
    ) -> Record:
        """Apply an RFC 7386 merge patch atomically: no concurrent update is lost.

        One round trip, even under contention: the script appends the encoded patch to
        the record without reading its JSON, so merges never conflict; readers fold the
        patches, and every few merges the merging client folds them back into the record
        (one more round trip; see redistate.records.mergelog). When the stored patches would pass
        ``max_bytes``, the merge is a compare-and-set instead (GET, merge in Python,
        write), which checks the merged record against ``max_bytes``.
        The returned Record holds the data right after this merge. With
        ``returning=False`` its ``data`` is None (version and expiry are the merge's):
        the reply is then a few bytes however large the record, and the client
        decodes nothing: a merge into a 100 KB profile costs 1.4x one into a 1 KB one
        (3.8x returning the value; one merge in 16, by chance, reads the record to fold
        its patches back). A merge whose reply
        was lost and that was sent again (see RELIABILITY.md) is applied once; the
        resend returns the record as it is now, with ``data=None`` if it has been
        deleted or has expired since.

        Raises:
            ConflictError: (compare-and-set only) still conflicting after ``attempts``.
            StateTooLarge: the patch, or the merged record, is over ``max_bytes``;
                nothing is written. CodecError: as for :meth:`put`.
            LockLost: ``lease`` no longer holds the lock.
        """
        with telemetry.operation("merge", self.spec.kind, self.spec.keys.namespace, id):
            replicas = self._conn.replicas(durability)
            prepared = self._prepare_merge(id, patch, ttl, lease, returning, durability)
            return await prepared.finish(await self._send(prepared, replicas))  # type: ignore[no-any-return]

    def _prepare_merge(
        self,
        id: str,
        patch: Any,
        ttl: TTL,
        lease: Any,
        returning: bool,
        durability: Durability | None,
    ) -> Prepared:
        """:meth:`merge`'s checks and call; its finish folds back or falls back (I/O)."""
        key = self.spec.key(id)
        ttl_ms, keep = self.spec.write_ttl(ttl, keep_default=True)
        keys, guard = self.spec.guarded_keys(id, key, lease)
        payload = self.spec.encode(key, patch)
        wid = new_write_id()
        args = self.spec.merge_args(
            key,
            payload,
            ttl_ms,
            wid,
            keep=keep,
            lease=guard,
            memory_ms=self._conn.memory_ms,
            brief=not returning,
        )

        async def finish(reply: RecordMergeReply) -> Record:
            return await self._merged(
                id, key, payload, reply, wid, ttl, lease, durability, returning
            )

        return Prepared("merge", Call(_MERGE, keys, args.argv(), wid, lease), finish)

    async def _merged(
        self,
        id: str,
        key: str,
        payload: bytes,
        reply: RecordMergeReply,
        wid: str,
        ttl: TTL,
        lease: Any,
        durability: Durability | None,
        returning: bool,
    ) -> Record:
        merged = self.spec.merged(id, key, reply)
        if merged is None:
            normalized = self.spec.codec.decode(payload, key.encode("utf-8"))
            return await self._update(
                id,
                lambda data: merge_patch(data, normalized),
                ttl,
                None,
                lease,
                durability,
                user_fn=False,
            )
        if merged.compact is not None:
            await self._compact(key, merged.compact, wid)
        elif merged.refold:
            await self._refold(key, wid)
        if not returning and merged.record.data is not None:
            return replace(merged.record, data=None)  # a recognised resend read it
        return merged.record

    async def _refold(self, key: str, wid: str) -> None:
        """A brief merge's turn to fold the record's patches back: read it, then as
        :meth:`_compact` (a failure is not the merge's)."""
        try:
            raw = await self._conn.get(key)
        except RedistateError:
            return
        if raw is None or not raw.startswith(b"M1,"):
            return  # gone, or folded back meanwhile
        try:
            compact = self.spec.compaction(key, raw)
        except RedistateError:
            return  # damaged or foreign: whoever reads it is told
        await self._compact(key, compact, wid)

    async def _compact(self, key: str, compact: Compaction, wid: str) -> None:
        """Fold the record's patches back (one script; it keeps what was appended since).
        Only a representation change: its failure is not the merge's, and a later due
        merge tries again. The folded record is named by ``wid``, the id of the merge
        that asked for it, which that merge's memory entry already holds: a later
        write replacing it leaves nothing new to remember. Unless the value read is
        already named by ``wid`` (that merge made the record patched): a fresh id
        then, or a resent fold would find the value unchanged and fold it again."""
        if compact.tail.endswith(b"," + wid.encode() + b"\n"):
            wid = new_write_id()
        args = self.spec.compact_args(key, compact, wid, self._conn.memory_ms)
        if args is None:
            return
        keys = self.spec.compact_keys(key)
        try:
            await self._conn.script(_COMPACT, keys, args.argv(), budget=_COMPACT_BUDGET)
        except RedistateError:
            # Unreachable, full (maxmemory) or anything else: raising here would tell the
            # caller that an applied merge failed, and a retry would apply it twice.
            pass

    async def upgrade(self, id: str, *, lease: Any = None) -> bool:
        """Write the record back at the schema this code writes (``store.migrations``),
        if it is stored at an older one: a compare-and-set of the migrated data that
        keeps its TTL. True if it was rewritten, False if already current or absent.

        Raises:
            SchemaError: the record is newer than this code knows.
        """
        with telemetry.operation("upgrade", self.spec.kind, self.spec.keys.namespace, id):
            key = self.spec.key(id)
            for attempt in range(self.attempts):
                raw = await self._conn.get(key)
                if raw is None or not self.spec.outdated(key, raw):
                    return False  # gone (never brought back) or brought up to date meanwhile
                current = self.spec.record(id, key, raw)
                assert current is not None  # raw is not None
                try:
                    await self._put(id, key, current.data, current.version, 0, True, lease)
                    return True
                except ConflictError:
                    await async_sleep(backoff_delay(attempt))
            raise ConflictError(key, -1, -1)

    async def touch(self, id: str, *, ttl: TTL = DEFAULT, lease: Any = None) -> bool:
        """Reset the TTL to ``ttl`` or the collection's (``None`` removes it); one script.
        False if there is no such record."""
        with telemetry.operation("touch", self.spec.kind, self.spec.keys.namespace, id):
            key = self.spec.key(id)
            keys, guard = self.spec.guarded_keys(id, key, lease)
            args = RecordTouchArgs(self.spec.touch_ttl(ttl), False, guard)
            reply = await self._conn.script(_TOUCH, keys, args.argv(), lease=lease)
            return reply.found

    async def delete(
        self,
        id: str,
        *,
        if_version: int | None = None,
        lease: Any = None,
        durability: Durability | None = None,
    ) -> bool:
        """Delete; True if it existed (one script: a resent delete reports what the
        first send did).

        Raises:
            ConflictError: the current version is not ``if_version``.
        """
        with telemetry.operation("delete", self.spec.kind, self.spec.keys.namespace, id):
            replicas = self._conn.replicas(durability)
            prepared = self._prepare_delete(id, if_version, lease)
            return prepared.finish(await self._send(prepared, replicas))  # type: ignore[no-any-return]

    def _prepare_delete(self, id: str, if_version: int | None, lease: Any) -> Prepared:
        """:meth:`delete`'s checks and call, for a batch."""
        key = self.spec.key(id)
        expected = None if if_version is None else check_version(if_version, allow_zero=False)
        keys, guard = self.spec.guarded_keys(id, key, lease)
        wid = new_write_id()
        args = RecordDeleteArgs(expected, guard, wid, self._conn.memory_ms)

        def finish(reply: RecordDeleteReply) -> bool:
            return self.spec.deleted(key, expected, reply)

        return Prepared("delete", Call(_DELETE, keys, args.argv(), wid, lease), finish)

    async def ttl(self, id: str) -> float | None:
        """Seconds left (PTTL): None if absent, ``math.inf`` if it never expires."""
        with telemetry.operation("ttl", self.spec.kind, self.spec.keys.namespace, id):
            return ttl_seconds(await self._conn.pttl(self.spec.key(id)))

    async def ids(self) -> AsyncIterator[str]:
        """Every id in the collection (SCAN, never KEYS). Like SCAN, an id may be
        reported twice if the keyspace is rehashed during the scan."""
        keys, kind = self.spec.keys, self.spec.kind
        traced = ("ids", kind, keys.namespace)
        async for key in self._conn.scan(keys.record_pattern(kind), traced=traced):
            try:
                yield keys.record_id(self.spec.kind, key)
            except InvalidId:
                continue  # a foreign key that only looks like ours


async def register(conn: AsyncConnection, keys: KeySpace, user: str, item: str) -> None:
    """Add ``item`` to ``user``'s index (before the write it registers)."""
    await conn.idempotent("SADD", keys.user_index(user), item)


class AsyncUsers(AsyncCollection):
    """``store.users``: user records, and erasure of everything registered to a user."""

    __slots__ = ()

    async def erase(self, user: str) -> ErasureReport:
        """Delete everything registered to ``user`` (``user=`` on their writes: every
        kind of redistate.core.kinds with ``registered``), then the profile and the index;
        report what was there. Not one atomic step on a cluster: see redistate.records.erasure.

        Raises:
            InvalidId: a malformed user id (nothing deleted).
            IntegrityError: an index entry redistate did not write (nothing of it
                deleted, the entry left on the index).
        """
        from .erasure import ErasureReport, entity_keys  # loads on first use

        with telemetry.operation("erase", self.spec.kind, self.spec.keys.namespace, user):
            keys = self.spec.keys
            profile = self.spec.key(user)
            index = keys.user_index(user)
            report = ErasureReport(user)
            for _ in range(_ERASE_ROUNDS):  # again until empty: what was registered meanwhile
                members = await self._conn.idempotent("SMEMBERS", index)
                todo = sorted(m.decode() if isinstance(m, bytes) else m for m in members)
                if not todo:
                    break
                for item in todo:
                    data, memory = entity_keys(keys, item)
                    # Off the index first: a write registering it again after this is seen
                    # by the next round (its SADD comes before its data).
                    await self._conn.idempotent("SREM", index, item)
                    try:
                        existed = int(await self._conn.idempotent("DEL", *data))
                        if memory:
                            await self._conn.idempotent("DEL", *memory)
                    except BaseException:  # any failure, a cancellation too
                        await _put_back(self._conn, index, item)
                        raise
                    report.note(item, existed > 0)
            else:
                raise RedistateError(
                    f"{user!r} still had data registered after {_ERASE_ROUNDS} rounds of "
                    f"erasure: stop the agents writing for it, then erase again"
                )
            report.profile = int(await self._conn.idempotent("DEL", profile)) > 0
            await self._conn.idempotent("DEL", keys.writes(profile), index)
            return report


async def _put_back(conn: AsyncConnection, index: str, item: str) -> None:
    """Put ``item`` back on the index after its deletion failed, or a later erase would
    never find the data; if that fails too, log what is no longer indexed."""
    try:
        await conn.idempotent("SADD", index, item)
    except Exception as exc:  # a cancellation of the put-back itself goes on up
        message = (
            f"erase: {item!r} could not be put back on {index!r} ({exc!r}): its data may "
            "remain unindexed; SADD it there and erase again"
        )
        # Data left behind: a warning too, seen where the application set up no logging.
        _log.error(message, extra={"redistate_event": "erase_unindexed", "redistate_key": index})
        warnings.warn(message, RedistateWarning, stacklevel=2)
