"""``redistate acl``: the ``ACL SETUSER`` line that gives a user one namespace, no more."""

from __future__ import annotations

import json
import re
import sys

import typer

from ..core.keys import KeySpace
from ..core.scripts import acl_commands
from ._app import app

__all__ = ["acl_command", "setuser"]

PASSWORD = "<password>"  # a placeholder the user replaces (or uses >hash / nopass)
# ACL user names are any run of non-space characters; control characters are refused
# too, so the line can be pasted as it is.
_USER_RE = re.compile(r"[!-~]{1,128}")


def setuser(namespace: str, user: str) -> str:
    """``ACL SETUSER`` for ``user``: only the namespace's keys, no channels, and only the
    commands redistate sends (the scripts' redis.call list and the I/O layer's own)."""
    pattern = KeySpace(namespace).namespace_pattern()  # validates the namespace
    if not _USER_RE.fullmatch(user):
        raise ValueError(f"--user must be 1 to 128 printable ASCII characters, no space: {user!r}")
    commands = " ".join(f"+{name}" for name in acl_commands())
    return f"ACL SETUSER {user} reset on >{PASSWORD} ~{pattern} resetchannels -@all {commands}"


@app.command("acl")
def acl_command(
    ctx: typer.Context,
    user: str | None = typer.Option(None, help="the user name (default: redistate-NAMESPACE)"),
    namespace: str | None = typer.Option(
        None, help="the namespace (default: the global --namespace)"
    ),
    as_json: bool = typer.Option(
        False, "--json", help="one JSON object: user, key pattern, commands, the line"
    ),
) -> None:
    """Print the ACL SETUSER line for a least-privilege user of one namespace: its keys
    (~NS:*), no pub/sub channels, and the commands redistate needs (docs/DESIGN.md,
    "Least privilege"). Replace <password> before running it; connects to nothing."""
    chosen = namespace if namespace is not None else ctx.obj.namespace
    KeySpace(chosen)  # a bad namespace is named before the default user is built from it
    name = f"redistate-{chosen}" if user is None else user
    line = setuser(chosen, name)
    if as_json:
        found = {
            "user": name,
            "keys": KeySpace(chosen).namespace_pattern(),
            "commands": list(acl_commands()),
            "acl": line,
        }
        line = json.dumps(found)
    sys.stdout.write(line + "\n")
