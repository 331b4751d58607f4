"""The command group: each command's module is imported only when that command runs.

A command's module pulls in what its command needs (the Store, rich's live display, the
backup codecs, ...); importing all of them made every run, ``ls`` included, pay for all
of them. :data:`COMMANDS` names the module of each command. The help listing shows each
command's docstring: it reads them from the modules' source (:func:`listed`), importing a
module only when its commands are not plainly ``@app.command`` functions.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import Any

import typer
import typer.core
import typer.main

__all__ = ["COMMANDS", "LazyGroup", "PlainCommand"]

# Command -> the module of redistate.cli that defines it, in the order help lists them.
COMMANDS: dict[str, str] = {
    "acl": "acl",
    "export": "backup",
    "import": "backup",
    "demo": "demo",
    "doctor": "doctor",
    "events": "events",
    "ls": "inspection",
    "show": "inspection",
    "checkpoints": "inspection",
    "locks": "inspection",
    "restore": "inspection",
    "handoff": "inspection",
    "verify": "inspection",
    "migrate": "migrate",
    "rotate-keys": "rotate",
    "stats": "stats",
}


class LazyGroup(typer.core.TyperGroup):
    """A TyperGroup that imports a command's module the first time it is asked for it."""

    _listing = False  # within format_help: commands not yet imported are listed from source

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if self._listing and cmd_name not in self.commands and cmd_name in COMMANDS:
            stand_in = listed(COMMANDS[cmd_name]).get(cmd_name)
            if stand_in is not None:
                return stand_in
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            from ._app import app

            import_module(f"{__package__}.{COMMANDS[cmd_name]}")  # its @app.command run
            for info in app.registered_commands:
                assert info.callback is not None  # set by @app.command
                name = info.name or typer.main.get_command_name(info.callback.__name__)
                if name in self.commands:
                    continue
                self.commands[name] = typer.main.get_command_from_info(
                    info,
                    pretty_exceptions_short=app.pretty_exceptions_short,
                    rich_markup_mode=app.rich_markup_mode,
                )
        command = super().get_command(ctx, cmd_name)
        if type(command) is typer.core.TyperCommand:  # typer's default class
            command.__class__ = PlainCommand  # it only adds get_params
        return command

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] not in COMMANDS:  # a typo: typer suggests among those loaded
            for name in COMMANDS:
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)

    def get_params(self, ctx: Any) -> list[Any]:
        return plain(super().get_params(ctx))


@cache
def listed(module: str) -> dict[str, typer.core.TyperCommand]:
    """Stand-ins for the help listing of the commands ``module`` defines, read from its
    source without running it: name and docstring, what typer's listing shows. Empty
    when a command there is not a plain ``@app.command()`` / ``@app.command("name")``
    (other options may change what is listed), or the source is not at hand: the
    listing then imports the module and shows the command itself."""
    spec = importlib.util.find_spec(f"{__package__}.{module}")
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return {}
    try:
        with open(spec.origin, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), spec.origin)
    except (OSError, SyntaxError):
        return {}
    found: dict[str, typer.core.TyperCommand] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            if not (
                isinstance(decorator, ast.Call)
                and isinstance(decorator.func, ast.Attribute)
                and isinstance(decorator.func.value, ast.Name)
                and decorator.func.value.id == "app"
                and decorator.func.attr == "command"
            ):
                continue
            args = decorator.args
            if decorator.keywords or len(args) > 1:
                return {}
            if not args:
                name = typer.main.get_command_name(node.name)
            elif isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                name = args[0].value
            else:
                return {}
            # typer's help is inspect.getdoc(callback); ast cleans a docstring the same way.
            found[name] = typer.core.TyperCommand(name=name, help=ast.get_docstring(node))
    return found


class PlainCommand(typer.core.TyperCommand):
    """A TyperCommand whose plain parameters skip pydantic (see :func:`plain`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return plain(super().get_params(ctx))


def plain(params: list[Any]) -> list[Any]:
    """``params``, those typed ``str`` or ``bool`` made to skip pydantic for such values.

    Recent typer (0.29 here) coerces each value through a pydantic TypeAdapter built on first
    use (even for ``--help``, whose value is None), which imports pydantic: about 0.1 s,
    more than ``ls`` spends on anything but redis-py. For a ``str`` or ``bool`` parameter
    (no parser, no file) that adapter returns a value of that type unchanged; any other
    value still goes through it. A typer without these internals (older, or changed) is
    left alone: slower, never wrong.
    """
    runtime = _plain_param()
    if runtime is None:
        return params
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if (
            getattr(param, "_runtime_param", "absent") is None
            and descriptor is not None
            and descriptor.annotation in (str, bool)
            and descriptor.file_annotation is None
            and descriptor.parameter_info.parser is None
        ):
            param._runtime_param = runtime(
                parameter_info=descriptor.parameter_info,
                annotation=descriptor.annotation,
                descriptor=descriptor,
            )
    return params


@cache
def _plain_param() -> Any:
    """A typer RuntimeParam passing a value of the parameter's type through, pydantic
    for any other (None: this typer has no such internals)."""
    try:
        from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
    except ImportError:
        return None

    @dataclass(frozen=True)
    class Plain(RuntimeParam):
        descriptor: TypeDescriptor

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if type(value) is self.annotation:
                return value
            full = build_runtime_param(self.descriptor)  # bytes, say: typer's own way
            return full._coerce_value(value, param=param, ctx=ctx)

    return Plain
