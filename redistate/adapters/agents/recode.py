"""Re-encoding Agents SDK session items for rotate-keys (pure: the I/O is
rotate_async.py here)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...core.codec import Codec

__all__ = ["recoded_items"]


def recoded_items(
    key: str, items: Sequence[bytes], codec: Codec, current: Callable[[bytes], bool]
) -> tuple[list[bytes], int]:
    """(old, new) pairs for ``core/lua/recode_items.lua``, one per item of the Agents SDK
    session ``key`` not under the primary key, and how many were current. Items are
    encoded with the key's bytes as context, as ``RedistateSession`` encodes them.

    Raises:
        IntegrityError: an item that does not decrypt with any known key.
    """
    context = key.encode("utf-8")
    pairs: list[bytes] = []
    for item in items:
        if not current(item):
            pairs += [item, codec.encode(codec.decode(item, context), context)]
    return pairs, len(items) - len(pairs) // 2
