"""``redistate stats``: keys and bytes per kind, the largest entities, keys without a TTL.

One SCAN of the namespace counts every key and keeps a uniform sample of up to N keys
per kind (reservoir sampling: memory is bounded by N per kind, not by the key count).
Bytes come from MEMORY USAGE of the sample, extrapolated to the kind's key count.
Servers without MEMORY USAGE (fakeredis) get the payload bytes instead (STRLEN, the
lengths of list and sorted-set members), marked "estimated". Keys without a TTL are
counted exactly (PTTL of every key) in the kinds that should have one.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, Final

import typer
from redis.exceptions import ResponseError

from .. import Store
from ..errors import InvalidId
from ..keys import KeySpace, check_kind
from ._app import app
from ._output import emit
from .backup_export import per_server
from .inspection import KINDS

__all__ = ["KindStats", "collect"]

BUILT_IN: Final = ("session", "user", "task", "lock", "fence")
OTHER: Final = "(other)"  # keys of the namespace that redistate did not build
TOP: Final = 5
EXAMPLES: Final = 5
SCAN_BATCH: Final = 1000


@dataclass
class KindStats:
    """What ``stats`` found for one kind."""

    kind: str
    keys: int = 0
    entities: int = 0  # main keys (a task's lists, a record's write memory are parts)
    size: int = 0  # bytes
    estimated: bool = False  # payload bytes, not MEMORY USAGE
    sampled: int = 0
    largest: list[dict[str, Any]] = field(default_factory=list)
    no_ttl: int | None = None  # None: the kind is not expected to have a TTL
    no_ttl_ids: list[str] = field(default_factory=list)
    sample: list[tuple[bytes, str, str]] = field(default_factory=list, repr=False)

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


def _parse(keys: KeySpace, key: bytes) -> tuple[str, str, str]:
    try:
        return keys.parse(key)
    except InvalidId:
        return OTHER, key.decode("utf-8", "replace"), ""


def collect(
    store: Store, samples: int = 200, expect_ttl: Iterable[str] = (), seed: int = 0
) -> list[KindStats]:
    """Statistics of ``store``'s namespace: the built-in kinds first, then collections.

    Raises:
        ValueError: ``samples`` is not an int from 1 to 100,000.
        InvalidId: an ``expect_ttl`` name that is no kind.
    """
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= 100_000:
        raise ValueError(f"samples must be an int from 1 to 100000, got {samples!r}")
    expected = {"session", *ttl_kinds(expect_ttl)}
    kinds = {kind: KindStats(kind, no_ttl=0 if kind in expected else None) for kind in BUILT_IN}
    rng = random.Random(seed)  # a repeatable sample
    batch: list[tuple[bytes, str, str]] = []  # keys whose TTL is checked: (key, kind, label)

    def count_ttls() -> None:
        _no_ttl(store, kinds, batch)
        batch.clear()

    for key in store._conn.scan(store.keys.namespace_pattern()):
        kind, entity, part = _parse(store.keys, key)
        found = kinds.get(kind)
        if found is None:
            found = kinds[kind] = KindStats(kind, no_ttl=0 if kind in expected else None)
        found.keys += 1
        found.entities += 0 if part else 1
        # Reservoir sampling: every key of the kind is in the sample with equal odds.
        if len(found.sample) < samples:
            found.sample.append((key, entity, part))
        else:
            slot = rng.randrange(found.keys)
            if slot < samples:
                found.sample[slot] = (key, entity, part)
        if kind in expected:
            batch.append((key, kind, f"{entity}:{part}" if part else entity))
            if len(batch) >= SCAN_BATCH:
                count_ttls()
    count_ttls()
    memory = _memory_usage_works(store)
    for stats in kinds.values():
        _size(store, stats, memory)
    built_in = [kinds[k] for k in BUILT_IN]
    return built_in + sorted(
        (s for s in kinds.values() if s.kind not in BUILT_IN),
        key=lambda s: (s.kind == OTHER, s.kind),
    )


def _no_ttl(store: Store, kinds: dict[str, KindStats], keys: list[tuple[bytes, str, str]]) -> None:
    """Count the keys that never expire (PTTL -1) among ``(key, kind, label)``."""
    for client, members in per_server(store, keys, lambda k: k[0].decode("utf-8", "replace")):
        pipe = client.pipeline(transaction=False)
        for key, _, _ in members:
            pipe.pttl(key)
        for (_, kind, label), pttl in zip(members, pipe.execute(), strict=True):
            if pttl == -1:
                stats = kinds[kind]
                stats.no_ttl = (stats.no_ttl or 0) + 1
                if len(stats.no_ttl_ids) < EXAMPLES:
                    stats.no_ttl_ids.append(label)


def _memory_usage_works(store: Store) -> bool:
    try:
        store.client.memory_usage(store.keys.namespace_pattern())
    except ResponseError as exc:
        if "unknown command" in str(exc).lower():
            return False
        raise
    return True


def _size(store: Store, stats: KindStats, memory: bool) -> None:
    """Bytes of the kind from its sample: exact when every key was sampled."""
    sized: list[tuple[int, str, str]] = []
    for client, members in per_server(
        store, stats.sample, lambda s: s[0].decode("utf-8", "replace")
    ):
        for (_, entity, part), size in zip(
            members, _sizes(client, [m[0] for m in members], memory), strict=True
        ):
            if size is not None:  # gone since the scan
                sized.append((size, entity, part))
    stats.sample.clear()
    stats.sampled = len(sized)
    stats.estimated = not memory
    if not sized:
        return
    total = sum(size for size, _, _ in sized)
    stats.size = total if len(sized) >= stats.keys else round(total / len(sized) * stats.keys)
    # An entity's size is the sum of its keys in the sample (a task has several lists);
    # exact when every key was sampled.
    entities: dict[str, list[int]] = {}
    for size, entity, _ in sized:
        entities.setdefault(entity, []).append(size)
    top = heapq.nlargest(TOP, entities.items(), key=lambda item: sum(item[1]))
    stats.largest = [{"id": entity, "keys": len(s), "bytes": sum(s)} for entity, s in top]


def _sizes(client: Any, keys: list[bytes], memory: bool) -> list[int | None]:
    """MEMORY USAGE of each key, or its payload bytes; None for a key that is gone."""
    pipe = client.pipeline(transaction=False)
    for key in keys:
        if memory:
            pipe.memory_usage(key)
        else:
            pipe.type(key)
    if memory:
        return [None if size is None else int(size) for size in pipe.execute()]
    types = pipe.execute()
    pipe = client.pipeline(transaction=False)
    for key, kind in zip(keys, types, strict=True):
        if kind == b"string":
            pipe.strlen(key)
        elif kind == b"list":
            pipe.lrange(key, 0, -1)
        elif kind == b"zset":
            pipe.zrange(key, 0, -1, withscores=True)
        else:
            pipe.exists(key)
    sizes: list[int | None] = []
    for kind, reply in zip(types, pipe.execute(), strict=True):
        if kind == b"none":
            sizes.append(None)
        elif kind == b"string":
            sizes.append(int(reply))
        elif kind == b"list":
            sizes.append(sum(len(item) for item in reply))
        elif kind == b"zset":
            sizes.append(sum(len(member) + 8 for member, _ in reply))  # a score is 8 bytes
        else:
            sizes.append(0)  # a type redistate never writes: counted, not sized
    return sizes


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(size)


def ttl_kinds(names: Iterable[str]) -> list[str]:
    """Kinds named by --expect-ttl ("sessions", "users", "tasks" or a kind).

    Raises:
        InvalidId: a name that is no kind.
    """
    return [check_kind(KINDS.get(name, name)) for name in names]


@app.command()
def stats(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines instead of tables")] = False,
    samples: Annotated[
        int, typer.Option("--samples", min=1, max=100_000, help="keys sized per kind")
    ] = 200,
    expect_ttl: Annotated[
        list[str] | None,
        typer.Option("--expect-ttl", metavar="KIND", help="count keys without TTL (repeatable)"),
    ] = None,
) -> None:
    """Keys, bytes and the largest entities per kind; keys without a TTL in kinds that
    should have one (sessions, and every --expect-ttl KIND).

    Bytes: MEMORY USAGE of up to --samples keys per kind, extrapolated to every key of
    the kind; "estimated" where the server has no MEMORY USAGE (payload bytes only).
    Keys count every key of a kind (a task's lists, write memories); entities its main
    keys (one per record, lease, fence key, and task with a checkpoint).
    """
    try:
        kinds = ttl_kinds(expect_ttl or [])
    except InvalidId as exc:
        raise typer.BadParameter(str(exc), param_hint="--expect-ttl") from None
    store: Store = ctx.obj.store
    found = collect(store, samples, kinds)
    if as_json:
        emit([s.row() for s in found], True, "")
        return
    namespace = store.keys.namespace
    emit([_table_row(s) for s in found], False, f"keys and bytes per kind in {namespace}")
    largest = [
        {
            "kind": s.kind,
            "id": top["id"],
            "keys": top["keys"],
            "bytes": _human(top["bytes"]),
        }
        for s in found
        for top in s.largest
    ]
    if largest:
        emit(largest, False, f"largest entities (top {TOP} per kind, of the sampled keys)")


def _table_row(stats: KindStats) -> dict[str, Any]:
    size = _human(stats.size) + (" (estimated)" if stats.estimated else "")
    sampled = stats.sampled < stats.keys
    return {
        "kind": stats.kind,
        "keys": stats.keys,
        "entities": stats.entities,
        "bytes": size + (f" from {stats.sampled} sampled" if sampled else ""),
        "no TTL": stats.no_ttl,
    }
