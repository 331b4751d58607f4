"""``redistate export`` and ``redistate import``: one namespace as a JSON-lines file.

Every kind of stored data goes into the file (redistate.core.kinds: records, tasks with
their step records, fences, audit event streams with their trim anchors, user indexes,
Agents SDK sessions, LangGraph threads) but held leases, lease wake-up lists and write
memories, which belong to running processes and the retry window.

The work is ``store.admin.export()`` and ``store.admin.import_file()`` (redistate.admin:
backup_format is the file format, each kind's ``backup.py`` its lines, backup_async the
streaming I/O); this prints.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from .. import RedistateError, Store
from ..admin import ExportReport, ImportReport
from ..admin.backup_codec import codecs
from ..core import kinds
from ._app import app
from ._output import err

__all__ = ["export_command", "import_command"]


def _progress(unit: str) -> Any:
    """A progress bar on stderr (only on a terminal: not in logs or pipes)."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    counter = DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
    columns = (TextColumn("{task.description}"), BarColumn(), counter, TimeElapsedColumn())
    return Progress(*columns, console=err, disable=not err.is_terminal)


@app.command("export")
def export_command(
    ctx: typer.Context,
    out_file: Annotated[
        Path,
        typer.Option("--out", metavar="FILE", help="the JSON-lines file to write (-: stdout)"),
    ],
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
) -> None:
    """Write the namespace to a JSON-lines file: records (value, version, TTL), task
    checkpoint histories, delta logs and step records, the last fence of each lease
    name, audit event streams with their trim anchors, user indexes (what is
    registered to each user), Agents SDK sessions and LangGraph threads.

    Not exported: held leases (a lease belongs to a running process), lease wake-up
    lists, write memories (<key>:writes, a short-lived memory of resent writes) and the
    staging stream of an event rewrite in progress.
    Each entity is read atomically; the file is not one point-in-time snapshot of the
    whole namespace. Written to FILE.partial, renamed to FILE when complete; with
    --out - to stdout, the summary on stderr.
    """
    store: Store = ctx.obj.store
    if str(out_file) == "-":  # the file on stdout: the summary goes to stderr
        report = store.admin.export(sys.stdout.buffer, lambda n: None)
        sys.stdout.flush()
        _summary(report, as_json, out_file, sys.stderr)
        return
    partial = out_file.with_name(out_file.name + ".partial")
    try:
        with _progress("keys") as bar, open(partial, "wb") as sink:
            task = bar.add_task(f"export {store.keys.namespace}", total=None)
            report = store.admin.export(sink, lambda n: bar.advance(task, n))
        os.replace(partial, out_file)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    _summary(report, as_json, out_file, sys.stdout)


def _summary(report: ExportReport, as_json: bool, out_file: Path, stream: TextIO) -> None:
    """What an export wrote, on ``stream``; a failure if entities were left out."""
    if as_json:
        stream.write(json.dumps(report.as_dict()) + "\n")
    else:
        _print_export(report, out_file, stream)
    if report.damaged_count:
        raise RedistateError(
            f"{_count(report.damaged_count, 'entity')} left out as damaged (the file "
            f"holds the rest): {report.damaged[0]}"
        )


def _print_export(report: ExportReport, out_file: Path, stream: TextIO) -> None:
    total = _count(sum(report.entities.values()), "entity")
    what = _kinds(report.entities, report.steps)
    where = "stdout" if str(out_file) == "-" else out_file
    _say(f"exported {total} ({what}) of namespace {report.namespace!r} to {where}", stream)
    if report.not_exported:
        left = _count(report.not_exported, "key")
        _say(
            f"left out {left} a restore does not need or rebuilds (held leases, wake"
            " lists, write memories, the LangGraph store's registry)",
            stream,
        )
    for name, count in sorted(report.left_out.items()):
        kind = kinds.by_name(name)
        _say(
            f"NOT EXPORTED: {_count(count, 'key')} of {kind.title} ({name}): "
            f"{kind.skips[kinds.Op.EXPORT]}",
            stream,
        )
    if report.unknown_count:
        examples = ", ".join(report.unknown)
        _say(
            f"left out {report.unknown_count} keys redistate does not recognise: {examples}",
            stream,
        )
    for damaged in report.damaged:
        _say(f"left out as damaged: {damaged}", stream)


