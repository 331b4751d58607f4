"""Versioned records: the pure half (validation, arguments, replies). No I/O here.

``Collection`` and ``AsyncCollection`` are thin I/O shells over :class:`RecordSpec`.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ..core._ttl import MAX_TTL_SECONDS, check_ttl
from ..core.codec import Codec
from ..core.envelope import Envelope, frame, tail, unpack
from ..core.errors import ConflictError, IntegrityError, SchemaError, StateTooLarge
from ..core.keys import KeySpace
from ..core.limits import check_max_bytes
from ..core.migrations import Migrations
from ..leases.guard import guard_args
from .mergelog import compact_by_chance, fold, frames, should_compact
from .mergelog import frame as patch_frame

if TYPE_CHECKING:  # a store without signing keys never loads the module
    from ..core.signing import SigningKeys

__all__ = [
    "DEFAULT",
    "MAX_TTL_SECONDS",
    "Compaction",
    "Default",
    "Merged",
    "Record",
    "RecordCompactArgs",
    "RecordCompactReply",
    "RecordDeleteArgs",
    "RecordDeleteReply",
    "RecordMergeArgs",
    "RecordMergeReply",
    "RecordPutArgs",
    "RecordPutReply",
    "RecordSpec",
    "RecordTouchArgs",
    "RecordTouchReply",
    "check_ttl",
    "check_updated",
]


def describe_function(fn: object) -> str:
    """``fn`` as an error message names it: its qualified name and where it is defined."""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    code = getattr(fn, "__code__", None)
    if code is None:
        return str(name)
    return f"{name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def check_updated(fn: object, data: Any, key: str) -> Any:
    """``data``, the new value ``fn`` returned for an update of ``key``.

    Raises:
        TypeError: ``fn`` returned None (``lambda d: d.update(...)`` does): replacing
            the record with null is never what such a function meant.
    """
    if data is None:
        raise TypeError(
            f"the update function {describe_function(fn)} returned None for {key!r}: it "
            f"must return the new data (dict.update() returns None; return "
            f"{{**d, ...}} instead); nothing was written. To store null on purpose, "
            f"use put(id, None)"
        )
    return data


class Default:
    """Type of :data:`DEFAULT`: "use the collection's setting"."""

    _instance: Default | None = None

    def __new__(cls) -> Default:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = Default()

TTL = float | None | Default


@dataclass(frozen=True, slots=True)
class Record:
    """A stored value and its metadata. ``version`` strictly increases per id."""

    id: str
    data: Any
    version: int
    expires_at: dt.datetime | None


class _WriteIds:
    """Write ids: a random per-process prefix (72 bits) and a counter.

    Unique without a syscall per write; the prefix is redrawn in a forked child so
    parent and child never share a sequence.
    """

    def __init__(self) -> None:
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._prefix = secrets.token_urlsafe(9)
        self._counter = itertools.count(1)

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._counter):x}"


new_write_id: Final = _WriteIds()
"""A write id ([A-Za-z0-9_-], at most 32 chars), so a resent write is recognised."""


class Compaction(NamedTuple):
    """A stored value to rewrite in place (record_compact): its header tail, its length,
    its data as stored and the schema that data is in."""

    tail: bytes
    length: int
    data: Any
    schema: int


class Merged(NamedTuple):
    """A record_merge reply made sense of: the record after the merge, and what
    record_compact needs when this merge should fold the patches back (else None)."""

    record: Record
    compact: Compaction | None
    # A brief merge's turn to fold the patches back, which needs the value read first.
    refold: bool = False


# -- script arguments and replies (see each script's header in redistate/lua) ---------


def _flag(value: bool) -> int:
    return 1 if value else 0


class RecordPutArgs(NamedTuple):
    """ARGV of record_put. ``expected``: None = any version, 0 = only if absent."""

    expected: int | None
    ttl_ms: int
    value: bytes  # the framed value, header fields zeroed
    tail: bytes  # the header tail inside ``value``: "<schema>,<write_id>\n"
    keep: bool  # keep the record's current TTL if it exists
    lease: str  # "" = unguarded
    memory_ms: int  # how long a write id is remembered once overwritten

    def argv(self) -> tuple[Any, ...]:
        expected = "" if self.expected is None else self.expected
        keep = _flag(self.keep)
        return (expected, self.ttl_ms, self.value, self.tail, keep, self.lease, self.memory_ms)


class PutStatus(Enum):
    """What record_put did."""

    WRITTEN = "written"
    CONFLICT = 0  # not written: the version was not the expected one
    RESENT = 2  # a resend of the current value: nothing changed
    REPLACED = 3  # a resend of a write applied earlier and replaced since: nothing changed


class RecordPutReply(NamedTuple):
    """A record_put reply. ``version``: the write's (the current one on a conflict, 0
    if absent); ``expires_ms``: the stored expiry (a REPLACED write: the current
    record's, 0 if none); ``updated_ms``: 0 unless WRITTEN or RESENT."""

    status: PutStatus
    version: int
    expires_ms: int = 0
    updated_ms: int = 0

    @classmethod
    def parse(cls, reply: Any) -> RecordPutReply:
        if type(reply) is bytes:  # written: "<version>,<expires_ms>,<updated_ms>"
            version, expires, updated = reply.split(b",")
            return cls(PutStatus.WRITTEN, int(version), int(expires), int(updated))
        status = PutStatus(int(reply[0]))
        if status is PutStatus.CONFLICT:
            return cls(status, int(reply[1]))
        return cls(status, int(reply[1]), int(reply[2]), int(reply[3]))

    @property
    def conflict(self) -> bool:
        return self.status is PutStatus.CONFLICT

    @property
    def wrote(self) -> bool:
        return self.status is not PutStatus.CONFLICT

    @property
    def guarded(self) -> bool:
        """Whether the script reached its fence check (which renews an inline lease):
        a resend it recognised returned before it."""
        return self.status not in (PutStatus.RESENT, PutStatus.REPLACED)


class RecordMergeArgs(NamedTuple):
    """ARGV of record_merge."""

    patch: bytes  # one frame, "<length>:<encoded patch>"
    ttl_ms: int
    keep: bool  # keep the record's TTL if it exists
    tail: bytes  # this merge's header tail "<schema>,<write_id>\n"
    lease: str
    memory_ms: int
    max_bytes: int  # the most payload bytes the record may hold
    brief: bool = False  # reply the header fields, not the value

    def argv(self) -> tuple[Any, ...]:
        keep = _flag(self.keep)
        brief = ("1",) if self.brief else ()
        return (
            self.patch,
            self.ttl_ms,
            keep,
            self.tail,
            self.lease,
            self.memory_ms,
            self.max_bytes,
            *brief,
        )


class MergeStatus(Enum):
    """What record_merge did."""

    APPENDED = "appended"  # the reply is the stored value after the merge
    RESENT = 3  # a merge applied earlier: nothing changed
    REFUSED = 4  # not appended (too large, or another schema): merge by compare-and-set
    BRIEF = 5  # appended; the reply holds the header fields, not the value


class RecordMergeReply(NamedTuple):
    """A record_merge reply. ``value``: the stored value after the merge (APPENDED), or
    the current one (RESENT; None when the record is gone); ``version``: the resent
    merge's; ``size``: the payload bytes the merge would have grown to (REFUSED; 0: the
    record is at another schema)."""

    status: MergeStatus
    value: bytes | None = None
    version: int = 0
    size: int = 0
    expires_ms: int = 0  # (BRIEF) the record's expiry; 0 = none

    @classmethod
    def parse(cls, reply: Any) -> RecordMergeReply:
        if type(reply) is bytes:
            return cls(MergeStatus.APPENDED, reply)
        status = MergeStatus(int(reply[0]))
        if status is MergeStatus.REFUSED:
            return cls(status, size=int(reply[1]))
        if status is MergeStatus.BRIEF:
            version, expires_ms, _ = reply[1].split(b",")
            return cls(status, version=int(version), expires_ms=int(expires_ms))
        current = reply[2] if len(reply) > 2 else None  # fakeredis reports a nil
        return cls(status, current, int(reply[1]))

    @property
    def wrote(self) -> bool:
        return self.status is not MergeStatus.REFUSED

    @property
    def guarded(self) -> bool:
        """Whether the script reached its fence check (which renews an inline lease):
        a resend it recognised returned before it."""
        return self.status is not MergeStatus.RESENT


class RecordDeleteArgs(NamedTuple):
    """ARGV of record_delete. ``expected``: None = any version."""

    expected: int | None
    lease: str
    write_id: str  # the delete's own id, so that a resend reports the delete it made
    memory_ms: int

    def argv(self) -> tuple[Any, ...]:
        expected = "" if self.expected is None else self.expected
        return (expected, self.lease, self.write_id, self.memory_ms)


class RecordDeleteReply(NamedTuple):
    """A record_delete reply. ``version``: the deleted one (0 for a resend of a delete
    already made), or when not deleted the current one (0: absent)."""

    deleted: bool
    version: int

    @classmethod
    def parse(cls, reply: Any) -> RecordDeleteReply:
        return cls(int(reply[0]) != 0, int(reply[1]))  # 2: a resend of one made

    @property
    def wrote(self) -> bool:
        return self.deleted

    @property
    def guarded(self) -> bool:
        """Whether the script reached its fence check (which renews an inline lease):
        a resend it recognised returned before it."""
        return not (self.deleted and self.version == 0)  # {2, 0}: a resend


class RecordTouchArgs(NamedTuple):
    """ARGV of record_touch."""

    ttl_ms: int
    with_value: bool  # also return the value (get with touch)
    lease: str

    def argv(self) -> tuple[Any, ...]:
        return (self.ttl_ms, _flag(self.with_value), self.lease)


class RecordTouchReply(NamedTuple):
    """A record_touch reply: ``found`` False when there is no such record; ``value``
    the one read before the touch (its header's expiry is the old one: take
    ``expires_ms``), None unless asked for."""

    found: bool
    expires_ms: int = 0
    value: bytes | None = None

    @classmethod
    def parse(cls, reply: Any) -> RecordTouchReply:
        if reply is None:
            return cls(False)
        return cls(True, int(reply[0]), reply[1] or None)

    @property
    def wrote(self) -> bool:
        return self.found


class RecordCompactArgs(NamedTuple):
    """ARGV of record_compact."""

    tail: bytes  # the header tail of the value that was read
    length: int  # its length in bytes (header included)
    payload: bytes  # the new payload
    new_tail: bytes  # the new header tail (a fresh write id)
    memory_ms: int

    def argv(self) -> tuple[Any, ...]:
        return (self.tail, self.length, self.payload, self.new_tail, self.memory_ms)


class RecordCompactReply(NamedTuple):
    """A record_compact reply: False when the record changed since it was read."""

    rewritten: bool

    @classmethod
    def parse(cls, reply: Any) -> RecordCompactReply:
        return cls(int(reply) == 1)

    @property
    def wrote(self) -> bool:
        return self.rewritten


def check_version(version: object, *, allow_zero: bool = True) -> int:
    """Validate an ``if_version`` argument."""
    if isinstance(version, bool) or not isinstance(version, int):
        raise TypeError(f"if_version must be an int, got {type(version).__name__}")
    low = 0 if allow_zero else 1
    if not low <= version < 2**63:
        raise ValueError(f"if_version must be between {low} and 2**63-1, got {version}")
    return version


def check_attempts(attempts: object) -> int:
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 10_000:
        raise ValueError(f"attempts must be an int from 1 to 10000, got {attempts!r}")
    return attempts


def _expiry(expires_ms: int) -> dt.datetime | None:
    if not expires_ms:
        return None
    return dt.datetime.fromtimestamp(expires_ms / 1000, tz=dt.timezone.utc)


# A sealed payload (signing keys): "H1,<write id>,<key id>:<HMAC hex>\n<codec bytes>", the
# seal over the record's key, the header's schema, that write id and the bytes. Inside
# the payload, so the scripts never look at it; a merge frame is one such unit too.
_UNIT: Final = re.compile(rb"H1,([A-Za-z0-9_-]{1,32}),([A-Za-z0-9_-]{1,32}:[0-9a-f]{64})\n")


class RecordSpec:
    """A collection's settings and every non-I/O step of its operations."""

    __slots__ = (
        "_key_cache",
        "_migrations",
        "_schema",
        "codec",
        "keys",
        "kind",
        "max_bytes",
        "signing",
        "ttl_ms",
    )

    def __init__(
        self,
        keys: KeySpace,
        kind: str,
        codec: Codec,
        *,
        ttl: float | None,
        max_bytes: int,
        schema: int = 1,
        migrations: Migrations | None = None,
        signing: SigningKeys | None = None,
    ) -> None:
        self.keys = keys
        self.signing = signing
        self.kind = kind
        self.codec = codec
        self.ttl_ms = check_ttl(ttl, "collection ttl")
        self.max_bytes = check_max_bytes(max_bytes)
        self._schema = schema
        self._migrations = migrations
        self._key_cache: dict[str, str] = {}
        keys.record_pattern(kind)  # validates the kind once, up front

    @property
    def schema(self) -> int:
        """The schema this code writes: one past the last registered migration step."""
        if self._migrations is None:
            return self._schema
        return self._migrations.current(self.kind)

    def guarded_keys(
        self, entity_id: str, key: str, lease: Any
    ) -> tuple[tuple[str, str, str], str]:
        """(KEYS, lease value) of a write: the record key, its id's lock key and its
        recent writes.

        Raises:
            ValueError: the lease is for another id. LockLost: it is known lost.
        """
        writes = self.keys.writes(key)
        if lease is None:
            return (key, key, writes), ""  # the script reads KEYS[2] only when guarded
        lock_key, value = guard_args(lease, entity_id, self.keys.lock(entity_id))
        return (key, lock_key, writes), value

    def key(self, entity_id: str) -> str:
        # Agents address the same few ids over and over; a small cache saves the
        # validation and escaping on the hot path. Cleared, not evicted: simple and bounded.
        key = self._key_cache.get(entity_id) if type(entity_id) is str else None
        if key is None:
            key = self.keys.record(self.kind, entity_id)
            if len(self._key_cache) >= 4096:
                self._key_cache.clear()
            self._key_cache[entity_id] = key
        return key

    def write_ttl(self, ttl: TTL, *, keep_default: bool) -> tuple[int, bool]:
        """(ttl in ms, keep the record's own TTL?) for a write.

        ``DEFAULT`` means the collection's TTL, or for ``keep_default`` writes
        (update, merge) the record's current TTL, the collection's when creating.
        """
        if isinstance(ttl, Default):
            return self.ttl_ms, keep_default
        return check_ttl(ttl), False

    def touch_ttl(self, ttl: TTL) -> int:
        """TTL in ms for touch; a collection without a TTL needs an explicit one."""
        if not isinstance(ttl, Default):
            return check_ttl(ttl)
        if not self.ttl_ms:
            raise ValueError(
                f"collection {self.kind!r} has no TTL to slide: pass ttl= (seconds, or None)"
            )
        return self.ttl_ms

    def encode(self, key: str, value: Any) -> bytes:
        """Encode ``value`` for ``key``; StateTooLarge if it is over ``max_bytes``."""
        payload = self.codec.encode(value, key.encode("utf-8"))
        if len(payload) > self.max_bytes:
            raise StateTooLarge(len(payload), self.max_bytes, key)
        return payload

    def sealed(self, key: str, schema: int, write_id: str, data: bytes) -> bytes:
        """``data`` as stored: sealed with the primary signing key (bound to the key,
        schema and write id), or as it is without signing keys."""
        if self.signing is None:
            return data
        seal = self.signing.seal(
            b"record", key.encode("utf-8"), b"%d" % schema, write_id.encode("ascii"), data
        )
        return b"H1,%s,%s\n%s" % (write_id.encode("ascii"), seal, data)

    def opened(self, key: str, schema: int, data: bytes, write_id: str | None = None) -> bytes:
        """The codec bytes of a stored payload or frame, its seal checked (``write_id``:
        the header's, which a plain record's seal must name).

        Raises:
            IntegrityError: with signing keys, not sealed, or a seal that does not
                authenticate (edited, moved from another key, another schema or write).
        """
        match = _UNIT.match(data)
        if match is None:
            if self.signing is not None and not self.signing.read_unsigned:
                raise IntegrityError(
                    f"value at {key!r} is not signed (written without a signing key, or "
                    f"its seal was removed)"
                )
            return data
        body = data[match.end() :]
        if self.signing is None:
            return body  # nothing to check it with: read like unkeyed data
        wid, seal = match.group(1), match.group(2)
        if write_id is not None and wid.decode() != write_id:
            raise IntegrityError(
                f"value at {key!r} is sealed for write {wid.decode()!r}, its header names "
                f"{write_id!r} (edited)"
            )
        where, context = f"value at {key!r}", key.encode("utf-8")
        self.signing.check(where, seal, b"record", context, b"%d" % schema, wid, body)
        return body

    def stale(self, key: str, raw: bytes, current: Callable[[bytes], bool]) -> bool:
        """Whether rotate-keys must rewrite the stored value ``raw``: a payload or
        frame ``current`` says is not under the primary key, or not sealed with the
        signing primary (every part is looked at: ``current`` counts them)."""
        env = unpack(key, raw)
        parts = frames(key, env.payload) if env.log else [env.payload]
        stale = False
        for part in parts:
            if not part:
                continue
            body = self.opened(key, env.schema, part, None if env.log else env.write_id)
            if not current(body):
                stale = True
            elif self.signing is not None:
                match = _UNIT.match(part)
                stale = stale or match is None or not self.signing.current(match.group(2))
        return stale

    def put_args(
        self,
        expected: int | None,
        ttl_ms: int,
        write_id: str,
        payload: bytes,
        *,
        keep: bool = False,
        lease: str = "",
        memory_ms: int = 0,
        key: str = "",
    ) -> RecordPutArgs:
        """The arguments of record_put for an encoded value (see :meth:`encode`).
        ``key``: the record's, which a seal is bound to (needed with signing keys)."""
        if self.signing is not None and not key:
            raise ValueError("put_args needs the record's key to seal it")
        write = tail(self.schema, write_id)
        value = frame(write, self.sealed(key, self.schema, write_id, payload))
        return RecordPutArgs(expected, ttl_ms, value, write, keep, lease, memory_ms)

    def written(
        self,
        entity_id: str,
        key: str,
        data: Any,
        expected: int | None,
        reply: RecordPutReply,
        ttl_ms: int = 0,
        keep: bool = False,
    ) -> Record:
        """Turn a record_put reply into a Record (holding ``data`` as passed, not a
        re-decoded copy: that would cost a decode per write), or raise ConflictError.
        ``ttl_ms`` and ``keep`` are the write's, for the expiry of a late resend."""
        version, expires_ms = reply.version, reply.expires_ms
        if reply.status is PutStatus.CONFLICT:
            raise ConflictError(key, expected if expected is not None else -1, version)
        if reply.status is PutStatus.REPLACED and not keep:
            # Applied earlier and replaced since: its expiry was its TTL from when it was
            # written, and its version is that time in µs (unless versions ran ahead).
            expires_ms = version // 1000 + ttl_ms if ttl_ms else 0
        # A keep-TTL write replaced since reports the record's current expiry.
        return Record(entity_id, data, version, _expiry(expires_ms))

    def merge_args(
        self,
        key: str,
        payload: bytes,
        ttl_ms: int,
        write_id: str,
        *,
        keep: bool,
        lease: str = "",
        memory_ms: int = 0,
        brief: bool = False,
    ) -> RecordMergeArgs:
        """The arguments of record_merge for an encoded patch (see :meth:`encode`);
        ``brief``: the reply holds the new version and expiry, not the value."""
        write = tail(self.schema, write_id)
        patch = patch_frame(self.sealed(key, self.schema, write_id, payload))
        return RecordMergeArgs(patch, ttl_ms, keep, write, lease, memory_ms, self.max_bytes, brief)

    def merged(self, entity_id: str, key: str, reply: RecordMergeReply) -> Merged | None:
        """A record_merge reply as the record after the merge; None when the patch did
        not fit in ``max_bytes`` as a frame (nothing written: merge by compare-and-set).
        A recognised resend reports the record as it is now (data None if it is gone)."""
        if reply.status is MergeStatus.REFUSED:
            return None
        if reply.status is MergeStatus.BRIEF:
            # Not read back: the patches are not counted, so a brief merge folds them
            # back by chance (one in COMPACT_AT, about as often as counting would).
            expiry = _expiry(reply.expires_ms)
            return Merged(Record(entity_id, None, reply.version, expiry), None, compact_by_chance())
        value = reply.value
        if reply.status is MergeStatus.APPENDED and value is not None:
            env = unpack(key, value)
            parts = frames(key, env.payload)
            stored = fold(parts, self._decoder(key, env.schema))
            data = self._upgraded(key, env, stored)
            record = Record(entity_id, data, env.version, _expiry(env.expires_ms))
            if not should_compact(len(parts) - 1):
                return Merged(record, None)
            compact = Compaction(tail(env.schema, env.write_id), len(value), stored, env.schema)
            return Merged(record, compact)
        if value is not None:
            env = unpack(key, value)
            now = Record(entity_id, self._data(key, env), env.version, _expiry(env.expires_ms))
            return Merged(now, None)
        # Applied, then deleted (or expired): the state right after it is not known.
        return Merged(Record(entity_id, None, reply.version, None), None)

    def compact_keys(self, key: str) -> tuple[str, str]:
        """KEYS of record_compact: the record and its recent writes."""
        return key, self.keys.writes(key)

    def compaction(self, key: str, raw: bytes) -> Compaction:
        """What rewriting the stored value ``raw`` in place needs: its tail, length, the
        data as stored (folded, not migrated) and its schema (rotate-keys)."""
        env = unpack(key, raw)
        stored = self._stored(key, env)
        return Compaction(tail(env.schema, env.write_id), len(raw), stored, env.schema)

    def compact_args(
        self, key: str, compact: Compaction, write_id: str, memory_ms: int = 0
    ) -> RecordCompactArgs | None:
        """The arguments of record_compact, or None when the new payload is over ``max_bytes``
        (a merge then folds by compare-and-set next time, which reports it). The value
        keeps its schema: frames appended since are in that schema too."""
        try:
            payload = self.encode(key, compact.data)
        except StateTooLarge:
            return None
        new_tail = tail(compact.schema, write_id)
        payload = self.sealed(key, compact.schema, write_id, payload)
        return RecordCompactArgs(compact.tail, compact.length, payload, new_tail, memory_ms)

    def outdated(self, key: str, raw: bytes) -> bool:
        """Whether the stored value ``raw`` is at an older schema than this code writes.

        Raises:
            SchemaError: it is at a newer one.
        """
        stored, current = unpack(key, raw).schema, self.schema
        if stored > current:
            raise SchemaError(
                f"value at {key!r} has schema {stored}, newer than this code knows ({current})"
            )
        return stored < current

    def _decoder(self, key: str, schema: int) -> Callable[[bytes], Any]:
        context = key.encode("utf-8")
        return lambda raw: self.codec.decode(self.opened(key, schema, raw), context)

    def _stored(self, key: str, env: Envelope) -> Any:
        """The data as stored: patches folded, in the value's own schema, seals checked."""
        if env.log:
            return fold(frames(key, env.payload), self._decoder(key, env.schema))
        data = self.opened(key, env.schema, env.payload, env.write_id)
        return self.codec.decode(data, key.encode("utf-8"))

    def _upgraded(self, key: str, env: Envelope, data: Any) -> Any:
        if self._migrations is None:
            if env.schema > self._schema:
                raise SchemaError(
                    f"value at {key!r} has schema {env.schema}, newer than this code "
                    f"knows ({self._schema})"
                )
            return data
        return self._migrations.upgrade(self.kind, env.schema, data, f"value at {key!r}")

    def _data(self, key: str, env: Envelope) -> Any:
        if (
            self.signing is None
            and not env.log
            and env.schema == self.schema
            and not env.payload.startswith(b"H1,")
        ):
            # What most reads are (unsigned, one value, in the current schema), decoded
            # as _stored and _upgraded would, without their calls: a get's cost over a
            # raw GET is a few µs, and these were one of them.
            return self.codec.decode(env.payload, key.encode("utf-8"))
        return self._upgraded(key, env, self._stored(key, env))

    def record(self, entity_id: str, key: str, raw: bytes | None) -> Record | None:
        """Decode a stored value (GET reply) into a Record."""
        if raw is None:
            return None
        env = unpack(key, raw)
        return Record(entity_id, self._data(key, env), env.version, _expiry(env.expires_ms))

    def touched(self, entity_id: str, key: str, reply: RecordTouchReply) -> Record | None:
        """A record_touch reply (with value) into a Record carrying the new expiry."""
        if not reply.found or reply.value is None:
            return None
        env = unpack(key, reply.value)
        return Record(entity_id, self._data(key, env), env.version, _expiry(reply.expires_ms))

    def deleted(self, key: str, expected: int | None, reply: RecordDeleteReply) -> bool:
        if not reply.deleted:
            if expected is None:
                return False  # guarded delete of a record that is not there
            raise ConflictError(key, expected, reply.version)
        return True


def ttl_seconds(pttl: int) -> float | None:
    """PTTL reply -> seconds left; None if the key is missing, inf if it never expires."""
    if pttl == -2:
        return None
    if pttl == -1:
        return math.inf
    return pttl / 1000
