"""Task checkpoints: the pure half (blobs, digests, replies, recovery, handoff). No I/O.

A task's history is two aligned Redis lists in its hash slot: checkpoint blobs, and
small id entries ``<seq>,<created_ms>,<fence>,<id>,<parent_id>`` that the save script
writes (so seq, time and parent come from the server, atomically). A delta log holds
merge patches made after the newest checkpoint; a save compacts it away.

Blob: ``K1,<sha256 hex>,<z|b|->\\n<meta JSON>\\n<payload>``, the payload being the state's
JSON, zlib-compressed above a threshold ("z"; "b": compressed, then base64, for a
connection that carries text only, a REST API's). The digest covers the meta JSON and the
uncompressed state JSON, and is checked on every read.

With signing keys (redistate.core.signing) the digest is a seal ``<key id>:<HMAC hex>`` over
the task's key, the checkpoint's id, the meta JSON and the state, and a delta's digest
line a seal over the log's key, the delta's id, the checkpoint it follows (the log
script appends it only after that one), its schema and its body: a state moved into
another checkpoint, or a delta to another task or checkpoint, no longer authenticates.
Not covered: the id entries (seq, time, fence, parent), which the server writes.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import re
import secrets
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Final, NamedTuple

import orjson

from ..core._ttl import check_ttl
from ..core.codec import MAX_DEPTH, Codec, to_json_value
from ..core.errors import CodecError, IntegrityError, InvalidId, SchemaError, StateTooLarge
from ..core.keys import KeySpace
from ..core.limits import check_compress_above, check_keep, check_max_bytes
from ..core.migrations import Migrations
from ..core.signing import SigningKeys, digest_problem
from ..leases.guard import guard_args
from ..records.mergepatch import merge_patch
from ..records.spec import Default
from ..steps.spec import Step

__all__ = [
    "Checkpoint",
    "CheckpointDeleteArgs",
    "CheckpointDeleteReply",
    "CheckpointFindArgs",
    "CheckpointFindReply",
    "CheckpointLogArgs",
    "CheckpointLogReply",
    "CheckpointMigrateArgs",
    "CheckpointMigrateReply",
    "CheckpointRecodeArgs",
    "CheckpointRecodeReply",
    "CheckpointSaveArgs",
    "CheckpointSaveReply",
    "CheckpointSpec",
    "Restored",
    "new_checkpoint_id",
]

_ID_RE: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ENTRY_RE: Final = re.compile(
    rb"(\d{16}),(\d{13}),(\d+),([A-Za-z0-9_-]{1,64}),([A-Za-z0-9_-]{0,64})"
)
_BLOB_RE: Final = re.compile(rb"K1,((?:[A-Za-z0-9_-]{1,32}:)?[0-9a-f]{64}),([zb-])\n")
_DELTA_RE: Final = re.compile(rb"D1,([A-Za-z0-9_-]{1,64}),([A-Za-z0-9_-]{0,64}),(\d{13})\n")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One saved state of a task. ``seq`` strictly increases per task."""

    id: str
    task_id: str
    seq: int
    parent_id: str | None
    created_at: dt.datetime
    phase: str | None
    progress: float | None
    state: Any
    metadata: dict[str, Any]
    fence: int | None
    digest: str


@dataclass(frozen=True, slots=True)
class Restored:
    """What :meth:`restore` rebuilt: the newest good checkpoint plus its deltas.

    ``complete`` is False when a checkpoint or delta was skipped (listed in ``skipped``).
    ``torn``: the task's two lists were of unequal length (one was evicted or lost);
    what could not be paired is skipped, and the next save repairs the task.
    """

    state: Any
    checkpoint: Checkpoint | None
    deltas_applied: int
    skipped: tuple[str, ...] = field(default=())
    complete: bool = True
    torn: bool = False


@dataclass(frozen=True, slots=True)
class Verification:
    """What :meth:`verify` found: ``count`` entries checked, the first damaged one
    (newest first; checkpoints before deltas) and a line per problem."""

    ok: bool
    count: int
    first_bad: str | None
    problems: tuple[str, ...] = ()


# -- script arguments and replies (see each script's header in redistate/lua) ---------


@dataclass(frozen=True, slots=True)
class CheckpointSaveArgs:
    """ARGV of checkpoint_save."""

    checkpoint_id: str
    blob: bytes
    keep: int  # how many checkpoints the history holds
    ttl_ms: int  # for every key of the task; 0 = no expiry
    fence: int  # of the lease the write is made under; 0 = none
    lease: str  # "" = unguarded
    memory_ms: int  # how long a checkpoint id is remembered
    given: bool  # the caller chose the id (looked for in the whole history)

    def argv(self) -> tuple[Any, ...]:
        return (
            self.checkpoint_id, self.blob, self.keep, self.ttl_ms, self.fence, self.lease,
            self.memory_ms, 1 if self.given else 0,
        )  # fmt: skip


class SaveStatus(Enum):
    """What checkpoint_save did."""

    SAVED = 1
    RESENT = 0  # the id is in the history already: nothing changed
    GONE = 2  # saved within the memory, no longer in the history: nothing changed


