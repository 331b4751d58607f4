"""Re-encrypt a namespace with the primary key: ``store.admin.rotate_keys()``, which
``redistate rotate-keys`` prints (the source of redistate.admin.rotate).

Every value the store's codec encoded and that is not yet under the primary key is
decrypted with whichever key it names and written back encrypted with the primary, in
place: versions, TTLs, sequence numbers and fences stay as they are; values written
before the namespace was encrypted are encrypted too. A value written meanwhile is
skipped by the script that checks it (it was written with the primary already, or is
caught by a second run). An audit event chain that does not verify is left as it is
and named (exit 1). Afterwards the old keys can go.

This is the loop: which keys are visited comes from the kind registry
(redistate.core.kinds); each kind rotate-keys applies to has its handlers in its own
folder, ``<Kind.home>/rotate_async.py`` (``ROTATE[kind.name][part]``, see
redistate.admin.handlers), for the parts of its keys that hold encoded values. The
kinds it skips say why in the registry.

With signing keys (``REDISTATE_SIGNING_KEYS``) it also seals anew, with the signing
primary, everything sealed with another key or not sealed at all (data written before
signing was configured, read once without the seal check: run it on a namespace you
trust). Either set of keys may be given alone.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Final

from ..core import kinds
from ..core.encryption import EncryptedCodec, key_id
from ..core.errors import InvalidId, RedistateError
from ..core.kinds import Kind, Op
from .handlers_async import Found
from .reports import RotateReport

if TYPE_CHECKING:
    from ..core.connection_async import AsyncConnection
    from ..store_async import AsyncStore
    from .handlers_async import RotateHandler

__all__ = ["handlers", "rotate"]

# The module of a kind's folder that holds its handlers (the sync twin: its sync one).
_ROTATE_MODULE: Final = "rotate_async"


@cache
def handlers(kind: Kind) -> Mapping[str, RotateHandler]:
    """The rotate-keys handlers of ``kind``, by part of its keys:
    ``<kind.home>/rotate_async.py``'s ``ROTATE[kind.name]``.

    Raises:
        KeyError: the kind's folder has no handlers for it.
    """
    module = importlib.import_module(f"..{kind.home}.{_ROTATE_MODULE}", __package__)
    table: Mapping[str, Mapping[str, RotateHandler]] = module.ROTATE
    return table[kind.name]


async def rotate(store: AsyncStore, conn: AsyncConnection) -> RotateReport:
    """Re-encrypt ``store``'s namespace with its codec's primary key.

    Raises:
        RedistateError: the store has neither an EncryptedCodec nor signing keys.
        IntegrityError: a value does not decrypt (nothing after it is rewritten).
    """
    codec = store.codec
    encrypted = isinstance(codec, EncryptedCodec)
    if not encrypted and store.signing is None:
        raise RedistateError(
            "rotate-keys needs the keys: set REDISTATE_KEYS (and REDISTATE_PRIMARY_KEY) "
            "or REDISTATE_SIGNING_KEYS (and REDISTATE_SIGNING_PRIMARY)"
        )
    report = RotateReport()
    if isinstance(codec, EncryptedCodec):
        codec.read_plaintext = True  # values written before encryption get encrypted too
    if store.signing is not None:
        store.signing.read_unsigned = True  # and data written before signing gets sealed

    def current(data: bytes) -> bool:
        if not isinstance(codec, EncryptedCodec) or codec.current(data):
            return True
        old = key_id(data) or "(not encrypted)"
        report.old_keys[old] = report.old_keys.get(old, 0) + 1
        return False

    async for raw_key in conn.scan(store.keys.namespace_pattern()):
        report.keys_seen += 1
        try:
            name, entity, part = store.keys.parse(raw_key)
        except InvalidId:
            continue
        owner = kinds.claim(name, part)
        if owner is None or not owner.applies(Op.ROTATE):
            continue
        handler = handlers(owner).get(part)
        if handler is not None:  # else a part holding nothing encoded (ids, writes...)
            key = raw_key.decode("utf-8") if isinstance(raw_key, bytes) else raw_key
            await handler(store, conn, Found(name, entity, key), current, report)
    return report
