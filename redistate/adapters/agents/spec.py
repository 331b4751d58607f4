"""Agents SDK sessions, the pure half of their scripts: each one's arguments and reply
(``lua/agents_*.lua``). No I/O."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = [
    "AddStatus",
    "AgentsAddArgs",
    "AgentsAddReply",
    "AgentsClearArgs",
    "AgentsClearReply",
    "AgentsPopArgs",
    "AgentsPopReply",
    "AgentsRecodeArgs",
    "AgentsRecodeReply",
    "ClearStatus",
    "PopStatus",
]


@dataclass(frozen=True, slots=True)
class AgentsAddArgs:
    """ARGV of agents_add."""

    ttl_ms: int  # 0 = leave the list's expiry as is
    max_items: int  # the most items kept (the newest); 0 = no cap
    memory_ms: int
    write_id: str
    items: tuple[bytes, ...]  # encoded, oldest first (at least one)

    def argv(self) -> tuple[Any, ...]:
        return (self.ttl_ms, self.max_items, self.memory_ms, self.write_id, *self.items)


class AddStatus(Enum):
    """What agents_add did."""

    APPENDED = 1
    RESENT = 2  # a resend of an add already made: nothing appended


@dataclass(frozen=True, slots=True)
class AgentsAddReply:
    """An agents_add reply: what it did and the list's ``length`` afterwards."""

    status: AddStatus
    length: int

    @classmethod
    def parse(cls, reply: Any) -> AgentsAddReply:
        return cls(AddStatus(int(reply[0])), int(reply[1]))

    @property
    def wrote(self) -> bool:
        return True  # a resend notes itself again in the write memory


@dataclass(frozen=True, slots=True)
class AgentsPopArgs:
    """ARGV of agents_pop."""

    memory_ms: int
    write_id: str

    def argv(self) -> tuple[Any, ...]:
        return (self.memory_ms, self.write_id)


class PopStatus(Enum):
    """What agents_pop did."""

    EMPTY = 0  # the list was empty
    REMOVED = 1
    RESENT = 2  # a resend of a pop already made: removed nothing, returns what it did


@dataclass(frozen=True, slots=True)
class AgentsPopReply:
    """An agents_pop reply: the ``item`` removed, as stored (None: none, or a resend
    whose pop found none)."""

    status: PopStatus
    item: bytes | None = None

    @classmethod
    def parse(cls, reply: Any) -> AgentsPopReply:
        status = PopStatus(int(reply[0]))
        return cls(status, bytes(reply[1]) if len(reply) > 1 else None)

    @property
    def wrote(self) -> bool:
        return True  # the write memory notes even a pop of nothing


@dataclass(frozen=True, slots=True)
class AgentsClearArgs:
    """ARGV of agents_clear."""

    memory_ms: int
    write_id: str

    def argv(self) -> tuple[Any, ...]:
        return (self.memory_ms, self.write_id)


class ClearStatus(Enum):
    """What agents_clear did."""

    NONE = 0  # there was no list
    DELETED = 1
    RESENT = 2  # a resend of a clear already made: nothing deleted


@dataclass(frozen=True, slots=True)
class AgentsClearReply:
    """An agents_clear reply."""

    status: ClearStatus

    @classmethod
    def parse(cls, reply: Any) -> AgentsClearReply:
        return cls(ClearStatus(int(reply)))

    @property
    def wrote(self) -> bool:
        return True  # the write memory notes even a clear of nothing


@dataclass(frozen=True, slots=True)
class AgentsRecodeArgs:
    """ARGV of recode_items."""

    pairs: tuple[bytes, ...]  # (an item as it was read, the item to put in its place)...

    def argv(self) -> tuple[Any, ...]:
        return self.pairs


@dataclass(frozen=True, slots=True)
class AgentsRecodeReply:
    """A recode_items reply: how many items were replaced (one popped, trimmed or
    cleared since it was read is not found)."""

    replaced: int

    @classmethod
    def parse(cls, reply: Any) -> AgentsRecodeReply:
        return cls(int(reply))

    @property
    def wrote(self) -> bool:
        return self.replaced > 0