@dataclass(frozen=True, slots=True)
class CheckpointSaveReply:
    """A checkpoint_save reply: ``entry`` the id entry (SAVED: the new one, RESENT: the
    stored one's, with its ``blob``); neither for GONE."""

    status: SaveStatus
    entry: bytes = b""
    blob: bytes | None = None

    @classmethod
    def parse(cls, reply: Any) -> CheckpointSaveReply:
        status = SaveStatus(int(reply[0]))
        if status is SaveStatus.SAVED:
            return cls(status, reply[1])
        if status is SaveStatus.RESENT:
            return cls(status, reply[1], reply[2])
        return cls(status)

    @property
    def wrote(self) -> bool:
        return True  # a resend, recognised or gone, notes itself again

    @property
    def guarded(self) -> bool:
        """Whether the script reached its fence check (which renews an inline lease):
        a resend it recognised returned before it."""
        return self.status is SaveStatus.SAVED


@dataclass(frozen=True, slots=True)
class CheckpointLogArgs:
    """ARGV of checkpoint_log. ``sealed_for``: the checkpoint a sealed delta follows
    ("" = none; ARGV[8] is then "="), None = not sealed (no ARGV[8])."""

    delta_id: str
    blob: bytes
    max_deltas: int  # the most deltas the log may hold
    ttl_ms: int
    follow: bool  # keep the task's current expiry
    lease: str
    memory_ms: int
    sealed_for: str | None = None
    given: bool = False  # the caller chose the id: it may come again as a new call

    def argv(self) -> tuple[Any, ...]:
        sealed = () if self.sealed_for is None else (f"={self.sealed_for}",)
        # "r": look the id up even on a first send (rs_memory).
        memory = f"{self.memory_ms}r" if self.given and self.memory_ms else self.memory_ms
        return (
            self.delta_id, self.blob, self.max_deltas, self.ttl_ms, 1 if self.follow else 0,
            self.lease, memory, *sealed,
        )  # fmt: skip


class LogStatus(Enum):
    """What checkpoint_log did."""

    APPENDED = 1
    RESENT = 0  # appended before: nothing changed
    RESEAL = 2  # the newest checkpoint is another: nothing written, seal for ``snapshot``


@dataclass(frozen=True, slots=True)
class CheckpointLogReply:
    """A checkpoint_log reply: ``length`` of the log (APPENDED, RESENT), or (RESEAL)
    ``snapshot`` the newest checkpoint's id ("" for none)."""

    status: LogStatus
    length: int = 0
    snapshot: str = ""

    @classmethod
    def parse(cls, reply: Any) -> CheckpointLogReply:
        status = LogStatus(int(reply[0]))
        if status is LogStatus.RESEAL:
            found = reply[1]
            return cls(status, snapshot=found.decode() if isinstance(found, bytes) else str(found))
        return cls(status, int(reply[1]))

    @property
    def wrote(self) -> bool:
        # A resend notes itself again: a write. A reseal wrote nothing (the delta is
        # sent again, sealed anew).
        return self.status is not LogStatus.RESEAL

    @property
    def guarded(self) -> bool:
        """Whether the script reached its fence check (which renews an inline lease):
        a resend it recognised returned before it."""
        return self.status is not LogStatus.RESENT


@dataclass(frozen=True, slots=True)
class CheckpointDeleteArgs:
    """ARGV of checkpoint_delete."""

    lease: str
    delete_id: str  # the delete's own id
    memory_ms: int

    def argv(self) -> tuple[Any, ...]:
        return (self.lease, self.delete_id, self.memory_ms)


@dataclass(frozen=True, slots=True)
class CheckpointDeleteReply:
    """A checkpoint_delete reply: how many keys it deleted (-1: a resend of a delete
    that deleted some)."""

    removed: int

    @classmethod
    def parse(cls, reply: Any) -> CheckpointDeleteReply:
        return cls(int(reply))

    @property
    def deleted(self) -> bool:
        return self.removed != 0

    @property
    def wrote(self) -> bool:
        return self.removed != 0

    @property
    def guarded(self) -> bool:
        """Whether the script reached its fence check (which renews an inline lease):
        a resend it recognised returned before it."""
        return self.removed != -1


@dataclass(frozen=True, slots=True)
class CheckpointFindArgs:
    """ARGV of checkpoint_find."""

    checkpoint_id: str

    def argv(self) -> tuple[Any, ...]:
        return (self.checkpoint_id,)


@dataclass(frozen=True, slots=True)
class CheckpointFindReply:
    """A checkpoint_find reply: the id entries and blobs found (one each, or none)."""

    entries: tuple[bytes, ...]
    blobs: tuple[bytes | None, ...]

    @classmethod
    def parse(cls, reply: Any) -> CheckpointFindReply:
        return cls(tuple(reply[0]), tuple(reply[1]))

    @property
    def wrote(self) -> bool:
        return False  # a lookup


@dataclass(frozen=True, slots=True)
class CheckpointMigrateArgs:
    """ARGV of checkpoint_migrate."""

    schema: int  # the schema the new checkpoints are at
    triples: tuple[bytes | str, ...]  # (prefix naming one, its id, its replacement)...

    def argv(self) -> tuple[Any, ...]:
        return (self.schema, *self.triples)


@dataclass(frozen=True, slots=True)
class CheckpointMigrateReply:
    """A checkpoint_migrate reply: checkpoints ``replaced``, and ``held`` (left because
    deltas made against an older schema follow them)."""

    replaced: int
    held: int

    @classmethod
    def parse(cls, reply: Any) -> CheckpointMigrateReply:
        return cls(int(reply[0]), int(reply[1]))

    @property
    def wrote(self) -> bool:
        return self.replaced > 0


