"""``redistate stats``: keys and bytes per kind, the largest entities, keys without a
TTL. The work is ``store.admin.stats()`` (redistate.admin.stats); this prints it."""

from __future__ import annotations

from typing import Annotated, Any, Final

import typer

from .. import Store
from ..admin import KindStats
from ..admin.stats import ALIASES, OTHER, key_kinds
from ..core.errors import InvalidId
from ..core.kinds import LOCK_KEY
from ._app import app
from ._output import emit

__all__ = ["GAUGES", "exposition", "stats"]

TOP: Final = 5


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(size)


@app.command()
def stats(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines instead of tables")] = False,
    prometheus: Annotated[
        bool,
        typer.Option("--prometheus", help="Prometheus text exposition (gauges) for a scrape"),
    ] = False,
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
    Keys count every key of a kind (a task's lists, write memories); entities the ids
    with any key of the kind (a task with only a delta log too), as the largest list.
    """
    try:
        kinds = key_kinds(expect_ttl or [])
    except InvalidId as exc:
        raise typer.BadParameter(str(exc), param_hint="--expect-ttl") from None
    store: Store = ctx.obj.store
    found = store.admin.stats(samples, kinds)
    present = [s.kind for s in found if s.kind != OTHER]
    unknown = [
        name for name, kind in zip(expect_ttl or [], kinds, strict=True) if kind not in present
    ]
    if unknown:
        known = ", ".join([*ALIASES, *(k for k in present if k not in ALIASES.values())])
        raise typer.BadParameter(
            f"{unknown[0]!r} is no kind of namespace {store.keys.namespace!r}; "
            f"known kinds: {known}",
            param_hint="--expect-ttl",
        )
    if as_json and prometheus:
        raise typer.BadParameter("give one of --json and --prometheus", param_hint="--prometheus")
    if as_json:
        emit([s.row() for s in found], True, "")
        return
    if prometheus:
        typer.echo(exposition(store.keys.namespace, found), nl=False)
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


# name -> help: the gauges of --prometheus, one sample per kind (leases: per namespace).
GAUGES: Final = {
    "redistate_keys": "Keys of each kind in the namespace.",
    "redistate_entities": "Entities (ids with any key) of each kind in the namespace.",
    "redistate_bytes": "Bytes of each kind (MEMORY USAGE of a sample, extrapolated).",
    "redistate_keys_without_ttl": "Keys without a TTL in kinds that should have one.",
    "redistate_leases_held": "Leases held now in the namespace.",
}


def _label(value: str) -> str:
    """A label value as the exposition format quotes it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def exposition(namespace: str, found: list[KindStats]) -> str:
    """The Prometheus text exposition (version 0.0.4) of a namespace's statistics:
    gauges labelled by namespace and kind."""
    ns = _label(namespace)
    values: dict[str, list[tuple[str, int]]] = {name: [] for name in GAUGES}
    for s in found:
        labels = f'namespace="{ns}",kind="{_label(s.kind)}"'
        values["redistate_keys"].append((labels, s.keys))
        values["redistate_entities"].append((labels, s.entities))
        values["redistate_bytes"].append((labels, s.size))
        if s.no_ttl is not None:
            values["redistate_keys_without_ttl"].append((labels, s.no_ttl))
    held = sum(s.main for s in found if s.kind == LOCK_KEY)
    values["redistate_leases_held"].append((f'namespace="{ns}"', held))
    lines: list[str] = []
    for name, text in GAUGES.items():
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
        lines += [f"{name}{{{labels}}} {value}" for labels, value in values[name]]
    return "\n".join(lines) + "\n"


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
