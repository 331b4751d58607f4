"""Size and count arguments, checked where they are given (a store's constructor) even
when what uses them is made later. Shared by records, checkpoints and events."""

from __future__ import annotations

__all__ = ["check_compress_above", "check_keep", "check_max_bytes"]


def check_max_bytes(max_bytes: object, what: str = "max_bytes") -> int:
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
        raise ValueError(f"{what} must be a positive int, got {max_bytes!r}")
    # Redis strings stop at 512 MiB; keep room for the envelope.
    limit = 512 * 1024 * 1024 - 4096
    if max_bytes > limit:
        raise ValueError(f"{what} {max_bytes} is over Redis's string limit ({limit})")
    return max_bytes


def check_keep(value: object, what: str = "keep") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000:
        raise ValueError(f"{what} must be an int from 1 to 100000, got {value!r}")
    return value


def check_compress_above(compress_above: object) -> int:
    if (
        isinstance(compress_above, bool)
        or not isinstance(compress_above, int)
        or compress_above < 0
    ):
        raise ValueError(f"compress_above must be an int >= 0, got {compress_above!r}")
    return compress_above
