"""LangGraph store operations run against the namespaces (async source of truth): what
``RedistateStore.abatch`` does; ``memory_ops.py`` is the sync twin ``batch`` runs.

As LangGraph's own stores, a batch reads first (gets, searches and listings see the
state before its puts) and then writes; puts to one item within a batch: the last
wins. Every op is checked, and every value encoded, before anything is sent: a bad one
raises and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from ...core import telemetry
from ...core.codec import Codec
from ...core.errors import StateTooLarge
from ...core.kinds import MEMORY
from ...leases.guard import guard_args
from .memory import (
    InvalidNamespace,
    Owners,
    Stored,
    check_key,
    check_labels,
    context,
    literal_prefix,
    matches,
    matches_condition,
    name_range,
    namespace_id,
    namespace_of,
    stamp,
    ttl_ms,
    under,
)
from .namespaces_async import AsyncNamespaces

__all__ = ["NOT_SEMANTIC", "run"]

NOT_SEMANTIC = (
    "RedistateStore has no semantic search: it stores no embeddings (plain Redis has no"
    " vector index); search with filter= instead, or use a store built on a vector index"
)


def _nsid(namespace: object) -> str:
    try:
        return namespace_id(namespace)
    except InvalidNamespace as exc:
        raise InvalidNamespaceError(str(exc)) from exc


def _labels(namespace: object) -> tuple[str, ...]:
    try:
        return check_labels(namespace)
    except InvalidNamespace as exc:
        raise InvalidNamespaceError(str(exc)) from exc


def _item(nsid: str, key: str, found: Stored, codec: Codec, kind: type[Item] = Item) -> Item:
    value = codec.decode(found.data, context(nsid, key))
    return kind(
        value=value,
        key=key,
        namespace=namespace_of(nsid),
        created_at=stamp(found.created_ms),
        updated_at=stamp(found.updated_ms),
    )


async def run(
    space: AsyncNamespaces,
    codec: Codec,
    max_bytes: int,
    ttl_config: TTLConfig | None,
    ops: Iterable[Op],
    lease: Any = None,
    owners: Owners | None = None,
) -> list[Result]:
    """Every op's result, in order (None for a put); writes to the namespace named
    like ``lease`` are made only while it holds its lock; a namespace ``owners`` names
    a user for is registered to that user before its first put."""
    todo = list(ops)
    with telemetry.operation(_name(todo), MEMORY.name, space.keys.namespace):
        return await _run(space, codec, max_bytes, ttl_config, todo, lease, owners)


# The span of a batch of one kind of op is named for it (BaseStore.get, put, search and
# list_namespaces each send one op): low-cardinality names a dashboard can tell apart.
_OPS: Final = {GetOp: "get", PutOp: "put", SearchOp: "search", ListNamespacesOp: "list_namespaces"}


def _name(ops: list[Op]) -> str:
    kinds = {_OPS.get(type(op), "batch") for op in ops}
    return kinds.pop() if len(kinds) == 1 else "batch"


async def _run(
    space: AsyncNamespaces,
    codec: Codec,
    max_bytes: int,
    ttl_config: TTLConfig | None,
    todo: list[Op],
    lease: Any,
    owners: Owners | None,
) -> list[Result]:
    writes: dict[str, dict[str, tuple[int | None, bytes]]] = {}
    for op in todo:  # checked and encoded before anything is sent
        if isinstance(op, PutOp):
            nsid, key = _nsid(op.namespace), check_key(op.key)
            if op.value is None:
                writes.setdefault(nsid, {})[key] = (None, b"")
                continue
            if not isinstance(op.value, dict):
                raise TypeError(f"a store value is a dict, got {type(op.value).__name__}")
            data = codec.encode(op.value, context(nsid, key))
            if len(data) > max_bytes:
                raise StateTooLarge(len(data), max_bytes, f"{nsid}/{key}")
            # BaseStore.put fills in the default; an op built by hand may say NOT_PROVIDED.
            ttl = (
                op.ttl
                if op.ttl is None or isinstance(op.ttl, int | float)
                else ((ttl_config or {}).get("default_ttl"))
            )
            writes.setdefault(nsid, {}).pop(key, None)  # the last put of a key wins
            writes[nsid][key] = (ttl_ms(ttl), data)
        elif isinstance(op, GetOp):
            _nsid(op.namespace)
            check_key(op.key)
        elif isinstance(op, SearchOp):
            _labels(op.namespace_prefix)
            if op.query is not None:
                raise NotImplementedError(NOT_SEMANTIC)
            if op.limit < 0 or op.offset < 0:
                raise ValueError(f"limit and offset must be >= 0, got {op.limit}, {op.offset}")
        elif isinstance(op, ListNamespacesOp):
            for condition in op.match_conditions or ():
                _labels(condition.path)
                if condition.match_type not in ("prefix", "suffix"):
                    raise ValueError(f"match_type must be prefix or suffix: {condition!r}")
        else:
            raise TypeError(f"unknown store operation {type(op).__name__}: {op!r:.80}")
    users = {} if owners is None else owners.unregistered(space.keys, writes)
    results: list[Result] = [None] * len(todo)
    gets = [(at, op) for at, op in enumerate(todo) if isinstance(op, GetOp)]
    if gets:
        reads = [(namespace_id(op.namespace), [op.key], op.refresh_ttl) for _, op in gets]
        for (at, op), (nsid, _, _), (_, found) in zip(
            gets, reads, await space.get(reads), strict=True
        ):
            results[at] = (
                None if found[0] is None else _item(nsid, op.key, Stored.parse(found[0]), codec)
            )
    for at, op in enumerate(todo):
        if isinstance(op, SearchOp):
            results[at] = await _search(space, codec, op)
        elif isinstance(op, ListNamespacesOp):
            results[at] = await _list(space, op)
    for nsid, items in writes.items():
        user = users.get(nsid)
        if user is not None and owners is not None:
            await space.register(user, nsid)  # before the put: erase never misses it
            owners.remember(user, nsid)
        guarded = lease is not None and lease.name == nsid
        guard = guard_args(lease, nsid, space.keys.lock(nsid))[1] if guarded else ""
        await space.put(
            nsid,
            [(key, ttl, data) for key, (ttl, data) in items.items()],
            guard,
            lease if guarded else None,
        )
    return results


async def _search(space: AsyncNamespaces, codec: Codec, op: SearchOp) -> list[SearchItem]:
    prefix = tuple(op.namespace_prefix)
    low, high = name_range(prefix)
    nsids = [n async for n in space.names(low, high) if under(namespace_of(n), prefix)]
    found: list[SearchItem] = []
    ttls: dict[tuple[str, str], int] = {}
    for nsid, (_, items) in zip(nsids, await space.read(nsids), strict=True):
        for raw_key, stored in items:
            key = raw_key.decode("utf-8", "surrogatepass")
            parsed = Stored.parse(stored)
            item = _item(nsid, key, parsed, codec, SearchItem)
            if matches(item.value, op.filter):
                found.append(item)  # type: ignore[arg-type]
                ttls[(nsid, key)] = parsed.ttl_ms
    # Newest first, as LangGraph's SQL stores order a search without a query.
    found.sort(key=lambda i: (-i.updated_at.timestamp(), i.namespace, i.key))
    page = found[op.offset : op.offset + op.limit]
    if op.refresh_ttl:
        refresh: dict[str, list[str]] = {}
        for item in page:
            nsid = ".".join(item.namespace)
            if ttls[(nsid, item.key)]:
                refresh.setdefault(nsid, []).append(item.key)
        if refresh:
            await space.get([(n, keys, True) for n, keys in refresh.items()])
    return page


async def _list(space: AsyncNamespaces, op: ListNamespacesOp) -> list[tuple[str, ...]]:
    conditions = list(op.match_conditions or ())
    prefix: tuple[str, ...] = ()
    for condition in conditions:
        if condition.match_type == "prefix":
            prefix = max(prefix, literal_prefix(condition.path), key=len)
    low, high = name_range(prefix)
    nsids = [n async for n in space.names(low, high)]
    out: set[tuple[str, ...]] = set()
    for nsid, alive in zip(nsids, await space.live(nsids), strict=True):
        ns = namespace_of(nsid)
        if not alive or not all(matches_condition(c.match_type, c.path, ns) for c in conditions):
            continue
        out.add(ns if op.max_depth is None else ns[: op.max_depth])
    return sorted(out)[op.offset : op.offset + op.limit]
