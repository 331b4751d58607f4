"""The CLI's keys: ``REDISTATE_KEYS`` and ``REDISTATE_PRIMARY_KEY`` (encryption),
``REDISTATE_SIGNING_KEYS`` and ``REDISTATE_SIGNING_PRIMARY`` (keyed integrity).

Keys come from the environment only: a command-line option would show them to anyone
who can list processes.
"""

from __future__ import annotations

import os

from ..core.codec import Codec
from ..core.signing import SigningKeys

__all__ = ["codec_from_env", "encrypted_without_keys", "plain_codec", "signing_from_env"]


def codec_from_env() -> Codec:
    """An EncryptedCodec when ``REDISTATE_KEYS`` ("k1=<base64>,k2=<base64>") is set,
    with ``REDISTATE_PRIMARY_KEY`` as primary (default: the first key listed); else
    plain JSON that names an encrypted value as such (see ``plain_codec``).

    Raises:
        ValueError: malformed keys, or a primary that is not among them.
    """
    found = _keys_from_env("REDISTATE_KEYS", "REDISTATE_PRIMARY_KEY")
    if found is None:
        return plain_codec()
    from ..core.encryption import EncryptedCodec

    return EncryptedCodec(found[0], primary=found[1])


def plain_codec() -> Codec:
    """JSON, as a store without a codec has, but an encrypted value is named as such
    (with the key that sealed it: ``encrypted`` remembers it) instead of "not JSON"."""
    from ..core.codec import JsonCodec
    from ..core.errors import CodecError

    class PlainCodec(JsonCodec):
        encrypted: str | None = None  # the key id of the first encrypted value read

        def decode(self, data: bytes, context: bytes = b"") -> object:
            # Imported on the first value read: `ls` reads none (tests/test_cli_startup).
            from ..core.encryption import key_id

            kid = key_id(data)
            if kid is None:
                return super().decode(data, context)
            self.encrypted = self.encrypted or kid
            where = context.decode("utf-8", "replace")
            raise CodecError(
                f"the value under {where!r} is encrypted (key {kid!r}): set REDISTATE_KEYS "
                f'("{kid}=<base64>") to read it'
            )

    return PlainCodec()


def encrypted_without_keys(codec: object) -> str | None:
    """The key id of an encrypted value a keyless ``plain_codec`` met, else None."""
    return getattr(codec, "encrypted", None)


def signing_from_env() -> SigningKeys | None:
    """SigningKeys when ``REDISTATE_SIGNING_KEYS`` ("s1=<base64>,s2=<base64>") is set,
    with ``REDISTATE_SIGNING_PRIMARY`` as primary (default: the first key listed); else
    None (unkeyed digests).

    Raises:
        ValueError: malformed keys, or a primary that is not among them.
    """
    found = _keys_from_env("REDISTATE_SIGNING_KEYS", "REDISTATE_SIGNING_PRIMARY")
    return None if found is None else SigningKeys(found[0], primary=found[1])


def _keys_from_env(keys_var: str, primary_var: str) -> tuple[dict[str, bytes], str] | None:
    """(keys, primary id) from ``keys_var`` ("id=<base64>,...") and ``primary_var``
    (default: the first key listed), or None when ``keys_var`` is unset."""
    text = os.environ.get(keys_var, "").strip()
    if not text:
        return None
    from ..core.encryption import keys_from_text

    keys = keys_from_text(text)
    return keys, os.environ.get(primary_var, "").strip() or next(iter(keys))
