"""redistate: agent state in plain Redis — shared, crash-safe, no lost updates.

Names are imported lazily so ``import redistate`` stays cheap for serverless cold
starts: redis.asyncio, fakeredis and friends load only when first used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .errors import (
    CodecError,
    ConflictError,
    IntegrityError,
    InvalidId,
    LockError,
    LockLost,
    LockTimeout,
    NotReplicated,
    PermissionDenied,
    RedistateError,
    RedistateWarning,
    SchemaError,
    StateTooLarge,
    StepFailed,
    StepInterrupted,
    StoreFull,
    StoreUnavailable,
    UnsafeServer,
)

if TYPE_CHECKING:
    from ._async.checkpoints import AsyncCheckpoints
    from ._async.events import AsyncEvents
    from ._async.leases import AsyncLease
    from ._async.records import AsyncCollection
    from ._async.runner import AsyncTaskRun
    from ._async.store import AsyncStore
    from ._sync.checkpoints import Checkpoints
    from ._sync.events import Events
    from ._sync.leases import Lease
    from ._sync.records import Collection
    from ._sync.runner import TaskRun
    from ._sync.store import Store
    from .checkpoints import Checkpoint, Restored, Verification
    from .codec import Codec, JsonCodec
    from .encryption import EncryptedCodec
    from .events import Event
    from .keys import KeySpace
    from .migrations import Migrations
    from .records import DEFAULT, Record
    from .retry import RetryPolicy
    from .server import ServerFacts
    from .signing import SigningKeys

__version__ = "0.1.0"

__all__ = [
    # entry points
    "AsyncStore",
    "Store",
    # records
    "DEFAULT",
    "AsyncCollection",
    "Collection",
    "Record",
    # checkpoints
    "AsyncCheckpoints",
    "Checkpoint",
    "Checkpoints",
    "Restored",
    "Verification",
    # audit events
    "AsyncEvents",
    "Event",
    "Events",
    # leases and the task runner
    "AsyncLease",
    "AsyncTaskRun",
    "Lease",
    "TaskRun",
    # building blocks
    "Codec",
    "EncryptedCodec",
    "JsonCodec",
    "KeySpace",
    "Migrations",
    "RetryPolicy",
    "ServerFacts",
    "SigningKeys",
    # errors
    "CodecError",
    "ConflictError",
    "IntegrityError",
    "InvalidId",
    "LockError",
    "LockLost",
    "LockTimeout",
    "NotReplicated",
    "PermissionDenied",
    "RedistateError",
    "RedistateWarning",
    "SchemaError",
    "StateTooLarge",
    "StepFailed",
    "StepInterrupted",
    "StoreFull",
    "StoreUnavailable",
    "UnsafeServer",
]

_LAZY = {
    "AsyncStore": "._async.store",
    "Store": "._sync.store",
    "AsyncCollection": "._async.records",
    "Collection": "._sync.records",
    "DEFAULT": ".records",
    "Record": ".records",
    "AsyncCheckpoints": "._async.checkpoints",
    "Checkpoints": "._sync.checkpoints",
    "Checkpoint": ".checkpoints",
    "Restored": ".checkpoints",
    "Verification": ".checkpoints",
    "AsyncEvents": "._async.events",
    "Events": "._sync.events",
    "Event": ".events",
    "AsyncLease": "._async.leases",
    "AsyncTaskRun": "._async.runner",
    "Lease": "._sync.leases",
    "TaskRun": "._sync.runner",
    "Codec": ".codec",
    "JsonCodec": ".codec",
    "EncryptedCodec": ".encryption",
    "KeySpace": ".keys",
    "Migrations": ".migrations",
    "RetryPolicy": ".retry",
    "ServerFacts": ".server",
    "SigningKeys": ".signing",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'redistate' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
