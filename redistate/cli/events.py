"""``redistate events ENTITY``: an entity's audit events, and whether the chain holds."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

from .. import RedistateError, Store
from ._app import app
from ._output import emit

__all__ = ["events_command"]

SHOWN = 80  # payload characters in the table, … marking a cut (--json has them whole)


@app.command("events")
def events_command(
    ctx: typer.Context,
    entity: str = typer.Argument(..., help="the entity id (a task, a user...)"),
    as_json: bool = typer.Option(False, "--json", help="JSON lines instead of a table"),
) -> None:
    """List ENTITY's events, oldest first, and verify their hash chain (from the trim
    anchor, if trimmed): exit 1 naming the first bad event if it is broken."""
    store: Store = ctx.obj.store
    check = store.events.verify(entity)
    rows: list[dict[str, Any]] = []
    for event in store.events.read(entity) if check.ok else []:
        payload = json.dumps(event.payload, ensure_ascii=False, default=str)
        if len(payload) > SHOWN:
            payload = payload[: SHOWN - 1] + "…"
        rows.append(
            {
                "id": event.id,
                "seq": event.seq,
                "type": event.type,
                "at": event.at.isoformat(timespec="milliseconds"),
                "payload": event.payload if as_json else payload,
                "digest": event.digest if as_json else event.digest[:12],
            }
        )
    if not check.ok:
        for line in check.problems:
            sys.stderr.write(f"  {line}\n")
        raise RedistateError(
            f"events of {entity!r} do not verify: first bad {check.first_bad} "
            f"({check.count} checked)"
        )
    if check.count == 0:
        raise RedistateError(f"no events of {entity!r} in namespace {store.keys.namespace!r}")
    emit(rows, as_json, f"events of {entity} ({check.count}, chain verified)")
