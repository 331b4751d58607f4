"""Export and import are found through the kind registry: every kind export applies to
has its codec in its own folder (``redistate.<home>.backup``, ``BACKUP[name]``), no
other kind has one, and the admin's backup code names no kind."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import redistate.admin
from redistate.admin.backup_codec import LineCodec, codec_of, codecs, line_codec, line_kinds
from redistate.core import kinds
from redistate.core.kinds import KINDS, Op
from redistate.core.scripts import names


def _backup(kind: kinds.Kind) -> dict[str, LineCodec]:
    try:
        module = importlib.import_module(f"redistate.{kind.home}.backup")
    except ModuleNotFoundError:
        return {}
    return dict(module.BACKUP)


def test_each_exported_kind_has_its_codec_in_its_folder_and_no_other_kind_has_one() -> None:
    for kind in KINDS:
        table = _backup(kind)
        if kind.applies(Op.EXPORT):
            assert isinstance(table.get(kind.name), LineCodec), kind.name
            assert codec_of(kind) is table[kind.name]
        else:
            assert kind.name not in table, f"{kind.name} skips export: {kind.skips[Op.EXPORT]}"
    # Every BACKUP entry is a kind of its folder: no codec for a kind the registry lacks.
    for home in {kind.home for kind in KINDS}:
        module = importlib.import_module(f"redistate.{home}")
        path = Path(next(iter(module.__path__))) / "backup.py"
        if path.exists():
            table = importlib.import_module(f"redistate.{home}.backup").BACKUP
            assert {kinds.by_name(name).home for name in table} == {home}


def test_kinds_skipping_export_are_carried_by_a_codec_or_not_exported() -> None:
    assert codec_of(kinds.STEPS) is codec_of(kinds.TASK)  # in its task's line
    assert codec_of(kinds.LEASE) is None  # a held lease is the holder's


def test_each_line_kind_has_one_codec_and_an_import_script() -> None:
    assert len(set(line_kinds())) == len(codecs())
    for codec in codecs():
        assert line_codec(codec.name) is codec
        assert codec.script().name in names() and codec.script().name.startswith("import_")
        assert codec.one and codec.many
        for carried in codec.carries:
            assert not carried.applies(Op.EXPORT)
    # The line kinds every file had since format 1 come first (reports list them so).
    assert [c.since for c in codecs()] == sorted(c.since for c in codecs())


def _strings(tree: ast.AST) -> list[str]:
    """The string literals of a module, docstrings left out."""
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def test_admin_backup_code_names_no_kind() -> None:
    folder = Path(next(iter(redistate.admin.__path__)))
    words = {kind.name for kind in KINDS} | {kind.key for kind in KINDS} - {kinds.ANY}
    words |= {"record", "staging", *(part for kind in KINDS for part in kind.parts)} - {""}
    for path in sorted(folder.glob("backup*.py")):
        found = set(_strings(ast.parse(path.read_text("utf-8")))) & words
        assert found == set(), f"{path.name} names kinds or their parts: {sorted(found)}"
