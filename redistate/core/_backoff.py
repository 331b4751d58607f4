"""Jittered exponential backoff for conflict retries (pure)."""

from __future__ import annotations

import random

__all__ = ["backoff_delay"]

BASE = 0.0005
CAP = 0.05


def backoff_delay(
    attempt: int, rng: random.Random | None = None, base: float = BASE, cap: float = CAP
) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2**attempt)] seconds.

    Without ``rng``, the random module's shared generator, which Python reseeds in
    forked children: processes forked from one parent do not back off in lockstep.

    Full jitter spreads contending writers apart better than a fixed or equal-jitter
    delay (fewer collisions on the next try).
    """
    return (rng or random).uniform(0.0, min(cap, base * (2 ** min(attempt, 30))))