def _kinds(counts: dict[str, int], steps: int) -> str:
    """The kinds of a report, e.g. "1 record, 2 tasks (3 step records)": those every
    file had since format 1 (records, tasks, fences) always, the others when there are
    any."""
    out = []
    for codec in codecs():
        n = counts.get(codec.name, 0)
        if n or codec.since == 1:
            out.append(f"{n} {codec.one if n == 1 else codec.many}")
            if codec.name == kinds.TASK.name and steps:
                out[-1] += f" ({_count(steps, 'step record')})"
    return ", ".join(out)


def _count(n: int, what: str) -> str:
    if n == 1:
        return f"1 {what}"
    if what == "entity":
        return f"{n} entities"
    return f"{n} {what}es" if what.endswith("x") else f"{n} {what}s"


def _say(text: str, stream: TextIO | None = None) -> None:
    (stream or sys.stdout).write(text + "\n")  # plain: keys and ids are printed as they are


@app.command("import")
def import_command(
    ctx: typer.Context,
    file: Annotated[
        Path,
        typer.Argument(exists=True, dir_okay=False, metavar="FILE", help="a file made by export"),
    ],
    force: bool = typer.Option(False, "--force", help="overwrite newer stored entities too"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
) -> None:
    """Import an export file into the namespace given by --namespace, else the file's.

    Each entity is written atomically by a script that compares versions on the server:
    a record whose stored version is newer, or a task whose newest checkpoint is newer
    (or equal, with more deltas), is left as it is and reported (exit code 1) unless
    --force; so is an event stream that ends elsewhere than the file's, an Agents SDK
    session or a LangGraph thread that differs from the file's (the same one is left
    as it is and counted as imported). An import deletes nothing the file does not
    replace: step records are merged (one the store lacks is written, even beside a
    refused task; --force overwrites stored ones), user indexes are a union. Fence keys
    are set to the higher of stored and exported, never lowered (not even with
    --force), and expire an hour after the server's clock passed them. TTLs continue
    from the export: what expired since is not imported. The whole file is checked
    first against the store (codec, digests and seals, event chains, versions, fences,
    stream ids and times at most an hour past the server's clock, record kinds,
    shapes): a bad line imports nothing. Importing a file again is harmless (equal
    versions, the same tasks, streams, sessions and threads are left as they are, so a
    file older than a rotate-keys puts no old-key ciphertext back; step records kept).
    Held leases, wake-up lists and write memories are not in an export. A codec that
    binds values to their key (encryption with the key as context) reads them only in
    the namespace they were written in.
    """
    store: Store = ctx.obj.store
    with _progress("bytes") as bar:
        task = bar.add_task(f"import {file.name}", total=2 * file.stat().st_size)
        report = store.admin.import_file(
            file,
            namespace=ctx.obj.namespace if ctx.obj.namespace_given else None,
            force=force,
            progress=lambda n: bar.advance(task, n),
        )
    if as_json:
        sys.stdout.write(json.dumps(report.as_dict()) + "\n")
    else:
        _print_import(report)
    if report.failed_count:
        raise RedistateError(f"{_count(report.failed_count, 'entity')} could not be imported")
    if report.refused_count:
        raise RedistateError(
            f"refused to overwrite {_count(report.refused_count, 'entity')} newer in the "
            f"store or different from the file (--force overwrites)"
        )


def _print_import(report: ImportReport) -> None:
    total = _count(sum(report.imported.values()), "entity")
    what = _kinds(report.imported, report.steps)
    _say(f"imported {total} ({what}) into namespace {report.namespace!r}")
    if report.refused_count:
        more = ", …" if report.refused_count > len(report.refused) else ""
        examples = ", ".join(report.refused)
        _say(f"skipped {report.refused_count} as newer in the store or different: {examples}{more}")
    if report.expired:
        _say(f"skipped {report.expired} whose TTL ran out since the export")
    if report.fences_kept:
        _say(f"kept {_count(report.fences_kept, 'fence')} already as high or higher")
    for failure in report.failed:
        _say(f"failed: {failure}")
