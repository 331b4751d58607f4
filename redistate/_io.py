"""The I/O seam between the async source of truth and its generated sync twin.

``scripts/unasync.py`` rewrites ``async_sleep`` to ``sync_sleep``; routing sleeps
through here keeps the rewrite from turning ``await asyncio.sleep(x)`` into a
coroutine that is created and never awaited.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["async_sleep", "sync_sleep"]


async def async_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


def sync_sleep(seconds: float) -> None:
    time.sleep(seconds)
