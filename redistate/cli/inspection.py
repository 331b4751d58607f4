"""Commands that read a namespace: ls, show, checkpoints, locks, restore, handoff,
verify."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Annotated, Any

import typer

from .. import RedistateError, Store
from ..admin.stats import ALIASES
from ..checkpoints.spec import Restored, Verification
from ..core.errors import IntegrityError, InvalidId
from ..core.kinds import STEPS, TASK
from ..leases.spec import holder_fence
from ._app import app
from ._output import dumps, emit, lines, readable_json, ttl

JSON_HELP = "one JSON line instead of indented JSON"


@app.command("ls")
def list_entities(
    ctx: typer.Context,
    kind: str = typer.Argument("sessions", help="sessions, users, tasks or a collection"),
    as_json: bool = typer.Option(False, "--json", help="JSON lines instead of a table"),
) -> None:
    """Every entity of a kind (SCAN): id, size in bytes, seconds left (- for none)."""
    store: Store = ctx.obj.store
    name = ALIASES.get(kind, kind)
    raw: Any = store.client
    rows: list[dict[str, Any]] = []
    pattern = store.keys.record_pattern(name)
    for key in raw.scan_iter(match=pattern, count=1000):
        try:
            entity = store.keys.record_id(name, key)
        except InvalidId:
            continue  # a foreign key that only looks like ours
        size = int(raw.llen(key) if name == "task" else raw.strlen(key))
        rows.append(
            {
                "id": entity,
                ("checkpoints" if name == "task" else "bytes"): size,
                "ttl_s": ttl(int(raw.pttl(key))),
            }
        )
    rows.sort(key=lambda r: str(r["id"]))
    emit(rows, as_json, f"{kind} in {store.keys.namespace}")


@app.command()
def show(
    ctx: typer.Context,
    kind: str = typer.Argument(..., help="sessions, users or a collection"),
    entity: str = typer.Argument(..., metavar="ID"),
    using: str | None = typer.Option(
        None,
        "--using",
        metavar="MODULE:FUNCTION",
        help="registers the migration steps (as migrate --using): reads newer schemas",
    ),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """One record: its data (JSON), version and expiry."""
    register = None
    if using is not None:
        from .migrate import load_steps

        register = load_steps(using)  # a bad --using is named before connecting
    store: Store = ctx.obj.store
    if register is not None:
        register(store.migrations)
    name = ALIASES.get(kind, kind)
    collection = {"session": store.sessions, "user": store.users}.get(name)
    record = (collection or store.collection(name)).get(entity)
    if record is None:
        raise RedistateError(f"no {name} {entity!r} in namespace {store.keys.namespace!r}")
    expires = None if record.expires_at is None else record.expires_at.isoformat()
    out = {"id": record.id, "version": record.version, "expires_at": expires}
    _print_json({**out, "data": record.data}, as_json)


def _print_json(value: dict[str, Any], as_json: bool) -> None:
    """``value`` as one JSON line (--json), else indented with its text as it is."""
    if as_json:
        sys.stdout.write(dumps(value) + "\n")
    else:
        sys.stdout.write(readable_json(value) + "\n")


@app.command()
def checkpoints(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="the task id"),
    as_json: bool = typer.Option(False, "--json", help="JSON lines instead of a table"),
) -> None:
    """A task's checkpoint history, newest first."""
    store: Store = ctx.obj.store
    history = store.checkpoints.history(task)
    if not history and store.checkpoints.restore(task) is None:
        raise RedistateError(f"no task {task!r} in namespace {store.keys.namespace!r}")
    rows = [
        {
            "seq": cp.seq,
            "id": cp.id,
            "created": cp.created_at.isoformat(timespec="seconds"),
            "phase": cp.phase,
            "progress": cp.progress,
            "fence": cp.fence,
        }
        for cp in history
    ]
    emit(rows, as_json, f"checkpoints of {task}")


