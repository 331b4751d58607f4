"""Edits of an export file's lines, for the tests that craft or damage backups."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Lines = list[Any]  # JSON objects, or raw bytes for a line that is not one
Edit = Callable[[Lines, int], Lines]


def edit_line(kind: str, entity: str, change: Callable[[Any, int], Any]) -> Edit:
    """An edit: ``change(line, now_us)`` replaces the ``kind`` line of ``entity``."""

    def edit(lines: Lines, now_us: int) -> Lines:
        def pick(line: Any) -> bool:
            return bool(line.get("kind") == kind and line.get("id") == entity)

        assert sum(map(pick, lines)) == 1, (kind, entity)
        return [change(dict(line), now_us) if pick(line) else line for line in lines]

    return edit
