"""Export and import of tasks (redistate.admin.backup_codec): one line holds a task's
checkpoints, ids, delta log and its step records (kinds.STEPS, which export skips: they
are read, checked and imported here). Pure: no I/O. The script: lua/import_task.lua.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..admin.backup_codec import (
    Entity,
    ImportReply,
    Limits,
    LineCodec,
    Pairs,
    Read,
    Ttl,
    b64,
    entity_id,
    field,
    first_present,
    pairs,
    pttls,
    ttl_of,
    unb64,
)
from ..core import kinds
from ..core.envelope import MAX_VERSION
from ..core.errors import RedistateError
from ..core.keys import KeySpace
from ..steps.spec import StepSpec, check_step_name
from .spec import _DAMAGED, _DELTA_RE, _ENTRY_RE, CheckpointSpec, _blob_id

if TYPE_CHECKING:
    from ..admin.reports import ExportReport, ImportReport

__all__ = ["BACKUP", "MAX_SEQ", "newest_seq"]

MAX_SEQ: Final = MAX_VERSION - 1  # a checkpoint seq an import accepts
# A task's keys in the order Read.keys holds them (KeySpace.task_keys, then steps),
# and the order in which the first existing one writes the line.
_TASK_PARTS: Final = ("", "ids", "log", *kinds.STEPS.parts)
_TASK_ORDER: Final = (0, 2, 1, 3)
_LISTS: Final = ("checkpoints", "ids", "log")


def newest_seq(entries: Sequence[bytes]) -> int:
    """Highest seq among readable id entries (as checkpoint_save reads them), 0 if none."""
    seqs = [int(m.group(1)) for e in entries if (m := _ENTRY_RE.fullmatch(e))]
    return max(seqs, default=0)


def _steps(obj: dict[str, Any]) -> Pairs:
    steps = obj.get("steps", {})  # a version-1 line has none
    if not isinstance(steps, dict):
        raise ValueError(f"field 'steps' must be an object of step name: base64, got {steps!r:.80}")
    out = []
    for name, raw in sorted(steps.items()):
        check_step_name(name)  # InvalidId: empty or over 512 bytes
        out.append((name.encode("utf-8"), unb64(raw, f"steps[{name!r:.80}]")))
    return tuple(out)


def _paired(blobs: Sequence[bytes], entries: Sequence[bytes]) -> tuple[list[bytes], list[bytes]]:
    """A torn task's checkpoints and ids (one list evicted or lost, or cut): only the
    pairs, matched by the checkpoint id each names, newest first. Only pairs can be
    restored (restore skips the rest, the next save trims them), so only pairs are
    exported: the file stays importable; the log and the step records stay whole."""
    by_id: dict[str, bytes] = {}
    for blob in blobs:
        by_id.setdefault(_blob_id(blob), blob)
    pairs = [
        (by_id[name], entry)
        for entry in entries
        if (match := _ENTRY_RE.fullmatch(entry)) and (name := match.group(4).decode()) in by_id
    ]
    return [blob for blob, _ in pairs], [entry for _, entry in pairs]


class _Tasks(LineCodec):
    name = kinds.TASK.name
    one, many = "task", "tasks"
    since = 1
    carries = (kinds.STEPS,)
    left_out = frozenset({"index"})  # derived from the ids: import_task rebuilds it

    def keys(self, keys: KeySpace, name: str, entity_id: str) -> tuple[str, ...]:
        return (*keys.task_keys(entity_id), keys.task_steps(entity_id))

    def commands(self, keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
        ranges: list[tuple[Any, ...]] = [("LRANGE", k, 0, -1) for k in keys[:3]]
        return [*ranges, ("HGETALL", keys[3]), *pttls(keys)]

    def line(self, read: Read, reply: Any, ttl: Ttl) -> dict[str, Any] | None:
        lists, steps, found_ttls = reply[:3], pairs(reply[3]), reply[4:]
        present = [bool(lists[0]), bool(lists[1]), bool(lists[2]), bool(steps)]
        order = tuple(_TASK_PARTS[i] for i in _TASK_ORDER)
        first = first_present(read, order, [present[i] for i in _TASK_ORDER])
        if first is None:
            return None
        if len(lists[0]) != len(lists[1]):
            lists = [*_paired(lists[0], lists[1]), lists[2]]
        return {
            "kind": self.name,
            "id": read.id,
            "seq": newest_seq(lists[1]),
            "ttl_ms": ttl(int(found_ttls[_TASK_ORDER[first]])),
            "checkpoints": [b64(b) for b in lists[0]],
            "ids": [b64(e) for e in lists[1]],
            "log": [b64(d) for d in lists[2]],
            "steps": {bytes(n).decode("utf-8"): b64(r) for n, r in sorted(steps)},
        }

    def parse(self, obj: dict[str, Any]) -> Entity:
        parts = [field(obj, name, list) for name in _LISTS]
        blobs, entries, log = (
            [unb64(x, f"{name}[{i}]") for i, x in enumerate(part)]
            for name, part in zip(_LISTS, parts, strict=True)
        )
        steps = _steps(obj)
        if not (blobs or entries or log or steps):
            raise ValueError("a task needs checkpoints, ids, a log or steps")
        if len(blobs) != len(entries):
            # The store writes both lists in one script: they only differ if edited.
            raise ValueError(f"{len(blobs)} checkpoints but {len(entries)} ids: they must align")
        seq = newest_seq(entries)
        if obj.get("seq") != seq:
            raise ValueError(f"seq {obj.get('seq')!r} is not the newest in its ids ({seq})")
        data = (*blobs, *entries, *log)
        counts = (len(blobs), len(entries))
        return Entity(self.name, "", entity_id(obj), ttl_of(obj), data, counts, steps=steps)

    def check(self, limits: Limits, entity: Entity) -> None:
        self._task(limits, entity)
        self._task_steps(limits, entity)

    def _task(self, limits: Limits, entity: Entity) -> None:
        spec = limits.made(
            CheckpointSpec,
            lambda: CheckpointSpec(limits.keys, limits.codec, signing=limits.signing),
        )
        blobs, entries = entity.counts
        checkpoints, ids = entity.data[:blobs], entity.data[blobs : blobs + entries]
        key, log_key = limits.keys.task(entity.id), limits.keys.task_log(entity.id)
        max_ms = limits.max_ms
        for n, (entry_, blob) in enumerate(zip(ids, checkpoints, strict=True)):
            match = _ENTRY_RE.fullmatch(entry_)
            if match is None:
                raise ValueError(f"ids[{n}] is not a checkpoint entry: {entry_[:80]!r}")
            seq, created_ms, fence = (int(match.group(i)) for i in (1, 2, 3))
            if seq > MAX_SEQ:
                raise ValueError(
                    f"ids[{n}] seq {seq} is over the limit {MAX_SEQ} (the next save's "
                    f"seq, one more, must stay exact in the scripts: at most 2**53-1)"
                )
            for field_name, value, limit in (
                (f"ids[{n}] created_ms", created_ms, max_ms),
                (f"ids[{n}] fence", fence, limits.max_us),
            ):
                if value > limit:
                    raise limits.late(field_name, value, limit)
            try:
                spec._saved(entity.id, key, entry_, blob)
            except (RedistateError, ValueError) as exc:
                raise ValueError(f"checkpoints[{n}]: {exc}") from None
        for n, raw in enumerate(entity.data[blobs + entries :]):
            head = _DELTA_RE.match(raw)
            if head is not None and int(head.group(3)) > max_ms:
                raise limits.late(f"log[{n}] time (ms)", int(head.group(3)), max_ms)
            if head is None or spec._delta(raw, log_key)[2] is _DAMAGED:
                raise ValueError(
                    f"log[{n}] is damaged (header, digest, or the store's codec cannot "
                    f"decode it): {raw[:80]!r}"
                )

    def _task_steps(self, limits: Limits, entity: Entity) -> None:
        # Only decoding is asked of the spec: no size limit applies.
        steps = limits.made(
            StepSpec, lambda: StepSpec(limits.codec, max_bytes=MAX_VERSION, signing=limits.signing)
        )
        key, max_ms = limits.keys.task_steps(entity.id), limits.max_ms
        for raw_name, raw in entity.steps:
            name = raw_name.decode("utf-8")
            what = f"steps[{name!r:.80}]"
            try:  # digest or seal, and the payload decoded, as a resumed run reads it
                step = steps.parse(key, name, raw)
            except RedistateError as exc:
                raise ValueError(
                    f"{what} does not decode with the store's step spec: {exc}"
                ) from None
            for field_name, at in (("started", step.started_at), ("ended", step.ended_at)):
                ms = 0 if at is None else round(at.timestamp() * 1000)
                if ms > max_ms:
                    raise limits.late(f"{what} {field_name} (ms)", ms, max_ms)
            if (step.fence or 0) > limits.max_us:
                raise limits.late(f"{what} fence", step.fence or 0, limits.max_us)

    def call(
        self, keys: KeySpace, entity: Entity, ttl_ms: int, force: bool
    ) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        blobs, entries = entity.counts
        checkpoints = entity.data[: blobs + entries]
        steps = [value for pair in entity.steps for value in pair]
        log = entity.data[blobs + entries :]
        args = (ttl_ms, int(force), blobs, entries, len(entity.steps), *checkpoints, *steps, *log)
        return (*self.keys(keys, self.name, entity.id), keys.task_index(entity.id)), args

    def exported(self, report: ExportReport, line: dict[str, Any]) -> None:
        super().exported(report, line)
        report.steps += len(line["steps"])  # step records, in their task's line

    def tally(self, report: ImportReport, entity: Entity, reply: ImportReply) -> bool:
        report.steps += reply.steps  # written even when the lists are refused
        return super().tally(report, entity, reply)


BACKUP: Final[Mapping[str, LineCodec]] = {kinds.TASK.name: _Tasks()}
