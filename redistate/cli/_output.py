"""How commands print: rich tables for people, JSON lines for scripts."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from ..records.spec import ttl_seconds

__all__ = ["emit", "err", "out", "ttl"]

out = Console()
err = Console(stderr=True)


def emit(rows: list[dict[str, Any]], as_json: bool, title: str) -> None:
    """A table of ``rows`` (dicts with the same keys), or one JSON object a line."""
    if as_json:
        for row in rows:
            sys.stdout.write(json.dumps(row, default=str) + "\n")
        return
    table = Table(title=title)
    for column in rows[0] if rows else ["(none)"]:
        table.add_column(column)
    for row in rows:
        table.add_row(*("-" if v is None else str(v) for v in row.values()))
    out.print(table)


def ttl(pttl: int) -> float | None:
    """Seconds left from a PTTL reply, rounded; None for a key without expiry."""
    left = ttl_seconds(pttl)
    return None if left is None or math.isinf(left) else round(left, 1)
