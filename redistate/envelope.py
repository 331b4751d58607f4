"""The record envelope: one Redis string holding a small text header and the payload.

``R1,<version>,<expires_ms>,<updated_ms>,<schema>,<write_id>\\n<payload>``

The header is built by the Lua scripts (they own version and time) and parsed here
and in ``lua/_envelope.lua``. A flat string keeps memory per record low and lets a
plain GET read a record in one command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import IntegrityError

__all__ = ["Envelope", "unpack"]

# Exactly what lua/_envelope.lua accepts: Python must not read what a script refuses.
_HEADER = re.compile(rb"R1,(\d+),(\d+),(\d+),(\d+),([A-Za-z0-9_-]*)\n")


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
    match = _HEADER.match(raw)
    if match is None:
        what = "a malformed record header" if raw.startswith(b"R1,") else "no record header"
        raise IntegrityError(f"value at {key!r} is not a redistate record: {what}")
    version, expires_ms, updated_ms, schema, write_id = match.groups()
    return Envelope(
        int(version),
        int(expires_ms),
        int(updated_ms),
        int(schema),
        write_id.decode("ascii"),
        raw[match.end() :],
    )
