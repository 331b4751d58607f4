"""TTL arguments: seconds from users, milliseconds for Redis. Shared by every kind."""

from __future__ import annotations

import math
from typing import Final

__all__ = ["MAX_TTL_SECONDS", "check_ttl"]

MAX_TTL_SECONDS: Final = 100 * 365 * 86400  # keeps expiry timestamps far below 2**53 ms


def check_ttl(ttl: object, what: str = "ttl") -> int:
    """Seconds (or None for no expiry) -> milliseconds for PX, 0 meaning no expiry."""
    if type(ttl) is int and 0 < ttl <= MAX_TTL_SECONDS:
        return ttl * 1000  # the common case, without the float dance below
    if ttl is None:
        return 0
    if isinstance(ttl, bool) or not isinstance(ttl, int | float):
        raise TypeError(f"{what} must be seconds as a number or None, got {type(ttl).__name__}")
    # Plain comparisons: NaN and inf fail them, and huge ints never overflow a float.
    if not 0 < ttl <= MAX_TTL_SECONDS:
        raise ValueError(f"{what} must be > 0 and <= {MAX_TTL_SECONDS} seconds, got {ttl!r}")
    # Never shorter than asked, but 2.007 * 1000 is 2007.0000000000002 in binary floating
    # point: round away that noise before rounding up.
    return max(1, math.ceil(round(ttl * 1000, 6)))
