"""Every Redis key redistate uses is built here, and nowhere else.

Layout: ``{ns}:{kind}:{<id>}[:part]``. The escaped entity id is the hash tag, so
all keys of one entity live in one cluster slot and one script can touch them all.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

from .errors import InvalidId
from .kinds import (
    ADK_APP_KEY,
    ADK_KEY,
    ADK_USER_KEY,
    AGENTS_KEY,
    CLAUDE_KEY,
    CLAUDE_PROJECT_KEY,
    EVENTS_KEY,
    FENCE_KEY,
    GRAPH_KEY,
    LOCK_KEY,
    MEMORY_KEY,
    MEMORY_NAMES_KEY,
    OWNS,
    PYDANTIC_AI_KEY,
    PYDANTIC_AI_LIST_KEY,
    RESERVED,
    TASK_KEY,
    USER_KEY,
    WRITES,
)

__all__ = [
    "MAX_ID_BYTES",
    "RESERVED_KINDS",
    "KeySpace",
    "escape_id",
    "path_part",
    "unescape_id",
]

MAX_ID_BYTES: Final = 512
# Names store.collection() refuses: declared with the kinds (redistate.core.kinds).
RESERVED_KINDS: Final = RESERVED

# '{' and '}' would move the hash tag; '*?[]\' would leak into SCAN patterns;
# '%' is the escape character itself. Percent-encoding keeps ids readable.
_ESCAPES: Final = {c: f"%{ord(c):02X}" for c in "%{}*?[]\\"}
_ESCAPE_TABLE: Final = str.maketrans(_ESCAPES)
_UNESCAPE_RE: Final = re.compile("|".join(re.escape(v) for v in _ESCAPES.values()))
_UNESCAPES: Final = {v: k for k, v in _ESCAPES.items()}
_ESCAPED_BYTE: Final = re.compile(rb"[%{}*?\[\]\\]")  # a byte escape_id never leaves

# No ':' in a namespace: "app" must not be a prefix of another namespace's keys.
_NAMESPACE_RE: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_KIND_RE: Final = re.compile(r"[a-z][a-z0-9_-]{0,63}")


def escape_id(entity_id: object) -> str:
    """Validate an entity id and return its escaped form (the hash tag's content).

    Raises:
        InvalidId: not a str, empty, not UTF-8 encodable, or over 512 bytes.
    """
    if type(entity_id) is str:
        # Agents address the same few ids over and over (a task run builds a dozen
        # keys of one id): the validation and escaping of each is remembered.
        return _escaped(entity_id)
    if not isinstance(entity_id, str):
        raise InvalidId(f"id must be a str, got {type(entity_id).__name__}: {entity_id!r:.80}")
    return _escaped(str.__str__(entity_id))  # a str subclass: as the plain str


@lru_cache(maxsize=1024)
def _escaped(entity_id: str) -> str:
    """:func:`escape_id` of a plain str (a refused id raises, and is not remembered)."""
    if not entity_id:
        raise InvalidId("id must not be empty")
    try:
        size = len(entity_id.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidId(f"id {entity_id!r:.80} is not valid UTF-8: {exc.reason}") from None
    if size > MAX_ID_BYTES:
        raise InvalidId(f"id is {size} bytes in UTF-8, over the limit of {MAX_ID_BYTES}")
    return entity_id.translate(_ESCAPE_TABLE)


def path_part(value: object, what: str) -> str:
    """A non-empty str as one part of a "/"-joined entity id (an adapter's
    ``<app>/<user>/<session>``): "%" and "/" percent-escaped, so the split is exact.

    Raises:
        InvalidId: not a str, or empty (named by ``what``).
    """
    if not isinstance(value, str) or not value:
        raise InvalidId(f"{what} must be a non-empty str, got {value!r:.80}")
    return value.replace("%", "%25").replace("/", "%2F")


def unescape_id(escaped: str) -> str:
    """Invert :func:`escape_id`."""
    if "%" not in escaped:
        return escaped
    return _UNESCAPE_RE.sub(lambda m: _UNESCAPES[m.group(0)], escaped)


def check_kind(kind: str) -> str:
    """Validate a collection or entity kind name: lowercase, digits, '_' and '-'."""
    if not isinstance(kind, str) or not _KIND_RE.fullmatch(kind):
        raise InvalidId(
            f"collection name {kind!r} must match [a-z][a-z0-9_-]* and be at most 64 chars"
        )
    return kind


class KeySpace:
    """Builds every key of one namespace."""

    __slots__ = ("_record_openings", "_record_prefixes", "namespace")

    def __init__(self, namespace: str = "redistate") -> None:
        if not isinstance(namespace, str) or not _NAMESPACE_RE.fullmatch(namespace):
            raise InvalidId(
                f"namespace {namespace!r} must be 1-64 chars of letters, digits and '_.-'"
            )
        self.namespace = namespace
        self._record_prefixes: dict[str, str] = {}
        self._record_openings: dict[str, bytes] = {}  # b"ns:kind:{"

    def _prefix(self, kind: str) -> str:
        prefix = self._record_prefixes.get(kind)
        if prefix is None:
            prefix = self._record_prefixes[kind] = f"{self.namespace}:{check_kind(kind)}:"
        return prefix

    def key(self, kind: str, entity_id: str, part: str = "") -> str:
        """Any key: ``ns:kind:{id}`` or ``ns:kind:{id}:part`` (the builders below are
        this with their kind and part)."""
        tail = f":{part}" if part else ""
        return f"{self._prefix(kind)}{{{escape_id(entity_id)}}}{tail}"

    def record(self, kind: str, entity_id: str) -> str:
        """Key of a versioned record: ``ns:kind:{id}``."""
        return f"{self._prefix(kind)}{{{escape_id(entity_id)}}}"

    def record_pattern(self, kind: str) -> str:
        """SCAN pattern matching every record of ``kind`` and nothing else."""
        # The namespace and kind carry no glob characters (validated above).
        return f"{self._prefix(kind)}{{*}}"

    def record_id(self, kind: str, key: str | bytes) -> str:
        """Entity id of a key built by :meth:`record`.

        Raises:
            InvalidId: ``key`` is not one :meth:`record` builds (a foreign key can
                still match the SCAN pattern, e.g. ``ns:kind:{a*b}``).
        """
        if isinstance(key, bytes):
            # The common case, one check and no rebuild: an id with nothing to escape
            # is its own escaped form (the SCAN pattern already fixed the prefix).
            prefix_bytes = self._record_openings.get(kind)
            if prefix_bytes is None:
                prefix_bytes = self._record_openings[kind] = self._prefix(kind).encode() + b"{"
            inner = key[len(prefix_bytes) : -1]
            if (
                key.startswith(prefix_bytes)
                and key.endswith(b"}")
                and 0 < len(inner) <= MAX_ID_BYTES
                and _ESCAPED_BYTE.search(inner) is None
            ):
                try:
                    return inner.decode("utf-8")
                except UnicodeDecodeError:
                    pass  # refused below, as a key record() cannot build
        try:
            text = key.decode("utf-8") if isinstance(key, bytes) else key
            prefix = self._prefix(kind)
            if text.startswith(prefix + "{") and text.endswith("}"):
                entity_id = unescape_id(text[len(prefix) + 1 : -1])
                if self.record(kind, entity_id) == text:
                    return entity_id
        except (UnicodeDecodeError, InvalidId):
            pass
        raise InvalidId(f"{key!r:.200} is not a {kind!r} record key in {self.namespace!r}")

    def task(self, task_id: str) -> str:
        """Checkpoint list of a task: ``ns:task:{id}``."""
        return self.key(TASK_KEY, task_id)

    def task_log(self, task_id: str) -> str:
        """Delta log after a task's latest checkpoint: ``ns:task:{id}:log``."""
        return self.key(TASK_KEY, task_id, "log")

    def task_ids(self, task_id: str) -> str:
        """Checkpoint ids and positions, aligned with the checkpoint list: ``ns:task:{id}:ids``."""
        return self.key(TASK_KEY, task_id, "ids")

    def task_index(self, task_id: str) -> str:
        """Where each checkpoint id is in the id list, a hash (id -> push number, and the
        head it was last checked against): ``ns:task:{id}:index``; derived from the id
        list (rebuilt from it, never exported), it expires and is deleted with the task."""
        return self.key(TASK_KEY, task_id, "index")

    def task_steps(self, task_id: str) -> str:
        """Step records of a task (``run.step``), a hash by step name:
        ``ns:task:{id}:steps``; it expires and is deleted with the task."""
        return self.key(TASK_KEY, task_id, "steps")

    def task_keys(self, task_id: str) -> tuple[str, str, str]:
        """Every key of a task: checkpoint list, id list, delta log."""
        return self.task(task_id), self.task_ids(task_id), self.task_log(task_id)

    def user_index(self, user_id: str) -> str:
        """What is registered to a user (``put(..., user=)`` and friends), a set of
        ``<kind>:<id>``: ``ns:user:{id}:owns``, in the user's hash slot."""
        return self.key(USER_KEY, user_id, OWNS)

    def events(self, entity: str) -> str:
        """Audit events of an entity, a stream: ``ns:events:{id}`` (the id's hash slot,
        like its lease, so a guarded append checks both in one script)."""
        return self.key(EVENTS_KEY, entity)

    def events_anchor(self, entity: str) -> str:
        """Where trimmed events end: ``ns:events:{id}:anchor``, a hash (seq, digest,
        state) the remaining chain continues from."""
        return self.key(EVENTS_KEY, entity, "anchor")

    def events_staging(self, entity: str) -> str:
        """Where a rewrite of an entity's events (rotate-keys, migrate) builds the new
        chain before it replaces the stream: ``ns:events:{id}:staging``, expiring."""
        return self.key(EVENTS_KEY, entity, "staging")

    def agent_session(self, session_id: str) -> str:
        """Items of an OpenAI Agents SDK session (redistate.agents), a list:
        ``ns:agents:{id}``."""
        return self.key(AGENTS_KEY, session_id)

    def graph_thread(self, thread_id: str, part: str) -> str:
        """A LangGraph thread's keys (redistate.langgraph), all in the thread's hash
        slot: ``ns:graph:{thread}:<part>``, ``part`` one of the saver's fixed names."""
        return self.key(GRAPH_KEY, thread_id, part)

    def graph_pattern(self) -> str:
        """SCAN pattern matching one key (the index) of every LangGraph thread."""
        return f"{self._prefix(GRAPH_KEY)}{{*}}:idx"

    def memory(self, namespace: str, part: str = "") -> str:
        """A namespace of the LangGraph store (redistate.langgraph.RedistateStore), all
        in its hash slot: ``ns:memory:{<labels joined by ".">}[:part]``, ``part`` one
        of ``exp``, ``tomb``, ``writes``."""
        return self.key(MEMORY_KEY, namespace, part)

    def memory_names(self, part: str = "") -> str:
        """The LangGraph store's registry of namespaces, one hash slot:
        ``ns:memory-names:{all}`` (a zset of every namespace) and ``…:gens``."""
        return self.key(MEMORY_NAMES_KEY, "all", part)

    def adk_session(self, session: str, part: str = "") -> str:
        """An ADK session (redistate.adk), its keys in its hash slot:
        ``ns:adk:{<app>/<user>/<session id>}`` (its state and times, a hash) and
        ``…:events`` (a list); ``session`` built by the adapter's ``session_path``."""
        return self.key(ADK_KEY, session, part)

    def adk_user(self, user: str, part: str = "") -> str:
        """An ADK user of an app: ``ns:adk-user:{<app>/<user>}`` (its ``user:`` state,
        a hash) and ``…:sessions`` (its sessions, a zset by last update)."""
        return self.key(ADK_USER_KEY, user, part)

    def adk_app(self, app: str, part: str = "") -> str:
        """An ADK app: ``ns:adk-app:{<app>}`` (its ``app:`` state, a hash) and
        ``…:users`` (the users with sessions, a set)."""
        return self.key(ADK_APP_KEY, app, part)

    def claude_session(self, session: str, part: str = "") -> str:
        """A Claude Agent SDK session (redistate.claude), its keys in its hash slot:
        ``ns:claude:{<project>/<session id>}`` (its counter, summary and time, a hash),
        ``…:log`` (every transcript's entries, a zset) and ``…:subs`` (its subpaths, a
        set); ``session`` built by the adapter's ``session_path``."""
        return self.key(CLAUDE_KEY, session, part)

    def claude_project(self, project: str) -> str:
        """The sessions of a Claude Agent SDK project, a zset (session id -> when it
        was last entered, ms): ``ns:claude-project:{<project key>}``."""
        return self.key(CLAUDE_PROJECT_KEY, project)

    def conversation(self, conversation_id: str, part: str = "") -> str:
        """A Pydantic AI conversation (redistate.pydantic_ai), its keys in its hash
        slot: ``ns:pydantic-ai:{<conversation id>}`` (its record, a hash),
        ``…:entries`` (entry id -> encoded entry) and ``…:parents`` (entry id -> the
        id of the entry before it, "" for a first one)."""
        return self.key(PYDANTIC_AI_KEY, conversation_id, part)

    def conversations(self, scope: str | None) -> str:
        """An index of Pydantic AI conversations, a zset (conversation id -> last
        saved, ms): those of one ``scope`` (``ns:pydantic-ai-list:{=<scope>}``) or,
        with None, every one (``ns:pydantic-ai-list:{all}``)."""
        return self.key(PYDANTIC_AI_LIST_KEY, "all" if scope is None else f"={scope}")

    def lock(self, name: str) -> str:
        """Lease key: ``ns:lock:{name}``."""
        return self.key(LOCK_KEY, name)

    def lock_wake(self, name: str) -> str:
        """Wake-up list waiters for a lease block on: ``ns:lock:{name}:wake``."""
        return self.key(LOCK_KEY, name, "wake")

    @staticmethod
    def writes(entity_key: str) -> str:
        """Recent write ids of the entity whose main key (a record's, a task's checkpoint
        list, or a lock key) is ``entity_key``, kept for the retry window so a resent
        write is recognised: ``<entity_key>:writes``, in the entity's hash slot."""
        return f"{entity_key}:{WRITES}"

    def fence(self, name: str) -> str:
        """The last fence issued on a lease name, kept as long as the lease:
        ``ns:fence:{name}``."""
        return self.key(FENCE_KEY, name)

    def namespace_pattern(self) -> str:
        """SCAN pattern matching every key of this namespace (used to clean up)."""
        return f"{self.namespace}:*"

    def parse(self, key: str | bytes) -> tuple[str, str, str]:
        """Split a key of this namespace into ``(kind, entity id, part)``: the inverse
        of the builders above. ``part`` is ``""`` for an entity's main key, else the
        suffix: ``"log"``, ``"ids"``, ``"wake"``, ``"writes"``...

        Raises:
            InvalidId: ``key`` is not one this KeySpace builds (another namespace, a
                malformed or non-canonical id, not UTF-8).
        """
        try:
            text = key.decode("utf-8") if isinstance(key, bytes) else key
            start = len(self.namespace) + 1
            if text.startswith(self.namespace + ":"):
                brace = text.find(":{", start)
                close = text.find("}", brace)  # an escaped id holds no '}'
                kind = text[start:brace]
                part = text[close + 1 :]
                if brace > 0 and close > 0 and _KIND_RE.fullmatch(kind):
                    entity_id = unescape_id(text[brace + 2 : close])
                    # Rebuilding the key rejects ids in a non-canonical escaping.
                    main = f"{self.namespace}:{kind}:{{{escape_id(entity_id)}}}"
                    if main == text[: close + 1] and (
                        part == "" or (part[:1] == ":" and _KIND_RE.fullmatch(part[1:]))
                    ):
                        return kind, entity_id, part[1:]
        except (UnicodeDecodeError, InvalidId):
            pass
        raise InvalidId(f"{key!r:.200} is not a redistate key in namespace {self.namespace!r}")
