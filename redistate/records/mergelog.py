"""Patched records: merges append patches to the stored value, readers fold them (pure).

A merge must not lose a concurrent update. Read-merge-compare-and-set does that, but
under contention most tries fail and retry. Appending the patch instead never conflicts:
``record_merge`` turns the payload into frames ``<length>:<bytes>`` (the base, then each
patch, all encoded by the collection's codec, so no JSON is parsed on the server and an
encrypting codec works too) under an ``M1`` header. Readers fold the frames with
RFC 7386; every ``COMPACT_EVERY``-th patch from ``COMPACT_AT`` on, the merging client
writes the folded state back (``record_compact``), which keeps what was appended since.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Final

from ..core.errors import IntegrityError
from .mergepatch import merge_patch

__all__ = [
    "COMPACT_AT",
    "COMPACT_EVERY",
    "compact_by_chance",
    "fold",
    "frame",
    "frames",
    "should_compact",
]

COMPACT_AT: Final = 16
"""Patches a record may carry before the next merge folds them back."""
COMPACT_EVERY: Final = 8
"""Past COMPACT_AT, the merge that brings the count to a multiple of this compacts: one
contender tries, not all of them (a failed or skipped try is caught up 8 merges later)."""


def frame(payload: bytes) -> bytes:
    """One frame: ``<length>:<bytes>``."""
    return b"%d:%s" % (len(payload), payload)


def frames(key: str, payload: bytes) -> list[bytes]:
    """Split a patched record's payload into its frames: the base (empty when a merge
    created the record) and the patches.

    Raises:
        IntegrityError: the frames are malformed (cut short, or not ``<length>:``).
    """
    out: list[bytes] = []
    at, end = 0, len(payload)
    while at < end:
        colon = payload.find(b":", at, at + 11)
        digits = payload[at:colon]
        if colon < 0 or not digits.isdigit():
            raise IntegrityError(f"value at {key!r} has a malformed patch frame at byte {at}")
        start = colon + 1
        stop = start + int(digits)
        if stop > end:
            raise IntegrityError(f"value at {key!r} has a patch frame cut short at byte {at}")
        out.append(payload[start:stop])
        at = stop
    if not out:
        raise IntegrityError(f"value at {key!r} is a patched record without a base frame")
    return out


def fold(parts: list[bytes], decode: Callable[[bytes], Any]) -> Any:
    """The state the frames describe: the base ({} if empty), each patch merged in."""
    data = decode(parts[0]) if parts[0] else {}
    for part in parts[1:]:
        data = merge_patch(data, decode(part))
    return data


def compact_by_chance() -> bool:
    """Whether a merge that did not read its record back (and so cannot count its
    patches) folds them back: one in COMPACT_AT, so a record's patches number about
    COMPACT_AT between folds whoever merges (``max_bytes`` bounds them in any case)."""
    return random.random() < 1 / COMPACT_AT


def should_compact(patches: int) -> bool:
    """Whether the merge that left ``patches`` patches should fold them back."""
    return patches >= COMPACT_AT and patches % COMPACT_EVERY == 0
