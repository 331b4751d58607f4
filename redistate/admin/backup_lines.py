"""Export and import, the pure half: what to read for each scanned key and the file
line it becomes, and the script call that imports each checked line (the format:
backup_format; the I/O: backup_async). What a scanned key belongs to is the kind
registry's answer (redistate.core.kinds), and what its line is, its kind's codec's
(backup_codec.codec_of: ``redistate.<home>.backup``). Left out of a file: kinds that
skip export (held leases, lease wake-up lists), write memories and the parts a codec
leaves out (the staging stream of an event rewrite in progress).
"""

from __future__ import annotations

from typing import Any, Final

from ..core import kinds
from ..core._translate import translate
from ..core.errors import IntegrityError, InvalidId, RedistateError
from ..core.keys import KeySpace
from ..core.scripts import Parsed, Script
from .backup_codec import Entity, ImportReply, Read, codec_of, line_codec
from .reports import EXAMPLES, ExportReport, ImportReport

__all__ = [
    "ANNOUNCES",
    "Batch",
    "Read",
    "aged",
    "again",
    "announcement",
    "entity_line",
    "import_call",
    "plan",
    "tally",
    "time_left",
]

BATCH_BYTES: Final = 4 * 1024 * 1024  # aim of one read or write batch: bounds memory
MAX_BATCH: Final = 512
PROGRESS_KEYS: Final = 1000  # progress is reported in steps of this many keys
ANNOUNCES: Final = 5  # an announcement gone stale this many times in a row: fail the line


class Batch:
    """How many entities one round trip carries: grows while batches are small, shrinks
    after a large one, so a batch holds about BATCH_BYTES whatever the entity sizes."""

    def __init__(self) -> None:
        self.size = 64

    def adapt(self, count: int, nbytes: int) -> None:
        per = max(1, nbytes // max(1, count))
        self.size = max(1, min(MAX_BATCH, BATCH_BYTES // per))


def plan(keys: KeySpace, key: bytes, report: ExportReport) -> Read | None:
    """What to read for a scanned key, or None (left out, or not redistate's)."""
    try:
        kind, entity, part = keys.parse(key)
    except InvalidId:
        report.skip_unknown(key)
        return None
    owner = kinds.claim(kind, part)
    if owner is None:
        report.skip_unknown(key)  # a reserved kind's key no kind builds, a stray part
        return None
    if owner.skips.get(kinds.Op.EXPORT, "").startswith(kinds.NOT_YET):
        report.left_out[owner.name] += 1  # data, not plumbing: said by kind
        return None
    codec = codec_of(owner)  # step records: their task's
    if codec is None or _memory(owner, part) or part in codec.left_out:
        report.not_exported += 1  # held leases, wake lists, write memories, staging
        return None
    return Read(codec, kind, entity, part, key, codec.keys(keys, kind, entity))


def _memory(owner: kinds.Kind, part: str) -> bool:
    """Whether ``part`` is a write memory (``KeySpace.writes`` of the kind's main key):
    a LangGraph thread has no main key, its "writes" is content."""
    return part == kinds.WRITES and "" in owner.parts


def _ttl_at_start(pttl: int, read_ms: int, started_ms: int) -> int | None:
    """A PTTL reply made relative to the export's start: the time left then."""
    return None if pttl < 0 else pttl + (read_ms - started_ms)


def entity_line(read: Read, reply: Any, read_ms: int, started_ms: int) -> dict[str, Any] | None:
    """The file line of one read entity; None if it is gone or not redistate's.

    Raises:
        IntegrityError: the keys hold values redistate did not write.
        ValueError: a line its own import would refuse (damaged data): it is checked
            here, so that an export never writes a file that cannot be restored.
    """
    if any(isinstance(part, Exception) for part in reply):
        raise IntegrityError(f"{read.found!r:.200} holds an unexpected type of value")

    def ttl(pttl: int) -> int | None:
        return _ttl_at_start(pttl, read_ms, started_ms)

    line = read.codec.line(read, reply, ttl)
    if line is not None:
        read.codec.parse(line)  # ValueError, TypeError, RedistateError naming the field
    return line


def import_call(
    keys: KeySpace, entity: Entity, ttl_ms: int, force: bool
) -> tuple[Parsed[ImportReply], tuple[str, ...], tuple[Any, ...]]:
    """(script, KEYS, ARGV) that imports ``entity`` into ``keys``' namespace with a TTL
    of ``ttl_ms`` (0: none). Every key is in the entity's hash slot."""
    codec = line_codec(entity.kind)
    if codec is None:  # parse_entity made it: never
        raise ValueError(f"unknown kind {entity.kind!r:.40}")
    return codec.script(), *codec.call(keys, entity, ttl_ms, force)


def aged(entity: Entity, exported_ms: int, now: int) -> Entity:
    """``entity`` as it is now, for a kind whose parts expire apart (LineCodec.aged)."""
    codec = line_codec(entity.kind)
    return entity if codec is None else codec.aged(entity, max(0, now - exported_ms))


def announcement(
    keys: KeySpace, entity: Entity
) -> tuple[Script, tuple[str, ...], tuple[Any, ...]] | None:
    """The script call that must precede ``entity``'s import (LineCodec.announce)."""
    codec = line_codec(entity.kind)
    return None if codec is None else codec.announce(keys, entity)


def again(entity: Entity, reply: ImportReply | Exception) -> bool:
    """Whether ``entity``'s import must be announced again and resent."""
    codec = line_codec(entity.kind)
    return not isinstance(reply, Exception) and codec is not None and codec.again(reply)


def time_left(entity: Entity, exported_ms: int, now: int) -> int | None:
    """TTL to set now (0: none); None if it ran out since the export. A clock behind
    the exporter's never lengthens a TTL."""
    if entity.ttl_ms is None:
        return 0
    left = entity.ttl_ms - max(0, now - exported_ms)
    return left if left > 0 else None


def tally(
    report: ImportReport, entity: Entity, reply: ImportReply | Exception, address: str
) -> None:
    """Count one import script's reply (parsed by its script) or error in ``report``."""
    if isinstance(reply, Exception):
        report.failed_count += 1
        if len(report.failed) < EXAMPLES:
            problem = reply if isinstance(reply, RedistateError) else translate(reply, address)
            report.failed.append(f"{entity.label}: {problem}")
        return
    codec = line_codec(entity.kind)
    if codec is None or not codec.tally(report, entity, reply):
        report.refused_count += 1
        if len(report.refused) < EXAMPLES:
            report.refused.append(entity.label)
