"""RFC 7386 JSON merge patch, as a pure function."""

from __future__ import annotations

from typing import Any

__all__ = ["merge_patch"]


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply ``patch`` to ``target`` (RFC 7386) and return the result.

    Objects merge key by key, ``None`` removes a key, anything else replaces.
    Neither argument is mutated; untouched subtrees of ``target`` are shared.
    """
    if not isinstance(patch, dict):
        return patch
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
