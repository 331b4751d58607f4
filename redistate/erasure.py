"""Per-user erasure, the pure half: what a user's index holds and which keys go with it.

``put(..., user=)``, ``checkpoints.save(..., user=)`` and ``events.append(..., user=)``
add ``<kind>:<id>`` to the user's index (``KeySpace.user_index``) before they write, so
an interrupted write leaves at most an index entry for nothing, never data the index
misses. ``users.erase`` deletes every listed entity, then the profile and the index.
On a cluster the entities live in other hash slots than the index: erasure is one
deletion per entity, not one atomic step (re-running it finishes an interrupted one),
and a write registered while it runs is caught by reading the index again until it
stays empty; writes after the index is gone are not — stop the user's agents first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from .errors import IntegrityError
from .keys import KeySpace, check_kind, escape_id

__all__ = ["ErasureReport", "entity_keys", "entry"]

TASK: Final = "task"
EVENTS: Final = "events"


def entry(kind: str, entity_id: str) -> str:
    """An index entry: ``<kind>:<id>`` (a kind holds no ``:``). Validates the id."""
    escape_id(entity_id)
    return f"{kind}:{entity_id}"


def entity_keys(keys: KeySpace, item: str) -> tuple[list[str], str]:
    """The keys holding the data of the entity an index entry names, and its write
    memory (all in one hash slot).

    Raises:
        IntegrityError: an entry redistate did not write.
    """
    kind, sep, entity_id = item.partition(":")
    try:
        if not sep:
            raise ValueError(item)
        check_kind(kind)
        if kind == TASK:
            task = keys.task_keys(entity_id)
            return [*task, keys.task_steps(entity_id)], keys.writes(task[0])
        if kind == EVENTS:
            stream = keys.events(entity_id)
            staging = keys.events_staging(entity_id)
            return [stream, keys.events_anchor(entity_id), staging], keys.writes(stream)
        record = keys.record(kind, entity_id)
        return [record], keys.writes(record)
    except ValueError:
        raise IntegrityError(f"user index entry {item!r:.120} is not one redistate wrote") from None


@dataclass
class ErasureReport:
    """What ``users.erase`` deleted: ``deleted`` maps each kind to the ids that had
    data, ``missing`` lists index entries whose data was already gone."""

    user: str
    profile: bool = False
    deleted: dict[str, list[str]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def note(self, item: str, existed: bool) -> None:
        kind, _, entity_id = item.partition(":")
        if existed:
            self.deleted.setdefault(kind, []).append(entity_id)
        else:
            self.missing.append(item)

    @property
    def count(self) -> int:
        """Entities deleted, the profile included."""
        return sum(len(ids) for ids in self.deleted.values()) + int(self.profile)
