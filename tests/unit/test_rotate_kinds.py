"""rotate-keys covers the kind registry: a handler for every kind Op.ROTATE applies to
(a new kind fails here until it is rotated or says why not), and only for parts the
kind owns."""

from __future__ import annotations

from redistate.admin.rotate import HANDLERS
from redistate.core import kinds
from redistate.core.kinds import Op


def test_rotate_handles_exactly_the_kinds_rotation_applies_to() -> None:
    assert set(HANDLERS) == {k for k in kinds.KINDS if k.applies(Op.ROTATE)}


def test_each_handler_is_for_a_part_its_kind_owns() -> None:
    for kind, parts in HANDLERS.items():
        assert parts, kind.name
        assert set(parts) <= set(kind.parts), (kind.name, set(parts) - set(kind.parts))
        assert kinds.WRITES not in parts  # a write memory holds ids, not encoded values
