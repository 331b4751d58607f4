"""Pydantic AI conversations on plain Redis: ``RedistateConversationStore``
(``redistate[pydantic-ai]``).

A ``ConversationStore`` that many processes share. A save writes the record and the
entries it adds by one script in the conversation's hash slot, only if the stored
revision is the one the save read: on a conflict nothing is written. A history is one
script that follows the entries' parents. Every entry a conversation reaches is kept
in its own slot (a fork copies the history it keeps), so a delete is one ``DEL`` and
frees exactly what no other conversation reaches. Every save sets the TTL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextvars import ContextVar
from datetime import datetime
from typing import Any, Final

import orjson
from pydantic import TypeAdapter
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationDetails,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.messages import ModelMessagesTypeAdapter

from ...core import telemetry
from ...core._ttl import check_ttl
from ...core.errors import CodecError, InvalidId, StateTooLarge
from ...core.kinds import PYDANTIC_AI
from ...store import Store
from ...store_async import AsyncStore
from .spec import FIELDS, Written, entry_context, record_context

__all__ = ["RedistateConversationStore"]

_RECORD: Final = TypeAdapter(ConversationRecord)
_DETAILS: Final = frozenset({"title", "metadata"})
_FIELD: Final = {name: i for i, name in enumerate(FIELDS)}
_PAGE: Final = 500  # index entries read per round trip


def _cid(record: object) -> object:
    """A record's conversation id, for a span (set only with ``record_ids``)."""
    return getattr(record, "conversation_id", None)


def _ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


