"""redistate: agent state in plain Redis — shared, crash-safe, no lost updates.

Names are imported lazily so ``import redistate`` stays cheap for serverless cold
starts: redis.asyncio, fakeredis and friends load only when first used.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .core.errors import (
    BatchError,
    BatchNotSent,
    CodecError,
    ConflictError,
    ForkedStore,
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
    TransportRefused,
    UnsafeServer,
)
from .core.lazy import lazy_names

if TYPE_CHECKING:
    from .batch import Batch
    from .batch_async import AsyncBatch
    from .checkpoints.spec import Checkpoint, Restored, Verification
    from .checkpoints.tasks import Checkpoints
    from .checkpoints.tasks_async import AsyncCheckpoints
    from .core.batching import Pending
    from .core.codec import Codec, JsonCodec
    from .core.encryption import EncryptedCodec
    from .core.keys import KeySpace
    from .core.migrations import Migrations
    from .core.retry import RetryPolicy
    from .core.server import ServerFacts
    from .core.signing import SigningKeys
    from .events.spec import Event
    from .events.stream import Events
    from .events.stream_async import AsyncEvents
    from .leases.lease import Lease
    from .leases.lease_async import AsyncLease
    from .records.collection import Collection
    from .records.collection_async import AsyncCollection
    from .records.spec import DEFAULT, Record
    from .steps.runner import TaskRun
    from .steps.runner_async import AsyncTaskRun
    from .steps.shutdown import Shutdown, graceful
    from .store import Store
    from .store_async import AsyncStore

__version__ = "0.1.0"

# The library's log records (server warnings, leases lost, restores that fell back past
# damage) go to the application's handlers, never to logging's last-resort stderr.
logging.getLogger("redistate").addHandler(logging.NullHandler())

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
    # batches
    "AsyncBatch",
    "Batch",
    "Pending",
    # leases and the task runner
    "AsyncLease",
    "AsyncTaskRun",
    "Lease",
    "Shutdown",
    "TaskRun",
    "graceful",
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
    "ForkedStore",
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
    "TransportRefused",
    "UnsafeServer",
    "BatchError",
    "BatchNotSent",
]

_LAZY = {
    "AsyncStore": ".store_async",
    "Store": ".store",
    "AsyncCollection": ".records.collection_async",
    "Collection": ".records.collection",
    "DEFAULT": ".records.spec",
    "Record": ".records.spec",
    "AsyncCheckpoints": ".checkpoints.tasks_async",
    "Checkpoints": ".checkpoints.tasks",
    "Checkpoint": ".checkpoints.spec",
    "Restored": ".checkpoints.spec",
    "Verification": ".checkpoints.spec",
    "AsyncEvents": ".events.stream_async",
    "Events": ".events.stream",
    "Event": ".events.spec",
    "AsyncLease": ".leases.lease_async",
    "AsyncBatch": ".batch_async",
    "Batch": ".batch",
    "Pending": ".core.batching",
    "AsyncTaskRun": ".steps.runner_async",
    "Lease": ".leases.lease",
    "TaskRun": ".steps.runner",
    "Shutdown": ".steps.shutdown",
    "graceful": ".steps.shutdown",
    "Codec": ".core.codec",
    "JsonCodec": ".core.codec",
    "EncryptedCodec": ".core.encryption",
    "KeySpace": ".core.keys",
    "Migrations": ".core.migrations",
    "RetryPolicy": ".core.retry",
    "ServerFacts": ".core.server",
    "SigningKeys": ".core.signing",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
