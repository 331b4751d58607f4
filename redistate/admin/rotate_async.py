"""Re-encrypt a namespace with the primary key: ``store.admin.rotate_keys()``, which
``redistate rotate-keys`` prints (the source of redistate.admin.rotate).

Every record (patched ones folded), checkpoint state, delta, durable step record and
OpenAI Agents SDK session item not yet under the primary key is decrypted with
whichever key it names and written back encrypted with the primary, in place: versions,
TTLs, sequence numbers and fences stay as they are; values written before the namespace
was encrypted are encrypted too. A value written meanwhile is skipped by the script
that checks it (it was written with the primary already, or is caught by a second
run). Audit events are rewritten too, after their chain is verified: their digests
cover the encrypted payloads, so the chain is recomputed from the first re-encrypted
event (a digest of its end kept elsewhere must be taken anew); a chain that does not
verify is left as it is and named (exit 1). Afterwards the old keys can go.

Which keys are visited comes from the kind registry (redistate.core.kinds): each kind
rotate-keys applies to has a handler below, for the parts of its keys that hold encoded
values. Not rotated: LangGraph threads (packed by LangGraph's serializer, not the
store's codec), and the reply an Agents SDK pop keeps in its write memory for a resend
(for the retry window only).

With signing keys (``REDISTATE_SIGNING_KEYS``) it also seals anew, with the signing
primary, everything sealed with another key or not sealed at all (data written before
signing was configured, read once without the seal check: run it on a namespace you
trust). Either set of keys may be given alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ..core import kinds
from ..core.codec import Codec
from ..core.encryption import EncryptedCodec, key_id
from ..core.errors import ConflictError, IntegrityError, InvalidId, RedistateError
from ..core.kinds import Kind, Op
from ..core.scripts import script
from ..records.spec import RecordCompactReply, new_write_id
from .reports import RotateReport

if TYPE_CHECKING:
    from ..core.connection_async import AsyncConnection
    from ..store_async import AsyncStore

__all__ = ["HANDLERS", "recoded_items", "rotate"]

_COMPACT = script("record_compact").replying(RecordCompactReply.parse)
_RECODE = script("checkpoint_recode")
_STEPS = script("step_recode")
_AGENTS = script("agents_recode")
_AGENTS_PAGE: Final = 500  # items re-encoded per agents_recode call


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
            kind, entity, part = store.keys.parse(raw_key)
        except InvalidId:
            continue
        owner = kinds.claim(kind, part)
        if owner is None or not owner.applies(Op.ROTATE):
            continue
        handler = HANDLERS[owner].get(part)
        if handler is not None:  # else a part holding nothing encoded (ids, writes...)
            key = raw_key.decode("utf-8") if isinstance(raw_key, bytes) else raw_key
            await handler(store, conn, _Found(kind, entity, key), current, report)
    return report


@dataclass(frozen=True, slots=True)
class _Found:
    """A scanned key, parsed: its key kind (a collection's own name), entity id, key."""

    kind: str
    entity: str
    key: str


Current = Callable[[bytes], bool]  # whether a value is under the primary (counts it if not)
Handler: TypeAlias = (  # quoted: the store and connection are imported for types only
    "Callable[[AsyncStore, AsyncConnection, _Found, Current, RotateReport], Awaitable[None]]"
)


async def _rotate_record(
    store: AsyncStore, conn: AsyncConnection, found: _Found, current: Current, report: RotateReport
) -> None:
    kind, key = found.kind, found.key
    raw = await conn.get(key)
    if raw is None:
        return
    spec = store.records_of(kind).spec
    if not spec.stale(key, raw, current):  # counts every old part
        report.current += 1
        return
    args = spec.compact_args(key, spec.compaction(key, raw), new_write_id(), conn.memory_ms)
    if args is None:
        raise RedistateError(f"{key!r} re-encrypted would pass its max_bytes: not rotated")
    done = await conn.script(_COMPACT, spec.compact_keys(key), args.argv())
    if done.rewritten:
        report.records += 1
    else:
        report.changed += 1


async def _rotate_list(
    store: AsyncStore,
    conn: AsyncConnection,
    key: str,
    deltas: bool,
    current: Current,
    report: RotateReport,
) -> int:
    """Re-encode a task's checkpoint list (or delta log); how many elements replaced."""
    spec = store.checkpoints.spec
    items: list[Any] = await conn.idempotent("LRANGE", key, 0, -1)  # retried, translated
    pairs: list[bytes] = []
    for item in items:
        if deltas:
            found = spec.recoded_delta(key, item, current)
        else:
            found = spec.recoded_blob(key, item, current)
        if found is None:
            report.current += 1
        else:
            pairs.extend(found)
    if not pairs:
        return 0
    done = int(await conn.script(_RECODE, (key,), pairs))
    report.changed += len(pairs) // 2 - done
    return done


async def _rotate_checkpoints(
    store: AsyncStore, conn: AsyncConnection, found: _Found, current: Current, report: RotateReport
) -> None:
    report.checkpoints += await _rotate_list(store, conn, found.key, False, current, report)


async def _rotate_deltas(
    store: AsyncStore, conn: AsyncConnection, found: _Found, current: Current, report: RotateReport
) -> None:
    report.deltas += await _rotate_list(store, conn, found.key, True, current, report)


async def _rotate_steps(
    store: AsyncStore, conn: AsyncConnection, found: _Found, current: Current, report: RotateReport
) -> None:
    key = found.key
    spec = store.checkpoints.step_spec
    fields: dict[bytes, bytes] = await conn.hgetall(key)
    triples: list[bytes] = []
    for name, raw in fields.items():
        fresh = spec.recoded(key, name.decode("utf-8"), raw, current)
        if fresh is None:
            report.current += 1
        else:
            triples += [name, raw, fresh]
    if triples:
        done = int(await conn.script(_STEPS, (key,), triples))
        report.steps += done
        report.changed += len(triples) // 3 - done


async def _rotate_events(
    store: AsyncStore, conn: AsyncConnection, found: _Found, current: Current, report: RotateReport
) -> None:
    entity = found.entity
    codec, aad = store.codec, store.keys.events(entity).encode("utf-8")

    def again(data: bytes) -> bytes | None:
        return None if current(data) else codec.encode(codec.decode(data, aad), aad)

    def payload(schema: int, data: bytes) -> tuple[int, bytes] | None:
        fresh = again(data)
        return None if fresh is None else (schema, fresh)

    try:
        report.events += await store.events.rewrite(entity, payload, again)
    except ConflictError:
        report.changed += 1  # appended or trimmed meanwhile: the next run rotates it
    except IntegrityError:
        report.unverified.append(store.keys.events(entity))


def recoded_items(
    key: str, items: Sequence[bytes], codec: Codec, current: Current
) -> tuple[list[bytes], int]:
    """(old, new) pairs for ``lua/agents_recode.lua``, one per item of the Agents SDK
    session ``key`` not under the primary key, and how many were current. Items are
    encoded with the key's bytes as context, as ``RedistateSession`` encodes them.

    Raises:
        IntegrityError: an item that does not decrypt with any known key.
    """
    context = key.encode("utf-8")
    pairs: list[bytes] = []
    for item in items:
        if not current(item):
            pairs += [item, codec.encode(codec.decode(item, context), context)]
    return pairs, len(items) - len(pairs) // 2


async def _rotate_agents(
    store: AsyncStore, conn: AsyncConnection, found: _Found, current: Current, report: RotateReport
) -> None:
    key = found.key
    items: list[bytes] = await conn.idempotent("LRANGE", key, 0, -1)
    pairs, now = recoded_items(key, items, store.codec, current)
    report.current += now
    # Only the item list: its write memory (<key>:writes) is another part, not visited.
    for start in range(0, len(pairs), 2 * _AGENTS_PAGE):
        page = pairs[start : start + 2 * _AGENTS_PAGE]
        done = int(await conn.script(_AGENTS, (key,), page))
        report.agent_items += done
        report.changed += len(page) // 2 - done


# What rotate-keys does with each kind it applies to, by the part of the kind's keys
# (parts not named hold nothing the codec encodes: write memories, id lists; an event
# stream's trim anchor is re-encoded with the stream). tests/unit/test_rotate_kinds.py
# checks these are exactly the kinds for which Op.ROTATE applies.
_RECORD: Final[Mapping[str, Handler]] = {"": _rotate_record}
HANDLERS: Final[Mapping[Kind, Mapping[str, Handler]]] = {
    kinds.SESSION: _RECORD,
    kinds.USER: _RECORD,
    kinds.COLLECTION: _RECORD,
    kinds.TASK: {"": _rotate_checkpoints, "log": _rotate_deltas},
    kinds.STEPS: {"steps": _rotate_steps},
    kinds.EVENTS: {"": _rotate_events},
    kinds.AGENTS: {"": _rotate_agents},
}
