"""Keys and bytes per kind, the largest entities, keys without a TTL; ``redistate
stats`` prints it (the source of redistate.admin.stats).

One SCAN of the namespace counts every key and keeps a uniform sample of up to N keys
per key kind (reservoir sampling: memory is bounded by N per kind, not by the key
count). Bytes come from MEMORY USAGE of the sample, extrapolated to the kind's key
count. Servers without MEMORY USAGE (fakeredis) get the payload bytes instead (STRLEN,
the lengths of list and sorted-set members), marked "estimated". Keys without a TTL are
counted exactly (PTTL of every key) in the kinds that should have one.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..core.errors import InvalidId
from ..core.keys import KeySpace, check_kind
from ..core.kinds import ANY, KINDS, RESERVED, SESSION, TASK, USER, Op
from .reports import EXAMPLES, KindStats

if TYPE_CHECKING:
    from ..core.connection_async import AsyncConnection

__all__ = ["ALIASES", "BUILT_IN", "OTHER", "collect", "key_kinds"]

# The key kinds every report lists, in the registry's order (collections follow).
BUILT_IN: Final = tuple(dict.fromkeys(k.key for k in KINDS if k.key != ANY and k.applies(Op.STATS)))
OTHER: Final = "(other)"  # keys of the namespace that redistate did not build
TOP: Final = 5
BATCH: Final = 1000
# The store's attribute names, accepted for their key kinds.
ALIASES: Final = {"sessions": SESSION.key, "users": USER.key, "tasks": TASK.key}


def key_kinds(names: Iterable[str]) -> list[str]:
    """Key kinds named by ``names`` ("sessions", "users", "tasks" or a key kind).

    Raises:
        InvalidId: a name that is no kind.
    """
    return [check_kind(ALIASES.get(name, name)) for name in names]


def _parse(keys: KeySpace, key: bytes) -> tuple[str, str, str]:
    try:
        return keys.parse(key)
    except InvalidId:
        return OTHER, key.decode("utf-8", "replace"), ""


async def collect(
    conn: AsyncConnection,
    keys: KeySpace,
    samples: int = 200,
    expect_ttl: Iterable[str] = (),
    seed: int = 0,
) -> list[KindStats]:
    """Statistics of a namespace: the built-in kinds first, then collections.

    Raises:
        ValueError: ``samples`` is not an int from 1 to 100,000.
        InvalidId: an ``expect_ttl`` name that is no kind.
    """
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= 100_000:
        raise ValueError(f"samples must be an int from 1 to 100000, got {samples!r}")
    expected = {SESSION.key, *key_kinds(expect_ttl)}
    kinds = {kind: KindStats(kind, no_ttl=0 if kind in expected else None) for kind in BUILT_IN}
    rng = random.Random(seed)  # a repeatable sample
    batch: list[tuple[bytes, str, str]] = []  # keys whose TTL is checked: (key, kind, label)
    later: list[tuple[str, list[str]]] = []  # (kind, earlier parts' keys): entity if none exist

    async for key in conn.scan(keys.namespace_pattern()):
        kind, entity, part = _parse(keys, key)
        found = kinds.get(kind)
        if found is None:
            found = kinds[kind] = KindStats(kind, no_ttl=0 if kind in expected else None)
        found.keys += 1
        if not part:
            found.main += 1
        earlier = _parts(kind, part)
        if not earlier:
            found.entities += 1  # a main key (or a part no kind builds: a key of its own)
        else:
            later.append((kind, [keys.key(kind, entity, p) for p in earlier]))
            if len(later) >= BATCH:
                await _entities(conn, kinds, later)
                later.clear()
        # Reservoir sampling: every key of the kind is in the sample with equal odds.
        if len(found.sample) < samples:
            found.sample.append((key, entity, part))
        else:
            slot = rng.randrange(found.keys)
            if slot < samples:
                found.sample[slot] = (key, entity, part)
        if kind in expected:
            batch.append((key, kind, f"{entity}:{part}" if part else entity))
            if len(batch) >= BATCH:
                await _no_ttl(conn, kinds, batch)
                batch.clear()
    await _no_ttl(conn, kinds, batch)
    await _entities(conn, kinds, later)
    # Whether the server has MEMORY USAGE (fakeredis has not): asked of a key of the
    # namespace's slot that need not exist.
    probe = await _each(conn, [keys.namespace_pattern().encode()], "MEMORY", "USAGE")
    memory = not (isinstance(probe[0], Exception) and "unknown command" in str(probe[0]).lower())
    for stats in kinds.values():
        await _size(conn, stats, memory)
    built_in = [kinds[k] for k in BUILT_IN]
    return built_in + sorted(
        (s for s in kinds.values() if s.kind not in BUILT_IN),
        key=lambda s: (s.kind == OTHER, s.kind),
    )


def _parts(kind: str, part: str) -> tuple[str, ...]:
    """The parts an entity of key kind ``kind`` is counted at before ``part``: its main
    key first, then the other parts in the registry's order. An entity is counted once,
    at the first of its keys in that order, so that the count is of every id with any
    key (a task with only a delta log too), as the largest entities are."""
    if kind == OTHER:
        return ()
    owners = [k for k in KINDS if k.key == (kind if kind in RESERVED else ANY)]
    order = [p for k in owners for p in k.parts]
    mains = [k.main for k in owners if k.main in k.parts]
    order = list(dict.fromkeys([*mains, *order]))
    if part not in order:
        return ()
    return tuple(order[: order.index(part)])


async def _entities(
    conn: AsyncConnection, kinds: dict[str, KindStats], found: list[tuple[str, list[str]]]
) -> None:
    """Count the entities of ``(kind, earlier keys)`` none of whose earlier keys exist."""
    groups = [(keys[0], [("EXISTS", *keys)]) for _, keys in found]
    replies = await conn.batch(groups, atomic=False)
    for (kind, _), reply in zip(found, replies, strict=True):
        if isinstance(reply[0], Exception):
            raise reply[0]
        if int(reply[0]) == 0:
            kinds[kind].entities += 1


def _text(key: bytes) -> str:
    return key.decode("utf-8", "replace")


async def _each(conn: AsyncConnection, keys: Sequence[bytes], *command: str) -> list[Any]:
    """``command key`` for each key, one round trip per server; errors in place."""
    groups = [(_text(key), [(*command, key)]) for key in keys]
    return [replies[0] for replies in await conn.batch(groups, atomic=False)]


async def _no_ttl(
    conn: AsyncConnection, kinds: dict[str, KindStats], keys: list[tuple[bytes, str, str]]
) -> None:
    """Count the keys that never expire (PTTL -1) among ``(key, kind, label)``."""
    pttls = await _each(conn, [key for key, _, _ in keys], "PTTL")
    for (_, kind, label), pttl in zip(keys, pttls, strict=True):
        if pttl == -1:
            stats = kinds[kind]
            stats.no_ttl = (stats.no_ttl or 0) + 1
            if len(stats.no_ttl_ids) < EXAMPLES:
                stats.no_ttl_ids.append(label)


async def _size(conn: AsyncConnection, stats: KindStats, memory: bool) -> None:
    """Bytes of the kind from its sample: exact when every key was sampled."""
    sample, stats.sample = stats.sample, []
    stats.estimated = not memory
    if not sample:
        return
    keys = [key for key, _, _ in sample]
    if memory:
        usage = await _each(conn, keys, "MEMORY", "USAGE")
        for reply in usage:
            if isinstance(reply, Exception):
                raise reply
        sizes = [None if size is None else int(size) for size in usage]
    else:
        sizes = await _payload_sizes(conn, keys)
    sized = [
        (size, entity, part)
        for (_, entity, part), size in zip(sample, sizes, strict=True)
        if size is not None  # gone since the scan
    ]
    stats.sampled = len(sized)
    if sized:
        total = sum(size for size, _, _ in sized)
        stats.size = total if len(sized) >= stats.keys else round(total / len(sized) * stats.keys)
        # An entity's size is the sum of its keys in the sample (a task has several
        # lists); exact when every key was sampled.
        entities: dict[str, list[int]] = {}
        for size, entity, _ in sized:
            entities.setdefault(entity, []).append(size)
        top = heapq.nlargest(TOP, entities.items(), key=lambda item: sum(item[1]))
        stats.largest = [{"id": entity, "keys": len(s), "bytes": sum(s)} for entity, s in top]


async def _payload_sizes(conn: AsyncConnection, keys: list[bytes]) -> list[int | None]:
    """The payload bytes of each key (no MEMORY USAGE); None for a key that is gone."""
    types = await _each(conn, keys, "TYPE")
    commands = {b"string": ("STRLEN",), b"list": ("LRANGE", 0, -1), b"set": ("SMEMBERS",),
                b"zset": ("ZRANGE", 0, -1), b"hash": ("HGETALL",)}  # fmt: skip
    groups = [
        (_text(key), [(commands[t][0], key, *commands[t][1:])] if t in commands else [])
        for key, t in zip(keys, types, strict=True)
    ]
    sizes: list[int | None] = []
    for kind, replies in zip(types, await conn.batch(groups, atomic=False), strict=True):
        if kind == b"none":
            sizes.append(None)
        elif kind == b"string":
            sizes.append(int(replies[0]))
        elif kind in (b"list", b"set"):  # a user's index, an ADK app's users: members
            sizes.append(sum(len(item) for item in replies[0]))
        elif kind == b"zset":
            sizes.append(sum(len(m) + 8 for m in replies[0]))  # a score is 8 bytes
        elif kind == b"hash":  # step records, a task's id index: fields and values
            found = replies[0]  # a dict, or (RESP2 without callbacks) a flat list
            flat = [x for pair in found.items() for x in pair] if isinstance(found, dict) else found
            sizes.append(sum(len(x) for x in flat))
        else:
            sizes.append(0)  # a type redistate never writes: counted, not sized
    return sizes
