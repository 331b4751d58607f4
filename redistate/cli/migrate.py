"""``redistate migrate --using MODULE:FUNCTION``: bring a namespace up to date.

The migration steps are the application's code: ``FUNCTION(migrations)`` registers them
on the store's registry, as the application does at start-up. The work is
``store.admin.migrate()`` (redistate.admin.migrate); this prints the report.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

import typer

from .. import RedistateError, Store
from ..core.migrations import Migrations
from ._app import app
from ._output import emit
from .backup import _progress

__all__ = ["load_steps", "migrate_command"]


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


@app.command("migrate")
def migrate_command(
    ctx: typer.Context,
    using: str = typer.Option(
        ..., "--using", help="module:function that registers the steps: function(migrations)"
    ),
    as_json: bool = typer.Option(False, "--json", help="one JSON line instead of a table"),
) -> None:
    """Write back every record, checkpoint, audit event and ADK event stored at an older
    schema, migrated by the steps that --using registers (records by compare-and-set,
    TTLs kept; event chains verified, then recomputed; ADK events checked by the
    installed ADK); values newer than those steps, or that a step made invalid, are
    reported (exit 1) and left as they are."""
    register = load_steps(using)
    store: Store = ctx.obj.store
    register(store.migrations)
    with _progress("records") as progress:
        task = progress.add_task("migrating", total=None)
        report = store.admin.migrate(lambda n: progress.advance(task, n))
    row = {
        "upgraded": report.upgraded,
        "current": report.current,
        "newer": report.newer,
        "checkpoints": report.checkpoints,
        "checkpoints held": report.held,
        "events": report.events,
        "ADK events": report.adk_events,
        "changed meanwhile": report.changed,
        "event chains not verified": len(report.unverified),
        "invalid after the steps": report.invalid,
    }
    emit([row], as_json, f"migrated {store.keys.namespace}", vertical=True)
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
    if report.invalid:
        raise RedistateError(
            f"{report.invalid} value(s) were left as they are: the steps made something "
            "that cannot be stored or read, e.g. " + "; ".join(report.invalid_examples)
        )
