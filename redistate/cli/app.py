"""``redistate [--url URL] [--namespace NS] COMMAND``: the console entry point."""

from __future__ import annotations

import sys
from typing import Any

from ..core.errors import RedistateError
from ._app import app, current  # each command's module is imported when it runs (_group)

__all__ = ["app", "main", "misplaced"]


def main() -> None:
    """Run the app: one-line errors, exit 1 for failures (usage errors: 2)."""
    hint = misplaced(sys.argv[1:])
    if hint is not None:
        sys.stderr.write(f"redistate: {hint}\n")
        sys.exit(2)
    try:
        app()  # exits 2 itself on a usage error
    except RedistateError as exc:
        sys.stderr.write(f"redistate: {exc}\n")
        sys.exit(1)
    except _redis_error() as exc:  # evaluated only when an exception gets this far
        from ..core._translate import translate

        context = current()
        address = "the embedded server" if context is None else context.address
        sys.stderr.write(f"redistate: {translate(exc, address)}\n")
        sys.exit(1)
    except OSError as exc:  # a file of the user's (redis-py wraps socket errors)
        where = f"{exc.filename}: " if exc.filename else ""
        sys.stderr.write(f"redistate: {where}{exc.strerror or exc}\n")
        sys.exit(1)
    except ValueError as exc:  # an option's value, e.g. a malformed --url
        sys.stderr.write(f"redistate: {exc}\n")
        sys.exit(2)
    finally:
        context = current()
        if context is not None:
            context.close()


class _NoRedisError(Exception):
    """Raised by nothing: what a run that never imported redis-py can fail with."""


def _redis_error() -> type[Exception]:
    """redis-py's RedisError, or a class nothing raises if redis-py was never imported
    (``--help``, ``acl``): importing it only to catch it would cost ~0.2 s."""
    exceptions = sys.modules.get("redis.exceptions")
    return _NoRedisError if exceptions is None else exceptions.RedisError


def misplaced(args: list[str]) -> str | None:
    """What to say when a global option (--url, --namespace...) comes after the
    command, which does not take it itself: click would only say "No such option"."""
    names = _global_options()
    if not any(arg.partition("=")[0] in names for arg in args[1:]):
        return None  # the common case, without building the click command
    import shlex

    import typer.main

    group: Any = typer.main.get_command(app)
    takes_value = {o: _takes_value(p) for p in group.params for o in p.opts}
    i = 0
    while i < len(args) and args[i].startswith("-"):  # the options before the command
        name, eq, _ = args[i].partition("=")
        i += 2 if takes_value.get(name) and not eq else 1
    if i >= len(args) or (command := group.get_command(None, args[i])) is None:
        return None  # no command: click's own usage error says what is wrong
    own = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    own_value = {o for p in command.params if _takes_value(p) for o in p.opts}
    moved: list[list[str]] = []
    rest: list[str] = []
    after, j = args[i + 1 :], 0
    while j < len(after):
        if after[j] == "--":
            rest += after[j:]
            break
        name, eq, _ = after[j].partition("=")
        if name in own_value and not eq:  # the command's own option and its value
            rest += after[j : j + 2]  # (`show --using --url`: --url is the module)
            j += 2
        elif name in takes_value and name not in own:
            width = 2 if takes_value[name] and not eq else 1
            option = after[j : j + width]
            moved.append(option + ["VALUE"] * (width - len(option)))  # a value left out
            j += width
        else:
            rest.append(after[j])
            j += 1
    if not moved:
        return None
    said = " and ".join(dict.fromkeys(option[0].partition("=")[0] for option in moved))
    fixed = [*args[:i], *(part for option in moved for part in option), args[i], *rest]
    return f"put {said} before the command: {shlex.join(['redistate', *fixed])}"


def _takes_value(param: Any) -> bool:
    """Whether a click parameter is an option followed by a value (not a flag, not
    a count, not an argument). Typer's parameters are its own click's (typer._click),
    so the kind is read from ``param_type_name``, not an isinstance check."""
    option = getattr(param, "param_type_name", None) == "option"
    return option and not (param.is_flag or param.count)


def _global_options() -> set[str]:
    """The option names of the app's callback (--url, --namespace...), read from its
    signature: cheaper than building the click command on every run."""
    import inspect

    from typer.models import OptionInfo

    from ._app import options

    names: set[str] = set()
    for name, param in inspect.signature(options).parameters.items():
        if isinstance(param.default, OptionInfo):
            decls = param.default.param_decls or ("--" + name.replace("_", "-"),)
            names.update(d for d in decls if d.startswith("-"))
    return names
