"""Value codecs: how user state becomes bytes. JSON via orjson; never pickle.

A codec turns a Python value into bytes and back. ``context`` is the Redis key the
bytes are stored under; plain JSON ignores it, an encrypting codec binds the
ciphertext to it so a value copied to another key fails to decrypt.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
import uuid
from typing import Any, Final, Protocol, runtime_checkable

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


_LEAVES = (str, bool, type(None), dt.datetime, dt.date, dt.time, uuid.UUID, enum.Enum)
MAX_DEPTH: Final = 254  # orjson's own nesting limit


def find_unserializable(value: Any, path: str = "$", depth: int = 0) -> tuple[str, str] | None:
    """Locate the first value JSON cannot hold exactly: ``(path, reason)`` or None.

    Mirrors what orjson accepts (plus this codec's ``default`` hook) and also flags
    NaN and infinities, which orjson would silently store as null. Off the hot path:
    called only after orjson refused a value, or wrote a null and the value does
    not read back equal.
    """
    if depth > MAX_DEPTH:
        return path, f"nesting deeper than {MAX_DEPTH} levels (or a reference cycle)"
    if isinstance(value, str):
        bad = None if value.isascii() else _lone_surrogate(value)
        return None if bad is None else (path, f"str with {bad}")
    if isinstance(value, enum.Enum):  # orjson writes the member's value
        return find_unserializable(value.value, path, depth)
    if isinstance(value, _LEAVES):
        return None
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return path, f"float {value!r} (JSON has no NaN or infinity; it would read back as null)"
    if isinstance(value, int):
        if -(2**63) <= value < 2**64:
            return None
        return path, f"integer {str(value)[:40]} (beyond the 64-bit range kept exactly)"
    children: Any
    if depth >= MAX_DEPTH and (isinstance(value, dict | list) or type(value) is tuple):
        # orjson refuses the container one level below its limit, even an empty one.
        return path, f"nesting deeper than {MAX_DEPTH} levels (or a reference cycle)"
    if isinstance(value, dict):
        for k in value:
            if type(k) is not str:  # orjson refuses str subclasses as keys too
                return f"{path}[{k!r}]", f"dict key of type {type(k).__name__} (keys must be str)"
            if not k.isascii() and (bad := _lone_surrogate(k)):
                return f"{path}[{k!r}]", f"dict key with {bad}"
        children = ((f"{path}.{k}" if k.isidentifier() else f"{path}[{k!r}]", v)
                    for k, v in value.items())  # fmt: skip
    elif isinstance(value, list) or type(value) is tuple:
        children = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        children = ((f"{path}.{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value))
    elif callable(getattr(value, "model_dump", None)):
        return find_unserializable(value.model_dump(mode="json"), path, depth)
    elif isinstance(value, set | frozenset):
        return find_unserializable(sorted(value, key=repr), path, depth)
    else:
        kind = f"{type(value).__module__}.{type(value).__qualname__}"
        return path, f"a value of type {kind} is not JSON-serializable"
    for child_path, child in children:
        found = find_unserializable(child, child_path, depth + 1)
        if found:
            return found
    return None


def _lone_surrogate(text: str) -> str | None:
    """What makes ``text`` impossible to write as UTF-8 (orjson refuses it), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate {text[exc.start : exc.end]!r} at index {exc.start} (not UTF-8)"
    return None


def _reads_back(out: bytes, value: Any) -> bool:
    """Whether ``out`` decodes to a value equal to ``value`` (a user type's ``__eq__``
    may raise: then it does not)."""
    try:
        return bool(orjson.loads(out) == value)
    except Exception:
        return False


def _short(path: str, limit: int = 120) -> str:
    return path if len(path) <= limit else f"{path[:60]}…{path[-50:]}"


class JsonCodec:
    """JSON through orjson: dataclasses, datetimes, UUIDs, enums, sets and pydantic
    models in, plain JSON values out. Integers keep their exact value within 64 bits.
    NaN and infinities have no JSON form and are refused (CodecError), not stored as null.
    """

    __slots__ = ("_option",)

    def __init__(self, *, sort_keys: bool = False) -> None:
        self._option = orjson.OPT_SORT_KEYS if sort_keys else 0

    def encode(self, value: Any, context: bytes = b"") -> bytes:
        try:
            out = orjson.dumps(value, default=_default, option=self._option)
        except (orjson.JSONEncodeError, TypeError, ValueError) as exc:
            found = find_unserializable(value)
            where, what = found if found else ("$", str(exc))
            raise CodecError(f"cannot encode {_short(where)}: {what}") from exc
        # orjson writes NaN and infinities as null; only a null in the output can hide
        # one. Reading the output back and comparing is C all the way: a value made of
        # JSON types only reads back equal unless a NaN became None. Unequal (tuples,
        # datetimes, dataclasses read back as lists and strings), the walk decides.
        if b"null" in out and not _reads_back(out, value):
            found = find_unserializable(value)
            if found:
                raise CodecError(f"cannot encode {_short(found[0])}: {found[1]}")
        return out

    def decode(self, data: bytes, context: bytes = b"") -> Any:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise CodecError(f"stored bytes under {context!r} are not JSON: {exc}") from exc


def to_json_value(value: Any) -> Any:
    """``value`` as plain JSON types (dicts, lists, str, int, float, bool, None)."""
    return orjson.loads(JsonCodec().encode(value))