@dataclass(frozen=True, slots=True)
class CheckpointRecodeArgs:
    """ARGV of checkpoint_recode."""

    pairs: tuple[bytes, ...]  # (prefix naming one element, its replacement)...

    def argv(self) -> tuple[Any, ...]:
        return self.pairs


@dataclass(frozen=True, slots=True)
class CheckpointRecodeReply:
    """A checkpoint_recode reply: how many elements were replaced (one saved, trimmed
    or deleted since it was read is not found)."""

    replaced: int

    @classmethod
    def parse(cls, reply: Any) -> CheckpointRecodeReply:
        return cls(int(reply))

    @property
    def wrote(self) -> bool:
        return self.replaced > 0


_last_us = 0
_id_lock = threading.Lock()


def new_checkpoint_id() -> str:
    """A time-ordered id made on the client: µs since the epoch (hex) and 48 random bits.
    Strictly increasing within a process: two ids made in the same µs (or after the
    clock stepped back) take the next µs, so the random part never decides the order."""
    global _last_us
    with _id_lock:
        _last_us = max(time.time_ns() // 1000, _last_us + 1)
        now = _last_us
    return f"{now:014x}-{secrets.token_urlsafe(6)}"


def check_id(value: object, what: str = "checkpoint id") -> str:
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        raise InvalidId(f"{what} {value!r:.80} must be 1-64 chars of letters, digits, '_' and '-'")
    return value


def _digest(meta: bytes, state: bytes) -> str:
    digest = hashlib.sha256(meta)  # piecewise: no copy of a large state
    digest.update(b"\n")
    digest.update(state)
    return digest.hexdigest()


class CheckpointSpec:
    """Settings of ``store.checkpoints`` and every non-I/O step of its operations."""

    __slots__ = (
        "_migrations",
        "codec",
        "compress_above",
        "keep",
        "keys",
        "max_bytes",
        "max_deltas",
        "signing",
        "text",
        "ttl_ms",
    )

    def __init__(
        self,
        keys: KeySpace,
        codec: Codec,
        *,
        keep: int = 10,
        ttl: float | None = None,
        max_bytes: int = 16 * 1024 * 1024,
        compress_above: int = 16 * 1024,
        max_deltas: int = 1000,
        migrations: Migrations | None = None,
        signing: SigningKeys | None = None,
        text: bool = False,
    ) -> None:
        self.keys = keys
        self.codec = codec
        self.signing = signing
        # Blobs must be UTF-8 text (a REST API's JSON): compressed ones are base64 too.
        self.text = text
        self._migrations = migrations
        self.keep = check_keep(keep)
        self.ttl_ms = check_ttl(ttl, "task ttl")
        # A checkpoint is one Redis string too (bools are not sizes).
        self.max_bytes = check_max_bytes(max_bytes, "checkpoint max_bytes")
        self.compress_above = check_compress_above(compress_above)
        self.max_deltas = check_keep(max_deltas, "max_deltas")

    @property
    def schema(self) -> int:
        """The schema states are saved with (``store.migrations``, kind "checkpoints")."""
        return 1 if self._migrations is None else self._migrations.current("checkpoint")

    def upgraded(self, schema: int, state: Any, where: str) -> Any:
        """``state`` saved at ``schema``, brought to :attr:`schema` (SchemaError if newer)."""
        if self._migrations is None:
            if schema > 1:
                raise SchemaError(f"{where} has schema {schema}, newer than this code knows (1)")
            return state
        return self._migrations.upgrade("checkpoint", schema, state, where)

    def task_keys(self, task_id: str) -> tuple[str, str, str]:
        return self.keys.task_keys(task_id)

    def guarded_keys(self, task_id: str, lease: Any) -> tuple[tuple[str, ...], str]:
        """(KEYS, lease value) of a write: the task's keys, its id's lock key, its
        recent writes, its step records and its checkpoint id index (which expire and
        go with the task).

        Raises:
            ValueError: the lease is for another task. LockLost: it is known lost.
        """
        keys = self.keys.task_keys(task_id)
        writes, steps = self.keys.writes(keys[0]), self.keys.task_steps(task_id)
        index = self.keys.task_index(task_id)
        if lease is None:  # the scripts read KEYS[4] only when guarded
            return (*keys, keys[0], writes, steps, index), ""
        lock_key, value = guard_args(lease, task_id, self.keys.lock(task_id))
        return (*keys, lock_key, writes, steps, index), value

    def write_ttl(self, ttl: object) -> int:
        """TTL in ms for a save or log: the store's task TTL unless given."""
        return self.ttl_ms if isinstance(ttl, Default) else check_ttl(ttl)

    # -- writing --------------------------------------------------------------------

    def blob(
        self,
        key: str,
        checkpoint_id: str,
        state: Any,
        phase: str | None,
        progress: float | None,
        metadata: dict[str, Any] | None,
    ) -> tuple[bytes, str, dict[str, Any]]:
        """Encode a checkpoint: (blob, digest, metadata as stored).

        Raises StateTooLarge, CodecError, TypeError or ValueError before any I/O.
        """
        if phase is not None and not isinstance(phase, str):
            raise TypeError(f"phase must be a str or None, got {type(phase).__name__}")
        if phase is not None and not phase.isascii():
            try:
                phase.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ValueError(f"phase {phase!r:.80} is not valid UTF-8: {exc.reason}") from None
        if progress is not None and (
            isinstance(progress, bool)
            or not isinstance(progress, int | float)
            or not 0 <= progress <= 1
        ):
            raise ValueError(f"progress must be a number from 0 to 1, got {progress!r}")
        if metadata is not None and not isinstance(metadata, dict):
            raise TypeError(f"metadata must be a dict or None, got {type(metadata).__name__}")
        state_bytes = self.codec.encode(state, key.encode("utf-8"))
        stored_metadata = to_json_value(metadata or {})
        try:
            meta = orjson.dumps(
                {
                    "id": checkpoint_id,
                    "phase": phase,
                    "progress": progress,
                    "metadata": stored_metadata,
                    # Only past the first schema: checkpoints saved before keep their bytes.
                    **({"schema": self.schema} if self.schema > 1 else {}),
                },
                option=orjson.OPT_SORT_KEYS,
            )
        except orjson.JSONEncodeError as exc:  # the only thing left to fail: depth
            raise CodecError(
                f"cannot encode metadata: nesting deeper than {MAX_DEPTH - 1} levels "
                f"(it is stored one level down, in the checkpoint's meta object): {exc}"
            ) from exc
        if len(state_bytes) + len(meta) > self.max_bytes:
            raise StateTooLarge(len(state_bytes) + len(meta), self.max_bytes, key)
        blob = self._sealed(key, checkpoint_id, meta, state_bytes)
        return blob, _name(blob)[3:].decode(), stored_metadata

    def saved(
        self,
        task_id: str,
        entry: bytes,
        state: Any,
        phase: str | None,
        progress: float | None,
        metadata: dict[str, Any],
        digest: str,
    ) -> Checkpoint:
        """The Checkpoint just written, from the script's id entry and what was sent
        (``state`` as passed, like ``put``: no decode of what was just encoded)."""
        fields = _entry(task_id, entry)
        return Checkpoint(
            **fields._asdict(),
            phase=phase,
            progress=progress,
            state=state,
            metadata=metadata,
            digest=digest,
        )

    def delta_blob(self, key: str, delta_id: str, delta: Any, snapshot: str = "") -> bytes:
        """Encode a delta, a merge patch object: ``<sha256 hex>[,<schema>]`` newline
        ``<codec bytes>``; the schema (written past 1, inside the digest) is the one the
        patch was made against, so a restore brings the state there before applying it.

        A patch that is not an object would replace the whole state (RFC 7386), almost
        always a mistake in a delta log, so it is refused. With signing keys the seal
        names ``snapshot``, the checkpoint the delta follows (checkpoint_log appends it
        only after that one).
        """
        if not isinstance(delta, dict):
            raise TypeError(f"a delta must be a dict (a merge patch), got {type(delta).__name__}")
        body = self.codec.encode(to_json_value(delta), key.encode("utf-8"))
        if len(body) > self.max_bytes:
            raise StateTooLarge(len(body), self.max_bytes, key)
        return self._delta_line(key, delta_id, snapshot, self.schema, body) + body

    def save_args(
        self,
        checkpoint_id: str,
        blob: bytes,
        keep: int | None,
        ttl_ms: int,
        fence: object,
        guard: str,
        memory_ms: int,
        given: bool = False,
    ) -> CheckpointSaveArgs:
        """The arguments of checkpoint_save (``given``: the caller chose the id)."""
        bad_fence = isinstance(fence, bool) or not isinstance(fence, int) or fence < 0
        if fence is not None and bad_fence:
            raise ValueError(f"lease.fence must be an int >= 0, got {fence!r}")
        keep_arg = self.keep if keep is None else check_keep(keep)
        fence_arg = fence if isinstance(fence, int) else 0
        return CheckpointSaveArgs(
            checkpoint_id, blob, keep_arg, ttl_ms, fence_arg, guard, memory_ms, given
        )

    @staticmethod
    def saved_earlier(
        task_id: str,
        checkpoint_id: str,
        fence: int | None,
        state: Any,
        phase: str | None,
        progress: float | None,
        metadata: dict[str, Any],
        digest: str,
    ) -> Checkpoint:
        """A resent save the server remembers but whose checkpoint has left the history
        (the task was deleted or trimmed past it): what was sent, with ``seq`` 0 (real
        seqs start at 1) and no parent, as neither is known any more."""
        return Checkpoint(
            id=checkpoint_id,
            task_id=task_id,
            seq=0,
            parent_id=None,
            created_at=dt.datetime.now(tz=dt.timezone.utc),
            phase=phase,
            progress=progress,
            state=state,
            metadata=metadata,
            fence=fence or None,
            digest=digest,
        )

    # -- reading --------------------------------------------------------------------

    def checkpoint(self, task_id: str, key: str, entry: bytes, blob: bytes | None) -> Checkpoint:
        """Decode and verify one checkpoint, its state migrated to :attr:`schema`.
        Raises IntegrityError if it is damaged, SchemaError if it is newer than this code."""
        saved, schema = self._saved(task_id, key, entry, blob)
        where = f"checkpoint {saved.id} of task {task_id!r}"
        return replace(saved, state=self.upgraded(schema, saved.state, where))

    def _saved(
        self, task_id: str, key: str, entry: bytes, blob: bytes | None, strict: bool = False
    ) -> tuple[Checkpoint, int]:
        """One checkpoint as saved (state in its own schema), and that schema.
        ``strict``: a seal this store has no keys to check is a problem too (verify)."""
        fields = _entry(task_id, entry)
        where = f"checkpoint {fields.id} of task {task_id!r}"
        head = None if blob is None else _BLOB_RE.match(blob)
        if head is None:
            raise IntegrityError(f"{where} has no valid header")
        digest, flag = head.group(1).decode(), head.group(2)
        rest = head.string[head.end() :]
        newline = rest.find(b"\n")
        if newline < 0:
            raise IntegrityError(f"{where} is truncated")
        meta_bytes, payload = rest[:newline], rest[newline + 1 :]
        state_bytes = _unpacked(flag, payload, where)
        # Sealed with the id of the entry it is stored next to: a blob (or a state)
        # moved into another checkpoint's slot fails here.
        self._check(where, head.group(1), key, fields.id, meta_bytes, state_bytes, strict)
        meta = orjson.loads(meta_bytes)
        if meta.get("id") != fields.id:
            raise IntegrityError(f"{where} is stored next to another checkpoint's entry")
        saved = Checkpoint(
            **fields._asdict(),
            phase=meta.get("phase"),
            progress=meta.get("progress"),
            state=_decode(self.codec, state_bytes, key, where),
            metadata=meta.get("metadata") or {},
            digest=digest,
        )
        return saved, _schema(meta, where)

    # -- re-encoding (rotate-keys) -------------------------------------------------------

    def recoded_blob(
        self, key: str, blob: bytes, current: Callable[[bytes], bool]
    ) -> tuple[bytes, bytes] | None:
        """(prefix naming ``blob``, the same checkpoint with its state decoded and encoded
        again by this codec), or None when ``current`` says its state bytes need nothing.

        Raises:
            IntegrityError: the blob is damaged (its digest is checked first).
        """
        meta, state_bytes, where, cid = self._opened(key, blob)
        fresh = state_bytes
        if not current(state_bytes):
            state = _decode(self.codec, state_bytes, key, where)
            fresh = self.codec.encode(state, key.encode("utf-8"))
        elif not self._resealed(blob):
            return None
        return _name(blob), self._sealed(key, cid, meta, fresh)

    def migrated_blob(self, key: str, blob: bytes) -> tuple[bytes, str, bytes] | None:
        """(prefix naming ``blob``, its checkpoint id, the same checkpoint with its state
        migrated to :attr:`schema` and stamped so), or None when it is there already.

        Raises:
            IntegrityError: the blob is damaged. SchemaError: it is newer than this code.
        """
        meta, state_bytes, where, cid = self._opened(key, blob)
        fields = orjson.loads(meta)
        schema = _schema(fields, where)
        if schema == self.schema:
            return None
        state = self.upgraded(schema, _decode(self.codec, state_bytes, key, where), where)
        fields["schema"] = self.schema
        fresh_meta = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)
        sealed = self._sealed(key, cid, fresh_meta, self.codec.encode(state, key.encode("utf-8")))
        return _name(blob), cid, sealed

    def _sealed(self, key: str, checkpoint_id: str, meta: bytes, state_bytes: bytes) -> bytes:
        """A checkpoint blob of ``meta`` and encoded state: digest (or seal), compression."""
        compress = len(state_bytes) > self.compress_above
        body = zlib.compress(state_bytes, 1) if compress else state_bytes
        flag = b"z" if compress else b"-"
        if compress and self.text:
            body, flag = base64.b64encode(body), b"b"
        if self.signing is None:
            digest = _digest(meta, state_bytes).encode()
        else:
            digest = self.signing.seal(
                b"checkpoint", key.encode("utf-8"), checkpoint_id.encode(), meta, state_bytes
            )
        return b"K1,%s,%s\n%s\n%s" % (digest, flag, meta, body)

    def _check(
        self,
        where: str,
        digest: bytes,
        key: str,
        checkpoint_id: str,
        meta: bytes,
        state: bytes,
        strict: bool = False,
    ) -> None:
        problem = digest_problem(
            self.signing,
            digest,
            lambda: _digest(meta, state).encode(),
            b"checkpoint",
            key.encode("utf-8"),
            checkpoint_id.encode(),
            meta,
            state,
            unverifiable=strict,
            what="SHA-256 digest",
        )
        if problem is not None:
            raise IntegrityError(f"{where} {problem}")

    def _resealed(self, blob: bytes) -> bool:
        """Whether rotate-keys must seal a checkpoint or delta anew (not under the primary)."""
        return self.signing is not None and not self.signing.current(_seal_of(blob))

    def _opened(self, key: str, blob: bytes) -> tuple[bytes, bytes, str, str]:
        """(meta JSON, state bytes, a name for messages, the checkpoint id) of a stored
        blob, digest or seal checked (against the id its meta names: no entry at hand)."""
        head = _BLOB_RE.match(blob)
        newline = -1 if head is None else blob.find(b"\n", head.end())
        if head is None or newline < 0:
            raise IntegrityError(f"a checkpoint of {key!r} has no valid header")
        flag, meta = head.group(2), blob[head.end() : newline]
        where = f"checkpoint {head.group(1)[:12].decode('ascii', 'replace')}… of {key!r}"
        state_bytes = _unpacked(flag, blob[newline + 1 :], where)
        try:
            cid = str(orjson.loads(meta).get("id", ""))
        except (orjson.JSONDecodeError, AttributeError):
            raise IntegrityError(f"{where} has malformed metadata") from None
        self._check(where, head.group(1), key, cid, meta, state_bytes)
        return meta, state_bytes, where, cid

    def log_args(
        self,
        delta_id: str,
        blob: bytes,
        ttl_ms: int,
        follow: bool,
        guard: str,
        memory_ms: int,
        snapshot: str,
        given: bool = False,
    ) -> CheckpointLogArgs:
        """The arguments of checkpoint_log; with signing keys the delta is sealed for
        ``snapshot``, which the script checks is the newest checkpoint. ``given``: the
        caller chose ``delta_id``."""
        sealed_for = None if self.signing is None else snapshot
        return CheckpointLogArgs(
            delta_id, blob, self.max_deltas, ttl_ms, follow, guard, memory_ms, sealed_for, given
        )

    def _delta_line(
        self, log_key: str, delta_id: str, snapshot: str, schema: int, body: bytes
    ) -> bytes:
        """A delta's digest line: unkeyed, :func:`_delta_line`; with signing keys a seal
        over the log's key, the delta's id, the checkpoint it follows, the schema and
        the body (``,<schema>`` after it past schema 1)."""
        if self.signing is None:
            return _delta_line(schema, body)
        parts = (log_key.encode("utf-8"), delta_id.encode(), snapshot.encode(), b"%d" % schema)
        seal = self.signing.seal(b"delta", *parts, body)
        return seal + (b"\n" if schema == 1 else b",%d\n" % schema)

    def _delta_body(
        self,
        log_key: str,
        delta_id: str,
        snapshot: str,
        rest: bytes,
        *,
        unverifiable: bool = False,
    ) -> tuple[int, bytes] | str:
        """(schema, body) of a delta after its header line, or why its digest or seal
        fails."""
        line, _, body = rest.partition(b"\n")
        digest, comma, schema_text = line.partition(b",")
        schema = 1
        if comma:
            if not schema_text.isdigit() or schema_text.startswith(b"0"):
                return "has a malformed schema"
            schema = int(schema_text)
        if not digest:
            return "has no digest"
        # An unsealed line must match whole (the digest and, past schema 1, ",<schema>"):
        # hashed once, and only when it is unsealed.
        problem = digest_problem(
            self.signing,
            digest,
            lambda: digest if _delta_line(schema, body) == line + b"\n" else b"",
            b"delta",
            log_key.encode("utf-8"),
            delta_id.encode(),
            snapshot.encode(),
            b"%d" % schema,
            body,
            unverifiable=unverifiable,
            what="SHA-256 digest",
        )
        if problem is not None:
            return problem
        return schema, body

    def recoded_delta(
        self, log_key: str, raw: bytes, current: Callable[[bytes], bool]
    ) -> tuple[bytes, bytes] | None:
        """Like :meth:`recoded_blob`, for one stored delta of the log at ``log_key``."""
        head = _DELTA_RE.match(raw)
        delta_id = "" if head is None else head.group(1).decode()
        snapshot = "" if head is None else head.group(2).decode()
        found: tuple[int, bytes] | str = "has no valid header"
        if head is not None:
            found = self._delta_body(log_key, delta_id, snapshot, raw[head.end() :])
        if head is None or isinstance(found, str):
            raise IntegrityError(f"delta {delta_id or '?'} of {log_key!r} {found}")
        schema, body = found
        fresh = body
        if not current(body):
            delta = _decode(self.codec, body, log_key, f"a delta of {log_key!r}")
            fresh = self.codec.encode(delta, log_key.encode("utf-8"))
        elif not self._resealed(raw[head.end() :]):
            return None
        prefix = raw[: raw.index(b",", 3) + 1]  # "D1,<id>,"
        line = self._delta_line(log_key, delta_id, snapshot, schema, fresh)
        return prefix, raw[: head.end()] + line + fresh

    def history(self, task_id: str, key: str, reply: Any) -> list[Checkpoint]:
        entries, blobs = reply[0], reply[1]
        if len(entries) != len(blobs):
            raise IntegrityError(
                f"task {task_id!r} is torn: {len(blobs)} checkpoint(s) against "
                f"{len(entries)} id entries (one list was evicted or lost); restore() "
                f"skips what cannot be paired and the next save repairs the task"
            )
        return [self.checkpoint(task_id, key, e, b) for e, b in zip(entries, blobs, strict=True)]

    def restored(self, task_id: str, key: str, reply: Any) -> Restored | None:
        """Newest good checkpoint + its deltas, skipping (and listing) damaged ones."""
        entries, blobs, deltas = reply[0], reply[1], reply[2]
        if not entries and not blobs and not deltas:
            return None
        skipped: list[str] = []
        chosen: Checkpoint | None = None
        schema = 1
        # A torn task has entries without blobs or blobs without entries past the
        # pairs made since the tear: each is skipped by name, never fatal.
        for n in range(max(len(entries), len(blobs))):
            entry = entries[n] if n < len(entries) else None
            blob = blobs[n] if n < len(blobs) else None
            try:
                if entry is not None:
                    chosen, schema = self._saved(task_id, key, entry, blob)
                    break
            except IntegrityError:
                pass
            if entry is None:  # a blob whose entry was lost: named by its metadata
                skipped.append(_blob_id(blob))
            else:
                match = _ENTRY_RE.fullmatch(entry)
                skipped.append(match.group(4).decode() if match else "?")
        # Deltas fold by merge_patch, which copies what it changes and never mutates:
        # the checkpoint keeps its state as saved, sharing the untouched parts (no
        # deep copy: it was 40% of a large restore). Migrations may change a state in
        # place, and both the state and the checkpoint are migrated: those get a copy.
        state: Any = {} if chosen is None else chosen.state
        if chosen is not None and schema != self.schema:
            state = orjson.loads(orjson.dumps(chosen.state))
        applied = 0
        seen: set[str] = set()
        log_key = self.keys.task_log(task_id)
        where = f"checkpoint {chosen.id if chosen else '(none)'} of task {task_id!r}"
        at = schema  # the schema the state being folded is in
        for raw in deltas:
            delta_id, snapshot, patch, made_at, _ = self._delta(raw, log_key)
            if delta_id is not None and delta_id in seen:
                continue  # a resend that arrived after another delta: applied once
            if delta_id is not None:
                seen.add(delta_id)
            if delta_id is None or patch is _DAMAGED:
                skipped.append(delta_id or "?")
                continue
            if snapshot != (chosen.id if chosen else "") or made_at < at:
                # It follows a checkpoint we could not read, or was made against an
                # older schema than the state has reached: a patch cannot be migrated.
                skipped.append(delta_id)
                continue
            if made_at > at:  # made by newer code: bring the state to its schema first
                state, at = self._migrations_to(at, made_at, state, where), made_at
            state = merge_patch(state, patch)
            applied += 1
        state = self.upgraded(at, state, where)
        if chosen is not None:
            chosen = replace(chosen, state=self.upgraded(schema, chosen.state, where))
        torn = len(entries) != len(blobs)
        return Restored(state, chosen, applied, tuple(skipped), not skipped, torn)

    def verification(self, task_id: str, key: str, reply: Any) -> Verification:
        """Check every checkpoint and delta of a task's whole history and log."""
        entries, blobs, deltas = reply[0], reply[1], reply[2]
        bad: list[tuple[str, str]] = []  # (entry id, problem)
        for n in range(max(len(entries), len(blobs))):
            entry = entries[n] if n < len(entries) else None
            match = None if entry is None else _ENTRY_RE.fullmatch(entry)
            name = match.group(4).decode() if match else f"#{n}"
            try:
                if entry is None:
                    raise IntegrityError(f"checkpoint #{n} of task {task_id!r} has no id entry")
                self._saved(task_id, key, entry, blobs[n] if n < len(blobs) else None, True)
            except IntegrityError as exc:
                bad.append((name, str(exc)))
        log_key = self.keys.task_log(task_id)
        for n, raw in enumerate(deltas):
            delta_id, _, patch, _, why = self._delta(raw, log_key, strict=True)
            if patch is _DAMAGED:
                name = delta_id or f"delta #{n}"
                bad.append((name, f"delta {name} of task {task_id!r} is damaged: {why}"))
        count = max(len(entries), len(blobs)) + len(deltas)
        return Verification(
            not bad, count, bad[0][0] if bad else None, tuple(problem for _, problem in bad)
        )

    def _delta(
        self, raw: bytes, log_key: str, *, strict: bool = False
    ) -> tuple[str | None, str, Any, int, str]:
        """(id, the checkpoint it follows, the patch or _DAMAGED, the schema it was
        made against, why it is damaged or "")."""
        head = _DELTA_RE.match(raw)
        if head is None:
            return None, "", _DAMAGED, 1, "has no valid header"
        delta_id, snapshot = head.group(1).decode(), head.group(2).decode()
        rest = raw[head.end() :]
        found = self._delta_body(log_key, delta_id, snapshot, rest, unverifiable=strict)
        if isinstance(found, str):
            return delta_id, snapshot, _DAMAGED, 1, found
        schema, body = found
        try:
            patch = self.codec.decode(body, log_key.encode("utf-8"))
            return delta_id, snapshot, patch, schema, ""
        except CodecError as exc:
            return delta_id, snapshot, _DAMAGED, schema, f"does not decode: {exc}"

    def _migrations_to(self, schema: int, target: int, state: Any, where: str) -> Any:
        """``state`` at ``schema`` brought to ``target`` (not past it: a delta made there
        applies next)."""
        if self._migrations is None:
            raise SchemaError(f"a delta after {where} has schema {target}, newer than this code")
        return self._migrations.upgrade_to("checkpoint", schema, target, state, where)


