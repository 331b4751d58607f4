"""What one kind's export and import are made of (:class:`LineCodec`), what every
kind's codec shares (the checked :class:`Entity`, :class:`Limits` against the store,
field and reply helpers), and how a kind finds its codec. Pure: no I/O.

A kind's codec lives in its own folder: ``redistate.<Kind.home>.backup`` maps each of
the folder's kinds that export applies to (``Kind.applies(Op.EXPORT)``) to its codec
in ``BACKUP[kind.name]``; kinds that share a line kind share a codec (sessions, users
and collections write "record" lines). A kind that skips export but whose keys are
read into another kind's line (step records, in their task's) is named in that codec's
``carries``. Nothing here names a kind.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import importlib
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

from ..core import kinds
from ..core.batching import pairs
from ..core.codec import Codec
from ..core.envelope import MAX_VERSION
from ..core.keys import KeySpace, escape_id
from ..core.scripts import Parsed, Script, script
from ..core.signing import SigningKeys

if TYPE_CHECKING:
    from .reports import ExportReport, ImportReport

__all__ = [
    "FUTURE_ALLOWANCE_US",
    "MAX_TTL_MS",
    "Entity",
    "ImportReply",
    "LineCodec",
    "Limits",
    "Pairs",
    "Read",
    "Ttl",
    "b64",
    "codec_of",
    "codecs",
    "count",
    "entity_id",
    "field",
    "first_present",
    "line_codec",
    "line_kinds",
    "pairs",
    "pttls",
    "reply_score",
    "score",
    "text",
    "ttl_of",
    "utf8",
    "unb64",
]

MAX_TTL_MS: Final = 100 * 365 * 86400 * 1000  # what the scripts accept (rs_ttl)
# How far past the importing server's clock a version, fence or time may be: an export
# from a server whose clock ran ahead (NTP keeps it to milliseconds) imports. More is a
# crafted or damaged line: a version far ahead outranks every live write until the
# clock catches up, and near 2**53 no write can follow it.
FUTURE_ALLOWANCE_US: Final = 3600 * 10**6  # 1 hour

Pairs = tuple[tuple[bytes, bytes], ...]
Ttl = Callable[[int], int | None]  # a PTTL reply -> the line's ttl_ms
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Entity:
    """One entity line, checked: what the import script needs apart from TTL and force."""

    kind: str  # a line kind (LineCodec.name)
    name: str  # the record's collection; "" otherwise
    id: str
    ttl_ms: int | None
    # record: (value,); task: blobs, ids, log; fence: (value,); user_index: entries;
    # agents: items; events and graph: ()
    data: tuple[bytes, ...]
    counts: tuple[int, int] = (0, 0)  # task: blobs, ids
    steps: Pairs = ()  # task: (step name, record), by name
    events: tuple[tuple[str, dict[bytes, bytes]], ...] = ()  # events: (stream id, fields)
    anchor: Pairs = ()  # events: the trim anchor's fields (ANCHOR_FIELDS order); () none
    # graph: each part's (field, value) or (member, score); adk: its hash's pairs, then
    # its collection's (element or member, b"") or (member, score)
    parts: tuple[Pairs, ...] = ()
    ttls: tuple[int | None, ...] = ()  # adk: each part's time left (None: no expiry)
    # memory: each item's (key, created ms, updated ms, ttl ms, ms left or None, value)
    items: tuple[tuple[bytes, int, int, int, int | None, bytes], ...] = ()
    announced: int = 0  # what LineCodec.announce's script replied (set by the importer)

    @property
    def label(self) -> str:
        return f"{self.name or self.kind} {self.id}"

    @property
    def size(self) -> int:
        """About how many bytes the import script is sent (a batch's budget)."""
        pairs = (*self.steps, *self.anchor, *(p for part in self.parts for p in part))
        fields = sum(len(v) for _, f in self.events for v in f.values())
        items = sum(len(item[0]) + len(item[5]) + 40 for item in self.items)
        return sum(map(len, self.data)) + sum(len(a) + len(b) for a, b in pairs) + fields + items


@dataclass(frozen=True, slots=True)
class Read:
    """One entity to read: its codec, id, the key the scan found and the keys to read."""

    codec: LineCodec
    name: str  # the key kind the scan found (a record's collection)
    id: str
    part: str  # which of the entity's keys the scan found
    found: bytes
    keys: tuple[str, ...]

    @property
    def kind(self) -> str:
        """Its line kind."""
        return self.codec.name

    def commands(self) -> list[tuple[Any, ...]]:
        """The commands that read the entity, in one MULTI/EXEC. Their names are bytes:
        redis-py's reply callbacks (keyed by str names) would parse the "QUEUED" reply
        as a stream or a hash."""
        return [(name.encode(), *args) for name, *args in self.codec.commands(self.keys)]


class LineCodec(ABC):
    """One line kind of the export file: the keys an entity's line is read from, the
    line built from the replies, the line parsed back and checked against the store,
    and the import script's call and reply. One instance per line kind; the defaults
    fit an entity whose main key is a string (GET) with a TTL."""

    name: str = ""  # the line kind: the "kind" of its lines, the report's counter
    one: str = ""  # how people read one of them ("event stream")
    many: str = ""  # and several
    since: int = 2  # the format version that added the line kind (1: always reported)
    carries: tuple[kinds.Kind, ...] = ()  # kinds that skip export, read in these lines
    left_out: frozenset[str] = frozenset()  # parts of the kind's keys that are not read

    @abstractmethod
    def keys(self, keys: KeySpace, name: str, entity_id: str) -> tuple[str, ...]:
        """The keys an entity's line is read from (``name``: the key kind scanned), in
        the order :meth:`commands` and :meth:`line` take them."""

    def commands(self, keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
        """The commands that read those keys (one MULTI/EXEC): names as str."""
        return [("GET", keys[0]), *pttls(keys)]

    @abstractmethod
    def line(self, read: Read, reply: Any, ttl: Ttl) -> dict[str, Any] | None:
        """The file line from the commands' replies (none an error); None if the entity
        is gone or another of its keys writes its line.

        Raises:
            IntegrityError, ValueError: the keys hold values redistate did not write.
        """

    @abstractmethod
    def parse(self, obj: dict[str, Any]) -> Entity:
        """A line of this kind (a JSON object), checked on its own.

        Raises:
            ValueError, TypeError or RedistateError: naming the field that is wrong.
        """

    def check(self, limits: Limits, entity: Entity) -> None:
        """Raises ValueError naming the field, its value and the limit if ``entity``
        cannot be imported into ``limits``' store (its codec, signing keys, clock)."""
        return None  # a kind whose parse checks all there is

    @abstractmethod
    def call(
        self, keys: KeySpace, entity: Entity, ttl_ms: int, force: bool
    ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        """(KEYS, ARGV) of :meth:`script` importing ``entity`` (every key in its slot)."""

    def aged(self, entity: Entity, elapsed_ms: int) -> Entity:
        """``entity`` as it is ``elapsed_ms`` after the export started: for a kind whose
        parts expire apart (the line's ``ttl_ms`` ages the whole entity)."""
        return entity

    def announce(
        self, keys: KeySpace, entity: Entity
    ) -> tuple[Script, tuple[str, ...], tuple[Any, ...]] | None:
        """(script, KEYS, ARGV) to run before the import script, a round trip earlier
        (a registry in another hash slot); its reply becomes ``entity.announced``.
        None: nothing to announce."""
        return None

    def again(self, reply: ImportReply) -> bool:
        """Whether the import script refused only because the announcement went stale
        meanwhile: the importer announces again and resends."""
        return False

    def script(self) -> Parsed[ImportReply]:
        """The import script: lua/import_<name>.lua in the kind's folder, its replies
        parsed into an :class:`ImportReply`."""
        return _import_script(self.name)

    def exported(self, report: ExportReport, line: dict[str, Any]) -> None:
        """Count a line written to the file in ``report``."""
        report.entities[self.name] += 1

    def tally(self, report: ImportReport, entity: Entity, reply: ImportReply) -> bool:
        """Count the script's reply (not an error) in ``report``; False: the entity was
        refused (the caller counts and lists it)."""
        if reply.written:
            report.imported[entity.kind] += 1
            return True
        return False


@dataclass(frozen=True, slots=True)
class ImportReply:
    """An import script's reply, ``{written, value[, steps]}`` in every kind (each
    lua/import_*.lua header says what ``value`` is). ``written``: the entity is stored
    as the file has it (written, or already there); False: refused, nothing of it
    changed but ``steps``. ``value``: the kind's count, version, fence or seq, or
    what refused it; text only when an event stream is refused (the stored last id).
    ``steps``: step records written (import_task; written even when refused)."""

    written: bool
    value: int | str
    steps: int = 0

    @classmethod
    def parse(cls, reply: Any) -> ImportReply:
        value = reply[1]
        value = value if isinstance(value, int) else text(value)
        return cls(int(reply[0]) == 1, value, int(reply[2]) if len(reply) > 2 else 0)

    @property
    def wrote(self) -> bool:
        return self.written or self.steps > 0


@cache
def _import_script(name: str) -> Parsed[ImportReply]:
    return script(f"import_{name}").replying(ImportReply.parse)


class Limits:
    """What a line must respect to be imported into one store, checked before anything
    is written: its payloads decode with the store's codec (under the keys they will
    have), checkpoint, delta and step digests or seals match, event chains verify from
    their anchor, no record version, fence, checkpoint seq, stream id or time is later
    than the server's clock allows (each kind's :meth:`LineCodec.check`). Pure: the
    server time is read once by the caller."""

    __slots__ = ("_made", "codec", "keys", "max_us", "now_us", "signing")

    def __init__(
        self, keys: KeySpace, codec: Codec, now_us: int, signing: SigningKeys | None = None
    ) -> None:
        self.keys, self.codec, self.now_us, self.signing = keys, codec, now_us, signing
        # The next version or fence after an imported one must still be exact.
        self.max_us = min(MAX_VERSION - 1, now_us + FUTURE_ALLOWANCE_US)
        self._made: dict[object, Any] = {}

    @property
    def max_ms(self) -> int:
        return self.max_us // 1000

    def made(self, key: object, make: Callable[[], T]) -> T:
        """What ``make`` returns, made once per import for ``key`` (a codec's specs)."""
        if key not in self._made:
            self._made[key] = make()
        return cast(T, self._made[key])

    def late(self, what: str, value: int, limit: int) -> ValueError:
        """The error for ``what`` at ``value``, later than the server's clock allows."""
        clock = dt.datetime.fromtimestamp(self.now_us / 1e6, tz=dt.timezone.utc)
        return ValueError(
            f"{what} {value} is over the limit {limit}: the server's clock "
            f"({clock:%Y-%m-%dT%H:%M:%SZ}) plus {FUTURE_ALLOWANCE_US // 10**6} s"
        )

    def check(self, entity: Entity) -> None:
        """Raises ValueError naming the entity, the field, its value and the limit."""
        codec = line_codec(entity.kind)
        try:
            if codec is not None:
                codec.check(self, entity)
        except ValueError as exc:
            raise ValueError(f"{entity.label}: {exc}") from None


# -- finding a kind's codec ------------------------------------------------------------


@cache
def _backup(home: str) -> Mapping[str, LineCodec]:
    module = importlib.import_module(f"redistate.{home}.backup")
    return cast(Mapping[str, LineCodec], module.BACKUP)


@cache
def codecs() -> tuple[LineCodec, ...]:
    """Every line codec once, in the order reports list line kinds: format 1's first,
    then the others, each in registry order."""
    found: dict[str, LineCodec] = {}
    for kind in kinds.KINDS:
        if kind.applies(kinds.Op.EXPORT):
            codec = _backup(kind.home)[kind.name]
            if found.setdefault(codec.name, codec) is not codec:
                raise RuntimeError(f"two codecs write {codec.name!r} lines")
    return tuple(sorted(found.values(), key=lambda codec: codec.since))  # stable


@cache
def _carried() -> dict[kinds.Kind, LineCodec]:
    return {kind: codec for codec in codecs() for kind in codec.carries}


def codec_of(kind: kinds.Kind) -> LineCodec | None:
    """The codec that reads ``kind``'s keys into lines: its own, the one carrying it
    (step records: the task's), or None (not exported)."""
    if kind.applies(kinds.Op.EXPORT):
        return _backup(kind.home)[kind.name]
    return _carried().get(kind)


@cache
def _by_line() -> dict[str, LineCodec]:
    return {codec.name: codec for codec in codecs()}


def line_codec(name: str) -> LineCodec | None:
    """The codec of line kind ``name``, None if no kind writes such lines."""
    return _by_line().get(name)


def line_kinds() -> tuple[str, ...]:
    """Every line kind a file may hold, in report order."""
    return tuple(codec.name for codec in codecs())


# -- what codecs share -----------------------------------------------------------------


def b64(data: bytes) -> str:
    """Raw bytes as the file holds them."""
    return base64.b64encode(data).decode("ascii")


def unb64(text: object, what: str) -> bytes:
    """A base64 field's bytes; ValueError naming ``what``."""
    if not isinstance(text, str):
        raise ValueError(f"{what} must be a base64 string, got {text!r:.80}")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{what} is not valid base64: {text!r:.80}") from None


def field(obj: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    """Field ``name`` of a line, which must be a ``kind`` (never a bool)."""
    value = obj.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"field {name!r} is missing or not a {_kind_name(kind)}: {value!r:.80}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds_ = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds_)


def ttl_of(obj: dict[str, Any]) -> int | None:
    """A line's ``ttl_ms``: None (no expiry) or 0 to MAX_TTL_MS."""
    ttl = obj.get("ttl_ms")
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 <= ttl <= MAX_TTL_MS:
        raise ValueError(f"ttl_ms must be null or an int from 0 to {MAX_TTL_MS}, got {ttl!r:.80}")
    return ttl


def entity_id(obj: dict[str, Any]) -> str:
    """A line's ``id``; InvalidId for an id no key can hold."""
    entity = field(obj, "id", str)
    escape_id(entity)
    return str(entity)


def pttls(keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """A PTTL command for each key."""
    return [("PTTL", k) for k in keys]


def text(value: Any) -> str:
    """A reply's bytes as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


_INTEGER: Final = re.compile(rb"0|-?[1-9][0-9]{0,15}")


def count(data: bytes, what: str, *, signed: bool = False) -> int:
    """A stored integer (a counter, a version, a time in ms) as its scripts write it:
    canonical decimal, within ±(2**53 - 1) so that Lua reads it exactly; ValueError
    naming ``what`` otherwise (``signed``: it may be negative)."""
    if (
        not _INTEGER.fullmatch(data)
        or (data[:1] == b"-" and not signed)
        or abs(int(data)) > MAX_VERSION
    ):
        low = f"-{MAX_VERSION}" if signed else "0"
        raise ValueError(f"{what} {data[:40]!r} is not an integer from {low} to {MAX_VERSION}")
    return int(data)


def utf8(data: bytes, what: str, errors: str = "strict") -> str:
    """Bytes of a line that must be non-empty UTF-8 text; ValueError naming ``what``
    (``errors="surrogatepass"``: text a store wrote from any Python str)."""
    try:
        found = data.decode("utf-8", errors)
    except UnicodeDecodeError:
        raise ValueError(f"{what} {data[:40]!r} is not UTF-8") from None
    if not found:
        raise ValueError(f"{what} is empty")
    return found


def reply_score(raw: Any) -> int | float:
    """A sorted set's score as the file holds it: an int where it is one, exactly."""
    value = float(raw)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def score(value: object, what: str) -> bytes:
    """A line's score as ZADD takes it; ValueError naming ``what`` unless it is a
    finite number (an int within ±2**53-1, so that it is exact)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {value!r:.80}")
    if isinstance(value, int):
        if abs(value) > MAX_VERSION:
            raise ValueError(f"{what} {value} is over the limit of ±2**53-1")
        return b"%d" % value
    return repr(value).encode()


def first_present(read: Read, parts: tuple[str, ...], present: list[bool]) -> int | None:
    """The index of the key that writes the entity's line: the first present one, in
    ``parts`` order. None if that is not the key the scan found (it writes the line:
    an entity is read at each of its keys the scan finds, with no memory of the
    entities already written), or nothing is left."""
    first = next((i for i, p in enumerate(parts) if present[i]), None)
    if first is None or parts[first] != read.part:
        return None
    return first
