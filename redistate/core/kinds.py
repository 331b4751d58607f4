"""Every kind of stored data, declared once: which keys it owns and what each
maintenance operation (export, import, rotate-keys, migrate, erase, stats) does with it.

A key is ``{ns}:{kind}:{<id>}[:part]`` (redistate.core.keys). Each (key kind, part) pair that
``KeySpace.parse`` can return belongs to exactly one :class:`Kind` here; the backup,
rotation, migration, erasure and statistics code iterate :data:`KINDS` and look kinds up
with :func:`claim`, so a kind cannot be forgotten by one of them. Where an operation
does not apply to a kind, the kind says why (``skips``): the tests fail on a kind that
neither handles an operation nor says why not.

Pure: no I/O. The names below are the only place a kind's name is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from .keys import KeySpace

__all__ = [
    "ADK",
    "ADK_APP",
    "ADK_USER",
    "AGENTS",
    "CLAUDE",
    "CLAUDE_PROJECT",
    "COLLECTION",
    "EVENTS",
    "FENCE",
    "GRAPH",
    "KINDS",
    "LEASE",
    "MEMORY",
    "MEMORY_NAMES",
    "NOT_YET",
    "PYDANTIC_AI",
    "PYDANTIC_AI_LIST",
    "RESERVED",
    "SESSION",
    "STEPS",
    "TASK",
    "USER",
    "USER_INDEX",
    "Kind",
    "Op",
    "claim",
    "by_name",
]

# Key kinds (the second part of a key). Parts after the id are named by each Kind.
SESSION_KEY: Final = "session"
USER_KEY: Final = "user"
TASK_KEY: Final = "task"
EVENTS_KEY: Final = "events"
LOCK_KEY: Final = "lock"
FENCE_KEY: Final = "fence"
AGENTS_KEY: Final = "agents"
GRAPH_KEY: Final = "graph"
MEMORY_KEY: Final = "memory"
MEMORY_NAMES_KEY: Final = "memory-names"
ADK_KEY: Final = "adk"
ADK_USER_KEY: Final = "adk-user"
ADK_APP_KEY: Final = "adk-app"
CLAUDE_KEY: Final = "claude"
CLAUDE_PROJECT_KEY: Final = "claude-project"
PYDANTIC_AI_KEY: Final = "pydantic-ai"
PYDANTIC_AI_LIST_KEY: Final = "pydantic-ai-list"
# Parts several kinds use: the write memory (``KeySpace.writes``) and the user index.
WRITES: Final = "writes"
OWNS: Final = "owns"
# LangGraph thread parts, in the order every graph script takes them (KEYS[1..7]).
GRAPH_PARTS: Final = ("cp", "idx", "blobs", "refs", "writes", "widx", "runs")
ANY: Final = "*"  # the key kind of user collections: any name store.collection() accepts


class Op(Enum):
    """A maintenance operation that visits every kind."""

    EXPORT = "export"  # written to an export file, and imported from one
    ROTATE = "rotate"  # re-encrypted and re-sealed by rotate-keys
    MIGRATE = "migrate"  # written back at the newest schema by migrate
    ERASE = "erase"  # deleted by users.erase when registered to the user
    STATS = "stats"  # counted by stats


@dataclass(frozen=True, slots=True, eq=False)  # one object per kind: compared by identity
class Kind:
    """One kind of stored data.

    ``key`` is its key kind (``ANY`` for user collections) and ``parts`` the parts after
    the id it owns (``""``: the main key). ``skips`` names each operation that does not
    apply and why; every other operation handles the kind. ``name`` is how files,
    reports and index entries name it.
    """

    name: str
    key: str
    parts: tuple[str, ...]
    title: str  # plural, for people
    # Not hashed (a dict is not hashable): kinds are dict keys and set members.
    skips: Mapping[Op, str] = field(default_factory=dict, hash=False)
    records: bool = False  # versioned records (redistate.records): sessions, users...
    registered: bool = False  # put/save/append(..., user=) can register it to a user
    # The folder (a package under redistate) that holds the kind's code, and how each
    # maintenance operation handles it: <home>/backup.py (BACKUP[name], export and
    # import), <home>/rotate_async.py (ROTATE[name]), <home>/migrate_async.py
    # (MIGRATE[name]); an operation in ``skips`` has none.
    home: str = ""
    # The part every entity has, for a kind without a main key ("" in parts): what
    # stats counts an entity by (a LangGraph thread: its index).
    main: str = ""
    # Parts users.erase leaves: they hold no user data, and deleting one would break a
    # protocol (a store namespace's sweep tomb, read by a put racing a sweep).
    erase_keeps: tuple[str, ...] = ()

    def applies(self, op: Op) -> bool:
        """Whether ``op`` handles this kind (else ``skips[op]`` says why not)."""
        return op not in self.skips

    def keys_of(self, keys: KeySpace, entity_id: str, collection: str = "") -> list[str]:
        """Every key an entity of this kind may have (all in its hash slot)."""
        return [self.key_of(keys, entity_id, part, collection) for part in self.parts]

    def key_of(self, keys: KeySpace, entity_id: str, part: str, collection: str = "") -> str:
        """The key of one of its parts (``collection``: a record kind's own name)."""
        kind = collection or self.key
        return keys.key(kind, entity_id, part)


_NOT_ENCODED = "holds no value the codec encodes"
_PROCESS = "belongs to the running process that holds it"

SESSION: Final = Kind(
    "session",
    SESSION_KEY,
    ("", WRITES),
    "sessions",
    records=True,
    registered=True,
    home="records",
)
USER: Final = Kind(
    "user",
    USER_KEY,
    ("", WRITES),
    "user profiles",
    records=True,
    skips={Op.ERASE: "the profile is deleted by users.erase itself, after what it owns"},
    home="records",
)
COLLECTION: Final = Kind(
    "collection",
    ANY,
    ("", WRITES),
    "collection records",
    records=True,
    registered=True,
    home="records",
)
TASK: Final = Kind(
    "task",
    TASK_KEY,
    ("", "ids", "log", "index", WRITES),
    "tasks",
    registered=True,
    home="checkpoints",
)
STEPS: Final = Kind(
    "steps",
    TASK_KEY,
    ("steps",),
    "step records",
    skips={
        Op.MIGRATE: "a step's result is returned as it was recorded, at no schema",
        Op.ERASE: "deleted with its task",
        Op.EXPORT: "exported and imported with its task, in the task's line",
    },
    home="steps",
)
EVENTS: Final = Kind(
    "events",
    EVENTS_KEY,
    ("", "anchor", "staging", WRITES),
    "event streams",
    registered=True,
    home="events",
)
LEASE: Final = Kind(
    "lease",
    LOCK_KEY,
    ("", "wake", WRITES),
    "leases",
    skips={
        Op.EXPORT: f"a held lease {_PROCESS}; its fence is exported",
        Op.ROTATE: _NOT_ENCODED,
        Op.MIGRATE: _NOT_ENCODED,
        Op.ERASE: "lease names are not registered to users; a lease expires",
    },
    home="leases",
)
FENCE: Final = Kind(
    "fence",
    FENCE_KEY,
    ("",),
    "fences",
    skips={
        Op.ROTATE: _NOT_ENCODED,
        Op.MIGRATE: _NOT_ENCODED,
        Op.ERASE: "lease names are not registered to users; a fence expires with its lease",
    },
    home="leases",
)
USER_INDEX: Final = Kind(
    "user_index",
    USER_KEY,
    (OWNS,),
    "user indexes",
    skips={
        Op.ROTATE: "holds kind:id entries, which the codec does not encode",
        Op.MIGRATE: _NOT_ENCODED,
        Op.ERASE: "deleted by users.erase itself, last",
    },
    home="records",
)
AGENTS: Final = Kind(
    "agents",
    AGENTS_KEY,
    ("", WRITES),
    "Agents SDK sessions",
    registered=True,
    skips={Op.MIGRATE: "items are the SDK's own format, not the application's schema"},
    home="adapters.agents",
)
GRAPH: Final = Kind(
    "graph",
    GRAPH_KEY,
    GRAPH_PARTS,
    "LangGraph threads",
    registered=True,
    skips={
        Op.ROTATE: "packed by the saver's serializer, not the store's codec",
        Op.MIGRATE: "packed by the saver's serializer: LangGraph migrates its checkpoints",
    },
    home="adapters.langgraph",
    main="idx",
)

# A kind whose skip reason starts with NOT_YET is data an operation leaves out for now:
# export reports its keys by kind, loudly (ExportReport.left_out), not as plumbing.
NOT_YET: Final = "not yet"
MEMORY: Final = Kind(
    "memory",
    MEMORY_KEY,
    ("", "exp", "tomb", WRITES),
    "LangGraph store namespaces",
    registered=True,
    skips={
        Op.MIGRATE: "items are the application's own dicts, stored as LangGraph gives them",
    },
    home="adapters.langgraph",
    erase_keeps=("tomb",),
)
MEMORY_NAMES: Final = Kind(
    "memory-names",
    MEMORY_NAMES_KEY,
    ("", "gens"),
    "LangGraph store registries",
    skips={
        Op.EXPORT: "rebuilt by import, which announces each namespace as a put does",
        Op.ROTATE: _NOT_ENCODED,
        Op.MIGRATE: _NOT_ENCODED,
        Op.ERASE: "an entry for a namespace erased goes at the next sweep",
    },
    home="adapters.langgraph",
)

ADK: Final = Kind(
    "adk",
    ADK_KEY,
    ("", "events", WRITES),
    "ADK sessions",
    registered=True,
    home="adapters.adk",
)
ADK_USER: Final = Kind(
    "adk-user",
    ADK_USER_KEY,
    ("", "sessions", WRITES),
    "ADK user states",
    registered=True,
    skips={
        Op.MIGRATE: "values are the application's own, stored as ADK gives them",
    },
    home="adapters.adk",
)
ADK_APP: Final = Kind(
    "adk-app",
    ADK_APP_KEY,
    ("", "users", WRITES),
    "ADK app states",
    skips={
        Op.MIGRATE: "values are the application's own, stored as ADK gives them",
        Op.ERASE: "an app's state is shared by its users: no user owns it",
    },
    home="adapters.adk",
)

CLAUDE: Final = Kind(
    "claude",
    CLAUDE_KEY,
    ("", "log", "subs", WRITES),
    "Claude Agent SDK sessions",
    registered=True,
    skips={
        Op.MIGRATE: "entries are the SDK's own transcript lines, not the application's schema",
    },
    home="adapters.claude",
)
CLAUDE_PROJECT: Final = Kind(
    "claude-project",
    CLAUDE_PROJECT_KEY,
    ("",),
    "Claude Agent SDK project indexes",
    skips={
        Op.ROTATE: "holds session ids, which the codec does not encode",
        Op.MIGRATE: _NOT_ENCODED,
        Op.ERASE: "an erased session's entry is skipped by listings, and taken off by one",
    },
    home="adapters.claude",
)

PYDANTIC_AI: Final = Kind(
    "pydantic-ai",
    PYDANTIC_AI_KEY,
    ("", "entries", "parents"),
    "Pydantic AI conversations",
    registered=True,
    skips={
        Op.MIGRATE: "entries are pydantic-ai's own messages, not the application's schema",
    },
    home="adapters.pydantic_ai",
)
PYDANTIC_AI_LIST: Final = Kind(
    "pydantic-ai-list",
    PYDANTIC_AI_LIST_KEY,
    ("",),
    "Pydantic AI conversation indexes",
    skips={
        Op.ROTATE: "holds conversation ids, which the codec does not encode",
        Op.MIGRATE: _NOT_ENCODED,
        Op.ERASE: "an erased conversation's entry is skipped by listings, and taken off by one",
    },
    home="adapters.pydantic_ai",
)

KINDS: Final[tuple[Kind, ...]] = (
    SESSION, USER, COLLECTION, TASK, STEPS, EVENTS, LEASE, FENCE, USER_INDEX, AGENTS, GRAPH,
    MEMORY, MEMORY_NAMES, ADK, ADK_USER, ADK_APP, CLAUDE, CLAUDE_PROJECT, PYDANTIC_AI,
    PYDANTIC_AI_LIST,
)  # fmt: skip

_BY_PART: Final = {(k.key, part): k for k in KINDS for part in k.parts}
_BY_NAME: Final = {k.name: k for k in KINDS}


def claim(kind: str, part: str) -> Kind | None:
    """The Kind owning keys of key kind ``kind`` and part ``part`` (as
    ``KeySpace.parse`` returns them); None for a key no kind builds."""
    found = _BY_PART.get((kind, part))
    if found is not None:
        return found
    if kind not in RESERVED and (ANY, part) in _BY_PART:
        return _BY_PART[(ANY, part)]
    return None


def by_name(name: str) -> Kind:
    """The Kind called ``name`` (as files and index entries name it).

    Raises:
        KeyError: no kind has that name.
    """
    return _BY_NAME[name]


# Names store.collection() refuses, so that a user collection never shares keys with a
# kind above: their key kinds, and names kept for kinds to come.
RESERVED: Final = frozenset(k.key for k in KINDS if k.key != ANY) | {
    "sessions", "users", "event", "step", "steps", "checkpoint", "checkpoints",
    "meta", "schema", "migration", "index", "idx", "link", "links", "sys", "internal",
}  # fmt: skip
