"""How commands print: rich tables for people, JSON lines for scripts.

What comes from the store (ids, phases, event types, payloads, holders...) is shown as
it is: every cell and title goes through ``shown``, a ``Text`` that Rich neither parses
for markup (``[red]``) nor for emoji codes (``:fire:``), with control characters
escaped so that a value cannot move the cursor or recolour the terminal. Columns fold
instead of truncating: an id is never cut.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..records.spec import ttl_seconds

__all__ = ["dumps", "emit", "err", "lines", "out", "readable_json", "shown", "table", "ttl"]

out = Console(emoji=False, highlight=False)
err = Console(stderr=True, emoji=False, highlight=False)

# C0 and C1 control characters and DEL, shown as Python escapes (\x1b, \n, \t).
_CONTROL = {c: chr(c).encode("unicode_escape").decode() for c in (*range(32), *range(127, 160))}


def shown(value: Any, style: str = "") -> Text:
    """``value`` as literal text for a table cell or a line: ``-`` for None."""
    text = "-" if value is None else str(value)
    return Text(text.translate(_CONTROL), style=style)


def lines(text: str) -> str:
    """``text`` (markdown, say) to write as it is: its newlines kept, every other
    control character escaped as in :func:`shown`."""
    return "\n".join(line.translate(_CONTROL) for line in text.split("\n"))


# json.dumps escapes C0 itself; with ensure_ascii=False DEL and C1 (U+009B is a CSI)
# would pass raw: JSON escapes for them keep the text valid JSON.
_JSON_CONTROL = {c: f"\\u{c:04x}" for c in range(127, 160)}


def readable_json(value: Any) -> str:
    """``value`` as indented JSON for people: its text as it is, no control character
    raw."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return text.translate(_JSON_CONTROL)


def table(title: str, columns: list[str]) -> Table:
    """A table whose columns fold (never truncate) and whose title fits unbroken on
    one line when the terminal is wide enough for it."""
    heading = shown(title)
    found = Table(title=heading, min_width=min(heading.cell_len + 4, out.width))
    for column in columns:
        found.add_column(shown(column), overflow="fold")
    return found


def emit(rows: list[dict[str, Any]], as_json: bool, title: str, *, vertical: bool = False) -> None:
    """A table of ``rows`` (dicts with the same keys), or one JSON object a line.
    ``vertical``: one row of many fields (a report) as a field-and-value table, which
    stays readable at 80 columns however many fields it has."""
    if as_json:
        for row in rows:
            sys.stdout.write(dumps(row) + "\n")
        return
    if vertical and len(rows) == 1:
        found = table(title, ["", "count"])
        for name, value in rows[0].items():
            found.add_row(shown(name), shown(value))
        out.print(found)
        return
    found = table(title, list(rows[0]) if rows else ["(none)"])
    for row in rows:
        found.add_row(*(shown(v) for v in row.values()))
    out.print(found)


def dumps(value: Any, indent: int | None = None) -> str:
    """JSON of ``value``; what JSON has no type for (datetimes) as its str."""
    return json.dumps(value, indent=indent, default=str)


def ttl(pttl: int) -> float | None:
    """Seconds left from a PTTL reply, rounded; None for a key without expiry."""
    left = ttl_seconds(pttl)
    return None if left is None or math.isinf(left) else round(left, 1)
