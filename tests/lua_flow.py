"""Which commands a Lua script may call after it has written: a flow analysis over
its syntax tree (luaparser), for the ACL check's ``unchecked`` header lines.

A script denied a command stops there, and Lua has no rollback: a denial after a first
write leaves a partial write. A denial before any write leaves nothing, so the check a
script runs first needs only the commands that may run once something may have been
written. This module computes that set on every path, independently of
redistate/core/scripts.py: each statement maps "nothing written yet" / "something may
have been written" / "unreachable" to the same after it; branches join, loops run to a
fixed point, ``return`` ends the script (or, in a function, the call), and a call of a
library or local function runs its body from the caller's state. Anything outside the
subset the scripts use (anonymous functions, goto) is refused, so nothing escapes it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from luaparser import ast, astnodes

State = bool | None  # None: unreachable; False: nothing written yet; True: may have written


def join(*states: State) -> State:
    reached = [s for s in states if s is not None]
    return any(reached) if reached else None


class Flow:
    """The analysis of one script with the library functions it may call."""

    def __init__(self, libraries: Iterable[str], reads: frozenset[str]) -> None:
        self.reads = reads
        self.functions: dict[str, astnodes.LocalFunction] = {}
        for text in libraries:
            for statement in ast.parse(text).body.body:
                if isinstance(statement, astnodes.LocalFunction):
                    self.functions[statement.name.id] = statement
        # Each command called, and whether any call of it may come after a write.
        self.after: dict[str, bool] = {}
        self._returns: list[list[State]] = []
        self._breaks: list[list[State]] = []
        self._active: set[str] = set()

    def script(self, text: str) -> dict[str, bool]:
        """Each command the script may call: True if it may run after a write."""
        self._returns.append([])
        self.block(ast.parse(text).body, False)
        self._returns.pop()
        return dict(self.after)

    # -- statements --------------------------------------------------------------

    def block(self, block: astnodes.Block, s: State) -> State:
        for statement in block.body:
            if s is None:
                break
            s = self.statement(statement, s)
        return s

    def statement(self, node: Any, s: State) -> State:
        if isinstance(node, (astnodes.LocalAssign, astnodes.Assign)):
            parts = [*node.targets, *node.values]
            if len(node.values) == 1 and all(_plain(t) for t in node.targets):
                return self.exprs(node.values, s)  # one value, nothing else to run
            # Lua leaves the order of an assignment's parts undefined (a target's key
            # runs before the values): if a part writes, every part runs again from
            # there, as for any expression.
            out = self.exprs(parts, s)
            return self.exprs(parts, out) if out != s else out
        if isinstance(node, astnodes.LocalFunction):
            if node.name.id in self.functions:
                # One flat namespace: a name defined twice could hide a block's scope.
                raise NotImplementedError(f"function {node.name.id} is defined twice")
            self.functions[node.name.id] = node
            return s
        if isinstance(node, (astnodes.Call, astnodes.Invoke)):
            return self.expr(node, s)
        if isinstance(node, (astnodes.If, astnodes.ElseIf)):
            s = self.expr(node.test, s)
            taken = self.block(node.body, s)
            other = node.orelse
            if other is None:
                rest = s
            elif isinstance(other, astnodes.Block):
                rest = self.block(other, s)
            else:
                rest = self.statement(other, s)
            return join(taken, rest)
        if isinstance(node, astnodes.While):
            return self.loop(s, node.body, test=node.test, test_first=True)
        if isinstance(node, astnodes.Repeat):
            return self.loop(s, node.body, test=node.test, test_first=False)
        if isinstance(node, astnodes.Fornum):
            step = node.step if isinstance(node.step, astnodes.Node) else None
            s = self.exprs([node.start, node.stop, *([step] if step else [])], s)
            return self.loop(s, node.body, test=None, test_first=True)
        if isinstance(node, astnodes.Forin):
            return self.loop(self.exprs(node.iter, s), node.body, test=None, test_first=True)
        if isinstance(node, astnodes.Do):
            return self.block(node.body, s)
        if isinstance(node, astnodes.Return):
            self._returns[-1].append(self.exprs(node.values or [], s))
            return None
        if isinstance(node, astnodes.Break):
            self._breaks[-1].append(s)
            return None
        if isinstance(node, astnodes.SemiColon):
            return s
        raise NotImplementedError(f"statement {type(node).__name__} is not analysed")

    def loop(self, s: State, body: astnodes.Block, *, test: Any, test_first: bool) -> State:
        """A loop body run any number of times (at least once for repeat): the state
        entering it joins the state before and after each pass, to a fixed point."""
        entering: State = s
        while True:
            self._breaks.append([])
            if test_first:
                tested = self.expr(test, entering) if test is not None else entering
                out = self.block(body, tested)
                leaving = tested
            else:
                out = self.block(body, entering)
                leaving = self.expr(test, out) if out is not None else None
                out = leaving
            breaks = self._breaks.pop()
            again = join(s, out)
            if again == entering:
                return join(leaving, *breaks)
            entering = again

    # -- expressions -------------------------------------------------------------

    def exprs(self, nodes: Iterable[Any], s: State) -> State:
        for node in nodes:
            s = self.expr(node, s)
        return s

    def expr(self, node: Any, s: State) -> State:
        """Every subexpression (both sides of and/or: either may run). Calls evaluate
        their function, then their arguments, in order; for any other expression that
        writes, its parts run again from the written state, so the order in which Lua
        evaluates them does not matter."""
        if s is None or node is None:
            return s
        if isinstance(node, (astnodes.AnonymousFunction, astnodes.Function, astnodes.Method)):
            raise NotImplementedError("a function value is not analysed: use local function")
        if isinstance(node, astnodes.Call):
            direct = isinstance(node.func, astnodes.Name) and node.func.id in self.functions
            s = self.exprs([*([] if direct else [node.func]), *node.args], s)
            return self.call(node, s)
        if isinstance(node, astnodes.Name) and node.id in self.functions:
            # Passed on (pcall(f), table.sort(t, f), g = f): where it runs is not known.
            raise NotImplementedError(f"function {node.id} used as a value")
        children = _children(node)
        out = self.exprs(children, s)
        if out != s:
            out = self.exprs(children, out)
        return out

    def call(self, node: astnodes.Call, s: State) -> State:
        func = node.func
        if (
            isinstance(func, astnodes.Index)
            and isinstance(func.value, astnodes.Name)
            and func.value.id == "redis"
            and isinstance(func.idx, astnodes.Name)
            and func.idx.id in ("call", "pcall")
        ):
            first = node.args[0] if node.args else None
            if not isinstance(first, astnodes.String):
                raise NotImplementedError("redis.call whose command is not a literal")
            command = first.s.decode() if isinstance(first.s, bytes) else str(first.s)
            command = command.lower()
            self.after[command] = self.after.get(command, False) or bool(s)
            return s if command in self.reads else True
        if isinstance(func, astnodes.Name) and func.id in self.functions:
            if func.id in self._active:
                raise NotImplementedError(f"recursive function {func.id}")
            self._active.add(func.id)
            self._returns.append([])
            out = self.block(self.functions[func.id].body, s)
            returned = self._returns.pop()
            self._active.discard(func.id)
            return join(out, *returned)
        return s


def _plain(target: Any) -> bool:
    """A target that runs nothing when assigned to: a name, or a field named by a
    literal of a name (KEYS, t.x, t[1], t["k"])."""
    if isinstance(target, astnodes.Name):
        return True
    if isinstance(target, astnodes.Index):
        key_ok = isinstance(target.idx, (astnodes.Name, astnodes.Number, astnodes.String))
        return key_ok and isinstance(target.value, astnodes.Name)
    return False


def _children(node: Any) -> list[Any]:
    """A node's subexpressions in source order."""
    out: list[Any] = []
    for key, value in vars(node).items():
        if key.startswith("_") or key in ("comments", "wrapped"):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, astnodes.Node):
                out.append(item)
    return out
