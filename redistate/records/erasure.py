"""Per-user erasure, the pure half: what a user's index holds and which keys go with it.

``put(..., user=)``, ``checkpoints.save(..., user=)``, ``events.append(..., user=)``,
``RedistateSession(..., user=)``, ``RedisStateSaver(..., user_key=)`` and
``RedistateStore(..., user=)`` add
``<key kind or collection name>:<id>`` to the user's index (``KeySpace.user_index``)
before they write, so an interrupted write leaves at most an index entry for nothing,
never data the index misses. ``users.erase`` deletes every listed entity (every key
the kind registry, redistate.core.kinds, gives it), then the profile and the index.
On a cluster the entities live in other hash slots than the index: erasure is one
deletion per entity, not one atomic step (re-running it finishes an interrupted one),
and a write registered while it runs is caught by reading the index again until it
stays empty; writes after the index is gone are not — stop the user's agents first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core import kinds
from ..core.errors import IntegrityError
from ..core.keys import KeySpace, check_kind, escape_id

__all__ = ["ErasureReport", "entity_keys", "entry", "owner"]


def entry(kind: str, entity_id: str) -> str:
    """An index entry: ``<kind>:<id>``, ``kind`` a key kind or a collection's name
    (it holds no ``:``). Validates the id."""
    escape_id(entity_id)
    return f"{kind}:{entity_id}"


def owner(entry_kind: str) -> kinds.Kind | None:
    """The registered Kind an index entry's kind names (None: no kind registers under
    it). A kind without a main key (a LangGraph thread) is found by its key kind."""
    found = kinds.claim(entry_kind, "")
    if found is not None and found.registered:
        return found
    return next((k for k in kinds.KINDS if k.registered and k.key == entry_kind), None)


def entity_keys(keys: KeySpace, item: str) -> tuple[list[str], list[str]]:
    """The keys holding the data of the entity an index entry names, and its write
    memory (all in one hash slot): the keys of every kind sharing its key kind, so a
    task's step records go with the task.

    Raises:
        IntegrityError: an entry redistate did not write.
    """
    entry_kind, sep, entity_id = item.partition(":")
    try:
        if not sep:
            raise ValueError(item)
        check_kind(entry_kind)
        found = owner(entry_kind)
        if found is None:
            raise ValueError(item)
        collection = entry_kind if found.key == kinds.ANY else ""
        data: list[str] = []
        memory: list[str] = []
        for kind in kinds.KINDS:
            if kind.key != found.key:
                continue
            built = kind.keys_of(keys, entity_id, collection=collection)
            for part, key in zip(kind.parts, built, strict=True):
                if part in kind.erase_keeps:
                    continue
                # WRITES after a main key is its write memory (KeySpace.writes), kept
                # apart so that a memory alone is not reported as data; a kind without
                # a main key (a LangGraph thread) names data that way.
                is_memory = part == kinds.WRITES and "" in kind.parts
                (memory if is_memory else data).append(key)
        return data, memory
    except ValueError:
        raise IntegrityError(f"user index entry {item!r:.120} is not one redistate wrote") from None


@dataclass
class ErasureReport:
    """What ``users.erase`` deleted: ``deleted`` maps each entry kind (a key kind, or a
    collection's name) to the ids that had data, ``missing`` lists index entries whose
    data was already gone."""

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