class RedistateConversationStore(ConversationStore):
    """Pydantic AI's ``ConversationStore`` over a redistate store.

    Args:
        store: an ``AsyncStore`` (native) or a ``Store`` (its calls run in a worker
            thread; pydantic-ai's store API is async only).
        ttl: seconds a conversation lives after its last save (None: no expiry), set
            on each of its keys with every save.
        register_scopes: a conversation's ``scope`` is a redistate user: each is
            registered to it before its first save (``store.users.erase(scope)``
            deletes them). A scope must then be a valid user id.

    Entries are read by the conversation that holds them: the one this task read or
    saved last; an entry of another one is found by probing every listed
    conversation (one round trip per 500).
    """

    def __init__(
        self,
        store: AsyncStore | Store,
        *,
        ttl: float | None = None,
        register_scopes: bool = False,
    ) -> None:
        if not isinstance(store, AsyncStore | Store):
            raise TypeError(
                f"store must be a redistate AsyncStore or Store, got {type(store).__name__}"
            )
        self.store = store
        self.register_scopes = register_scopes
        self._ns = store.keys.namespace
        self._ttl_ms = check_ttl(ttl)
        self._codec = store.codec
        self._max_bytes: int = store._max_bytes
        self._async = store.pydantic_conversations() if isinstance(store, AsyncStore) else None
        self._sync = None if isinstance(store, AsyncStore) else store.pydantic_conversations()
        self._registered: set[str] = set()
        # The conversation this task last read or saved: where its entries are read.
        self._hint: ContextVar[str | None] = ContextVar(f"redistate-pai-{id(self)}", default=None)

    async def _run(self, name: str, *args: Any) -> Any:
        if self._async is not None:
            return await getattr(self._async, name)(*args)
        return await asyncio.to_thread(getattr(self._sync, name), *args)

    # -- checks and codecs ------------------------------------------------------

    def _id(self, conversation_id: object) -> str:
        """A valid conversation id (it builds a key); InvalidId naming it otherwise."""
        try:
            self.store.keys.conversation(conversation_id)  # type: ignore[arg-type]
        except InvalidId as exc:
            raise InvalidId(f"conversation_id: {exc}") from None
        return conversation_id  # type: ignore[return-value]

    def _scope(self, scope: object) -> str | None:
        if scope is None:
            return None
        try:
            if self.register_scopes:
                self.store.keys.user_index(scope)  # type: ignore[arg-type]
            self.store.keys.conversations(scope)  # type: ignore[arg-type]
        except InvalidId as exc:
            raise InvalidId(f"scope: {exc}") from None
        return scope  # type: ignore[return-value]

    def _encode(self, value: Any, where: bytes, what: str) -> bytes:
        try:
            data = self._codec.encode(value, where)
        except CodecError as exc:
            raise CodecError(f"{what}: {exc}") from exc
        if len(data) > self._max_bytes:
            raise StateTooLarge(len(data), self._max_bytes, what)
        return data

    def _encode_entry(self, entry: ConversationEntry) -> tuple[str, str, bytes]:
        if not isinstance(entry, ConversationEntry):
            raise TypeError(f"new_entries must hold ConversationEntry, got {type(entry).__name__}")
        self._id(entry.id)
        message = ModelMessagesTypeAdapter.dump_python([entry.message], mode="json")[0]
        value = {"kind": entry.kind, "message": message}
        data = self._encode(value, entry_context(entry.id), f"entry {entry.id!r:.80}")
        return entry.id, entry.parent_id or "", data

    def _decode_entry(self, entry_id: str, parent: str, raw: bytes) -> ConversationEntry:
        value = self._codec.decode(raw, entry_context(entry_id))
        # Through JSON: pydantic-ai's messages carry bytes as base64 in JSON only.
        message = ModelMessagesTypeAdapter.validate_json(orjson.dumps([value["message"]]))[0]
        return ConversationEntry(
            id=entry_id, parent_id=parent or None, message=message, kind=value["kind"]
        )

    def _decode_record(self, conversation_id: str, fields: Sequence[Any]) -> ConversationRecord:
        body = self._codec.decode(
            bytes(fields[_FIELD["body"]]), record_context(conversation_id, "body")
        )
        record = _RECORD.validate_json(orjson.dumps(body))
        title, meta = fields[_FIELD["title"]], fields[_FIELD["meta"]]
        if title is not None:
            record.title = self._codec.decode(
                bytes(title), record_context(conversation_id, "title")
            )
        if meta is not None:
            record.metadata = self._codec.decode(
                bytes(meta), record_context(conversation_id, "meta")
            )
        return record

    # -- reads ------------------------------------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """The conversation's record, or None (never saved, deleted or expired)."""
        with telemetry.operation("read_record", PYDANTIC_AI.name, self._ns, conversation_id):
            cid = self._id(conversation_id)
            fields = await self._run("record", cid)
            self._hint.set(cid)
            if fields[0] is None:
                return None
            return self._decode_record(cid, fields)

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        """The records of ``scope`` (None: every one), most recently saved first."""
        with telemetry.operation("read_records", PYDANTIC_AI.name, self._ns, scope):
            scope = self._scope(scope)
            if limit is not None and (not isinstance(limit, int) or limit < 0):
                raise ValueError(f"limit must be an int >= 0 or None, got {limit!r}")
            found: list[ConversationRecord] = []
            gone: list[str] = []
            # A few more than the limit: the index holds ms (a record, µs) and may be
            # ahead of a record whose save was cut off; the records are sorted here.
            size = _PAGE if limit is None else min(_PAGE, limit + 8)
            start, last_ms = 0, 0
            while True:
                page = await self._run("listed", scope, start, size)
                if limit is not None and len(found) >= limit:
                    page = [(m, s) for m, s in page if s == last_ms]  # only the ties
                if not page:
                    break
                ids = [m.decode("utf-8", "surrogatepass") for m, _ in page]
                for cid, fields in zip(ids, await self._run("records", ids), strict=True):
                    held = fields[_FIELD["scope"]]
                    if fields[0] is None or (
                        scope is not None and (held is None or bytes(held).decode() != scope)
                    ):
                        gone.append(cid)  # expired, deleted, erased, or now of another scope
                        continue
                    found.append(self._decode_record(cid, fields))
                last_ms = page[-1][1]
                if len(page) < size:
                    break
                start += size
            if gone:
                await self._run("prune", scope, gone)
            found.sort(key=lambda r: r.updated_at, reverse=True)
            return found if limit is None else found[:limit]

    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[ConversationEntry]:
        """The entries up to ``head_id``, oldest first (the last ``limit``): one script."""
        with telemetry.operation("read_history", PYDANTIC_AI.name, self._ns, head_id):
            if head_id is None:
                return []
            if limit is not None and (not isinstance(limit, int) or limit < 0):
                raise ValueError(f"limit must be an int >= 0 or None, got {limit!r}")
            if limit == 0:
                return []
            triples = await self._triples(head_id, -1 if limit is None else limit)
            return [self._decode_entry(*t) for t in triples]

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry with this id; KeyError if no conversation holds it."""
        with telemetry.operation("read_entry", PYDANTIC_AI.name, self._ns, entry_id):
            return self._decode_entry(*(await self._triples(entry_id, 1))[0])

    async def _triples(
        self, head_id: str, limit: int, where: str | None = None
    ) -> list[tuple[str, str, bytes]]:
        """(id, parent, encoded entry) up to ``head_id``, from ``where``, the hinted
        conversation or one that holds it. KeyError if none does."""
        self._id(head_id)
        tried: set[str] = set()
        hinted = [c for c in (where, self._hint.get()) if c is not None]
        for cid in [*dict.fromkeys(hinted), ""]:
            if not cid:  # neither holds it: find one that does
                cid = await self._run("locate", head_id)
                if cid is None or cid in tried:
                    break
            tried.add(cid)
            reply = await self._run("history", cid, head_id, limit)
            if reply[0] == 1:
                flat = reply[1:]
                return [
                    (bytes(flat[i]).decode(), bytes(flat[i + 1]).decode(), bytes(flat[i + 2]))
                    for i in range(0, len(flat), 3)
                ]
        raise KeyError(head_id)

    # -- writes -----------------------------------------------------------------

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Write ``record`` and ``new_entries`` together, only if the stored revision
        is ``expected_revision`` (None: no record). A stored record's title and
        metadata are kept.

        Raises:
            ConversationConflict: another revision is stored, or the head is neither
                stored nor new (nothing written).
            InvalidId, StateTooLarge, CodecError: bad input (nothing written).
        """
        with telemetry.operation("write_record", PYDANTIC_AI.name, self._ns, _cid(record)):
            if not isinstance(record, ConversationRecord):
                raise TypeError(f"record must be a ConversationRecord, got {type(record).__name__}")
            cid = self._id(record.conversation_id)
            scope = self._scope(record.scope)
            if expected_revision is not None and not isinstance(expected_revision, str):
                raise TypeError(
                    f"expected_revision must be a str or None, got {expected_revision!r}"
                )
            if not isinstance(record.revision, str) or not record.revision:
                raise ValueError(
                    f"record.revision must be a non-empty str, got {record.revision!r}"
                )
            triples = [self._encode_entry(e) for e in new_entries]
            body = _RECORD.dump_python(record, mode="json", exclude=set(_DETAILS))
            data = self._encode(body, record_context(cid, "body"), f"conversation {cid!r:.80}")
            details: list[Any] = []
            if expected_revision is None and (
                record.title is not None or record.metadata is not None
            ):
                details = [
                    record.revision,
                    "0",
                    *self._detail_ops(cid, {"title": record.title, "metadata": record.metadata}),
                ]
            head = record.head_id or ""
            new_fork = record.forked_from is not None and expected_revision is None
            if new_fork and head and head not in {t[0] for t in triples}:
                # The history it keeps is copied into its slot.
                try:
                    copied = await self._triples(head, -1, where=record.forked_from)
                except KeyError:
                    raise ConversationConflict(cid) from None
                triples = copied + triples
            if scope is not None and self.register_scopes and cid not in self._registered:
                await self._run("register", scope, cid)
                self._registered.add(cid)
            upd = _ms(record.updated_at)
            argv: list[Any] = [
                expected_revision or "",
                record.revision,
                data,
                upd,
                "-" if scope is None else f"={scope}",
                head,
                self._ttl_ms,
                len(triples),
            ]
            for t in triples:
                argv += t
            reply = await self._run("write", cid, scope, argv, details)
            self._hint.set(cid)
            status = Written(int(reply[0]))
            if status is Written.CONFLICT:
                stored_upd = int(reply[1])
                if stored_upd:
                    await self._run("reindex", cid, scope, stored_upd)
                raise ConversationConflict(cid)
            if status is Written.HEAD_MISSING:
                raise ConversationConflict(cid)

    def _detail_ops(self, cid: str, details: ConversationDetails) -> list[Any]:
        ops: list[Any] = []
        for key, field in (("title", "title"), ("metadata", "meta")):
            if key not in details:
                ops += ["-", ""]
            elif details[key] is None:  # type: ignore[literal-required]
                ops += ["0", ""]
            else:
                value = details[key]  # type: ignore[literal-required]
                where = record_context(cid, field)
                ops += ["1", self._encode(value, where, f"{key} of {cid!r:.80}")]
        return ops

    async def write_details(
        self,
        conversation_id: str,
        details: ConversationDetails,
        *,
        expected_revision: str,
        expected: ConversationDetails | None = None,
    ) -> ConversationRecord:
        """Set the title or metadata (or both), keeping the revision and save time,
        only if the record is at ``expected_revision`` with the ``expected`` values:
        a compare-and-set on the record's details version."""
        with telemetry.operation("write_details", PYDANTIC_AI.name, self._ns, conversation_id):
            cid = self._id(conversation_id)
            unknown = (set(details) | set(expected or {})) - _DETAILS
            if unknown:
                raise NotImplementedError(f"{sorted(unknown)}: only title and metadata are stored")
            ops = self._detail_ops(cid, details)
            fields = await self._run("record", cid)
            if fields[0] is None or bytes(fields[0]).decode() != expected_revision:
                raise ConversationConflict(cid)
            record = self._decode_record(cid, fields)
            for key, value in (expected or {}).items():
                if getattr(record, key) != value:
                    raise ConversationConflict(cid)
            dver = fields[_FIELD["dver"]]
            argv = [expected_revision, "0" if dver is None else bytes(dver).decode(), *ops]
            if not await self._run("details", cid, argv):
                raise ConversationConflict(cid)
            if "title" in details:
                record.title = details["title"]
            if "metadata" in details:
                record.metadata = details["metadata"]
            return record

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Delete the conversation with every entry it holds (one DEL: each
        conversation holds its own), if it is at ``expected_revision``."""
        with telemetry.operation("delete_record", PYDANTIC_AI.name, self._ns, conversation_id):
            cid = self._id(conversation_id)
            if not isinstance(expected_revision, str) or not expected_revision:
                raise ConversationConflict(cid)
            if not await self._run("delete", cid, expected_revision):
                raise ConversationConflict(cid)
            self._registered.discard(cid)

    def __repr__(self) -> str:
        return f"RedistateConversationStore({self.store!r})"
