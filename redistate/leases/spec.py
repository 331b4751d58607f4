"""Fenced leases: the pure half (tokens, values, replies, deadlines). No I/O.

A lease is the lock key ``ns:lock:{name}`` holding ``<token>,<fence>`` with a TTL. The
fence is ``max(last fence + 1, server time in µs)``, the last one kept in
``ns:fence:{name}`` for as long as the lease: a holder's fence is larger than every
earlier holder's, across expiry and deletion of the lock key, restarts, restores and
failovers (while the servers' clocks agree). Guarded writes compare the lock key's
value with the lease's in the write script itself; before sending one, and before
``run.step`` calls its function, the lease checks its own local deadline.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from ..core._ttl import check_ttl
from .guard import INLINE, Guard, guard_args

# Re-exported: guard.py holds them so that a guarded write's kind loads none of the
# rest of this module (a cold start's first put needs only them).

__all__ = [
    "INLINE",
    "Guard",
    "guard_args",
    "LockAbandonArgs",
    "LockAbandonReply",
    "LockAcquireArgs",
    "LockAcquireReply",
    "LockExtendArgs",
    "LockExtendReply",
    "LockReleaseArgs",
    "LockReleaseReply",
    "holder_fence",
    "lease_value",
    "lost_message",
    "refusal",
    "taken_or_expired",
    "new_token",
    "valid_until",
    "wait_budget",
]

MIN_BLOCK: Final = 0.001  # BLPOP's smallest useful timeout, seconds
SHORT_WAIT: Final = 0.1  # below this, wait with a local timer (BLPOP wakes at 1/hz)
# Longest single block on the wake list. A wake-up can be lost (a waiter cancelled
# while its BLPOP reply was in flight, a waiting process killed): this bounds how long
# another waiter can sleep past a free lock. One request per 2 s is not a busy loop.
MAX_BLOCK: Final = 2.0
# How far a client's monotonic clock may run slow against the server's while a lease
# holds, as a fraction of the TTL, plus a fixed allowance for the reply's own trip.
DRIFT: Final = 0.01
DRIFT_FIXED: Final = 0.002


# -- script arguments and replies (see each script's header in redistate/lua) ---------


class LockAcquireArgs(NamedTuple):
    """ARGV of lock_acquire."""

    token: str  # 128 random bits, hex
    ttl_ms: int

    def argv(self) -> tuple[Any, ...]:
        return (self.token, self.ttl_ms)


class LockAcquireReply(NamedTuple):
    """A lock_acquire reply: ``acquired`` (or already held with this token) with its
    ``fence`` and ``ttl_ms`` left; else held by another for ``remaining_ms`` (-1: the
    lock key has no expiry)."""

    acquired: bool
    fence: int = 0
    ttl_ms: int = 0
    remaining_ms: int = 0
    reads: list[Any] | None = None  # lock_acquire_reading's, when acquired

    @classmethod
    def parse(cls, reply: Any) -> LockAcquireReply:
        if int(reply[0]) == 1:
            reads = list(reply[3]) if len(reply) > 3 else None
            return cls(True, int(reply[1]), int(reply[2]), reads=reads)
        return cls(False, remaining_ms=int(reply[1]))

    @property
    def wrote(self) -> bool:
        return self.acquired


def reading_args(reads: Sequence[tuple[Any, ...]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The extra KEYS and ARGV of lock_acquire_reading for ``reads``, commands as a
    MULTI would queue them: ``("LRANGE", key, start, stop)`` or ``("HGETALL", key)``.

    Raises:
        ValueError: a command lock_acquire_reading does not read with.
    """
    keys: list[str] = []
    specs: list[str] = []
    for command in reads:
        name, key, *rest = command
        if name == "LRANGE" and len(rest) == 2:
            specs.append(f"{int(rest[0])}:{int(rest[1])}")
        elif name == "HGETALL" and not rest:
            specs.append("h")
        else:
            raise ValueError(f"lock_acquire_reading reads with LRANGE or HGETALL, not {command!r}")
        keys.append(key)
    return tuple(keys), tuple(specs)


class LockExtendArgs(NamedTuple):
    """ARGV of lock_extend."""

    value: str  # the lease's "<token>,<fence>"
    ttl_ms: int  # new ttl, from now

    def argv(self) -> tuple[Any, ...]:
        return (self.value, self.ttl_ms)


class LockExtendReply(NamedTuple):
    """A lock_extend reply: False when the lease is not held any more."""

    extended: bool

    @classmethod
    def parse(cls, reply: Any) -> LockExtendReply:
        return cls(int(reply) == 1)

    @property
    def wrote(self) -> bool:
        return self.extended


class LockReleaseArgs(NamedTuple):
    """ARGV of lock_release."""

    value: str  # the lease's "<token>,<fence>"
    memory_ms: int  # how long released values are remembered

    def argv(self) -> tuple[Any, ...]:
        return (self.value, self.memory_ms)


