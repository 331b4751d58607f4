"""What the maintenance operations report (redistate.admin): plain values, the same
for the sync and the async store."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from ..core.kinds import Kind
from .backup_codec import line_kinds
from .backup_format import plural

__all__ = [
    "EXAMPLES",
    "ExportReport",
    "ImportReport",
    "KindStats",
    "MigrateReport",
    "RotateReport",
    "Scanned",
]

EXAMPLES: Final = 5  # ids or keys a report lists, at most


@dataclass(frozen=True, slots=True)
class Scanned:
    """A key of the namespace as a scan found it: its Kind (None: no kind builds it),
    key kind (a collection's name), entity id and part (``""``: the main key)."""

    key: bytes
    kind: Kind | None
    name: str
    id: str
    part: str


@dataclass
class KindStats:
    """What ``stats`` found for one key kind."""

    kind: str
    keys: int = 0
    entities: int = 0  # ids with any key of the kind (a task with only a log too)
    size: int = 0  # bytes
    estimated: bool = False  # payload bytes, not MEMORY USAGE
    sampled: int = 0
    largest: list[dict[str, Any]] = field(default_factory=list)
    no_ttl: int | None = None  # None: the kind is not expected to have a TTL
    no_ttl_ids: list[str] = field(default_factory=list)
    sample: list[tuple[bytes, str, str]] = field(default_factory=list, repr=False)
    main: int = 0  # keys of the kind's main part (of "lock": the leases held now)

    def row(self) -> dict[str, Any]:
        """The JSON line of this kind."""
        return {
            "kind": self.kind,
            "keys": self.keys,
            "entities": self.entities,
            "bytes": self.size,
            "estimated": self.estimated,
            "sampled": self.sampled,
            "largest": self.largest,
            "no_ttl": self.no_ttl,
            "no_ttl_ids": self.no_ttl_ids,
        }


@dataclass
class MigrateReport:
    """What a migration wrote back, found current, or left."""

    upgraded: int = 0  # records written back
    current: int = 0  # records already at the newest schema
    newer: int = 0  # values newer than the registered steps (left as they are)
    newer_keys: list[str] = field(default_factory=list)
    checkpoints: int = 0  # checkpoint states written back
    held: int = 0  # checkpoints older deltas follow: migrated after the next save
    events: int = 0  # event payloads written back (their chains recomputed)
    changed: int = 0  # streams appended to meanwhile: the next run migrates them
    unverified: list[str] = field(default_factory=list)  # event chains left as they are
    adk_events: int = 0  # Google ADK events written back (redistate.adk)
    invalid: int = 0  # values a step made that cannot be stored or read: left as they are
    invalid_examples: list[str] = field(default_factory=list)  # where, and why

    def note_newer(self, key: str) -> None:
        self.newer += 1
        if len(self.newer_keys) < EXAMPLES:
            self.newer_keys.append(key)

    def note_invalid(self, what: str) -> None:
        self.invalid += 1
        if len(self.invalid_examples) < EXAMPLES:
            self.invalid_examples.append(what)


@dataclass
class RotateReport:
    """What a rotation rewrote, found current, or skipped because it changed meanwhile."""

    records: int = 0
    checkpoints: int = 0
    deltas: int = 0
    steps: int = 0  # durable step records (run.step)
    agent_items: int = 0  # OpenAI Agents SDK session items (redistate.agents)
    memory_items: int = 0  # LangGraph store items (redistate.langgraph.RedistateStore)
    adk_values: int = 0  # Google ADK state values and events (redistate.adk)
    claude_values: int = 0  # Claude Agent SDK entries and summaries (redistate.claude)
    pydantic_values: int = 0  # Pydantic AI records, details and entries (redistate.pydantic_ai)
    current: int = 0
    changed: int = 0
    keys_seen: int = 0
    events: int = 0  # event payloads (and trim anchors) re-encrypted, chains recomputed
    unverified: list[str] = field(default_factory=list)  # event chains left: see the doc
    old_keys: dict[str, int] = field(default_factory=dict)  # key id -> values moved off it


@dataclass
class ExportReport:
    """What an export wrote and what it left out."""

    namespace: str
    entities: Counter[str] = field(default_factory=Counter)  # by line kind
    steps: int = 0  # step records, in their tasks' lines
    keys: int = 0  # keys the scan found in the namespace
    not_exported: int = 0  # held leases, wake lists, write memories, staging streams
    # Keys of kinds export does not handle yet (Kind.skips reason kinds.NOT_YET): data
    # a restore would not bring back, by kind name.
    left_out: Counter[str] = field(default_factory=Counter)
    unknown: list[str] = field(default_factory=list)  # keys redistate did not recognise
    unknown_count: int = 0
    damaged: list[str] = field(default_factory=list)  # entities left out (examples)
    damaged_count: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "entities": sum(self.entities.values()),
            **{plural(kind): self.entities[kind] for kind in line_kinds()},
            "steps": self.steps,
            "keys": self.keys,
            "not_exported": self.not_exported,
            "left_out": dict(self.left_out),
            "unknown": self.unknown_count,
            "unknown_keys": self.unknown,
            "damaged": self.damaged_count,
            "damaged_entities": self.damaged,
        }

    def skip_damaged(self, key: bytes | str, problem: object) -> None:
        """An entity whose data its own import would refuse: left out, and said."""
        self.damaged_count += 1
        if len(self.damaged) < EXAMPLES:
            text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
            self.damaged.append(f"{text}: {problem}")

    def skip_unknown(self, key: bytes | str) -> None:
        self.unknown_count += 1
        if len(self.unknown) < EXAMPLES:
            self.unknown.append(key.decode("utf-8", "replace") if isinstance(key, bytes) else key)


@dataclass
class ImportReport:
    """What an import wrote, and what it left as it was."""

    namespace: str
    imported: Counter[str] = field(default_factory=Counter)  # by line kind
    steps: int = 0  # step records written (absent in the store, or --force)
    refused: list[str] = field(default_factory=list)  # newer or other in the store (examples)
    refused_count: int = 0
    expired: int = 0  # TTL ran out since the export
    fences_kept: int = 0  # already at or above the file's value
    failed: list[str] = field(default_factory=list)  # server errors (examples)
    failed_count: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "imported": sum(self.imported.values()),
            **{plural(kind): self.imported[kind] for kind in line_kinds()},
            "steps": self.steps,
            "refused": self.refused_count,
            "refused_ids": self.refused,
            "expired": self.expired,
            "fences_kept": self.fences_kept,
            "failed": self.failed_count,
            "failures": self.failed,
        }
