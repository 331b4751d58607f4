"""Google ADK sessions: the I/O of redistate.adk (async source of truth; ``sessions.py``
is the generated sync twin).

Every call is one round trip per server in the common case: a get reads the session,
the user's and the app's state in one pipeline of scripts; an append sends the event
with its session-state delta (one script in the session's slot) and moves the session
up in its user's index, in one pipeline. A delta with ``app:`` or ``user:`` keys is
applied after the event landed (one more round trip), so a session that is gone
changes no shared state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ...core import kinds
from ...core.batching import Call, pairs, raise_first
from ...core.connection_async import AsyncConnection
from ...core.keys import KeySpace
from ...core.scripts import script
from ...records.erasure import entry
from ...records.spec import new_write_id
from .spec import SEEN, Appended, event_element, stamp

__all__ = ["AsyncAdkSessions", "Appended", "Found"]

_CREATE: Final = script("adk_create")
_APPEND: Final = script("adk_append")
_STATE: Final = script("adk_state")
_INDEX: Final = script("adk_index")
_GET: Final = script("adk_get")
_READ: Final = script("adk_read")
_USERS: Final = script("adk_users")

Found = tuple[dict[bytes, bytes], list[bytes]]  # a session's hash, its events as stored


def _hash(reply: Any) -> dict[bytes, bytes]:
    return dict(pairs(reply))


class AsyncAdkSessions:
    """ADK sessions, users' and apps' state in one redistate namespace."""

    __slots__ = ("_conn", "keys")

    def __init__(self, conn: AsyncConnection, keys: KeySpace) -> None:
        self._conn = conn
        self.keys = keys

    def _session(self, path: str) -> tuple[str, str, str]:
        hash_key = self.keys.adk_session(path)
        return hash_key, self.keys.adk_session(path, "events"), self.keys.writes(hash_key)

    def _state(self, key: str) -> tuple[str, str]:
        return key, self.keys.writes(key)

    async def create(
        self,
        app: str,
        user: str,
        user_path: str,
        path: str,
        session_id: str,
        created: float,
        ttl_ms: int,
        fields: Sequence[bytes],
        owner: str | None = None,
        reads: Sequence[str] = (),
    ) -> tuple[bool, list[dict[bytes, bytes]]]:
        """Enter the session in its user's index, its user in the app's and, with an
        ``owner``, both in that redistate user's index (one round trip), then create it
        with its session-state ``fields`` and read each state hash of ``reads`` (one
        more). False if it existed (nothing changed: it was in the indexes already)."""
        index = self.keys.adk_user(user_path, "sessions")
        users = self.keys.adk_app(app, "users")
        # Indexed first: a listing never misses a session that exists, an erasure never
        # misses one registered.
        calls: list[Any] = [
            (_INDEX, (index,), (session_id, stamp(created), "new", ttl_ms)),
            (_USERS, (users,), (user,)),
        ]
        if owner is not None:
            entries = (entry(kinds.ADK_KEY, path), entry(kinds.ADK_USER_KEY, user_path))
            calls.append((_USERS, (self.keys.user_index(owner),), entries))
        raise_first(await self._conn.scripts(calls))
        wid = new_write_id()
        args = (self._conn.memory_ms, wid, ttl_ms, stamp(created), *fields)
        replies = raise_first(
            await self._conn.writes(
                [
                    Call(_CREATE, self._session(path), args, wid=wid),
                    *(Call(_READ, (key,), ()) for key in reads),
                ]
            )
        )
        return int(replies[0][0]) != 0, [_hash(r) for r in replies[1:]]

    async def append(
        self,
        user_path: str,
        path: str,
        session_id: str,
        timestamp: float,
        ttl_ms: int,
        event_id: str,
        event: bytes,
        schema: int,
        fields: Sequence[bytes],
        again: bool = False,
    ) -> Appended:
        """Append an encoded event (written at ``schema``) and its session-state
        ``fields``, and move the session up in its user's index, in one round trip per
        server. Unless ``again``, an event whose id the session holds is not appended
        (SEEN: the caller compares the two)."""
        wid = new_write_id()
        memory = self._conn.memory_ms
        at = stamp(timestamp)
        index = self.keys.adk_user(user_path, "sessions")
        seen = SEEN + event_id.encode("utf-8", "surrogatepass")
        element = event_element(timestamp, schema, event)
        args = (memory, wid, ttl_ms, at, seen, int(again), element, *fields)
        replies = raise_first(
            await self._conn.writes(
                [
                    Call(_APPEND, self._session(path), args, wid=wid),
                    Call(_INDEX, (index,), (session_id, at, "touch", ttl_ms)),
                ]
            )
        )
        return Appended(int(replies[0][0]))

    async def merge(
        self, states: Sequence[tuple[str, Sequence[bytes]]], reads: Sequence[str] = ()
    ) -> list[dict[bytes, bytes]]:
        """Set each (state key, flat fields and values) as a merge, then read each state
        hash of ``reads`` (after the merges: each server runs its calls in order), one
        round trip per server."""
        calls = []
        for key, fields in states:
            wid = new_write_id()
            calls.append(
                Call(_STATE, self._state(key), (self._conn.memory_ms, wid, *fields), wid=wid)
            )
        calls += [Call(_READ, (key,), ()) for key in reads]
        replies = raise_first(await self._conn.writes(calls))
        return [_hash(r) for r in replies[len(states) :]]

    async def get(
        self,
        paths: Sequence[str],
        recent: int,
        after: float | None,
        states: Sequence[str],
    ) -> tuple[list[Found | None], list[dict[bytes, bytes]]]:
        """Each session (None: absent or expired) with its events as selected, and
        each state hash, in one round trip per server."""
        argv = (recent, "" if after is None else stamp(after))
        calls: list[Any] = [(_GET, self._session(p)[:2], argv) for p in paths]
        calls += [(_READ, (key,), ()) for key in states]
        replies = raise_first(await self._conn.scripts(calls))
        found: list[Found | None] = []
        for reply in replies[: len(paths)]:
            found.append(None if not reply else (_hash(reply[0]), list(reply[1])))
        return found, [_hash(r) for r in replies[len(paths) :]]

    async def index(self, user_paths: Sequence[str]) -> list[list[bytes]]:
        """The session ids each user's index lists (some may be gone: see prune)."""
        groups = [
            (
                self.keys.adk_user(u, "sessions"),
                [("ZRANGE", self.keys.adk_user(u, "sessions"), 0, -1)],
            )
            for u in user_paths
        ]
        replies = await self._conn.batch(groups, atomic=False)
        return [list(r[0]) for r in replies]

    async def users(self, app: str) -> list[bytes]:
        """The users with a session of ``app`` (some may have none left)."""
        return list(await self._conn.idempotent("SMEMBERS", self.keys.adk_app(app, "users")))

    async def prune(self, user_path: str, session_ids: Sequence[bytes | str]) -> None:
        """Take sessions found gone (expired) off their user's index."""
        if session_ids:
            await self._conn.idempotent(
                "ZREM", self.keys.adk_user(user_path, "sessions"), *session_ids
            )

    async def delete(self, user_path: str, path: str, session_id: str) -> None:
        """Delete a session's keys and take it off its user's index."""
        hash_key, events, writes = self._session(path)
        index = self.keys.adk_user(user_path, "sessions")
        raise_first(
            [
                part
                for reply in await self._conn.batch(
                    [
                        (hash_key, [("DEL", hash_key, events, writes)]),
                        (index, [("ZREM", index, session_id)]),
                    ],
                    atomic=False,
                )
                for part in reply
            ]
        )