class LockReleaseReply(NamedTuple):
    """A lock_release reply: released (now or by an earlier send), or not held."""

    released: bool

    @classmethod
    def parse(cls, reply: Any) -> LockReleaseReply:
        return cls(int(reply) != 0)  # 2: by an earlier send of this release

    @property
    def wrote(self) -> bool:
        return self.released


class LockAbandonArgs(NamedTuple):
    """ARGV of lock_abandon."""

    token: str  # the token of the abandoned acquire

    def argv(self) -> tuple[Any, ...]:
        return (self.token,)


class LockAbandonReply(NamedTuple):
    """A lock_abandon reply: whether this token held the lock (and released it)."""

    released: bool

    @classmethod
    def parse(cls, reply: Any) -> LockAbandonReply:
        return cls(int(reply) == 1)

    @property
    def wrote(self) -> bool:
        return self.released


def valid_until(sent: float, ttl_ms: int) -> float:
    """The local deadline of a lease the server set (or extended) to ``ttl_ms`` in reply
    to a request sent at ``sent`` (monotonic seconds): the server ran it no earlier, so
    the lock key lives at least until ``sent + ttl`` on the server's clock. Less a drift
    margin; past it the holder cannot know it still holds the lease."""
    ttl = ttl_ms / 1000
    return sent + ttl - ttl * DRIFT - DRIFT_FIXED


def lost_message(name: str, fence: int | None, what: str, key: str) -> str:
    """A LockLost message: which lease, what happened, what to do."""
    return (
        f"lease {name!r} (fence {fence}) {what}. Its writes are refused: stop the work on "
        f"{name!r} it guarded, or take the lease again to go on under a new fence (lock "
        f"key {key!r})"
    )


def taken_or_expired(holder: int | None) -> str:
    """What became of a lease whose lock key holds ``holder``'s fence (None: nothing)."""
    if holder is None:
        return "expired before it was renewed (its lock key is gone)"
    return f"was taken over by fence {holder}"


def refusal(reply: str, fence: int | None) -> str:
    """What a guarded write's ``RSLOCKLOST <lock key> <holder fence|free|other>`` reply
    says happened to the lease of ``fence``."""
    # The address is the last " (at ...)": a lease name may hold those words too.
    head, at, _ = reply.rpartition(" (at ")
    holder = (head if at else reply).rpartition(" ")[2]
    if holder == str(fence):  # the same fence, another token: not this acquisition
        return "was taken over (its lock key holds another token)"
    if holder.isdigit():
        return taken_or_expired(int(holder))
    if holder == "free":
        return taken_or_expired(None)
    return "was taken over (its lock key holds another value)"


def new_token() -> str:
    """128 random bits, hex: what identifies one acquisition."""
    return secrets.token_hex(16)


def lease_value(token: str, fence: int) -> str:
    """The lock key's value while this lease holds it."""
    return f"{token},{fence}"


def holder_fence(value: bytes | str | None) -> int | None:
    """The fence in a stored lease value (None: no lease, or not one we wrote)."""
    if value is None:
        return None
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    _, comma, fence = text.rpartition(",")
    return int(fence) if comma and fence.isdigit() else None


def check_wait(wait: object) -> float | None:
    if wait is None:
        return None
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not wait >= 0:
        raise ValueError(f"wait must be seconds >= 0 or None, got {wait!r}")
    return float(wait)


def check_renew(renew: object) -> bool | str:
    """``renew=``: True (a renewer task or thread), False (extend() by hand) or
    "inline" (each guarded write extends the lease; nothing runs in the background)."""
    if renew is True or renew is False or renew == INLINE:
        return renew
    raise ValueError(f"renew must be True, False or 'inline', got {renew!r:.80}")


def check_lease_ttl(ttl: object) -> int:
    ms = check_ttl(ttl, "lease ttl")
    if ms == 0:
        raise ValueError("a lease needs a ttl: a lock without one outlives a crashed holder")
    return ms


def wait_budget(
    deadline: float | None, now: float, held_ms: int, socket_timeout: float | None
) -> float:
    """Seconds to block for a wake-up: until the holder's lease runs out, the caller's
    deadline, or (so that the socket does not time out first) most of the socket timeout.

    ``held_ms`` is the lock key's PTTL: -1 (a key with no TTL, set by hand or by an old
    client) never runs out, so the wait is the longest block, not a busy poll."""
    no_ttl = held_ms == -1
    budget = min(held_ms / 1000 if held_ms > 0 else MAX_BLOCK if no_ttl else MIN_BLOCK, MAX_BLOCK)
    if deadline is not None:
        budget = min(budget, deadline - now)
    if socket_timeout:
        budget = min(budget, socket_timeout * 0.8)
    return max(budget, 0.0)
