"""Encryption at rest: AES-GCM around another codec (extra ``redistate[crypto]``).

``EncryptedCodec(keys={"k1": key32}, primary="k1")`` encrypts every value a store
writes — records, merge patches, checkpoint states, deltas — with the primary key, and
decrypts with whichever known key a value names, so keys rotate without downtime: add
the new key as primary, keep the old one until ``redistate rotate-keys`` has rewritten
the namespace, then drop it.

Stored form: ``E1:<key id>:<12-byte nonce><ciphertext and 16-byte tag>``, or over a
connection that carries text only (a REST API) ``E1b:<key id>:<base64 of the same>``;
either is read everywhere. The associated
data is the key id and the Redis key the value is stored under (the codec's
``context``), so a value copied to another key, or relabelled with another key id, fails
to authenticate: IntegrityError. Not caught by the cipher: an older ciphertext of the
same key put back (a rollback), or values swapped within one key (merge frames, an
event's payload) — the chain digests catch the latter for events. Nonces are random (96 bits): keep
under ~2^32 writes per key, then rotate.
"""

from __future__ import annotations

import base64
import binascii
import copy
import os
import re
from collections.abc import Mapping
from typing import Any, Final

from .codec import Codec, JsonCodec
from .errors import IntegrityError

__all__ = ["EncryptedCodec", "key_id", "keys_from_text"]

_MAGIC: Final = b"E1:"
_TEXT_MAGIC: Final = b"E1b:"
_NONCE: Final = 12
_TAG: Final = 16
_KEY_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,32}")
_SIZES: Final = (16, 24, 32)  # AES-128, AES-192, AES-256


def _aad(kid: bytes, context: bytes) -> bytes:
    return b"redistate E1\x00%s\x00%s" % (kid, context)


def key_id(data: bytes) -> str | None:
    """The id of the key ``data`` was encrypted with, or None if it is not an
    EncryptedCodec value (what ``rotate-keys`` checks before rewriting)."""
    magic = _MAGIC if data.startswith(_MAGIC) else _TEXT_MAGIC
    if not data.startswith(magic):
        return None
    end = data.find(b":", len(magic), len(magic) + 33)
    if end < 0:
        return None
    return data[len(magic) : end].decode("ascii", "replace")


def keys_from_text(text: str) -> dict[str, bytes]:
    """Keys from ``"k1=<base64>,k2=<base64>"`` (what ``REDISTATE_KEYS`` holds for the CLI).

    Raises:
        ValueError: an entry without ``=``, or whose key is not base64; names the entry
            by its id only (never the key material).
    """
    keys: dict[str, bytes] = {}
    for n, entry in enumerate(text.split(","), 1):
        kid, sep, encoded = entry.strip().partition("=")
        if not sep or not kid:
            raise ValueError(f"key entry {n} is not <id>=<base64 key>")
        try:
            keys[kid] = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"key {kid!r:.40} is not valid base64") from None
    return keys


