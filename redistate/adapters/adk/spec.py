"""Google ADK sessions, the pure half: ids and keys, state scopes, the stored forms of
state values and events, the scripts' arguments and replies (``lua/adk_*.lua``). No
I/O, no ADK import.

A session is the entity ``<app>/<user>/<session id>`` ("%" and "/" in the app and the
user percent-escaped, so the split is exact); its state and times are one hash and its
events one list, in its hash slot. The user ``<app>/<user>`` holds its ``user:`` state
and an index of its sessions (a zset by last update) in another slot; the app holds
its ``app:`` state and the set of its users in a third.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from ...core.errors import InvalidId
from ...core.keys import escape_id, path_part

__all__ = [
    "APP",
    "EVENTS",
    "SEEN",
    "TEMP",
    "USER",
    "Appended",
    "Scopes",
    "app_id",
    "context",
    "event_element",
    "session_path",
    "split_element",
    "split_state",
    "stamp",
    "user_path",
]

APP: Final = "app:"
USER: Final = "user:"
TEMP: Final = "temp:"
STATE: Final = b"s:"  # a session-state field of the session hash
LAST: Final = b"m:last"  # the session's last update time (seconds, as ADK keeps it)
SEEN: Final = b"e:"  # marks an event id the session holds: "e:<event id>" -> "1"
# What store.migrations.register names ADK events by ("adk-events" too): each stored
# event carries the schema it was written at, and reads upgrade an older one.
EVENTS: Final = "adk-event"


class Appended(Enum):
    """What adk_append did (its reply's first element)."""

    GONE = 0  # no such session: nothing written
    APPENDED = 1
    RESENT = 2  # a resend of an append already made: nothing written again
    SEEN = 3  # an event with this id is in the session: nothing written


def user_path(app: str, user: str) -> str:
    """The entity id of a user of an app. Raises InvalidId (too long, not a str...)."""
    path = f"{path_part(app, 'app_name')}/{path_part(user, 'user_id')}"
    try:
        escape_id(path)
    except InvalidId as exc:
        raise InvalidId(f"app_name and user_id together: {exc}") from None
    return path


def session_path(app: str, user: str, session_id: str) -> str:
    """The entity id of a session. Raises InvalidId naming the part that is wrong."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidId(f"session_id must be a non-empty str, got {session_id!r:.80}")
    path = f"{user_path(app, user)}/{session_id}"
    try:
        escape_id(path)
    except InvalidId as exc:
        raise InvalidId(f"app, user and session id together: {exc}") from None
    return path


def app_id(app: str) -> str:
    """The entity id of an app. Raises InvalidId."""
    if not isinstance(app, str) or not app:
        raise InvalidId(f"app_name must be a non-empty str, got {app!r:.80}")
    escape_id(app)
    return app


def context(scope: str, entity: str, key: str) -> bytes:
    """What the codec binds a stored value to: its scope, owner and key (a value moved
    to another place does not decode)."""
    return f"adk\0{scope}\0{entity}\0{key}".encode("utf-8", "surrogatepass")


@dataclass(frozen=True, slots=True)
class Scopes:
    """A state delta split by ADK's prefixes: ``app:`` and ``user:`` keys (prefix
    taken off), the session's own, ``temp:`` dropped (never stored)."""

    app: dict[str, Any]
    user: dict[str, Any]
    session: dict[str, Any]

    def __bool__(self) -> bool:
        return bool(self.app or self.user or self.session)


def split_state(delta: Mapping[str, Any] | None) -> Scopes:
    """``delta``'s keys by scope, as ADK's session services split them."""
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    session: dict[str, Any] = {}
    for key, value in (delta or {}).items():
        if not isinstance(key, str):
            raise TypeError(f"a state key is a str, got {type(key).__name__}: {key!r:.80}")
        if key.startswith(APP):
            app[key[len(APP) :]] = value
        elif key.startswith(USER):
            user[key[len(USER) :]] = value
        elif not key.startswith(TEMP):
            session[key] = value
    return Scopes(app, user, session)


def stamp(seconds: object) -> bytes:
    """An ADK time (float seconds) as stored: its repr, exact when read back."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(f"a timestamp is a number of seconds, got {seconds!r:.80}")
    value = float(seconds)
    if not math.isfinite(value) or not 0 <= value < 2**42:
        raise ValueError(f"timestamp {seconds!r} is not a time from 1970 on (seconds)")
    return repr(value).encode()


def event_element(timestamp: object, schema: int, data: bytes) -> bytes:
    """An event as its list holds it: ``<timestamp>:<schema>:<encoded event>`` (the
    script filters by time without decoding; migrate finds old ones the same way)."""
    return b"%s:%d:%s" % (stamp(timestamp), schema, data)


def split_element(element: bytes) -> tuple[float, int, bytes]:
    """An event list element's (timestamp, schema, encoded event). Raises ValueError
    if it is not ``<timestamp>:<schema>:<encoded event>``."""
    head, _, rest = bytes(element).partition(b":")
    schema, sep, data = rest.partition(b":")
    if not sep or not schema.isdigit() or not 0 < len(schema) <= 9 or int(schema) < 1:
        raise ValueError(f"not '<timestamp>:<schema>:<event>': {bytes(element)[:40]!r}")
    return float(head), int(schema), data