@app.command()
def locks(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="JSON lines instead of a table"),
) -> None:
    """Every lease held: name, holder (token prefix), fence, seconds left."""
    store: Store = ctx.obj.store
    raw: Any = store.client
    rows: list[dict[str, Any]] = []
    for key in raw.scan_iter(match=store.keys.record_pattern("lock"), count=1000):
        try:
            name = store.keys.record_id("lock", key)
        except InvalidId:
            continue
        value = raw.get(key)
        if value is None:
            continue  # expired between SCAN and GET
        token = value.decode("utf-8", "replace").partition(",")[0]
        fence = holder_fence(value)  # None: a value redistate did not write
        rows.append(
            {"name": name, "holder": token[:8], "fence": fence, "ttl_s": ttl(raw.pttl(key))}
        )
    rows.sort(key=lambda r: str(r["name"]))
    emit(rows, as_json, f"leases in {store.keys.namespace}")


def _task_ids(store: Store) -> list[str]:
    """Every task with any key (a task may hold only a delta log)."""
    found = set()
    for key in store.admin.scan():
        if key.kind in (TASK, STEPS):
            found.add(key.id)
    return sorted(found)


def _restored(store: Store, task: str) -> Restored:
    """What ``restore`` finds of ``task``; a failure when there is no such task, or
    its entries were skipped for being encrypted with no REDISTATE_KEYS to read them."""
    from ._keys import encrypted_without_keys

    restored = store.checkpoints.restore(task)
    if restored is None:
        raise RedistateError(f"no task {task!r} in namespace {store.keys.namespace!r}")
    kid = encrypted_without_keys(store.codec)
    if restored.skipped and kid is not None:
        raise RedistateError(
            f"task {task!r} in namespace {store.keys.namespace!r} is encrypted (key "
            f'{kid!r}): set REDISTATE_KEYS ("{kid}=<base64>") to read it'
        )
    return restored


@app.command()
def restore(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="the task id"),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """What a new owner of TASK would resume from (JSON): the newest intact checkpoint
    plus the deltas after it, and whether anything had to be skipped."""
    store: Store = ctx.obj.store
    restored = _restored(store, task)
    cp = restored.checkpoint
    out = {
        "task": task,
        "complete": restored.complete,
        "torn": restored.torn,  # a list of the task was lost: the next save repairs it
        "skipped": list(restored.skipped),
        "checkpoint": None
        if cp is None
        else {
            "id": cp.id,
            "seq": cp.seq,
            "created": cp.created_at.isoformat(timespec="milliseconds"),
            "phase": cp.phase,
            "progress": cp.progress,
            "fence": cp.fence,
        },
        "deltas_applied": restored.deltas_applied,
        "state": restored.state,
    }
    _print_json(out, as_json)


@app.command()
def handoff(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="the task id"),
    as_json: bool = typer.Option(
        False, "--json", help='one JSON line: {"task": TASK, "markdown": the summary}'
    ),
) -> None:
    """A markdown summary of where TASK stands, for the next owner (or a person)."""
    store: Store = ctx.obj.store
    _restored(store, task)
    markdown = store.checkpoints.handoff(task)
    if as_json:
        sys.stdout.write(dumps({"task": task, "markdown": markdown}) + "\n")
    else:
        sys.stdout.write(lines(markdown))  # ids, phases, notes: no raw control characters


@app.command()
def verify(
    ctx: typer.Context,
    tasks: Annotated[
        list[str] | None, typer.Argument(help="task ids (default: every task)")
    ] = None,
    as_json: bool = typer.Option(False, "--json", help="JSON lines instead of a table"),
) -> None:
    """Check the SHA-256 digest of every checkpoint and delta; exit 1 if any is damaged."""
    store: Store = ctx.obj.store
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for task in tasks or _task_ids(store):
        try:
            found = store.checkpoints.verify(task)
        except IntegrityError as exc:  # WRONGTYPE: a foreign value under a task's key
            found = Verification(False, 0, None, (f"task {task!r}: {exc}",))
        if tasks and found.count == 0:
            problems.append(f"no task {task!r} in namespace {store.keys.namespace!r}")
            found = replace(found, ok=False)
        rows.append(
            {"task": task, "entries": found.count, "ok": found.ok, "first_bad": found.first_bad}
        )
        problems += found.problems
    emit(rows, as_json, f"checkpoints verified in {store.keys.namespace}")
    if problems:
        for line in problems:
            sys.stderr.write(f"  {line}\n")
        bad = sum(1 for row in rows if not row["ok"])
        raise RedistateError(f"verify: {bad} of {len(rows)} tasks failed")
