"""Claude Agent SDK transcripts on plain Redis: ``RedistateSessionStore``
(``redistate[claude]``).

A ``SessionStore`` that many processes share. An append is one script in the
session's hash slot: an entry whose ``uuid`` the transcript holds is not stored again,
a batch resent after a lost reply is recognised by its write id (so a timed-out append
can be retried), and the main transcript's summary, folded by the SDK's
``fold_session_summary`` in this process, is written in the same script only if no
other append moved it meanwhile (compare-and-set on its version; on a move the fold
is done again on the stored summary). Every write sets the TTL.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any, Final, cast

from claude_agent_sdk import fold_session_summary
from claude_agent_sdk.types import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStore,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
)

from ...core import telemetry
from ...core._ttl import check_ttl
from ...core.errors import CodecError, ConflictError, InvalidId, StateTooLarge
from ...core.kinds import CLAUDE
from ...store import Store
from ...store_async import AsyncStore
from .spec import (
    AppendArgs,
    Appended,
    AppendReply,
    context,
    session_path,
    split_member,
    subpath_bytes,
    summary_context,
)

__all__ = ["RedistateSessionStore"]

_ATTEMPTS: Final = 100  # folds in a row that another append overtook: then ConflictError
_CACHED: Final = 1024  # sessions whose summary this store remembers between appends
_MAX_BATCH: Final = 99_999  # entries per append (the script's limit)


def _sid(key: object) -> object:
    """A session key's id, for a span (set only with ``record_ids``, and only a str)."""
    return key.get("session_id") if isinstance(key, dict) else None