_DAMAGED: Final = object()


def _delta_line(schema: int, body: bytes) -> bytes:
    """A delta's digest line: SHA-256 of the body (schema 1, the first format), or of
    the schema and the body with the schema after a comma, so neither can be edited."""
    if schema == 1:
        return hashlib.sha256(body).hexdigest().encode() + b"\n"
    digest = hashlib.sha256(b"%d\n%s" % (schema, body)).hexdigest().encode()
    return b"%s,%d\n" % (digest, schema)


class _Entry(NamedTuple):
    """The server-written fields of a checkpoint (from its id entry)."""

    id: str
    task_id: str
    seq: int
    parent_id: str | None
    created_at: dt.datetime
    fence: int | None


def _entry(task_id: str, entry: bytes) -> _Entry:
    match = _ENTRY_RE.fullmatch(entry)
    if match is None:
        raise IntegrityError(f"checkpoint entry {entry[:120]!r} of task {task_id!r} is damaged")
    seq, created_ms, fence, checkpoint_id, parent = match.groups()
    return _Entry(
        checkpoint_id.decode(),
        task_id,
        int(seq),
        parent.decode() or None,
        dt.datetime.fromtimestamp(int(created_ms) / 1000, tz=dt.timezone.utc),
        int(fence) or None,
    )


