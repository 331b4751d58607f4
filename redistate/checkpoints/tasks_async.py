"""Task checkpoints: capped history, integrity, recovery (async source of truth)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from ..core import telemetry
from ..core._translate import translate
from ..core.batching import Call, Prepared, pairs
from ..core.connection_async import AsyncConnection
from ..core.durability import Durability
from ..core.errors import ConflictError
from ..core.kinds import TASK_KEY
from ..core.scripts import script
from ..records.collection_async import register
from ..records.erasure import entry
from ..records.spec import DEFAULT, TTL, Default
from ..steps.spec import Step, StepRecordArgs, StepRecordReply, StepSpec
from .spec import (
    Checkpoint,
    CheckpointDeleteArgs,
    CheckpointDeleteReply,
    CheckpointFindArgs,
    CheckpointFindReply,
    CheckpointLogReply,
    CheckpointSaveReply,
    CheckpointSpec,
    LogStatus,
    Restored,
    SaveStatus,
    Verification,
    check_id,
    handoff,
    new_checkpoint_id,
)

__all__ = ["AsyncCheckpoints"]

_log = logging.getLogger("redistate")

_SAVE = script("checkpoint_save").replying(CheckpointSaveReply.parse)
_LOG = script("checkpoint_log").replying(CheckpointLogReply.parse)
_FIND = script("checkpoint_find").replying(CheckpointFindReply.parse)
_DELETE = script("checkpoint_delete").replying(CheckpointDeleteReply.parse)
_STEP = script("step_record").replying(StepRecordReply.parse)
_SEAL_ATTEMPTS = 16  # a sealed delta resent for a newer checkpoint, at most this often


class AsyncCheckpoints:
    """``store.checkpoints``: snapshots of a task's state at each milestone.

    Every call is one round trip: a script for writes and lookups by id, MULTI/EXEC
    for reads (``restore`` takes a second one only to fall back past damage). The
    history is capped at ``keep`` checkpoints; ``log`` appends merge patches after the
    newest; ``restore`` rebuilds the state from the newest checkpoint that is intact.
    """

    __slots__ = ("_conn", "_snapshots", "spec", "step_spec")

    def __init__(self, conn: AsyncConnection, spec: CheckpointSpec) -> None:
        self._conn = conn
        self.spec = spec
        self.step_spec = StepSpec(spec.codec, max_bytes=spec.max_bytes, signing=spec.signing)
        # With signing keys, the newest checkpoint of each task this store last saw: a
        # delta is sealed for the checkpoint it follows, in one round trip when known.
        self._snapshots: dict[str, str] = {}

    def _snapshot(self, task_id: str, checkpoint_id: str) -> None:
        if self.spec.signing is None:
            return
        if len(self._snapshots) >= 4096:  # cleared when full: a miss costs one resend
            self._snapshots.clear()
        self._snapshots[task_id] = checkpoint_id

    async def steps(self, task_id: str) -> list[Step]:
        """The task's recorded durable steps (``run.step``), in the order they started:
        status, timing, fence, result or error. One HGETALL.

        Raises:
            IntegrityError: a record is damaged.
        """
        return list((await self._steps(task_id)).values())

    async def _steps(self, task_id: str) -> dict[str, Step]:
        key = self.spec.keys.task_steps(task_id)
        return self.step_spec.steps(key, await self._conn.hgetall(key))

    async def _record_step(
        self, task_id: str, name: str, record: bytes, lease: Any
    ) -> bytes | None:
        """step_record: one guarded script (LockLost once another owner holds the task),
        WAITed for like a save under ``durability="replicated"``. Returns the result
        already recorded for the step (a result is final), or None when written."""
        prepared = self._prepare_step(task_id, name, record, lease)
        replicas = self._conn.replicas(None)
        return prepared.finish(await self._send(prepared, replicas))  # type: ignore[no-any-return]

    def _prepare_step(self, task_id: str, name: str, record: bytes, lease: Any) -> Prepared:
        """step_record's call (the runner and a run's batch send it); its finish
        returns the result recorded before, or None when this one was written."""
        keys, guard = self.spec.guarded_keys(task_id, lease)
        args = StepRecordArgs(name, record, guard, self.spec.ttl_ms).argv()
        step_keys = (keys[5], keys[0], keys[3], keys[2])

        def finish(reply: StepRecordReply) -> bytes | None:
            return reply.existing

        return Prepared("step", Call(_STEP, step_keys, args, None, lease), finish)

    async def save(
        self,
        task_id: str,
        state: Any,
        *,
        phase: str | None = None,
        progress: float | None = None,
        metadata: dict[str, Any] | None = None,
        checkpoint_id: str | None = None,
        keep: int | None = None,
        ttl: TTL = DEFAULT,
        lease: Any = None,
        durability: Durability | None = None,
        user: str | None = None,
    ) -> Checkpoint:
        """Push a checkpoint and trim the history to ``keep``, in one step.

        Saving an id that is already in the history (a retried call) changes nothing
        and returns the stored checkpoint; an id saved within the retry memory and gone
        from the history since (deleted, trimmed) is not saved again either, and comes
        back as sent with ``seq`` 0. With ``lease=`` (a lease named ``task_id``)
        the save is guarded: refused with LockLost, in the same step, unless the lease
        still holds the lock; its fence is recorded in the checkpoint.

        ``keep`` caps the history for this call; ``ttl`` (seconds, or None for no
        expiry) applies to every key of the task, the store's ``task_ttl`` by default.
        ``user=`` registers the task to that user first (one more round trip), so
        ``store.users.erase(user)`` deletes it.

        Raises:
            StateTooLarge: the state's and metadata's JSON are over ``max_bytes``.
            CodecError: the state is not JSON-serializable.
            InvalidId: a malformed task or checkpoint id.
            TypeError, ValueError: a malformed phase, progress, metadata, keep or fence.
            IntegrityError: a resend found the stored checkpoint damaged.
            LockLost: ``lease`` no longer holds the lock.
        """
        with telemetry.operation("save", "task", self.spec.keys.namespace, task_id):
            prepared = self._prepare_save(
                task_id, state, phase, progress, metadata, checkpoint_id, keep, ttl, lease
            )
            replicas = self._conn.replicas(durability)
            if user is not None:
                await register(self._conn, self.spec.keys, user, entry(TASK_KEY, task_id))
            return prepared.finish(await self._send(prepared, replicas))  # type: ignore[no-any-return]

    async def _send(self, prepared: Prepared, replicas: int) -> Any:
        """The reply of a prepared write sent alone."""
        run, keys, args, wid, lease = prepared.call
        return await self._conn.script(run, keys, args, replicas=replicas, lease=lease, wid=wid)

    def _prepare_save(
        self,
        task_id: str,
        state: Any,
        phase: str | None,
        progress: float | None,
        metadata: dict[str, Any] | None,
        checkpoint_id: str | None,
        keep: int | None,
        ttl: TTL,
        lease: Any,
    ) -> Prepared:
        """:meth:`save`'s checks and call (the single call and a batch send it)."""
        keys, guard = self.spec.guarded_keys(task_id, lease)
        cid = new_checkpoint_id() if checkpoint_id is None else check_id(checkpoint_id)
        blob, digest, stored_meta = self.spec.blob(keys[0], cid, state, phase, progress, metadata)
        fence = getattr(lease, "fence", None) if lease is not None else None
        ttl_ms = self.spec.write_ttl(ttl)
        memory_ms = self._conn.memory_ms
        given = checkpoint_id is not None
        args = self.spec.save_args(cid, blob, keep, ttl_ms, fence, guard, memory_ms, given)
        # Only a generated id is acknowledged: a chosen one may be saved again later.
        wid = None if given else cid

        def finish(reply: CheckpointSaveReply) -> Checkpoint:
            self._snapshot(task_id, cid)
            if reply.status is SaveStatus.SAVED:
                return self.spec.saved(
                    task_id, reply.entry, state, phase, progress, stored_meta, digest
                )
            if reply.status is SaveStatus.GONE:  # resent, and no longer in the history
                return self.spec.saved_earlier(
                    task_id, cid, fence, state, phase, progress, stored_meta, digest
                )
            return self.spec.checkpoint(task_id, keys[0], reply.entry, reply.blob)  # stored

        return Prepared("save", Call(_SAVE, keys, args.argv(), wid, lease), finish)

    async def log(
        self,
        task_id: str,
        delta: Any,
        *,
        delta_id: str | None = None,
        ttl: TTL = DEFAULT,
        lease: Any = None,
        durability: Durability | None = None,
    ) -> int:
        """Append a merge patch (a dict) after the newest checkpoint; returns how many
        the log holds. A resend of a delta (same ``delta_id``) is applied once. The log
        keeps the task's expiry unless ``ttl=`` sets a new one for every key of the task.

        With signing keys the delta is sealed for the newest checkpoint, which the
        script checks: a store that has not seen the task's newest checkpoint is told
        which it is and sends the delta once more.

        Raises:
            RedistateError: the log is full (``max_deltas``): save a checkpoint.
            TypeError: ``delta`` is not a dict.
            LockLost: ``lease`` (a lease named ``task_id``) no longer holds the lock.
            ConflictError: (signing keys) checkpoints kept being saved meanwhile.
        """
        with telemetry.operation("log", "task", self.spec.keys.namespace, task_id):
            keys, guard = self.spec.guarded_keys(task_id, lease)
            did = new_checkpoint_id() if delta_id is None else check_id(delta_id, "delta id")
            wid = did if delta_id is None else None  # a chosen id may come again: not acked
            follow = isinstance(ttl, Default)  # keep the task's current expiry
            ttl_ms = self.spec.write_ttl(ttl)
            replicas = self._conn.replicas(durability)
            snapshot = self._snapshots.get(task_id, "")
            given = delta_id is not None
            for _ in range(_SEAL_ATTEMPTS):
                call = self._log_call(
                    keys, guard, did, delta, ttl_ms, follow, snapshot, given, lease, wid
                )
                reply = await self._conn.script(
                    _LOG, call.keys, call.args, replicas=replicas, lease=lease, wid=wid
                )
                if reply.status is not LogStatus.RESEAL:
                    self._snapshot(task_id, snapshot)
                    return reply.length
                snapshot = reply.snapshot
                if delta_id is None:  # acked as it returned: the next send is a new call
                    did = wid = new_checkpoint_id()
            raise ConflictError(keys[2], -1, -1)

    def _log_call(
        self,
        keys: tuple[str, ...],
        guard: str,
        did: str,
        delta: Any,
        ttl_ms: int,
        follow: bool,
        snapshot: str,
        given: bool,
        lease: Any,
        wid: str | None,
    ) -> Call:
        blob = self.spec.delta_blob(keys[2], did, delta, snapshot)
        memory_ms = self._conn.memory_ms
        args = self.spec.log_args(did, blob, ttl_ms, follow, guard, memory_ms, snapshot, given)
        return Call(_LOG, keys, args.argv(), wid, lease)

    def _prepare_log(
        self,
        task_id: str,
        delta: Any,
        delta_id: str | None,
        ttl: TTL,
        lease: Any,
        durability: Durability | None,
    ) -> Prepared:
        """:meth:`log`'s checks and first call, for a batch; a delta sealed for
        another checkpoint than the newest is sent again alone (signing keys)."""
        keys, guard = self.spec.guarded_keys(task_id, lease)
        did = new_checkpoint_id() if delta_id is None else check_id(delta_id, "delta id")
        wid = did if delta_id is None else None
        follow = isinstance(ttl, Default)
        ttl_ms = self.spec.write_ttl(ttl)
        snapshot = self._snapshots.get(task_id, "")
        given = delta_id is not None
        call = self._log_call(keys, guard, did, delta, ttl_ms, follow, snapshot, given, lease, wid)

        async def finish(reply: CheckpointLogReply) -> int:
            if reply.status is not LogStatus.RESEAL:
                self._snapshot(task_id, snapshot)
                return reply.length
            self._snapshot(task_id, reply.snapshot)  # nothing written: alone, from there
            return await self.log(
                task_id, delta, delta_id=delta_id, ttl=ttl, lease=lease, durability=durability
            )

        return Prepared("log", call, finish)

    async def latest(self, task_id: str) -> Checkpoint | None:
        """The newest checkpoint, or None.

        Raises:
            IntegrityError: it is damaged (``restore()`` falls back to an older one).
        """
        with telemetry.operation("latest", "task", self.spec.keys.namespace, task_id):
            history = await self.history(task_id, limit=1)
            return history[0] if history else None

    async def history(self, task_id: str, limit: int | None = None) -> list[Checkpoint]:
        """Checkpoints newest first, at most ``limit``.

        Raises:
            IntegrityError: one of them is damaged.
        """
        with telemetry.operation("history", "task", self.spec.keys.namespace, task_id):
            keys = self.spec.task_keys(task_id)
            count = 0 if limit is None else limit
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"limit must be an int >= 0 or None, got {limit!r}")
            if limit == 0:
                return []
            return self.spec.history(task_id, keys[0], await self._read(keys, count, deltas=False))

    async def latest_many(self, task_ids: Iterable[str]) -> dict[str, Checkpoint | None]:
        """The newest checkpoint of each task (None for a task without one), keyed by
        task id in the order given: one MULTI/EXEC on a single server, one per task on
        a cluster (a transaction cannot span slots).

        Raises:
            InvalidId: a malformed task id (before anything is read).
            IntegrityError: one of them is damaged.
            TypeError: ``task_ids`` is a single str.
        """
        with telemetry.operation("latest_many", "task", self.spec.keys.namespace, None):
            if isinstance(task_ids, (str, bytes)):
                raise TypeError(
                    f"task_ids must be an iterable of ids, not one {type(task_ids).__name__}"
                )
            wanted = {task: self.spec.task_keys(task) for task in task_ids}
            found: dict[str, Checkpoint | None] = {}
            if self._conn.one_server and wanted:
                ranges = [(k, 0, 0) for keys in wanted.values() for k in (keys[1], keys[0])]
                lists = await self._conn.lranges(*ranges)
                replies = [[lists[2 * n], lists[2 * n + 1]] for n in range(len(wanted))]
            else:
                replies = [await self._read(keys, 1, deltas=False) for keys in wanted.values()]
            for (task, keys), reply in zip(wanted.items(), replies, strict=True):
                history = self.spec.history(task, keys[0], reply)
                found[task] = history[0] if history else None
            return found

    async def _read(self, keys: tuple[str, str, str], count: int, *, deltas: bool) -> list[Any]:
        """The newest ``count`` entries and blobs (0: all), and the delta log if asked:
        one MULTI/EXEC, so blobs are not copied through Lua."""
        last = count - 1
        ranges = [(keys[1], 0, last), (keys[0], 0, last)]
        if deltas:
            ranges.append((keys[2], 0, -1))
        reply: list[Any] = await self._conn.lranges(*ranges)
        return reply if deltas else [*reply, []]

    async def get(self, task_id: str, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint with this id, if the history still holds it: one script, O(1)
        in the history's length (the task's id index; rebuilt by one scan if it does
        not match the id list).

        Raises:
            IntegrityError: it is damaged.
        """
        with telemetry.operation("get", "task", self.spec.keys.namespace, task_id):
            keys = self.spec.task_keys(task_id)
            args = CheckpointFindArgs(check_id(checkpoint_id)).argv()
            find_keys = (keys[0], keys[1], self.spec.keys.task_index(task_id))
            reply = await self._conn.script(_FIND, find_keys, args)
            found = self.spec.history(task_id, keys[0], (reply.entries, reply.blobs))
            return found[0] if found else None

    async def restore(self, task_id: str) -> Restored | None:
        """The newest intact checkpoint plus the deltas logged after it (None for an
        unknown task). Damaged checkpoints and deltas are skipped and listed."""
        with telemetry.operation("restore", "task", self.spec.keys.namespace, task_id):
            keys = self.spec.task_keys(task_id)
            return await self._restored(task_id, await self._read(keys, 1, deltas=True))

    def _entry_reads(self, task_id: str) -> list[tuple[Any, ...]]:
        """What a run reads on entry, as commands for one MULTI/EXEC (sent with its
        lease's acquire): the newest checkpoint's id entry and blob, the delta log, the
        step records."""
        keys = self.spec.task_keys(task_id)
        steps = self.spec.keys.task_steps(task_id)
        ranges = [(keys[1], 0, 0), (keys[0], 0, 0), (keys[2], 0, -1)]
        return [*(("LRANGE", *r) for r in ranges), ("HGETALL", steps)]

    async def _entered(
        self, task_id: str, replies: list[Any] | None
    ) -> tuple[Restored | None, dict[str, Step]]:
        """The restore and the step records from the replies to :meth:`_entry_reads`,
        read now when None (one MULTI/EXEC; one more only to fall back past damage)."""
        if replies is None:
            key = self.spec.keys.task(task_id)
            replies = (await self._conn.batch([(key, self._entry_reads(task_id))]))[0]
        for reply in replies:
            if isinstance(reply, Exception):
                raise translate(reply, self._conn.address, "multi") from reply
        *newest, found = replies
        steps_key = self.spec.keys.task_steps(task_id)
        # In a transaction's reply HGETALL is a flat list under RESP2, a map under RESP3.
        fields = dict(pairs(found))
        steps = self.step_spec.steps(steps_key, fields)
        return await self._restored(task_id, newest), steps

    async def _restored(self, task_id: str, newest: list[Any]) -> Restored | None:
        """:meth:`restore` from the newest entry, its blob and the delta log."""
        keys = self.spec.task_keys(task_id)
        restored = self.spec.restored(task_id, keys[0], newest)
        if restored is not None and restored.checkpoint is None and restored.skipped:
            # The newest is damaged: only now read the whole history to fall back.
            restored = self.spec.restored(task_id, keys[0], await self._read(keys, 0, deltas=True))
        if restored is not None and restored.checkpoint is not None and restored.complete:
            self._snapshot(task_id, restored.checkpoint.id)  # the newest: deltas follow it
        if restored is not None and restored.skipped:
            telemetry.event("redistate.integrity_failures", len(restored.skipped))
            _log.warning(
                "task %r restored past %d damaged checkpoint(s) or delta(s): %s",
                task_id,
                len(restored.skipped),
                ", ".join(restored.skipped),
                extra={
                    "redistate_event": "integrity_fallback",
                    "redistate_task": task_id,
                    "redistate_skipped": list(restored.skipped),
                },
            )
        return restored

    async def verify(self, task_id: str) -> Verification:
        """Check the digest of every checkpoint the task's history holds and of every
        delta in its log (``restore`` skips damaged ones; this lists them)."""
        with telemetry.operation("verify", "task", self.spec.keys.namespace, task_id):
            keys = self.spec.task_keys(task_id)
            return self.spec.verification(task_id, keys[0], await self._read(keys, 0, deltas=True))

    async def handoff(self, task_id: str) -> str:
        """A short markdown summary (SESSION-STATE.md style) of where the task stands,
        with its last completed and any interrupted step."""
        with telemetry.operation("handoff", "task", self.spec.keys.namespace, task_id):
            restored = await self.restore(task_id)
            return handoff(task_id, restored, list((await self._steps(task_id)).values()))

    async def delete(
        self, task_id: str, *, lease: Any = None, durability: Durability | None = None
    ) -> bool:
        """Remove every key of the task; True if it had any (a resend reports what the
        first send did). With ``lease=`` the delete is guarded (LockLost, and nothing
        deleted, unless the lease still holds)."""
        with telemetry.operation("delete", "task", self.spec.keys.namespace, task_id):
            keys, guard = self.spec.guarded_keys(task_id, lease)
            wid = new_checkpoint_id()
            args = CheckpointDeleteArgs(guard, wid, self._conn.memory_ms).argv()
            replicas = self._conn.replicas(durability)
            reply = await self._conn.script(
                _DELETE, keys, args, replicas=replicas, lease=lease, wid=wid
            )
            return reply.deleted
