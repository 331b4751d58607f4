"""A script call as the store's retry layer sends it again after a failure.

Tests that replay a call by hand (the same arguments twice) must mark the second as a
resend, as the connection does: only a resend looks its id up in the write memory
(see ``rs_memory`` in redistate/core/lua/_envelope.lua).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redistate.core.scripts import Script

__all__ = ["resent"]


def resent(run: Script, args: Sequence[Any]) -> tuple[Any, ...]:
    """``args`` of ``run`` with its write memory's argument marked as a resend."""
    if run.memory is None:
        raise ValueError(f"{run.name} has no write memory: a resend is the same call")
    out = list(args)
    at = run.memory[1]
    base = str(out[at])
    out[at] = base if base.endswith("r") else f"{base}r"
    return tuple(out)
