"""The record envelope: one Redis string holding a small text header and the payload.

``R1,<version>,<expires_ms>,<updated_ms>,<schema>,<write_id>\\n<payload>``

The header is built by the Lua scripts (they own version and time) and parsed here
and in ``lua/_envelope.lua``. A flat string keeps memory per record low and lets a
plain GET read a record in one command.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import IntegrityError

__all__ = ["Envelope", "unpack"]

_MAGIC = b"R1,"


@dataclass(frozen=True, slots=True)
class Envelope:
    version: int
    expires_ms: int
    updated_ms: int
    schema: int
    write_id: str
    payload: bytes


def unpack(key: str, raw: bytes) -> Envelope:
    """Split a stored value into header fields and payload.

    Raises:
        IntegrityError: the value is not a redistate record.
    """
    newline = raw.find(b"\n")
    if newline < 0 or not raw.startswith(_MAGIC):
        raise IntegrityError(f"value at {key!r} is not a redistate record")
    fields = raw[3:newline].split(b",")
    try:
        version, expires_ms, updated_ms, schema = (int(f) for f in fields[:4])
        (write_id,) = fields[4:]
    except ValueError:
        raise IntegrityError(f"value at {key!r} has a malformed record header") from None
    return Envelope(version, expires_ms, updated_ms, schema, write_id.decode("ascii"),
                    raw[newline + 1 :])
