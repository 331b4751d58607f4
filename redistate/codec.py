"""Value codecs: how user state becomes bytes. JSON via orjson; never pickle.

A codec turns a Python value into bytes and back. ``context`` is the Redis key the
bytes are stored under; plain JSON ignores it, an encrypting codec binds the
ciphertext to it so a value copied to another key fails to decrypt.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import orjson

from .errors import CodecError

__all__ = ["Codec", "JsonCodec"]


@runtime_checkable
class Codec(Protocol):
    """Turns values into bytes and back. Implementations must be deterministic to decode."""

    def encode(self, value: Any, context: bytes) -> bytes:
        """Serialize ``value``; raise CodecError when it cannot be."""
        ...

    def decode(self, data: bytes, context: bytes) -> Any:
        """Inverse of :meth:`encode`; raise CodecError on bytes it did not produce."""
        ...


def _default(obj: Any) -> Any:
    # orjson handles dataclasses, datetimes, UUIDs and enums itself; this hook adds
    # pydantic models (and anything else with model_dump) and sets/tuples-likes.
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(obj, frozenset | set):
        return sorted(obj, key=repr)
    raise TypeError


_NATIVE = (str, int, float, bool, type(None), dt.datetime, dt.date, dt.time, uuid.UUID, enum.Enum)


def find_unserializable(value: Any, path: str = "$") -> tuple[str, str] | None:
    """Locate the first value JSON cannot hold: ``(path, reason)`` or None.

    Only called after orjson has refused a value, so its cost is off the hot path.
    """
    if isinstance(value, bool | type(None) | str | float):
        return None
    if isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            return path, f"integer {str(value)[:40]} (beyond the 64-bit range kept exactly)"
        return None
    if isinstance(value, _NATIVE):
        return None
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"{path}[{k!r}]", f"dict key of type {type(k).__name__} (keys must be str)"
            found = find_unserializable(v, f"{path}.{k}" if k.isidentifier() else f"{path}[{k!r}]")
            if found:
                return found
        return None
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found = find_unserializable(v, f"{path}[{i}]")
            if found:
                return found
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            found = find_unserializable(getattr(value, f.name), f"{path}.{f.name}")
            if found:
                return found
        return None
    if callable(getattr(value, "model_dump", None)):
        return find_unserializable(value.model_dump(mode="json"), path)
    if isinstance(value, set | frozenset):
        return find_unserializable(sorted(value, key=repr), path)
    return path, f"value of type {type(value).__module__}.{type(value).__qualname__}"


class JsonCodec:
    """JSON through orjson: dataclasses, datetimes, UUIDs, enums and pydantic models in,
    plain JSON values out. Integers keep their exact value within 64 bits.
    NaN and infinities have no JSON form and are stored as null, as orjson does.
    """

    __slots__ = ("_option",)

    def __init__(self, *, sort_keys: bool = False) -> None:
        self._option = orjson.OPT_SORT_KEYS if sort_keys else 0

    def encode(self, value: Any, context: bytes = b"") -> bytes:
        try:
            return orjson.dumps(value, default=_default, option=self._option)
        except (orjson.JSONEncodeError, TypeError, ValueError) as exc:
            found = find_unserializable(value)
            where, what = found if found else ("$", str(exc))
            raise CodecError(f"cannot encode {where}: {what} is not JSON-serializable") from exc

    def decode(self, data: bytes, context: bytes = b"") -> Any:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise CodecError(f"stored bytes under {context!r} are not JSON: {exc}") from exc


def to_json_value(value: Any) -> Any:
    """``value`` as plain JSON types (dicts, lists, str, int, float, bool, None)."""
    return orjson.loads(JsonCodec().encode(value))
