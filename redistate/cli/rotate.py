"""``redistate rotate-keys``: re-encrypt a namespace with the primary key and seal it
anew with the signing primary. The work is ``store.admin.rotate_keys()``
(redistate.admin.rotate, which says what is rotated and what is not); this prints it."""

from __future__ import annotations

import typer

from .. import RedistateError, Store
from ._app import app
from ._output import emit

__all__ = ["rotate_keys"]


@app.command("rotate-keys")
def rotate_keys(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="one JSON line instead of a table"),
) -> None:
    """Re-encrypt every record, checkpoint, delta, step record, audit event, Agents SDK
    session item, LangGraph store item and ADK state value and event of the namespace
    with the primary key of REDISTATE_KEYS (versions, TTLs and fences kept; event chains
    verified, then recomputed); with REDISTATE_SIGNING_KEYS, seal them anew with the
    signing primary (data written before signing included). LangGraph threads are not
    (LangGraph's serializer packs them). Run it again until it rewrites nothing; then
    the old keys can be dropped."""
    store: Store = ctx.obj.store
    report = store.admin.rotate_keys()
    moved = ", ".join(f"{k}: {n}" for k, n in sorted(report.old_keys.items())) or "none"
    row = {
        "records": report.records,
        "checkpoints": report.checkpoints,
        "deltas": report.deltas,
        "steps": report.steps,
        "agent items": report.agent_items,
        "store items": report.memory_items,
        "ADK values": report.adk_values,
        "Claude values": report.claude_values,
        "Pydantic AI values": report.pydantic_values,
        "already current": report.current,
        "changed meanwhile": report.changed,
        "moved off": moved,
        "events": report.events,
        "event chains not verified": len(report.unverified),
    }
    primary = getattr(store.codec, "primary", None)
    sealer = None if store.signing is None else store.signing.primary
    named = (("key", primary), ("signing key", sealer))
    to = ", ".join(f"{what} {kid}" for what, kid in named if kid)
    emit([row], as_json, f"rotated {store.keys.namespace} to {to}", vertical=True)
    if report.unverified:
        raise RedistateError(
            f"{len(report.unverified)} event chain(s) do not verify and were not "
            f"re-encrypted (see redistate events ENTITY), e.g. {report.unverified[0]}"
        )