def _name(blob: bytes) -> bytes:
    """The prefix naming a stored checkpoint blob: ``K1,<digest or seal>``."""
    return blob[: blob.index(b",", 3)]


def _seal_of(data: bytes) -> bytes:
    """The digest or seal of a checkpoint blob, or of a delta's digest line."""
    if data.startswith(b"K1,"):
        return _name(data)[3:]
    return data.partition(b"\n")[0].partition(b",")[0]


def _blob_id(blob: bytes | None) -> str:
    """The checkpoint id a blob's metadata names (for a blob without its entry), or "?"."""
    head = None if blob is None else _BLOB_RE.match(blob)
    newline = -1 if head is None or blob is None else blob.find(b"\n", head.end())
    if head is None or blob is None or newline < 0:
        return "?"
    try:
        found = orjson.loads(blob[head.end() : newline]).get("id")
    except (orjson.JSONDecodeError, AttributeError):
        return "?"
    return found if isinstance(found, str) and _ID_RE.fullmatch(found) else "?"


def _schema(meta: dict[str, Any], where: str) -> int:
    schema = meta.get("schema", 1)
    if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
        raise IntegrityError(f"{where} has a malformed schema {schema!r:.40}")
    return schema


def _unpacked(flag: bytes, payload: bytes, where: str) -> bytes:
    """The state bytes of a blob's payload, by its flag: "-" as stored, "z" compressed,
    "b" compressed and base64."""
    if flag == b"-":
        return payload
    if flag == b"b":
        try:
            payload = base64.b64decode(payload, validate=True)
        except binascii.Error as exc:
            raise IntegrityError(f"{where} is not base64: {exc}") from exc
    return _inflate(payload, where)