class RedistateSessionStore(SessionStore):
    """The Claude Agent SDK's ``SessionStore`` over a redistate store.

    Args:
        store: an ``AsyncStore`` (native) or a ``Store`` (its calls run in a worker
            thread; the SDK's store API is async only).
        ttl: seconds a session lives after its last append (None: no expiry), set on
            every key of it with every append.
        user: register every session this object writes to this redistate user
            (``store.users.erase(user)`` deletes them), before its first append.

    Raises:
        InvalidId: a malformed ``user``.
    """

    def __init__(
        self, store: AsyncStore | Store, *, ttl: float | None = None, user: str | None = None
    ) -> None:
        if not isinstance(store, AsyncStore | Store):
            raise TypeError(
                f"store must be a redistate AsyncStore or Store, got {type(store).__name__}"
            )
        if user is not None:
            try:
                store.keys.user_index(user)  # validates it: bad input writes nothing
            except InvalidId as exc:
                raise InvalidId(f"user: {exc}") from None
        self.store = store
        self.user = user
        self._ns = store.keys.namespace
        self._ttl_ms = check_ttl(ttl)
        self._codec = store.codec
        self._max_bytes: int = store._max_bytes
        self._async = store.claude_transcripts() if isinstance(store, AsyncStore) else None
        self._sync = None if isinstance(store, AsyncStore) else store.claude_transcripts()
        self._registered: set[str] = set()
        # path -> (version, summary data) as this object last wrote or read it: the
        # next fold starts from it (a stale one costs a round trip, never an update).
        self._summaries: OrderedDict[str, tuple[int, dict[str, Any] | None]] = OrderedDict()

    async def _run(self, name: str, *args: Any) -> Any:
        if self._async is not None:
            return await getattr(self._async, name)(*args)
        return await asyncio.to_thread(getattr(self._sync, name), *args)

    @staticmethod
    def _key(key: SessionKey) -> tuple[str, str, str, bytes]:
        if not isinstance(key, dict):
            raise TypeError(f"key must be a SessionKey dict, got {type(key).__name__}")
        project, sid = key.get("project_key"), key.get("session_id")
        path = session_path(project, sid)
        return str(project), str(sid), path, subpath_bytes(key.get("subpath"))

    def _encode(self, value: Any, where: bytes, what: str) -> bytes:
        try:
            data = self._codec.encode(value, where)
        except CodecError as exc:
            raise CodecError(f"{what}: {exc}") from exc
        if len(data) > self._max_bytes:
            raise StateTooLarge(len(data), self._max_bytes, what)
        return data

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Append ``entries`` as one batch, never interleaved with another. An entry
        whose ``uuid`` the transcript holds (or an earlier entry of the batch) is not
        stored again. Every entry is encoded first: a bad one raises and nothing is
        written.

        Raises:
            CodecError: an entry the codec cannot encode (not JSON, NaN...).
            StateTooLarge: an encoded entry over the store's ``max_bytes``.
            ConflictError: other appends to the session overtook this one's fold
                100 times in a row (nothing written).
        """
        with telemetry.operation("append", CLAUDE.name, self._ns, _sid(key)):
            project, sid, path, sub = self._key(key)
            if not isinstance(entries, list | tuple):
                raise TypeError(f"entries must be a list, got {type(entries).__name__}")
            if len(entries) > _MAX_BATCH:
                raise ValueError(
                    f"{len(entries)} entries in one append, over the limit of {_MAX_BATCH}"
                )
            batch: list[tuple[bytes, SessionStoreEntry, bytes]] = []
            seen: set[bytes] = set()
            where = context(path, sub)
            for i, item in enumerate(entries):
                if not isinstance(item, dict):
                    raise TypeError(f"entry {i} must be a dict, got {type(item).__name__}")
                uuid = item.get("uuid")
                if uuid is not None and not isinstance(uuid, str):
                    raise TypeError(
                        f"entry {i}'s uuid must be a str, got {type(uuid).__name__}: {uuid!r:.80}"
                    )
                mark = b"" if uuid is None else uuid.encode("utf-8", "surrogatepass")
                if mark and mark in seen:
                    continue
                seen.add(mark)
                batch.append(
                    (
                        mark,
                        item,
                        self._encode(item, where, f"entry {i} of {len(entries)} for {path!r:.80}"),
                    )
                )
            if not batch:
                return
            if path not in self._registered:
                await self._register(path)
            if sub:
                args = AppendArgs(
                    self._ttl_ms, sub, None, b"", [m for m, _, _ in batch], [d for _, _, d in batch]
                )
                # The index entry is renewed too: the session's keys live on with it.
                await self._run("append", project, path, sid, args, True)
                return
            await self._append_main(key, project, sid, path, batch)

    async def _register(self, path: str) -> None:
        """Add the session to ``user``'s index (before the write it registers)."""
        if self.user is not None:
            await self._run("register", self.user, path)
        self._registered.add(path)

    async def _append_main(
        self,
        key: SessionKey,
        project: str,
        sid: str,
        path: str,
        batch: list[tuple[bytes, SessionStoreEntry, bytes]],
    ) -> None:
        known = self._summaries.get(path)
        if known is None:  # this object's first append to it: indexed first, and read
            version, raw = await self._run("enter", project, path, sid, self._ttl_ms)
            data = self._summary(path, raw)
        else:
            version, data = known
        first = version
        for _ in range(_ATTEMPTS):
            prev: SessionSummaryEntry | None = None
            if data is not None:
                prev = {"session_id": sid, "mtime": 0, "data": data}
            folded = fold_session_summary(prev, key, [item for _, item, _ in batch])
            # Not held to max_bytes: each of its fields is from an entry that was, and a
            # summary refused would refuse every later append of the session.
            summary = self._codec.encode(folded["data"], summary_context(path))
            args = AppendArgs(
                self._ttl_ms,
                b"",
                version,
                summary,
                [m for m, _, _ in batch],
                [d for _, _, d in batch],
            )
            # Known: its index entry is renewed in the same round trip.
            index = known is not None
            reply: AppendReply = await self._run("append", project, path, sid, args, index)
            known = None
            if reply.status is Appended.APPENDED:
                self._remember(path, reply.version, folded["data"])
                return
            if reply.status is Appended.RESENT:
                self._summaries.pop(path, None)  # landed; the version it made is unknown
                return
            version, data = reply.version, self._summary(path, reply.summary)
            self._remember(path, version, data)
            if version == 0 and self.user is not None:
                await self._register(path)  # deleted or erased meanwhile: a new session
            stored = set(reply.stored)
            batch = [b for b in batch if not b[0] or b[0] not in stored]
            if not batch:  # every entry was stored already: only the TTL is set
                if self._ttl_ms:
                    touch = AppendArgs(self._ttl_ms, b"", None, b"", (), ())
                    await self._run("append", project, path, sid, touch, True)
                return
        # Other appends overtook every fold: the summary's version moved each time.
        raise ConflictError(self.store.keys.claude_session(path), first, version)

    def _summary(self, path: str, raw: bytes) -> dict[str, Any] | None:
        if not raw:
            return None
        data: dict[str, Any] = self._codec.decode(raw, summary_context(path))
        return data

    def _remember(self, path: str, version: int, data: dict[str, Any] | None) -> None:
        self._summaries[path] = (version, data)
        self._summaries.move_to_end(path)
        while len(self._summaries) > _CACHED:
            self._summaries.popitem(last=False)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """A transcript's entries in the order they were appended; None if it has none
        (never written, deleted or expired)."""
        with telemetry.operation("load", CLAUDE.name, self._ns, _sid(key)):
            _, _, path, sub = self._key(key)
            members = await self._run("load", path, sub)
            if not members:
                return None
            where = context(path, sub)
            return [
                cast(SessionStoreEntry, self._codec.decode(split_member(m, sub), where))
                for m in members
            ]

    async def _listed(self, project_key: str, summary: bool) -> list[tuple[str, list[Any]]]:
        if not isinstance(project_key, str) or not project_key:
            raise InvalidId(f"project_key must be a non-empty str, got {project_key!r:.80}")
        ids = [
            bytes(s).decode("utf-8", "surrogatepass")
            for s in await self._run("sessions", project_key)
        ]
        ids.sort()
        heads = (
            await self._run("heads", [session_path(project_key, s) for s in ids], summary)
            if ids
            else []
        )
        found: list[tuple[str, list[Any]]] = []
        gone: list[tuple[str, list[Any]]] = []
        for sid, head in zip(ids, heads, strict=True):
            # Without a main-transcript time: expired, deleted, erased, with subagent
            # transcripts only, or being created (prune_index leaves those).
            (gone if head[0] is None else found).append((sid, head))
        if gone:
            await self._run("prune", project_key, [sid for sid, _ in gone])
        return found

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The project's sessions with a main transcript and its last write time (ms,
        the server's clock: the same as their summaries')."""
        with telemetry.operation("list_sessions", CLAUDE.name, self._ns, project_key):
            return [
                {"session_id": sid, "mtime": int(head[0])}
                for sid, head in await self._listed(project_key, False)
            ]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """Each session's summary as the SDK folded it, with its write time."""
        with telemetry.operation("list_session_summaries", CLAUDE.name, self._ns, project_key):
            out: list[SessionSummaryEntry] = []
            for sid, (mtime, raw) in await self._listed(project_key, True):
                if raw is None:
                    continue
                data = self._codec.decode(
                    bytes(raw), summary_context(session_path(project_key, sid))
                )
                out.append({"session_id": sid, "mtime": int(mtime), "data": data})
            return out

    async def delete(self, key: SessionKey) -> None:
        """Delete a session with every subagent transcript of it, or, with a subpath,
        that transcript alone."""
        with telemetry.operation("delete", CLAUDE.name, self._ns, _sid(key)):
            _, _, path, sub = self._key(key)
            if sub:
                await self._run("drop", path, sub)
            else:
                await self._run("delete", path)
                self._summaries.pop(path, None)
                self._registered.discard(path)

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths of a session's subagent transcripts, sorted."""
        with telemetry.operation("list_subkeys", CLAUDE.name, self._ns, _sid(key)):
            _, _, path, _ = self._key(cast(SessionKey, {**key, "subpath": None}))
            found = await self._run("subkeys", path)
            return sorted(bytes(s).decode("utf-8", "surrogatepass") for s in found)

    def __repr__(self) -> str:
        user = "" if self.user is None else f", user={self.user!r}"
        return f"RedistateSessionStore({self.store!r}{user})"
