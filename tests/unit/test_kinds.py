"""The kind registry: every key redistate builds belongs to exactly one kind, and every
kind says, for each maintenance operation, that it handles it or why not."""

from __future__ import annotations

import inspect
from collections import Counter

import pytest

from redistate.core import kinds
from redistate.core.keys import KeySpace
from redistate.core.kinds import KINDS, RESERVED, Op, claim

# Builders that return a pattern, parse a key or build from another key.
NOT_BUILDERS = {"parse", "record_id", "record_pattern", "graph_pattern", "namespace_pattern",
                "writes", "key", "task_keys"}  # fmt: skip


def built_keys(keys: KeySpace) -> dict[str, str]:
    """Every key a KeySpace builder makes (one id each), with its write memory."""
    out: dict[str, str] = {}
    for name, method in inspect.getmembers(keys, inspect.ismethod):
        if name.startswith("_") or name in NOT_BUILDERS:
            continue
        params = list(inspect.signature(method).parameters)
        if name == "record":
            out["record:notes"] = method("notes", "a")
            out["record:session"] = method("session", "a")
            out["record:user"] = method("user", "a")
        elif name == "graph_thread":
            for part in kinds.GRAPH_PARTS:
                out[f"graph_thread:{part}"] = method("a", part)
        elif name == "memory":
            for part in ("", "exp", "tomb"):
                out[f"memory:{part}"] = method("a.b", part)
        elif name in ("adk_session", "adk_user", "adk_app"):
            parts = {"adk_session": ("", "events"), "adk_user": ("", "sessions"),
                     "adk_app": ("", "users")}[name]  # fmt: skip
            for part in parts:
                out[f"{name}:{part}"] = method("a", part)
        elif name == "claude_session":
            for part in ("", "log", "subs"):
                out[f"{name}:{part}"] = method("p/s", part)
        elif name == "conversation":
            for part in ("", "entries", "parents"):
                out[f"{name}:{part}"] = method("c", part)
        elif name == "conversations":
            out["conversations:all"] = method(None)
            out["conversations:scope"] = method("u")
        elif name == "memory_names":
            for part in ("", "gens"):
                out[f"memory_names:{part}"] = method(part)
        else:
            assert len(params) == 1, (name, params)
            out[name] = method("a")
    for name in ("record:notes", "record:session", "record:user", "task", "events", "lock",
                 "agent_session", "memory:", "adk_session:", "adk_user:", "adk_app:",
                 "claude_session:"):  # fmt: skip
        out[f"{name}:writes"] = keys.writes(out[name])
    return out


def test_every_key_a_builder_makes_belongs_to_exactly_one_kind() -> None:
    keys = KeySpace("ns")
    owners: dict[str, kinds.Kind] = {}
    for name, key in built_keys(keys).items():
        kind, _, part = keys.parse(key)
        found = claim(kind, part)
        assert found is not None, f"{name} ({key}) is claimed by no kind"
        owners[name] = found
    # No (key kind, part) is claimed twice.
    pairs = Counter((k.key, part) for k in KINDS for part in k.parts)
    assert [pair for pair, n in pairs.items() if n > 1] == []
    # And every claimed pair is one the builders make: no kind claims keys nobody writes.
    made = {keys.parse(key)[::2] for key in built_keys(keys).values()}
    claimed = {(k.key, part) for k in KINDS for part in k.parts}
    collection = {(kinds.ANY, part) for part in kinds.COLLECTION.parts}
    assert claimed - collection <= made
    assert {k.name for k in owners.values()} == {k.name for k in KINDS}


def test_unknown_kinds_and_parts_are_claimed_by_none() -> None:
    assert claim("task", "nonsense") is None
    assert claim("meta", "") is None  # reserved, not a collection
    assert claim("notes", "") is kinds.COLLECTION
    assert claim("notes", "log") is None


def test_every_key_kind_is_reserved_from_user_collections() -> None:
    for kind in KINDS:
        if kind.key != kinds.ANY:
            assert kind.key in RESERVED


@pytest.mark.parametrize("op", list(Op))
def test_every_kind_handles_each_operation_or_says_why_not(op: Op) -> None:
    for kind in KINDS:
        reason = kind.skips.get(op)
        assert kind.applies(op) == (reason is None)
        if reason is not None:
            assert len(reason) > 10, (kind.name, op)


@pytest.mark.parametrize("module", ["migrate_async", "migrate"])
def test_migrate_handles_exactly_the_kinds_it_applies_to(module: str) -> None:
    """``redistate.<home>.migrate_async.MIGRATE[kind.name]`` (and its sync twin's)
    exists exactly where Op.MIGRATE applies; a folder migrates only its own kinds."""
    import importlib

    from redistate.admin import migrate

    for kind in KINDS:
        try:
            table = importlib.import_module(f"redistate.{kind.home}.{module}").MIGRATE
        except ModuleNotFoundError:
            table = {}
        assert (kind.name in table) == kind.applies(Op.MIGRATE), kind.name
        for name in table:
            assert kinds.by_name(name).home == kind.home, (kind.home, name)
        if kind.applies(Op.MIGRATE) and module == "migrate":
            assert migrate.factory(kind) is table[kind.name]


def test_stats_lists_every_key_kind() -> None:
    from redistate.admin.stats import BUILT_IN

    assert set(BUILT_IN) == {k.key for k in KINDS if k.key != kinds.ANY}


def test_every_kind_lives_in_a_folder_of_the_package() -> None:
    import importlib

    for kind in KINDS:
        assert kind.home, kind.name
        importlib.import_module(f"redistate.{kind.home}")
