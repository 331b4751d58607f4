"""Google ADK sessions on plain Redis: ``RedistateSessionService`` (``redistate[adk]``).

A ``BaseSessionService`` that many instances share: each session is its own hash and
event list, ``user:`` state one hash per user of an app and ``app:`` state one hash per
app, each written as a merge of the keys a delta sets. An append adds its event and
applies its session-state delta in one script, and never rewrites the session or its
history; there is no stale-session check, because no append overwrites what another
wrote (each state key is set on its own, events keep the order they arrive in).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session

from ...core import telemetry
from ...core._ttl import check_ttl
from ...core.batching import pairs
from ...core.codec import Codec
from ...core.errors import InvalidId, StateTooLarge
from ...core.kinds import ADK
from ...store import Store
from ...store_async import AsyncStore
from .sessions_async import Appended, AsyncAdkSessions, Found
from .spec import (
    APP,
    EVENTS,
    LAST,
    STATE,
    USER,
    app_id,
    context,
    session_path,
    split_element,
    split_state,
    stamp,
    user_path,
)

__all__ = ["RedistateSessionService"]


def _sid(session: object) -> object:
    """A session's id, for a span (set only with ``record_ids``)."""
    return getattr(session, "id", None)


class RedistateSessionService(BaseSessionService):
    """ADK's ``BaseSessionService`` over a redistate store.

    Args:
        store: an ``AsyncStore`` (native) or a ``Store`` (its calls run in a worker
            thread; ADK's service API is async only).
        ttl: seconds a session lives after its last write (None: no expiry). The
            user's and the app's state keep their own lifetime (none).
        register_users: register each session and its user's ``user:`` state to the
            redistate user named by ADK's ``user_id`` (in every app), so that
            ``store.users.erase(user_id)`` deletes them; added to the user's index in
            the round trip before the session is created. The ``app:`` state is
            shared by every user of the app: no user's erasure deletes it. Erasure
            deletes the user's index of an app too: create every session of an app
            with the same setting, or one made without it is left unlisted.
    """

    def __init__(
        self,
        store: Store | AsyncStore,
        *,
        ttl: float | None = None,
        register_users: bool = False,
    ) -> None:
        if not isinstance(store, Store | AsyncStore):
            raise TypeError(f"store must be a Store or AsyncStore, got {type(store).__name__}")
        if not isinstance(register_users, bool):
            raise TypeError(f"register_users must be a bool, got {register_users!r:.80}")
        self.store = store
        self.register_users = register_users
        self._ns = store.keys.namespace
        self._ttl_ms = check_ttl(ttl)  # ms; 0: no expiry
        self._codec: Codec = store.codec
        self._max_bytes: int = store._max_bytes
        self._async: AsyncAdkSessions | None = (
            store.adk_sessions() if isinstance(store, AsyncStore) else None
        )
        self._sync = None if isinstance(store, AsyncStore) else store.adk_sessions()

    async def _run(self, name: str, *args: Any) -> Any:
        if self._async is not None:
            return await getattr(self._async, name)(*args)
        return await asyncio.to_thread(getattr(self._sync, name), *args)

    def _encode(self, value: Any, where: bytes, what: str) -> bytes:
        data = self._codec.encode(value, where)
        if len(data) > self._max_bytes:
            raise StateTooLarge(len(data), self._max_bytes, what)
        return data

    def _fields(self, scope: str, owner: str, values: dict[str, Any], prefix: bytes) -> list[bytes]:
        out: list[bytes] = []
        for key, value in values.items():
            out += [
                prefix + key.encode("utf-8", "surrogatepass"),
                self._encode(value, context(scope, owner, key), f"{scope} state {key!r:.40}"),
            ]
        return out

    def _decoded(
        self, scope: str, owner: str, found: dict[bytes, bytes], prefix: bytes
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for field, data in found.items():
            if field.startswith(prefix):
                key = field[len(prefix) :].decode("utf-8", "surrogatepass")
                out[key] = self._codec.decode(data, context(scope, owner, key))
        return out

    def _session(
        self,
        app: str,
        user: str,
        session_id: str,
        found: Found,
        app_state: dict[bytes, bytes],
        user_state: dict[bytes, bytes],
    ) -> Session:
        fields, elements = found
        path = session_path(app, user, session_id)
        state = self._decoded("session", path, fields, STATE)
        for key, value in self._decoded("app", app, app_state, b"").items():
            state[APP + key] = value
        for key, value in self._decoded("user", user_path(app, user), user_state, b"").items():
            state[USER + key] = value
        events = []
        migrations = self.store.migrations
        for element in elements:
            _, schema, data = split_element(element)
            value = self._codec.decode(data, context("event", path, ""))
            if schema != migrations.current(EVENTS):  # newer: SchemaError, never dropped
                value = migrations.upgrade(EVENTS, schema, value, f"an event of {path!r:.80}")
            events.append(Event.model_validate(value))
        return Session(
            id=session_id,
            app_name=app,
            user_id=user,
            state=state,
            events=events,
            last_update_time=float(fields[LAST]),
        )

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        with telemetry.operation("create_session", ADK.name, self._ns, session_id):
            session_id = (session_id.strip() if session_id else None) or str(uuid.uuid4())
            path, owner = session_path(app_name, user_id, session_id), user_path(app_name, user_id)
            app_id(app_name)
            registered = None
            if self.register_users:
                try:
                    self.store.keys.user_index(user_id)  # bad input writes nothing
                except InvalidId as exc:
                    raise InvalidId(f"user_id (the user to register): {exc}") from None
                registered = user_id
            scopes = split_state(state)
            fields = self._fields("session", path, scopes.session, STATE)
            app_fields = self._fields("app", app_name, scopes.app, b"")
            user_fields = self._fields("user", owner, scopes.user, b"")
            created = time.time()
            keys = self.store.keys
            reads = [keys.adk_app(app_name), keys.adk_user(owner)]
            merges = self._merges(app_name, owner, app_fields, user_fields)
            made, read = await self._run(
                "create",
                app_name,
                user_id,
                owner,
                path,
                session_id,
                created,
                self._ttl_ms,
                fields,
                registered,
                [] if merges else reads,
            )
            if not made:
                raise AlreadyExistsError(f"Session with id {session_id} already exists.")
            if merges:  # the shared state read after this session's part of it is merged
                read = await self._run("merge", merges, reads)
            # Built here, not read back: as stored (decoded), with no event yet.
            stored = dict(pairs(fields)) | {LAST: stamp(created)}
            found: Found = (stored, [])
            return self._session(app_name, user_id, session_id, found, read[0], read[1])

    def _merges(
        self, app: str, owner: str, app_fields: list[bytes], user_fields: list[bytes]
    ) -> list[tuple[str, list[bytes]]]:
        states = []
        if app_fields:
            states.append((self.store.keys.adk_app(app), app_fields))
        if user_fields:
            states.append((self.store.keys.adk_user(owner), user_fields))
        return states

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        with telemetry.operation("get_session", ADK.name, self._ns, session_id):
            session_id = session_id.strip() if session_id else session_id
            path, owner = session_path(app_name, user_id, session_id), user_path(app_name, user_id)
            recent = -1
            after = None
            if config is not None:
                recent = -1 if config.num_recent_events is None else config.num_recent_events
                after = config.after_timestamp
            keys = self.store.keys
            found, (app_state, user_state) = await self._run(
                "get", [path], recent, after, [keys.adk_app(app_id(app_name)), keys.adk_user(owner)]
            )
            if found[0] is None:
                return None
            return self._session(app_name, user_id, session_id, found[0], app_state, user_state)

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        with telemetry.operation("list_sessions", ADK.name, self._ns, user_id):
            app_id(app_name)
            users = (
                [user_id]
                if user_id is not None
                else sorted(u.decode("utf-8") for u in await self._run("users", app_name))
            )
            owners = [user_path(app_name, u) for u in users]
            indexes = await self._run("index", owners)
            wanted = [
                (user, owner, sid.decode("utf-8"))
                for user, owner, ids in zip(users, owners, indexes, strict=True)
                for sid in ids
            ]
            keys = self.store.keys
            states = [keys.adk_app(app_name), *(keys.adk_user(o) for o in owners)]
            paths = [session_path(app_name, u, s) for u, _, s in wanted]
            found, read = await self._run("get", paths, 0, None, states)
            user_states = dict(zip(owners, read[1:], strict=True))
            sessions: list[Session] = []
            gone: dict[str, list[str]] = {}
            for (user, owner, sid), got in zip(wanted, found, strict=True):
                if got is None:
                    gone.setdefault(owner, []).append(sid)  # expired: off the index
                    continue
                sessions.append(
                    self._session(app_name, user, sid, got, read[0], user_states[owner])
                )
            for owner, sids in gone.items():
                await self._run("prune", owner, sids)
            sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
            return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        with telemetry.operation("delete_session", ADK.name, self._ns, session_id):
            session_id = session_id.strip() if session_id else session_id
            path, owner = session_path(app_name, user_id, session_id), user_path(app_name, user_id)
            await self._run("delete", owner, path, session_id)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        with telemetry.operation("get_user_state", ADK.name, self._ns, user_id):
            owner = user_path(app_name, user_id)
            _, (state,) = await self._run("get", [], 0, None, [self.store.keys.adk_user(owner)])
            return self._decoded("user", owner, state, b"")

    async def _holds(self, app: str, user: str, sid: str, event: Event) -> bool:
        """Whether the stored session holds an event equal to ``event`` (one read)."""
        stored = await self.get_session(app_name=app, user_id=user, session_id=sid)
        return stored is not None and any(e == event for e in stored.events if e.id == event.id)

    async def append_event(self, session: Session, event: Event) -> Event:
        with telemetry.operation("append_event", ADK.name, self._ns, _sid(session)):
            if event.partial:
                return event
            app, user, sid = session.app_name, session.user_id, session.id
            path, owner = session_path(app, user, sid), user_path(app, user)
            stored = event.model_copy(deep=True)
            self._trim_temp_delta_state(stored)
            delta = stored.actions.state_delta if stored.actions else None
            scopes = split_state(delta)
            fields = self._fields("session", path, scopes.session, STATE)
            app_fields = self._fields("app", app, scopes.app, b"")
            user_fields = self._fields("user", owner, scopes.user, b"")
            data = self._encode(
                stored.model_dump(mode="json", exclude_none=True),
                context("event", path, ""),
                f"event {event.id!r:.40}",
            )
            schema = self.store.migrations.current(EVENTS)
            args = (owner, path, sid, event.timestamp, self._ttl_ms, event.id, data, schema, fields)
            done: Appended = await self._run("append", *args)
            if done is Appended.SEEN:
                # An event with this id is stored: an equal one is a redelivery, not
                # appended again (as ADK's InMemorySessionService does); a different one
                # that shares the id is appended.
                if await self._holds(app, user, sid, event):
                    return event
                done = await self._run("append", *args, True)
            if done is Appended.GONE:
                raise SessionNotFoundError(f"Session {sid} not found.")
            merges = self._merges(app, owner, app_fields, user_fields)
            if merges:
                await self._run("merge", merges)
            await super().append_event(session=session, event=event)
            session.last_update_time = event.timestamp
            return event
