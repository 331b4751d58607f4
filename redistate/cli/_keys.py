"""The CLI's keys: ``REDISTATE_KEYS`` and ``REDISTATE_PRIMARY_KEY`` (encryption),
``REDISTATE_SIGNING_KEYS`` and ``REDISTATE_SIGNING_PRIMARY`` (keyed integrity).

Keys come from the environment only: a command-line option would show them to anyone
who can list processes.
"""

from __future__ import annotations

import os

from ..codec import Codec
from ..signing import SigningKeys

__all__ = ["codec_from_env", "signing_from_env"]


def codec_from_env() -> Codec | None:
    """An EncryptedCodec when ``REDISTATE_KEYS`` ("k1=<base64>,k2=<base64>") is set,
    with ``REDISTATE_PRIMARY_KEY`` as primary (default: the first key listed); else None
    (plain JSON).

    Raises:
        ValueError: malformed keys, or a primary that is not among them.
    """
    text = os.environ.get("REDISTATE_KEYS", "").strip()
    if not text:
        return None
    from ..encryption import EncryptedCodec, keys_from_text

    keys = keys_from_text(text)
    primary = os.environ.get("REDISTATE_PRIMARY_KEY", "").strip() or next(iter(keys))
    return EncryptedCodec(keys, primary=primary)


def signing_from_env() -> SigningKeys | None:
    """SigningKeys when ``REDISTATE_SIGNING_KEYS`` ("s1=<base64>,s2=<base64>") is set,
    with ``REDISTATE_SIGNING_PRIMARY`` as primary (default: the first key listed); else
    None (unkeyed digests).

    Raises:
        ValueError: malformed keys, or a primary that is not among them.
    """
    text = os.environ.get("REDISTATE_SIGNING_KEYS", "").strip()
    if not text:
        return None
    from ..encryption import keys_from_text

    keys = keys_from_text(text)
    primary = os.environ.get("REDISTATE_SIGNING_PRIMARY", "").strip() or next(iter(keys))
    return SigningKeys(keys, primary=primary)