def _inflate(payload: bytes, where: str) -> bytes:
    """zlib-decompress, refusing trailing bytes (zlib.decompress would ignore them)."""
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(payload)
    except zlib.error as exc:
        raise IntegrityError(f"{where} does not decompress: {exc}") from exc
    if not inflater.eof or inflater.unused_data:
        raise IntegrityError(f"{where} has a truncated or padded compressed state")
    return data


def _decode(codec: Codec, data: bytes, key: str, where: str) -> Any:
    try:
        return codec.decode(data, key.encode("utf-8"))
    except CodecError as exc:
        raise IntegrityError(f"{where} matches its digest but does not decode: {exc}") from exc


def _step_lines(steps: Sequence[Step]) -> list[str]:
    done = [s for s in steps if s.status == "done" and s.ended_at is not None]
    lines = []
    if done:
        last = max(done, key=lambda s: s.ended_at or s.started_at or _NEVER)
        when = (last.ended_at or _NEVER).strftime("%Y-%m-%d %H:%M:%S UTC")
        lines.append(f"- Last completed step: {_line(last.name)} ({when})")
    for step in steps:
        when = (step.started_at or _NEVER).strftime("%Y-%m-%d %H:%M:%S UTC")
        if step.status == "started":
            lines.append(
                f"- Interrupted step: {_line(step.name)} (started {when}, fence {step.fence}, "
                "not completed)"
            )
        elif step.status == "failed":
            kind = step.error[0] if step.error else "an error"
            lines.append(f"- Failed step: {_line(step.name)} ({_line(kind, 60)}, started {when})")
    return lines[:4]


