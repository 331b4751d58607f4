"""Durable steps, the pure half: step records, their encoding and what a resume does.

A task's steps live in one hash in the task's slot (``KeySpace.task_steps``), a field
per step name. A record is ``S1,<status>,<idempotent>,<fence>,<started_ms>,<ended_ms>,
<sha256 of the payload>\\n<payload>``: status ``s`` started (no payload), ``d`` done
(the result, encoded by the store's codec), ``f`` failed (``{"type", "message"}``,
encoded the same way). The codec's context binds a payload to its task and step, so an
encrypted result copied to another step does not decrypt. With signing keys the digest
is a seal ``<key id>:<HMAC hex>`` over the task's step key, the step's name, the header
before it (status, idempotence, fence, times) and the payload.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ..core.codec import Codec
from ..core.errors import IntegrityError, StateTooLarge, StepFailed, StepInterrupted
from ..core.keys import escape_id
from ..core.signing import SigningKeys, digest_problem

__all__ = [
    "Step",
    "StepRecodeArgs",
    "StepRecodeReply",
    "StepRecordArgs",
    "StepRecordReply",
    "StepSpec",
    "check_step_name",
]

_HEAD_RE: Final = re.compile(
    rb"S1,([sdf]),([01]),(\d{1,19}),(\d{13}),(\d{13}),((?:[A-Za-z0-9_-]{1,32}:)?[0-9a-f]{64})\n"
)
_STATUS: Final = {b"s": "started", b"d": "done", b"f": "failed"}
_CODES: Final = {v: k for k, v in _STATUS.items()}
MESSAGE_LIMIT: Final = 2000  # characters of a recorded exception message


def check_step_name(name: object) -> str:
    """A step name, validated like an entity id (a str of 1-512 UTF-8 bytes).

    Raises:
        InvalidId: not a str, empty, or too long.
    """
    escape_id(name)
    return name  # type: ignore[return-value]  # escape_id accepted it: a str


def _at(ms: int) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc) if ms else None


@dataclass(frozen=True, slots=True)
class StepRecordArgs:
    """ARGV of step_record."""

    name: str  # the step's
    record: bytes  # "S1,<status>,...\n<payload>"
    lease: str  # "" = unguarded
    ttl_ms: int  # when the task has neither a checkpoint list nor a delta log

    def argv(self) -> tuple[Any, ...]:
        return (self.name, self.record, self.lease, self.ttl_ms)


@dataclass(frozen=True, slots=True)
class StepRecordReply:
    """A step_record reply: ``recorded`` (``resent``: this very record was stored
    already, found before the fence check), else ``existing``, the result the step
    already has (final: nothing was written)."""

    recorded: bool
    existing: bytes | None = None
    resent: bool = False

    @classmethod
    def parse(cls, reply: Any) -> StepRecordReply:
        status = int(reply[0])
        if status:
            return cls(True, resent=status == 2)
        return cls(False, bytes(reply[1]))

    @property
    def wrote(self) -> bool:
        return self.recorded

    @property
    def guarded(self) -> bool:
        """Whether the script reached its fence check (which renews an inline lease)."""
        return not self.resent


@dataclass(frozen=True, slots=True)
class StepRecodeArgs:
    """ARGV of recode_fields."""

    triples: tuple[bytes, ...]  # (the step's name, the record read, its replacement)...

    def argv(self) -> tuple[Any, ...]:
        return self.triples


@dataclass(frozen=True, slots=True)
class StepRecodeReply:
    """A recode_fields reply: how many records were replaced (one changed since it was
    read is left for a second run)."""

    replaced: int

    @classmethod
    def parse(cls, reply: Any) -> StepRecodeReply:
        return cls(int(reply))

    @property
    def wrote(self) -> bool:
        return self.replaced > 0


@dataclass(frozen=True, slots=True)
class Step:
    """One recorded step. ``result`` when done; ``error`` (type, message) when failed;
    ``fence`` of the owner that recorded it (None if unfenced)."""

    name: str
    status: str  # "started" | "done" | "failed"
    idempotent: bool
    fence: int | None
    started_at: dt.datetime | None
    ended_at: dt.datetime | None
    result: Any = None
    error: tuple[str, str] | None = None

    @property
    def seconds(self) -> float | None:
        """How long the step ran, when it ended."""
        if self.started_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()

    def replay(self, *, idempotent: bool, retry_failed: bool) -> bool:
        """What a run does on meeting this record: True = return :attr:`result`;
        False = call the function (again).

        Raises:
            StepFailed: a recorded failure, without ``retry_failed``.
            StepInterrupted: started by an owner that never recorded its end, and the
                step is not idempotent: a person or the agent decides, never a silent
                second call.
        """
        if self.status == "done":
            return True
        if self.status == "failed":
            if retry_failed:
                return False
            kind, message = self.error or ("Exception", "")
            raise StepFailed(self.name, kind, message)
        if idempotent:
            return False
        raise StepInterrupted(self.name, self.started_at, self.fence)


class StepSpec:
    """Encoding and decoding of step records for one store."""

    __slots__ = ("codec", "max_bytes", "signing")

    def __init__(self, codec: Codec, *, max_bytes: int, signing: SigningKeys | None = None) -> None:
        self.codec = codec
        self.max_bytes = max_bytes
        self.signing = signing

    @staticmethod
    def _context(key: str, name: str) -> bytes:
        return key.encode("utf-8") + b"\0" + name.encode("utf-8")

    def _record(
        self, key: str, name: str, code: bytes, idempotent: bool, fence: int | None,
        started: int, ended: int, payload: bytes,
    ) -> bytes:  # fmt: skip
        head = b"S1,%s,%d,%d,%013d,%013d," % (code, idempotent, fence or 0, started, ended)
        return head + self._digest(key, name, head, payload) + b"\n" + payload

    def _digest(self, key: str, name: str, head: bytes, payload: bytes) -> bytes:
        if self.signing is None:
            return hashlib.sha256(payload).hexdigest().encode()
        return self.signing.seal(b"step", key.encode("utf-8"), name.encode("utf-8"), head, payload)

    def _checked(self, key: str, name: str, raw: bytes) -> tuple[re.Match[bytes], bytes]:
        """(header match, payload) of a stored record, its digest or seal checked.

        Raises:
            IntegrityError: damaged, edited, or (signing keys) not sealed.
        """
        head = _HEAD_RE.match(raw)
        if head is None:
            raise IntegrityError(f"step {name!r} of {key!r} is damaged: {raw[:80]!r}")
        payload = raw[head.end() :]
        problem = digest_problem(
            self.signing,
            head.group(6),
            lambda: hashlib.sha256(payload).hexdigest().encode(),
            b"step",
            key.encode("utf-8"),
            name.encode("utf-8"),
            raw[: head.start(6)],
            payload,
            unverifiable=False,
        )
        if problem is not None:
            raise IntegrityError(f"step {name!r} of {key!r} {problem}")
        return head, payload

    def started(
        self, key: str, name: str, idempotent: bool, fence: int | None, now_ms: int
    ) -> bytes:
        return self._record(key, name, b"s", idempotent, fence, now_ms, 0, b"")

    def done(
        self, key: str, name: str, idempotent: bool, fence: int | None, started: int,
        now_ms: int, result: Any,
    ) -> bytes:  # fmt: skip
        """A done record. Raises CodecError (not JSON) or StateTooLarge (over max_bytes)."""
        payload = self.codec.encode(result, self._context(key, name))
        if len(payload) > self.max_bytes:
            raise StateTooLarge(len(payload), self.max_bytes, f"{key} step {name!r}")
        return self._record(key, name, b"d", idempotent, fence, started, now_ms, payload)

    def failed(
        self, key: str, name: str, idempotent: bool, fence: int | None, started: int,
        now_ms: int, exc: BaseException,
    ) -> bytes:  # fmt: skip
        message = str(exc)[:MESSAGE_LIMIT].encode("utf-8", "replace").decode("utf-8")
        error = {"type": type(exc).__name__, "message": message}
        payload = self.codec.encode(error, self._context(key, name))
        return self._record(key, name, b"f", idempotent, fence, started, now_ms, payload)

    def recoded(
        self, key: str, name: str, raw: bytes, current: Callable[[bytes], bool]
    ) -> bytes | None:
        """The record with its payload decoded and encoded again by this codec
        (rotate-keys), or None when ``current`` says the payload needs nothing.

        Raises:
            IntegrityError: the record is damaged.
        """
        head, payload = self._checked(key, name, raw)
        resealed = self.signing is not None and not self.signing.current(head.group(6))
        fresh = payload
        if payload and not current(payload):
            context = self._context(key, name)
            fresh = self.codec.encode(self.codec.decode(payload, context), context)
        elif not resealed:
            return None
        prefix = raw[: head.start(6)]
        return prefix + self._digest(key, name, prefix, fresh) + b"\n" + fresh

    def parse(self, key: str, name: str, raw: bytes) -> Step:
        """A stored record as a Step (its payload decoded).

        Raises:
            IntegrityError: damaged, or its payload does not match its digest.
        """
        head, payload = self._checked(key, name, raw)
        status = _STATUS[head.group(1)]
        result, error = None, None
        if status != "started":
            value = self.codec.decode(payload, self._context(key, name))
            if status == "done":
                result = value
            elif isinstance(value, dict):
                error = (str(value.get("type", "Exception")), str(value.get("message", "")))
        fence = int(head.group(3))
        return Step(
            name,
            status,
            head.group(2) == b"1",
            fence or None,
            _at(int(head.group(4))),
            _at(int(head.group(5))),
            result,
            error,
        )

    def steps(self, key: str, fields: dict[bytes, bytes]) -> dict[str, Step]:
        """Every record of an HGETALL reply, by name, in the order they started."""
        found = [self.parse(key, name.decode("utf-8"), raw) for name, raw in fields.items()]
        found.sort(key=lambda s: (s.started_at or _EPOCH, s.name))
        return {step.name: step for step in found}


_EPOCH: Final = dt.datetime.fromtimestamp(0, tz=dt.timezone.utc)
