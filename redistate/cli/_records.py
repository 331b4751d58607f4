"""The records of a namespace, as the commands that rewrite them in place see them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .. import Store, kinds
from ..errors import InvalidId

__all__ = ["collection_of", "namespace_keys", "record_keys"]

_LISTED = (kinds.TASK, kinds.EVENTS)  # with the records, by namespace_keys


def collection_of(store: Store, kind: str) -> Any:
    """The store's collection for a record kind (users, sessions, or a named one)."""
    if kind == kinds.USER_KEY:
        return store.users
    if kind == kinds.SESSION_KEY:
        return store.sessions
    return store.collection(kind)


def namespace_keys(store: Store) -> Iterator[tuple[str, str, str]]:
    """(kind, id, key) of every entity's main key in the namespace (SCAN, every
    primary): records, tasks' checkpoint lists, event streams."""
    for raw in store._conn.scan(store.keys.namespace_pattern()):
        try:
            kind, entity, part = store.keys.parse(raw)
        except InvalidId:
            continue
        owner = kinds.claim(kind, part)
        if not part and owner is not None and (owner.records or owner in _LISTED):
            yield kind, entity, raw.decode() if isinstance(raw, bytes) else raw


def record_keys(store: Store) -> Iterator[tuple[str, str, str]]:
    """(kind, id, key) of every record in the namespace (SCAN, every primary)."""
    for item in namespace_keys(store):
        owner = kinds.claim(item[0], "")
        if owner is not None and owner.records:
            yield item
