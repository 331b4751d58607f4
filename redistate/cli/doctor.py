"""``redistate doctor``: each server's eviction, persistence and replication facts, and
what each means for redistate's guarantees.

Exit 1 when a guarantee does not hold: an eviction policy other than ``noeviction`` (or
one that cannot be read), or a replica instead of a primary. Persistence and
replication gaps (no AOF, fsync every second, no min-replicas-to-write) lose data in a
crash or failover but break no promise redistate makes by itself: they are reported as
"warn" and fail only with ``--strict``.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.table import Table

from ..core.server import ServerFacts
from ._app import app
from ._output import out

__all__ = ["doctor"]

_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def _table(facts: ServerFacts) -> Table:
    where = facts.address + (f" ({facts.version})" if facts.version else "")
    source = {"config": "CONFIG GET", "info": "INFO (CONFIG denied or renamed)"}
    read = source.get(facts.source, "nothing readable" if facts.source == "none" else "")
    table = Table(title=f"{where}: read by {read}" if read else where)
    for column in ("fact", "value", "status", "meaning"):
        table.add_column(column, overflow="fold")
    for f in facts.findings():
        style = _STYLE[f.status]
        table.add_row(f.name, f.value, f"[{style}]{f.status}[/{style}]", f.meaning)
    return table


@app.command()
def doctor(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per server")] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="exit 1 on warnings (persistence) too")
    ] = False,
) -> None:
    """Each server's eviction policy, persistence and replication (a cluster: every
    primary), and what each means for redistate's guarantees. Exit 1 when one does
    not hold (eviction policy not noeviction or unknown; a replica); --strict also
    on warnings (no AOF, fsync every second, no min-replicas-to-write)."""
    ctx.obj.server_check = "off"  # the facts are this command's output, not a warning
    found = ctx.obj.store.server_facts()
    statuses = {f.status for facts in found for f in facts.findings()}
    if as_json:
        import json

        for facts in found:
            sys.stdout.write(json.dumps(facts.row()) + "\n")
    else:
        for facts in found:
            out.print(_table(facts))
    if "fail" in statuses or (strict and "warn" in statuses):
        raise typer.Exit(1)
