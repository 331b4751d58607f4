"""The record envelope: one Redis string holding a small text header and the payload.

``R1,<version:16>,<expires_ms:13>,<updated_ms:13>,<schema>,<write_id>\\n<payload>``

A record that merges appended patches to starts with ``M1`` instead, and its payload is
frames (``redistate.records.mergelog``): the base, then the patches, folded by the reader.

The client frames a value with zeroed version/expiry/updated fields; the write script
fills them in place (SETRANGE), so the payload never passes through Lua. Fixed widths
let scripts read and patch the header without touching the payload. Parsed here and in
``lua/_envelope.lua``, which accept exactly the same shapes.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from .errors import IntegrityError

__all__ = ["Envelope", "frame", "tail", "unpack"]

# Versions live in Lua doubles inside the scripts: exact only up to 2**53 - 1. Zero is
# never stored (a frame has version 0 until the script fills it; create-only means
# "no record", so a stored 0 would make if_version=0 overwrite it).
MAX_VERSION: Final = 2**53 - 1
_UNWRITTEN: Final = b"R1,0000000000000000,0000000000000,0000000000000,"
_HEADER: Final = re.compile(
    rb"([RM])1,(\d{16}),(\d{13}),(\d{13}),(\d{1,9}),([A-Za-z0-9_-]{1,32})\n"
)


class Envelope(NamedTuple):
    version: int
    expires_ms: int
    updated_ms: int
    schema: int
    write_id: str
    payload: bytes
    log: bool = False
    """True for "M1": ``payload`` is frames (a base and merge patches), not one value."""


def tail(schema: int, write_id: str) -> bytes:
    """The header's last part, ``<schema>,<write_id>\\n``: what identifies one write."""
    return b"%d,%s\n" % (schema, write_id.encode("ascii"))


def frame(head_tail: bytes, payload: bytes) -> bytes:
    """The value a write script receives: header with zeroed fields, then the payload."""
    return _UNWRITTEN + head_tail + payload


def unpack(key: str, raw: bytes) -> Envelope:
    """Split a stored value into header fields and payload.

    Raises:
        IntegrityError: the value is not a redistate record.
    """
    match = _HEADER.match(raw)
    if match is None:
        known = raw.startswith((b"R1,", b"M1,"))
        what = "a malformed record header" if known else "no record header"
        raise IntegrityError(f"value at {key!r} is not a redistate record: {what}")
    kind, version, expires_ms, updated_ms, schema, write_id = match.groups()
    if not 0 < int(version) <= MAX_VERSION:
        raise IntegrityError(
            f"value at {key!r} is not a redistate record: version {int(version)} is outside "
            f"1..2**53-1"
        )
    return Envelope(
        int(version),
        int(expires_ms),
        int(updated_ms),
        int(schema),
        write_id.decode("ascii"),
        raw[match.end() :],
        kind == b"M",
    )
