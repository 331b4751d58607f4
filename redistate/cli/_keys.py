"""The CLI's encryption keys: ``REDISTATE_KEYS`` and ``REDISTATE_PRIMARY_KEY``.

Keys come from the environment only: a command-line option would show them to anyone
who can list processes.
"""

from __future__ import annotations

import os

from ..codec import Codec

__all__ = ["codec_from_env"]


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
