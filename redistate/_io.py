"""The I/O seam between the async source of truth and its generated sync twin.

``scripts/unasync.py`` rewrites ``async_sleep`` to ``sync_sleep``; routing sleeps
through here keeps the rewrite from turning ``await asyncio.sleep(x)`` into a
coroutine that is created and never awaited.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any

__all__ = ["async_resolve", "async_sleep", "sync_resolve", "sync_sleep"]


async def async_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


def sync_sleep(seconds: float) -> None:
    time.sleep(seconds)


async def async_resolve(value: Awaitable[Any]) -> Any:
    """Await what a user callback returned (AsyncStore accepts coroutine functions)."""
    return await value


def sync_resolve(value: Awaitable[Any]) -> Any:
    close = getattr(value, "close", None)
    if callable(close):
        close()  # a coroutine that is never awaited would warn at garbage collection
    raise TypeError("the function returned an awaitable: use AsyncStore for async functions")
