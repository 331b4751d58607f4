"""``redistate migrate --using MODULE:FUNCTION``: bring a namespace up to date.

The migration steps are the application's code: ``FUNCTION(migrations)`` registers them
on the store's registry, as the application does at start-up. Records are read in
batches (one pipeline of GETs each); every one at an older schema is written back
migrated, by compare-and-set (its TTL kept), so writes made meanwhile are never lost.
Checkpoints are rewritten in place (lua/checkpoint_migrate.lua), except one that deltas
made against its older schema still follow: a patch cannot be migrated, so it waits for
the task's next save (counted as held). Audit events are rewritten after their chain
verifies, the chain recomputed from the first migrated event (events.rewrite).
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
from ..errors import ConflictError, IntegrityError
from ..migrations import Migrations
from ..scripts import script
from ._app import app
from ._output import emit
from ._records import collection_of, namespace_keys
from .backup import _progress

__all__ = ["MigrateReport", "load_steps", "migrate_namespace"]

BATCH = 500
_MIGRATE = script("checkpoint_migrate")
EXAMPLES = 5


@dataclass
class MigrateReport:
    upgraded: int = 0  # records written back
    current: int = 0  # records already at the newest schema
    newer: int = 0  # values newer than the registered steps (left as they are)
    newer_keys: list[str] = field(default_factory=list)
    checkpoints: int = 0  # checkpoint states written back
    held: int = 0  # checkpoints older deltas follow: migrated after the next save
    events: int = 0  # event payloads written back (their chains recomputed)
    changed: int = 0  # streams appended to meanwhile: the next run migrates them
    unverified: list[str] = field(default_factory=list)  # event chains left as they are

    def note_newer(self, key: str) -> None:
        self.newer += 1
        if len(self.newer_keys) < EXAMPLES:
            self.newer_keys.append(key)


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
                report.note_newer(key)
        advance(len(batch))
        batch.clear()

    for kind, entity, key in namespace_keys(store):
        if kind == "task":
            _migrate_task(store, entity, report)
            advance(1)
        elif kind == "events":
            _migrate_events(store, entity, report)
            advance(1)
        else:
            batch.append((kind, entity, key))
            if len(batch) >= BATCH:
                flush()
    if batch:
        flush()
    return report


def _migrate_task(store: Store, task_id: str, report: MigrateReport) -> None:
    spec = store.checkpoints.spec
    key, _, log_key = spec.task_keys(task_id)
    triples: list[bytes | str] = []
    for blob in store._conn.lranges((key, 0, -1))[0]:
        try:
            found = spec.migrated_blob(key, blob)
        except SchemaError:
            report.note_newer(key)
            continue
        if found is not None:
            triples.extend(found)
    if triples:
        done = store._conn.script(_MIGRATE, (key, log_key), (spec.schema, *triples))
        report.checkpoints += int(done[0])
        report.held += int(done[1])


def _migrate_events(store: Store, entity: str, report: MigrateReport) -> None:
    key = store.keys.events(entity)
    try:
        report.events += store.events.rewrite(
            entity, lambda schema, data: store.events.spec.migrated(key, schema, data)
        )
    except SchemaError:
        report.note_newer(key)
    except ConflictError:
        report.changed += 1
    except IntegrityError:
        report.unverified.append(key)


@app.command("migrate")
def migrate_command(
    ctx: typer.Context,
    using: str = typer.Option(
        ..., "--using", help="module:function that registers the steps: function(migrations)"
    ),
    as_json: bool = typer.Option(False, "--json", help="one JSON line instead of a table"),
) -> None:
    """Write back every record, checkpoint and audit event stored at an older schema,
    migrated by the steps that --using registers (records by compare-and-set, TTLs
    kept; event chains verified, then recomputed); values newer than those steps are
    reported (exit 1) and left as they are."""
    register = load_steps(using)
    store: Store = ctx.obj.store
    register(store.migrations)
    with _progress("records") as progress:
        task = progress.add_task("migrating", total=None)
        report = migrate_namespace(store, lambda n: progress.advance(task, n))
    row = {
        "upgraded": report.upgraded,
        "current": report.current,
        "newer": report.newer,
        "checkpoints": report.checkpoints,
        "checkpoints held": report.held,
        "events": report.events,
        "changed meanwhile": report.changed,
        "event chains not verified": len(report.unverified),
    }
    emit([row], as_json, f"migrated {store.keys.namespace}")
    if report.newer:
        raise RedistateError(
            f"{report.newer} value(s) are newer than the registered steps, e.g. "
            + ", ".join(report.newer_keys)
        )
    if report.unverified:
        raise RedistateError(
            f"{len(report.unverified)} event chain(s) do not verify and were not "
            f"migrated (see redistate events ENTITY), e.g. {report.unverified[0]}"
        )
