"""The migration registry alone: registering steps, and running them in order."""

from __future__ import annotations

from typing import Any

import pytest

from redistate import Migrations, SchemaError


def test_steps_run_in_order_to_the_current_schema() -> None:
    m = Migrations()
    assert m.current("user") == 1
    m.register("users", 1, lambda d: {**d, "trail": [*d.get("trail", []), 2]})
    m.register("user", 2, lambda d: {**d, "trail": [*d["trail"], 3]})
    assert m.current("user") == 3 and m.current("session") == 1
    assert m.upgrade("user", 1, {}, "here") == {"trail": [2, 3]}
    assert m.upgrade("user", 2, {"trail": [2]}, "here") == {"trail": [2, 3]}
    assert m.upgrade("user", 3, {"same": 1}, "here") == {"same": 1}


def test_a_value_newer_than_the_code_is_refused_by_name() -> None:
    m = Migrations()
    m.register("notes", 1, lambda d: d)
    with pytest.raises(SchemaError, match="value at 'k' has schema 5, newer than this code"):
        m.upgrade("notes", 5, {}, "value at 'k'")


def test_a_value_older_than_the_first_step_is_refused() -> None:
    m = Migrations()
    m.register("notes", 3, lambda d: d)
    with pytest.raises(SchemaError, match="has schema 1, but 'notes' has no step from 1"):
        m.upgrade("notes", 1, {}, "value at 'k'")


@pytest.mark.parametrize(
    ("kind", "version", "fn", "error", "message"),
    [
        ("users", 0, lambda d: d, ValueError, "from 1 to"),
        ("users", True, lambda d: d, ValueError, "must be an int"),
        ("users", 1.5, lambda d: d, ValueError, "must be an int"),
        ("users", 1, "not callable", TypeError, "must be callable"),
        ("bad kind!", 1, lambda d: d, ValueError, "bad kind"),
    ],
)
def test_bad_steps_are_refused(
    kind: str, version: Any, fn: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        Migrations().register(kind, version, fn)


def test_a_step_twice_or_with_a_gap_is_refused() -> None:
    m = Migrations()
    m.register("users", 2, lambda d: d)
    with pytest.raises(ValueError, match="already has a step from version 2"):
        m.register("users", 2, lambda d: d)
    with pytest.raises(ValueError, match="would leave a gap"):
        m.register("users", 5, lambda d: d)
    m.register("users", 1, lambda d: d)  # before the first: no gap
    m.register("users", 3, lambda d: d)
    assert m.current("user") == 4