_NEVER: Final = dt.datetime.fromtimestamp(0, tz=dt.timezone.utc)


def _line(value: object, limit: int = 200) -> str:
    """One line of markdown: newlines folded, long values cut."""
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def handoff(task_id: str, restored: Restored | None, steps: Sequence[Step] = ()) -> str:
    """A SESSION-STATE.md style summary of where a task stands: 5-15 lines, stable format.

    Task, phase, progress, checkpoint id and time, deltas since, the last completed and
    any interrupted durable step, next step (metadata ``next`` or ``next_step``), then
    the other metadata (sorted by key) as decisions and notes.
    """
    cp = None if restored is None else restored.checkpoint
    meta = dict(cp.metadata) if cp else {}
    next_step = meta.pop("next", None)
    next_step = meta.pop("next_step", None) or next_step
    lines = [f"# Task {_line(task_id)}", ""]
    if cp is None:
        lines += ["- Phase: unknown", "- Progress: unknown"]
        none = "none saved yet" if restored is None else "none readable"
        lines.append(f"- Checkpoint: {none}")
    else:
        progress = "unknown" if cp.progress is None else f"{cp.progress:.0%}"
        when = cp.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        lines += [
            f"- Phase: {_line(cp.phase or 'unknown')}",
            f"- Progress: {progress}",
            f"- Checkpoint: `{cp.id}` (seq {cp.seq}), saved {when}",
        ]
    lines.append(f"- Deltas since: {0 if restored is None else restored.deltas_applied}")
    if restored is not None and not restored.complete:
        what = "torn task (a list was lost)" if restored.torn else "damaged entries"
        lines.append(f"- Warning: skipped {what}: {_line(', '.join(restored.skipped))}")
    lines += _step_lines(steps)
    lines.append(f"- Next step: {_line(next_step) if next_step else 'not recorded'}")
    if meta:
        lines += ["", "## Decisions and notes"]
        lines += [f"- {_line(name, 60)}: {_line(value)}" for name, value in meta.items()]
    return "\n".join(lines[:15]) + "\n"
