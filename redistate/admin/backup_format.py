"""The export file format: one namespace as JSON lines. Pure: no I/O on Redis.

Format version 2 (version-1 files, which have only the record, task and fence lines
and no step records, still import). One JSON object a line, keys relative to the
namespace (a file can be imported into another one), raw bytes in base64 beside
readable fields::

    {"format": "redistate-export", "version": 2, "namespace": "app",
     "exported_ms": 1767225600000, "exported_at": "2026-01-01T00:00:00+00:00"}
    {"kind": "record", "collection": "session", "id": "s1", "version": 1767225599000001,
     "ttl_ms": 3599000, "value": "<base64 of the stored envelope>"}
    {"kind": "task", "id": "t1", "seq": 3, "ttl_ms": null, "checkpoints": ["<base64>", ...],
     "ids": ["<base64>", ...], "log": ["<base64>", ...],
     "steps": {"<step name>": "<base64 of the step record>", ...}}
    {"kind": "fence", "id": "t1", "fence": 4}
    {"kind": "events", "id": "e1", "ttl_ms": null, "anchor": {"<field>": "<base64>"} | null,
     "events": [["<stream id>", {"<field>": "<base64>", ...}], ...]}
    {"kind": "user_index", "id": "u1", "owns": ["<kind>:<id>", ...]}
    {"kind": "agents", "id": "chat", "ttl_ms": 60000, "items": ["<base64>", ...]}
    {"kind": "graph", "id": "thread", "ttl_ms": null, "parts": {"cp": {"<b64 field>":
     "<b64 value>"}, "idx": [["<b64 member>", 0], ...], ...}}
    {"kind": "adk", "id": "chat/u1/s1", "ttl_ms": 60000, "state": {"<b64 field>":
     "<b64 value>"}, "state_ttl_ms": 60000, "events": ["<b64>", ...], "events_ttl_ms": 60000}
    {"kind": "adk-user", "id": "chat/u1", "ttl_ms": null, "state": {...},
     "state_ttl_ms": null, "sessions": [["<b64 id>", 1767225599.5], ...], "sessions_ttl_ms": 60000}
    {"kind": "adk-app", "id": "chat", "ttl_ms": null, "state": {...}, "state_ttl_ms": null,
     "users": ["<b64 id>", ...], "users_ttl_ms": null}
    {"kind": "end", "entities": 11}

``ttl_ms`` is the time left as of ``exported_ms`` (null: no expiry); lists are in Redis
order (checkpoints and ids newest first, deltas, events and agents items oldest first).
A graph line holds the seven keys of a LangGraph thread (kinds.GRAPH_PARTS): hashes
as objects, sorted sets as [member, score] pairs. An ADK line holds a hash and a
collection that expire apart, each with its own time left (``ttl_ms``: the later one);
a user's sessions and an app's users are merged into what is stored, never refused
(redistate.adapters.adk.backup). The end line says the file is
complete. Not in a file: held leases (a lease belongs to the process holding it),
lease wake-up lists, write memories (``<key>:writes``) and the staging stream of an
event rewrite in progress.

A file may be crafted or damaged: before an import writes anything, every line is checked
against the store it goes to (:class:`Limits`): payloads decode with its codec, digests,
seals and event chains verify, and no version, fence, stream id or time is later than
the server's clock plus :data:`FUTURE_ALLOWANCE_US` (a value near 2**53 would leave no
room for the next write).

Each line kind is built, parsed, checked and imported by its kind's codec
(backup_codec.LineCodec, ``BACKUP[kind.name]`` in ``redistate.<Kind.home>.backup``);
this module is what every file shares: the header, the end line, reading a file.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from .. import RedistateError
from ..core import kinds
from ..core.keys import KeySpace
from .backup_codec import (
    FUTURE_ALLOWANCE_US,
    MAX_TTL_MS,
    Entity,
    Limits,
    Pairs,
    b64,
    field,
    line_codec,
    line_kinds,
)

__all__ = [
    "FORMAT",
    "VERSION",
    "READS",
    "MAX_TTL_MS",
    "NOT_RECORDS",
    "FUTURE_ALLOWANCE_US",
    "Limits",
    "Pairs",
    "plural",
    "Progress",
    "nothing",
    "now_ms",
    "b64",
    "encode_line",
    "BadFile",
    "Entity",
    "Header",
    "line_kinds",
    "parse_entity",
    "read_file",
]

FORMAT: Final = "redistate-export"
VERSION: Final = 2
READS: Final = (1, 2)  # the versions an import reads
END: Final = "end"  # the last line's kind: the file is complete
# Key kinds that hold no records.
_RECORD_KEYS: Final = frozenset(k.key for k in kinds.KINDS if k.records)
NOT_RECORDS: Final = frozenset(k.key for k in kinds.KINDS if not k.records) - _RECORD_KEYS
PROGRESS_BYTES: Final = 1 << 20  # progress is reported in steps of this many bytes

Progress = Callable[[int], None]  # called with how many more keys or bytes are done


def nothing(_: int) -> None:
    """A Progress that reports nowhere."""


def now_ms() -> int:
    """The wall clock in ms since the epoch: the clock of ``exported_ms``."""
    return time.time_ns() // 1_000_000


def encode_line(obj: dict[str, Any]) -> bytes:
    """One line of the file."""
    return orjson.dumps(obj) + b"\n"


def plural(kind: str) -> str:
    """A line kind's name in a ``--json`` summary: records, tasks, user_indexes,
    adk_users..."""
    kind = kind.replace("-", "_")
    if kind.endswith("s"):
        return kind
    return kind + ("es" if kind.endswith("x") else "s")


# -- reading a file --------------------------------------------------------------------


class BadFile(RedistateError):
    """A line of an export file that cannot be imported."""


def parse_entity(obj: dict[str, Any]) -> Entity:
    """An entity line (a JSON object), checked by its kind's codec.

    Raises:
        ValueError, TypeError or RedistateError: naming the field that is wrong.
    """
    kind = obj.get("kind")
    codec = line_codec(kind) if isinstance(kind, str) else None
    if codec is None:
        raise ValueError(f"unknown kind {kind!r:.40} ({', '.join(line_kinds())} or {END})")
    return codec.parse(obj)


@dataclass
class Header:
    namespace: str
    exported_ms: int


def _header(obj: dict[str, Any]) -> Header:
    if obj.get("format") != FORMAT:
        raise ValueError(f"not a redistate export (no {FORMAT!r} header line)")
    version = obj.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version not in READS:
        reads = " and ".join(map(str, READS))
        raise ValueError(
            f"format version {version!r} is not supported (this redistate reads {reads})"
        )
    namespace = KeySpace(field(obj, "namespace", str)).namespace
    return Header(namespace, field(obj, "exported_ms", int))


def _lines(path: Path, progress: Progress) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, JSON object) of each line; BadFile for one that is not an object."""
    unreported = 0
    with open(path, "rb") as source:
        for number, raw in enumerate(source, 1):
            unreported += len(raw)
            if unreported >= PROGRESS_BYTES:
                progress(unreported)
                unreported = 0
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise BadFile(f"{path}:{number}: not valid JSON ({exc})") from None
            if not isinstance(obj, dict):
                raise BadFile(f"{path}:{number}: not a JSON object")
            yield number, obj
    progress(unreported)


