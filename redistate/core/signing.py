"""Keyed integrity: HMAC-SHA-256 seals on what a store writes (optional).

``SigningKeys({"s1": key32}, primary="s1")`` given to a Store as ``signing=`` seals
audit events (the chain link itself becomes an HMAC), trim anchors, checkpoints, deltas
and records with the primary key, and checks every seal on read and verify with
whichever known key it names, so keys rotate like ``EncryptedCodec``'s: add the new key
as primary, run ``redistate rotate-keys`` (which re-seals), then drop the old one.

Without a key, the SHA-256 digests catch accidental damage only: anyone who can write
to Redis can recompute them. With one, an edit, a removal inside an event chain, a value
moved to another key or to another checkpoint's slot fails to authenticate
(IntegrityError naming the key), unless the writer also holds a signing key.

A seal is ``<key id>:<64 hex>``: an HMAC over a domain name and length-prefixed parts,
so no part can be shifted into another. A store with signing keys refuses unsealed data
(an attacker would otherwise strip the seal and recompute the plain digest) unless
``read_unsigned`` is set, which ``rotate-keys`` does to seal data written before.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from typing import Final

from .errors import IntegrityError

__all__ = ["SigningKeys", "digest_problem", "is_seal", "seal_key_id"]

_KEY_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,32}")
_SEAL: Final = re.compile(rb"([A-Za-z0-9_-]{1,32}):([0-9a-f]{64})")
_MIN_KEY: Final = 16


def _message(domain: bytes, parts: tuple[bytes, ...]) -> bytes:
    out = [b"redistate-seal-1\x00", domain, b"\x00"]
    for part in parts:
        out += [b"%d:" % len(part), part]
    return b"".join(out)


def is_seal(value: bytes) -> bool:
    """Whether ``value`` is a seal ``<key id>:<64 hex>`` (not a plain SHA-256 digest)."""
    return _SEAL.fullmatch(value) is not None


def seal_key_id(value: bytes) -> str | None:
    """The key id a seal names, or None if ``value`` is not a seal."""
    match = _SEAL.fullmatch(value)
    return None if match is None else match.group(1).decode()


class SigningKeys:
    """HMAC-SHA-256 keys by id; see the module doc.

    Args:
        keys: key id ([A-Za-z0-9_-], 1-32 chars) -> at least 16 random bytes (32 advised).
        primary: the id new seals are made with; every key checks.

    Raises:
        ValueError: a malformed key id, a key shorter than 16 bytes, an unknown primary.
    """

    __slots__ = ("_keys", "primary", "read_unsigned")

    def __init__(self, keys: Mapping[str, bytes], primary: str) -> None:
        if not keys:
            raise ValueError("signing keys must hold at least one key")
        checked: dict[bytes, bytes] = {}
        for kid, key in keys.items():
            if not isinstance(kid, str) or not _KEY_ID.fullmatch(kid):
                raise ValueError(
                    f"signing key id {kid!r:.40} must be 1-32 characters [A-Za-z0-9_-]"
                )
            if not isinstance(key, bytes | bytearray) or len(key) < _MIN_KEY:
                size = len(key) if isinstance(key, bytes | bytearray) else type(key).__name__
                raise ValueError(f"signing key {kid!r} must be at least 16 bytes, got {size}")
            checked[kid.encode("ascii")] = bytes(key)
        if primary not in keys:
            raise ValueError(
                f"signing primary {primary!r:.40} is not one of the key ids {sorted(keys)}"
            )
        self._keys = checked
        self.primary = primary
        # rotate-keys sets it to seal data written before signing was configured.
        self.read_unsigned = False

    def __repr__(self) -> str:  # ids only: key material never reaches a log
        ids = sorted(k.decode() for k in self._keys)
        return f"SigningKeys(keys={ids}, primary={self.primary!r})"

    def seal(self, domain: bytes, *parts: bytes) -> bytes:
        """``<primary id>:<HMAC hex>`` over ``domain`` and ``parts``."""
        kid = self.primary.encode("ascii")
        mac = hmac.new(self._keys[kid], _message(domain, parts), hashlib.sha256).hexdigest()
        return b"%s:%s" % (kid, mac.encode("ascii"))

    def problem(self, seal: bytes, domain: bytes, *parts: bytes) -> str | None:
        """Why ``seal`` does not authenticate ``parts`` — or None when it does."""
        match = _SEAL.fullmatch(seal)
        if match is None:
            if self.read_unsigned:
                return None
            return "is not signed (written without a signing key, or its seal was removed)"
        kid, mac = match.groups()
        key = self._keys.get(kid)
        if key is None:
            known = sorted(k.decode() for k in self._keys)
            return f"is signed with key {kid.decode()!r}, not one of {known}"
        want = hmac.new(key, _message(domain, parts), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want.encode("ascii"), mac):
            return f"does not authenticate with signing key {kid.decode()!r} (edited or moved)"
        return None

    def check(self, where: str, seal: bytes, domain: bytes, *parts: bytes) -> None:
        """Raise IntegrityError naming ``where`` unless ``seal`` authenticates ``parts``."""
        problem = self.problem(seal, domain, *parts)
        if problem is not None:
            raise IntegrityError(f"{where} {problem}")

    def current(self, seal: bytes) -> bool:
        """Whether ``seal`` was made with the primary key."""
        return seal_key_id(seal) == self.primary


def unsigned_problem(seal: bytes) -> str | None:
    """For a store without signing keys: a seal it cannot check, or None."""
    kid = seal_key_id(seal)
    if kid is None:
        return None
    return f"is signed with key {kid!r}; this store has no signing keys to check it"


def digest_problem(
    signing: SigningKeys | None,
    stored: bytes,
    plain: Callable[[], bytes],
    domain: bytes,
    *parts: bytes,
    unverifiable: bool = True,
    what: str = "digest",
) -> str | None:
    """Why a stored digest or seal does not cover ``parts`` — or None when it does.

    ``plain()`` is the unkeyed SHA-256 digest (hex) an unsealed value must match. A
    store without keys cannot check a seal: that is a problem when ``unverifiable``
    (verify says so), and passes otherwise (a read without keys, like a read before
    signing existed).
    """
    if is_seal(stored):
        if signing is None:
            return unsigned_problem(stored) if unverifiable else None
        return signing.problem(stored, domain, *parts)
    if signing is not None and not signing.read_unsigned:
        return signing.problem(stored, domain, *parts)  # "is not signed"
    if not hmac.compare_digest(stored, plain()):
        return f"does not match its {what} (edited)"
    return None
