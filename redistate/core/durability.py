"""When a write counts as done: on the primary alone, or on a replica too (pure).

``"async"`` (the default) is Redis's own: the primary acknowledges, replicas follow
asynchronously, and a failover can lose what they had not received. ``"replicated"``
sends ``WAIT 1 <timeout>`` right behind the write, on the same connection and in the
same round trip: the call returns only once a replica has the write, and raises
NotReplicated (the write may still exist) when none confirms in time.
"""

from __future__ import annotations

import math
from typing import Final, Literal

__all__ = [
    "DEFAULT",
    "DURABILITIES",
    "Durability",
    "check_durability",
    "check_replica_timeout",
]

Durability = Literal["async", "replicated"]
DURABILITIES: Final = ("async", "replicated")
DEFAULT: Final[Durability] = "async"  # named, so code generated for sync never spells it


def check_durability(durability: object) -> int:
    """Replicas a write must reach: 0 for "async", 1 for "replicated"."""
    if durability not in DURABILITIES:
        raise ValueError(f"durability must be one of {DURABILITIES}, got {durability!r}")
    return 1 if durability == "replicated" else 0


def check_replica_timeout(seconds: object) -> int:
    """WAIT's timeout in ms (at least 1: WAIT 0 would block for ever)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(f"replica_timeout must be seconds (a number), got {seconds!r}")
    if not 0 < seconds <= 60 or math.isnan(seconds):
        raise ValueError(f"replica_timeout must be over 0 and at most 60 seconds, got {seconds!r}")
    return max(1, math.ceil(seconds * 1000))
