"""Batches: writes queued to be sent together, and their results (pure; no I/O).

A kind's shell splits each write into its *call* (the script, keys and arguments it
sends) and its *finish* (what makes the reply a result or an error): the single call
sends one call and finishes it; a batch (redistate/batch_async.py) sends many through
``AsyncConnection.writes`` and finishes each. One source of truth for both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

from .errors import BatchError, BatchNotSent
from .scripts import Script

__all__ = [
    "BatchError",
    "BatchNotSent",
    "Call",
    "Pending",
    "Prepared",
    "pairs",
    "raise_first",
]

T = TypeVar("T")


def pairs(reply: Any) -> list[tuple[bytes, Any]]:
    """A hash or WITHSCORES reply as pairs: RESP2 (and a script) gives a flat list,
    RESP3 a map (a hash) or a list of pairs (a sorted set)."""
    if isinstance(reply, dict):
        return list(reply.items())
    if reply and isinstance(reply[0], list | tuple):
        return [(a, b) for a, b in reply]
    return list(zip(reply[::2], reply[1::2], strict=True))


def raise_first(replies: list[Any]) -> list[Any]:
    """The replies of a batch (``conn.scripts``, ``conn.writes``), or the first failed
    call's error raised: for callers whose calls only make sense together."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


class Call(NamedTuple):
    """One script call of a write: what the connection sends. ``wid``: the id its
    write memory keeps (acknowledged once it returns); ``lease``: the lease guarding it
    (nothing is sent past its local deadline)."""

    script: Script
    keys: Sequence[str]
    args: Sequence[Any]
    wid: str | None = None
    lease: Any = None


class Prepared(NamedTuple):
    """A write checked and encoded, not sent: its call and what turns the reply into
    the write's result (or raises its error). ``finish`` may return an awaitable where
    the write needs more I/O after its reply (a merge that folds its patches back)."""

    kind: str
    call: Call
    finish: Callable[[Any], Any]


_QUEUED, _DONE, _FAILED, _DROPPED = range(4)


class Pending(Generic[T]):
    """The result of a write queued in a batch: :meth:`result` once the batch was sent."""

    __slots__ = ("_error", "_state", "_value", "index", "kind")

    def __init__(self, index: int, kind: str) -> None:
        self.index = index
        """Its position in the batch, from 0."""
        self.kind = kind
        """What it is: ``"sessions.put"``, ``"checkpoints.save"``..."""
        self._state = _QUEUED
        self._value: Any = None
        self._error: BaseException | None = None

    def __repr__(self) -> str:
        state = ("queued", "done", "failed", "not sent")[self._state]
        return f"<Pending #{self.index} {self.kind} {state}>"

    @property
    def done(self) -> bool:
        """True once the batch was sent and this write has a result or an error."""
        return self._state in (_DONE, _FAILED)

    @property
    def error(self) -> BaseException | None:
        """This write's own error (None if it succeeded or is not sent yet)."""
        return self._error

    def result(self) -> T:
        """The write's result (what the single call returns).

        Raises:
            BatchNotSent: the batch was not sent (yet, or the block raised).
            The write's own error: ConflictError, LockLost, NotReplicated...
        """
        if self._state == _DONE:
            return self._value  # type: ignore[no-any-return]
        if self._state == _FAILED:
            assert self._error is not None
            raise self._error
        why = "the block raised, so nothing" if self._state == _DROPPED else "not yet: it"
        raise BatchNotSent(
            f"batched write #{self.index} ({self.kind}) has no result: {why} is sent when "
            f"the 'with store.batch()' block ends (or at batch.send())"
        )

    def _set(self, value: Any) -> None:
        self._state, self._value = _DONE, value

    def _fail(self, error: BaseException) -> None:
        self._state, self._error = _FAILED, error

    def _drop(self) -> None:
        if self._state == _QUEUED:  # a result already there stays readable
            self._state = _DROPPED
