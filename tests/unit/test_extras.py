"""Each extra installs what its documented code imports: the guide's blocks and the
examples a user runs after `pip install -e '.[extra]'`."""

from __future__ import annotations

import ast
import re
import sys
from functools import cache
from importlib import metadata, util
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).parent.parent.parent
ADAPTERS = (ROOT / "docs" / "guides" / "adapters.md").read_text("utf-8")


def _blocks_importing(module: str) -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", ADAPTERS, re.S)
    return [b for b in blocks if re.search(rf"^(from|import) {module}\b", b, re.M)]


# extra -> the code a user of that extra runs
CODE = {
    "langgraph": [
        *_blocks_importing("langgraph"),
        (ROOT / "examples" / "langgraph_resume.py").read_text("utf-8"),
    ],
    "openai-agents": _blocks_importing("redistate.agents"),
}


def _imports(code: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    assert names, "no imports found"
    return {n for n in names if n.split(".")[0] not in {*sys.stdlib_module_names, "redistate"}}


def _owner(module: str) -> str:
    """The distribution whose files hold ``module`` (namespace packages are shared)."""
    spec = util.find_spec(module)
    assert spec is not None and spec.origin, f"{module} is not installed"
    origin = Path(spec.origin).resolve()
    candidates = metadata.packages_distributions().get(module.split(".")[0], [])
    for dist in map(metadata.distribution, candidates):
        for file in dist.files or ():
            if Path(str(dist.locate_file(file))).resolve() == origin:
                return _norm(dist.metadata["Name"])
    raise AssertionError(f"no distribution holds {origin}")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def _closure(extra: str) -> frozenset[str]:
    """redistate and every distribution ``redistate[extra]`` installs, transitively."""
    seen = {"redistate"}
    todo = [
        req
        for req in map(Requirement, metadata.requires("redistate") or [])
        if req.marker is None or req.marker.evaluate({"extra": extra})
    ]
    while todo:
        req = todo.pop()
        name = _norm(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        for sub in map(Requirement, requires):
            wanted = sub.marker is None or any(
                sub.marker.evaluate({"extra": e}) for e in ("", *req.extras)
            )
            if wanted:
                todo.append(sub)
    return frozenset(seen)


@pytest.mark.parametrize("extra", sorted(CODE))
def test_an_extra_installs_what_its_documented_code_imports(extra: str) -> None:
    assert CODE[extra], f"no documented code found for {extra}"
    modules = set().union(*(_imports(code) for code in CODE[extra]))
    missing = {m: _owner(m) for m in modules if _owner(m) not in _closure(extra)}
    assert not missing, f"redistate[{extra}] does not install {missing}"


def test_the_langgraph_extra_names_langgraph_itself() -> None:
    """The saver imports only langgraph-checkpoint; `langgraph.graph` is langgraph's."""
    assert _owner("langgraph.graph") == "langgraph"
    assert "langgraph" in _closure("langgraph")
