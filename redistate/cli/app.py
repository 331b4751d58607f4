"""``redistate [--url URL] [--namespace NS] COMMAND``: look into a namespace.

Listings print a table, or JSON lines with ``--json``. Errors are one line on stderr:
exit code 2 for a usage error, 1 for a failure (an unreachable server names its
address). Without ``--url`` (or ``REDISTATE_URL``) an empty in-process store is used.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from .. import RedistateError, Store
from ..errors import InvalidId
from ..records import ttl_seconds

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_enable=False
)
KINDS = {"sessions": "session", "users": "user", "tasks": "task"}


class Context:
    def __init__(self, url: str | None, namespace: str) -> None:
        self.url = url
        self.namespace = namespace
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            if self.url:
                self._store = Store.from_url(self.url, namespace=self.namespace, timeout=3)
            else:
                self._store = Store.embedded(namespace=self.namespace)
        return self._store


_context: Context | None = None  # this run's, for the error message of a failed call


@app.callback()
def options(
    ctx: typer.Context,
    url: str | None = typer.Option(None, envvar="REDISTATE_URL", help="redis://… URL"),
    namespace: str = typer.Option("redistate", help="the namespace to look into"),
) -> None:
    global _context
    ctx.obj = _context = Context(url, namespace)


def _emit(rows: list[dict[str, Any]], as_json: bool, title: str) -> None:
    if as_json:
        for row in rows:
            sys.stdout.write(json.dumps(row, default=str) + "\n")
        return
    table = Table(title=title)
    for column in rows[0] if rows else ["(none)"]:
        table.add_column(column)
    for row in rows:
        table.add_row(*("-" if v is None else str(v) for v in row.values()))
    Console().print(table)


def _ttl(pttl: int) -> float | None:
    left = ttl_seconds(pttl)
    return None if left is None or math.isinf(left) else round(left, 1)


@app.command("ls")
def list_entities(
    ctx: typer.Context,
    kind: str = typer.Argument("sessions", help="sessions, users, tasks or a collection"),
    as_json: bool = typer.Option(False, "--json", help="JSON lines instead of a table"),
) -> None:
    """Every entity of a kind (SCAN): id, size in bytes, seconds left (- for none)."""
    store: Store = ctx.obj.store
    name = KINDS.get(kind, kind)
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
                "ttl_s": _ttl(int(raw.pttl(key))),
            }
        )
    rows.sort(key=lambda r: str(r["id"]))
    _emit(rows, as_json, f"{kind} in {store.keys.namespace}")


@app.command()
def show(
    ctx: typer.Context,
    kind: str = typer.Argument(..., help="sessions, users or a collection"),
    entity: str = typer.Argument(..., metavar="ID"),
) -> None:
    """One record: its data (JSON), version and expiry."""
    store: Store = ctx.obj.store
    name = KINDS.get(kind, kind)
    collection = {"session": store.sessions, "user": store.users}.get(name)
    record = (collection or store.collection(name)).get(entity)
    if record is None:
        raise RedistateError(f"no {name} {entity!r} in namespace {store.keys.namespace!r}")
    expires = None if record.expires_at is None else record.expires_at.isoformat()
    out = {"id": record.id, "version": record.version, "expires_at": expires}
    sys.stdout.write(json.dumps({**out, "data": record.data}, indent=2, default=str) + "\n")


@app.command()
def checkpoints(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="the task id"),
    as_json: bool = typer.Option(False, "--json", help="JSON lines instead of a table"),
) -> None:
    """A task's checkpoint history, newest first."""
    store: Store = ctx.obj.store
    rows = [
        {
            "seq": cp.seq,
            "id": cp.id,
            "created": cp.created_at.isoformat(timespec="seconds"),
            "phase": cp.phase,
            "progress": cp.progress,
            "fence": cp.fence,
        }
        for cp in store.checkpoints.history(task)
    ]
    _emit(rows, as_json, f"checkpoints of {task}")


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
        token, _, fence = value.decode().partition(",")
        rows.append(
            {"name": name, "holder": token[:8], "fence": int(fence), "ttl_s": _ttl(raw.pttl(key))}
        )
    rows.sort(key=lambda r: str(r["name"]))
    _emit(rows, as_json, f"leases in {store.keys.namespace}")


def main() -> None:
    """Console entry point: one-line errors, exit 1 for failures (usage errors: 2)."""
    from redis.exceptions import RedisError

    from .._translate import translate

    try:
        app()  # exits 2 itself on a usage error
    except RedistateError as exc:
        sys.stderr.write(f"redistate: {exc}\n")
        sys.exit(1)
    except (RedisError, OSError) as exc:
        sys.stderr.write(f"redistate: {translate(exc, _address())}\n")
        sys.exit(1)


def _address() -> str:
    """The server a failed command was talking to, for its error message."""
    store = None if _context is None else _context._store
    return "embedded" if store is None else store._conn.address
