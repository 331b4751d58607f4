"""rotate-keys covers the kind registry: a handler in the kind's own folder
(``redistate.<home>.rotate_async.ROTATE[kind.name]``) for every kind Op.ROTATE applies
to (a new kind fails here until it is rotated or says why not), none for the others,
and only for parts the kind owns."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import pytest

from redistate.core import kinds
from redistate.core.kinds import Kind, Op


def rotations(kind: Kind, module: str = "rotate_async") -> Mapping[str, Any] | None:
    """The kind's folder's ROTATE table (None: the folder has no such module)."""
    try:
        found: ModuleType = importlib.import_module(f"redistate.{kind.home}.{module}")
    except ModuleNotFoundError:
        return None
    table: Mapping[str, Any] = found.ROTATE
    return table


@pytest.mark.parametrize("kind", kinds.KINDS, ids=lambda k: k.name)
def test_a_handler_exactly_where_rotation_applies(kind: Kind) -> None:
    table = rotations(kind)
    assert (table is not None and kind.name in table) == kind.applies(Op.ROTATE)


@pytest.mark.parametrize("kind", kinds.KINDS, ids=lambda k: k.name)
def test_the_sync_twin_has_the_same_handlers(kind: Kind) -> None:
    table, twin = rotations(kind), rotations(kind, "rotate")
    assert (table is None) == (twin is None)
    if table is not None and twin is not None:
        assert {k: set(v) for k, v in table.items()} == {k: set(v) for k, v in twin.items()}


def test_each_folder_rotates_only_kinds_that_live_there() -> None:
    for kind in kinds.KINDS:
        for name in rotations(kind) or {}:
            assert kinds.by_name(name).home == kind.home, (kind.home, name)


def test_each_handler_is_for_a_part_its_kind_owns() -> None:
    for kind in kinds.KINDS:
        parts = (rotations(kind) or {}).get(kind.name)
        if parts is None:
            continue
        assert parts, kind.name
        assert set(parts) <= set(kind.parts), (kind.name, set(parts) - set(kind.parts))
        assert kinds.WRITES not in parts  # a write memory holds ids, not encoded values


def test_the_loop_finds_them() -> None:
    from redistate.admin import rotate, rotate_async

    for kind in kinds.KINDS:
        if kind.applies(Op.ROTATE):
            assert set(rotate_async.handlers(kind)) == set(rotate.handlers(kind))
            assert rotate.handlers(kind) is rotate.handlers(kind)  # cached