def read_file(
    path: Path, progress: Progress, limits: Callable[[Header], Limits] | None = None
) -> Iterator[Header | Entity]:
    """The header, then each entity; BadFile (naming the line) for anything wrong,
    including a missing end line. ``limits``: given the header, what every entity must
    also respect (:class:`Limits`)."""
    lines = _lines(path, progress)
    first = next(lines, None)
    if first is None:
        raise BadFile(f"{path}: empty file, not a redistate export")
    try:
        header = _header(first[1])
    except (ValueError, RedistateError) as exc:
        raise BadFile(f"{path}:1: {exc}") from None
    yield header
    check = None if limits is None else limits(header)
    count, ended = 0, 0
    for number, obj in lines:
        kind = obj.get("kind")
        try:
            if ended:
                raise ValueError(f"a line after the end line (line {ended})")
            if kind == END:
                if obj.get("entities") != count:
                    raise ValueError(
                        f"the end line counts {obj.get('entities')!r} entities, "
                        f"the file holds {count}"
                    )
                ended = number
                continue
            entity = parse_entity(obj)
            if check is not None:
                check.check(entity)
        except (ValueError, TypeError, RedistateError) as exc:
            raise BadFile(f"{path}:{number}: {exc}") from None
        count += 1
        yield entity
    if not ended:
        raise BadFile(f"{path}: no end line after line {count + 1}: the file is incomplete")
