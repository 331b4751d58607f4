"""``redistate migrate --using MODULE:FUNCTION``: bring a namespace's records up to date.

The migration steps are the application's code: ``FUNCTION(migrations)`` registers them
on the store's registry, as the application does at start-up. Records are read in
batches (one pipeline of GETs each); every one at an older schema is written back
migrated, by compare-and-set (its TTL kept), so writes made meanwhile are never lost.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import typer

from .. import RedistateError, SchemaError, Store
from ..migrations import Migrations
from ._app import app
from ._output import emit
from ._records import collection_of, record_keys
from .backup import _progress

__all__ = ["MigrateReport", "load_steps", "migrate_namespace"]

BATCH = 500
EXAMPLES = 5


@dataclass
class MigrateReport:
    upgraded: int = 0
    current: int = 0
    newer: int = 0
    newer_keys: list[str] = field(default_factory=list)


def load_steps(spec: str) -> Callable[[Migrations], Any]:
    """The function ``module:function`` names (the working directory is importable).

    Raises:
        ValueError: not ``module:function``, or nothing callable there.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--using {spec!r} must be module:function")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"--using {spec!r}: cannot import {module_name!r}: {exc}") from exc
    found = getattr(module, attr, None)
    if not callable(found):
        raise ValueError(f"--using {spec!r}: {module_name} has no function {attr!r}")
    return found  # type: ignore[no-any-return]


def migrate_namespace(
    store: Store, advance: Callable[[int], None] = lambda n: None
) -> MigrateReport:
    """Write back every record of ``store``'s namespace stored at an older schema."""
    report = MigrateReport()
    batch: list[tuple[str, str, str]] = []

    def flush() -> None:
        values = store._conn.gets([key for _, _, key in batch])
        for (kind, entity, key), raw in zip(batch, values, strict=True):
            collection = collection_of(store, kind)
            try:
                if raw is not None and collection.spec.outdated(key, raw):
                    report.upgraded += int(collection.upgrade(entity))
                else:
                    report.current += 1
            except SchemaError:
                report.newer += 1
                if len(report.newer_keys) < EXAMPLES:
                    report.newer_keys.append(key)
        advance(len(batch))
        batch.clear()

    for item in record_keys(store):
        batch.append(item)
        if len(batch) >= BATCH:
            flush()
    if batch:
        flush()
    return report


@app.command("migrate")
def migrate_command(
    ctx: typer.Context,
    using: str = typer.Option(
        ..., "--using", help="module:function that registers the steps: function(migrations)"
    ),
    as_json: bool = typer.Option(False, "--json", help="one JSON line instead of a table"),
) -> None:
    """Write back every record stored at an older schema, migrated by the steps that
    --using registers (compare-and-set, TTLs kept); records newer than those steps are
    reported (exit 1) and left as they are."""
    register = load_steps(using)
    store: Store = ctx.obj.store
    register(store.migrations)
    with _progress("records") as progress:
        task = progress.add_task("migrating", total=None)
        report = migrate_namespace(store, lambda n: progress.advance(task, n))
    row = {"upgraded": report.upgraded, "current": report.current, "newer": report.newer}
    emit([row], as_json, f"migrated {store.keys.namespace}")
    if report.newer:
        raise RedistateError(
            f"{report.newer} record(s) are newer than the registered steps, e.g. "
            + ", ".join(report.newer_keys)
        )
