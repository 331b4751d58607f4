"""A guarded write's lease, as its script takes it: the pure half, no I/O.

Every kind that takes ``lease=`` turns it into the lock key and lease value its write
script compares (``rs_guard``). Apart from the rest of leases/spec.py so that a kind's
first write loads only this.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from ..core.errors import LockLost

__all__ = ["INLINE", "Guard", "guard_args"]

INLINE: Final = "inline"  # renew=: extended by each guarded write, no renewer


class Guard(NamedTuple):
    """What a guarded write's script needs of its lease: the lock key (KEYS) and the
    lease's value (ARGV; "" when unguarded)."""

    lock_key: str
    value: str


def guard_args(lease: Any, entity_id: str, lock_key: str) -> Guard:
    """The lock key and lease value of a guarded write's script ("" when unguarded).

    Raises:
        TypeError: ``lease`` is not a lease (from ``store.lock()``).
        ValueError: the lease is for another entity or namespace.
        LockLost: the lease is already known to be lost.
    """
    if lease is None:
        return Guard(lock_key, "")
    name = getattr(lease, "name", None)
    if not isinstance(name, str) or not hasattr(lease, "lost") or not hasattr(lease, "key"):
        raise TypeError(
            f"lease= must be a lease from store.lock() or None, got {type(lease).__name__}"
        )
    if name != entity_id:
        raise ValueError(f"lease {name!r} guards entities named {name!r}, not {entity_id!r}")
    if getattr(lease, "key", None) != lock_key:
        raise ValueError(f"lease on {lease.key!r} belongs to another namespace than {lock_key!r}")
    value = lease.value
    if value is not None and getattr(lease, "renew", None) == INLINE:
        value = f"{value};{lease.ttl_ms}"  # each guarded write extends it (rs_guard)
    if lease.lost.is_set() or value is None:
        overdue = getattr(lease, "_overdue", None)
        problem = overdue() if callable(overdue) else None
        if hasattr(lease, "_reported"):
            lease._reported = True  # the caller has heard it: exit does not raise again
        raise LockLost(problem or f"lease {name!r} is not held")
    return Guard(lock_key, value)
