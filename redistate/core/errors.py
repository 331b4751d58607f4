"""The exception hierarchy. Every error redistate raises derives from RedistateError,
but for malformed arguments: TypeError or ValueError (InvalidId and CodecError are both)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "BatchError",
    "BatchNotSent",
    "CodecError",
    "ConflictError",
    "ForkedStore",
    "IntegrityError",
    "InvalidId",
    "LockError",
    "LockLost",
    "LockTimeout",
    "NotReplicated",
    "PermissionDenied",
    "RedistateError",
    "RedistateWarning",
    "SchemaError",
    "StateTooLarge",
    "StepFailed",
    "StepInterrupted",
    "StoreFull",
    "StoreUnavailable",
    "TransportRefused",
    "UnsafeServer",
]


class RedistateError(Exception):
    """Root of every redistate error."""


class ConflictError(RedistateError):
    """A conditional write found another version than the one it expected."""

    def __init__(self, key: str, expected: int, actual: int) -> None:
        self.key = key
        self.expected = expected
        self.actual = actual
        found = "no record" if actual == 0 else f"version {actual}"
        want = "no record (create-only)" if expected == 0 else f"version {expected}"
        super().__init__(f"conflict on {key!r}: expected {want}, found {found}")


class LockError(RedistateError):
    """Base of lease errors."""


class LockTimeout(LockError):
    """A lease could not be acquired before the deadline."""


class LockLost(LockError):
    """The lease expired or was taken over; the guarded write was rejected."""


class StepInterrupted(RedistateError):
    """A non-idempotent step was started by an earlier owner and never completed: it
    may or may not have had its effect, so it is not run again by itself."""

    def __init__(self, name: str, started_at: Any, fence: int | None) -> None:
        self.name = name
        self.started_at = started_at
        self.fence = fence
        super().__init__(
            f"step {name!r} was started at {started_at} by the owner with fence {fence} "
            f"and never completed; it is not idempotent, so it is not run again: check "
            f"its effect, then record it (run.step(..., idempotent=True) re-runs it)"
        )


class StepFailed(RedistateError):
    """A step's recorded failure, re-raised on resume (``retry_failed=True`` runs it
    again instead)."""

    def __init__(self, name: str, type: str, message: str) -> None:
        self.name = name
        self.type = type
        self.message = message
        super().__init__(f"step {name!r} failed earlier with {type}: {message}")


class IntegrityError(RedistateError):
    """Stored bytes do not match their digest, or are not a redistate value."""


class SchemaError(RedistateError):
    """A stored value's schema this code cannot bring up to date: newer than it knows,
    or older than its first registered migration step."""


class StateTooLarge(RedistateError):
    """An encoded value is larger than the collection allows; nothing was written."""

    def __init__(self, size: int, limit: int, key: str | None = None) -> None:
        self.size = size
        self.limit = limit
        self.key = key
        where = f" for {key!r}" if key else ""
        super().__init__(f"encoded state{where} is {size} bytes, over the limit of {limit} bytes")


class TransportRefused(RedistateError, ValueError):
    """A command the connection cannot carry, refused before it was sent: over a REST
    API, an argument that is not UTF-8 text or a request over its size limit. Nothing
    was written."""


class InvalidId(RedistateError, ValueError):
    """An entity id, namespace or collection name that cannot be used."""


class CodecError(RedistateError, TypeError):
    """A value that cannot be encoded, or stored bytes that cannot be decoded."""


class StoreUnavailable(RedistateError):
    """The server could not be reached or did not answer in time."""


class ForkedStore(RedistateError):
    """An embedded store (``Store.embedded()``) used in a process forked after it was
    made: its data are in the parent's memory, so the child's writes would be lost.
    Nothing was sent; use a server URL to share state between processes."""


class StoreFull(RedistateError):
    """The server refused a write for want of memory (maxmemory with noeviction).
    Nothing was written: scripts check memory before their first write."""


class NotReplicated(RedistateError):
    """A write made with ``durability="replicated"`` was applied on the primary but no
    replica confirmed it in time: it may still exist, and may be lost in a failover."""


class PermissionDenied(RedistateError):
    """The server's ACL refused a command (NOPERM), also one called inside a script;
    ``command`` names it (lowercase, as ACL rules do). Never retried: the user's
    permissions must change first. The command, or the script it was in, changed
    nothing: every script checks its commands before its first write."""

    def __init__(self, command: str, message: str) -> None:
        self.command = command
        super().__init__(message)


class UnsafeServer(RedistateError):
    """``server_check="strict"`` and a server whose configuration breaks a guarantee
    (an eviction policy other than ``noeviction``, say); raised before any write."""

    def __init__(self, policy: str, message: str) -> None:
        self.policy = policy
        super().__init__(message)


class BatchNotSent(RedistateError):
    """A batched write's result was asked for before the batch was sent (or after
    the block raised, which sends nothing)."""


class BatchError(RedistateError):
    """Some writes of a batch failed; the others were applied (writes are not atomic
    together). ``failures`` lists ``(index, kind, error)`` in queueing order; every
    write's :class:`Pending` keeps its own result or error."""

    def __init__(self, failures: Sequence[tuple[int, str, BaseException]], total: int) -> None:
        self.failures = list(failures)
        self.exceptions = [error for _, _, error in self.failures]
        self.total = total
        shown = "; ".join(f"#{at} {kind}: {error}" for at, kind, error in self.failures[:5])
        more = len(self.failures) - 5
        tail = f"; and {more} more" if more > 0 else ""
        super().__init__(
            f"{len(self.failures)} of {total} batched writes failed (the others were "
            f"applied): {shown}{tail}"
        )


class RedistateWarning(UserWarning):
    """A server configuration under which a guarantee may not hold (``server_check="warn"``).
    Also logged on ``logging.getLogger("redistate")``."""
