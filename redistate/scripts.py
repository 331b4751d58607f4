"""Lua scripts, shipped as package data under ``redistate/lua``.

Each script file starts with a header naming its KEYS, ARGV and return values.
Files whose name starts with ``_`` are libraries prepended to the scripts that use
them. SHAs are computed here; loading into a server happens per client, in the
I/O shells, which reload a script when the server answers NOSCRIPT.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["Script", "names", "script", "wrote"]

# Which library each script needs; one entry per script file.
_LIBRARIES: dict[str, tuple[str, ...]] = {
    "record_put": ("_envelope",),
    "record_touch": ("_envelope",),
    "record_delete": ("_envelope",),
    "record_merge": ("_envelope",),
    "record_compact": ("_envelope",),
    "checkpoint_save": ("_envelope",),
    "checkpoint_log": ("_envelope",),
    "checkpoint_find": (),
    "lock_acquire": ("_envelope",),
    "lock_release": ("_envelope",),
    "lock_extend": ("_envelope",),
    "lock_abandon": (),
    "checkpoint_delete": ("_envelope",),
    "checkpoint_recode": (),
    "checkpoint_migrate": (),
    "step_record": ("_envelope",),
    "step_recode": (),
    "event_append": ("_envelope",),
    "event_trim": (),
    "event_rewrite": (),
    "read_lists": (),
    "graph_put": ("_envelope", "_graph"),
    "graph_writes": ("_envelope", "_graph"),
    "graph_read": ("_graph",),
    "graph_remove": ("_graph",),
    "graph_copy": ("_envelope", "_graph"),
    "import_record": ("_envelope",),
    "import_task": ("_envelope",),
    "import_fence": ("_envelope",),
    "agents_add": ("_envelope",),
    "agents_pop": ("_envelope",),
    "agents_clear": ("_envelope",),
}


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script's source and SHA-1 (what EVALSHA takes)."""

    name: str
    source: str
    sha: str


def _read(name: str) -> str:
    return resources.files("redistate").joinpath("lua").joinpath(f"{name}.lua").read_text("utf-8")


@cache
def script(name: str) -> Script:
    """The script called ``name``, with its libraries prepended."""
    if name not in _LIBRARIES:
        raise KeyError(f"no Lua script named {name!r}")
    source = "".join(_read(lib) for lib in _LIBRARIES[name]) + _read(name)
    return Script(name, source, hashlib.sha1(source.encode("utf-8")).hexdigest())


def wrote(name: str, reply: Any) -> bool:
    """Whether a script's reply says it changed something: a replicated write waits
    for a replica only then (a conflict, or a delete of nothing, leaves WAIT nothing to
    wait for). Recognised resends count as writes: they note themselves again."""
    if name in ("record_put", "record_delete"):
        return type(reply) is bytes or int(reply[0]) != 0
    if name == "record_merge":
        return type(reply) is bytes or int(reply[0]) == 3
    if name == "checkpoint_delete":
        return int(reply) != 0
    if name == "step_record":
        return int(reply[0]) != 0
    if name == "lock_acquire":
        return int(reply[0]) == 1
    if name == "lock_extend":
        return int(reply) == 1
    return True


def names() -> tuple[str, ...]:
    """Every script name, for preloading and for the header test."""
    return tuple(_LIBRARIES)