class EncryptedCodec:
    """AES-GCM encryption around ``inner`` (JSON by default); see the module doc.

    Args:
        keys: key id ([A-Za-z0-9_-], 1-32 chars) -> 16, 24 or 32 random bytes.
        primary: the id new values are encrypted with; every key decrypts.
        inner: the codec that turns values into the bytes being encrypted.
        text: write the base64 form (``E1b``); a store over a REST API uses
            :meth:`as_text`, which sets it.

    Raises:
        ValueError: a malformed key id, a key of another length, an unknown primary.
        ImportError: the ``cryptography`` package is missing (``redistate[crypto]``).
    """

    __slots__ = ("_ciphers", "_inner", "_primary", "primary", "read_plaintext", "text")

    def __init__(
        self,
        keys: Mapping[str, bytes],
        primary: str,
        *,
        inner: Codec | None = None,
        text: bool = False,
    ) -> None:
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "EncryptedCodec needs the cryptography package: pip install 'redistate[crypto]'"
            ) from exc
        if not keys:
            raise ValueError("keys must hold at least one key")
        ciphers: dict[bytes, Any] = {}
        for kid, key in keys.items():
            if not isinstance(kid, str) or not _KEY_ID.fullmatch(kid):
                raise ValueError(f"key id {kid!r:.40} must be 1-32 characters [A-Za-z0-9_-]")
            if not isinstance(key, bytes | bytearray) or len(key) not in _SIZES:
                size = len(key) if isinstance(key, bytes | bytearray) else type(key).__name__
                raise ValueError(f"key {kid!r} must be 16, 24 or 32 bytes, got {size}")
            ciphers[kid.encode("ascii")] = AESGCM(bytes(key))
        if primary not in keys:
            raise ValueError(f"primary {primary!r:.40} is not one of the key ids {sorted(keys)}")
        self._ciphers = ciphers
        self._primary = primary.encode("ascii")
        self.primary = primary
        self._inner: Codec = inner if inner is not None else JsonCodec()
        # rotate-keys sets it to encrypt a namespace written before encryption: values
        # without an E1 header are then read with ``inner`` instead of refused.
        self.read_plaintext = False
        self.text = bool(text)

    def as_text(self) -> EncryptedCodec:
        """This codec writing the base64 form (same keys): what a store over a REST API,
        whose JSON carries text only, encrypts with."""
        twin = copy.copy(self)
        twin.text = True
        return twin

    def __repr__(self) -> str:  # ids only: key material never reaches a log
        ids = sorted(k.decode() for k in self._ciphers)
        return f"EncryptedCodec(keys={ids}, primary={self.primary!r})"

    def encode(self, value: Any, context: bytes = b"") -> bytes:
        plain = self._inner.encode(value, context)
        nonce = os.urandom(_NONCE)
        sealed = self._ciphers[self._primary].encrypt(nonce, plain, _aad(self._primary, context))
        if self.text:
            return b"%s%s:%s" % (_TEXT_MAGIC, self._primary, base64.b64encode(nonce + sealed))
        return b"%s%s:%s%s" % (_MAGIC, self._primary, nonce, sealed)

    def decode(self, data: bytes, context: bytes = b"") -> Any:
        """Decrypt with the key the value names, then decode.

        Raises:
            IntegrityError: not an encrypted value, an unknown key id, or bytes that do
                not authenticate (altered, copied from another key, or another key
                under the same id).
        """
        from cryptography.exceptions import InvalidTag

        kid = key_id(data)
        where = context.decode("utf-8", "replace")
        if kid is None:
            if self.read_plaintext:
                return self._inner.decode(data, context)
            raise IntegrityError(f"value under {where!r} is not encrypted (no E1 header)")
        cipher = self._ciphers.get(kid.encode("ascii", "replace"))
        if cipher is None:
            known = sorted(k.decode() for k in self._ciphers)
            raise IntegrityError(
                f"value under {where!r} was encrypted with key {kid!r}, not one of {known}"
            )
        if data.startswith(_TEXT_MAGIC):
            try:
                body = base64.b64decode(data[len(_TEXT_MAGIC) + len(kid) + 1 :], validate=True)
            except binascii.Error:
                raise IntegrityError(f"value under {where!r} is not base64 after E1b") from None
        else:
            body = data[len(_MAGIC) + len(kid) + 1 :]
        nonce, sealed = body[:_NONCE], body[_NONCE:]
        if len(sealed) < _TAG:
            raise IntegrityError(f"value under {where!r} is cut short ({len(data)} bytes)")
        try:
            plain = cipher.decrypt(nonce, sealed, _aad(kid.encode("ascii"), context))
        except InvalidTag:
            raise IntegrityError(
                f"value under {where!r} does not authenticate with key {kid!r}: altered, "
                f"copied from another key, or encrypted with a different key of that id"
            ) from None
        return self._inner.decode(plain, context)

    def current(self, data: bytes) -> bool:
        """Whether ``data`` is already encrypted with the primary key."""
        return key_id(data) == self.primary
