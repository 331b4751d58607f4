"""Lua scripts, shipped as package data in each concept folder's ``lua/``.

Each script file starts with a header naming its KEYS, ARGV and return values.
Files whose name starts with ``_`` are libraries prepended to the scripts that use
them. SHAs are computed here; loading into a server happens per client, in the
I/O shells, which reload a script when the server answers NOSCRIPT.

The same sources also make one server-side library (Redis 7+ and Valkey FUNCTION, see
:func:`library`): the ``_*.lua`` libraries once at its top level, each script a
registered function. Its name and its functions' carry a hash of its source, so two
redistate versions on one server never clash.

This module is also the one source of truth for the ACL a namespace needs: the
commands each script calls are read out of its Lua source, and every script starts
with a generated check that the user may run all of them (see :func:`acl_commands`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, Final, Generic, NamedTuple, Protocol, TypeVar

from . import _lua_index, telemetry

__all__ = [
    "CLIENT_COMMANDS",
    "Parsed",
    "Reply",
    "Script",
    "acl_commands",
    "library",
    "lua_commands",
    "names",
    "script",
    "unchecked",
]


class Reply(Protocol):
    """A script's reply made sense of (one parse per script, next to its arguments)."""

    @property
    def wrote(self) -> bool:
        """Whether the script changed something: a replicated write waits for a replica
        only then (a conflict, or a delete of nothing, leaves WAIT nothing to wait for).
        Recognised resends count as writes: they note themselves again."""
        ...


P = TypeVar("P", bound=Reply)


class Made(NamedTuple):
    """What every call of a script needs, read from its Lua file's header on first use
    (its source, for EVALSHA, only when asked: it needs every library's)."""

    memory: tuple[int, int] | None
    function: str
    resent: frozenset[int]


class Script:
    """A Lua script, by name: its source and SHA-1 (what EVALSHA takes) and the rest of
    :class:`Made` are read on first use, not at import (a serverless cold start pays
    for none of the package's Lua until its first call). Its replies are returned as
    the server sent them and count as writes; see :meth:`replying`.

    ``memory``: for a script with a write memory (its header's ``memory KEYS[k]
    ARGV[a]`` line), the 0-based positions of the memory's key and of its argument,
    which the connection completes on each send (see ``rs_memory`` in _envelope.lua).

    ``function``: its name in the server-side library (what FCALL takes).

    ``resent``: the replies (or a table reply's first elements) by which it says the
    server recognised the call as a resend of one applied before (its header's
    ``resent`` line); each is noted on the operation's span and metrics. Only a resend
    can get one, so the check costs the usual reply one comparison."""

    __slots__ = ("_made", "name")

    def __init__(self, name: str, made: Made | None = None) -> None:
        self.name = name
        self._made = made

    def _get(self) -> Made:
        made = self._made
        if made is None:
            made = self._made = _make(self.name)
        return made

    @property
    def source(self) -> str:
        return _compiled(self.name)[0]

    @property
    def sha(self) -> str:
        return _compiled(self.name)[1]

    @property
    def memory(self) -> tuple[int, int] | None:
        return self._get().memory

    @property
    def function(self) -> str:
        return self._get().function

    @property
    def resent(self) -> frozenset[int]:
        return self._get().resent

    def read(self, reply: Any) -> Any:
        """The reply a call returns."""
        resent = self._get().resent
        if resent:
            _recognised(resent, reply)
        return reply

    def wrote(self, reply: Any) -> bool:
        """Whether ``reply`` (as :meth:`read` returned it) means something was written."""
        return True  # nobody parsed it: a replicated call waits

    def guarded(self, reply: Any) -> bool:
        """Whether the script reached its fence check (``rs_guard``, which renews an
        inline lease) before ``reply``: a resend it recognised returns before it."""
        resent = self._get().resent
        return not (resent and _is_resend(resent, reply))

    def replying(self, parse: Callable[[Any], P]) -> Parsed[P]:
        """This script, its replies parsed by ``parse`` (a reply type's ``parse``)."""
        return Parsed(self.name, parse, self._made)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Parsed(Script, Generic[P]):
    """A script whose replies a call returns parsed, and whose parsed reply says
    whether it wrote (the connection decodes no status itself)."""

    __slots__ = ("parse",)

    def __init__(self, name: str, parse: Callable[[Any], P], made: Made | None = None) -> None:
        super().__init__(name, made)
        self.parse = parse

    def read(self, reply: Any) -> P:
        resent = self._get().resent
        if resent:
            _recognised(resent, reply)
        return self.parse(reply)

    def wrote(self, reply: Any) -> bool:
        return bool(reply.wrote)

    def guarded(self, reply: Any) -> bool:
        return bool(getattr(reply, "guarded", True))  # a reply type without early returns


def _is_resend(codes: frozenset[int], reply: Any) -> bool:
    """Whether ``reply`` (or its first element) is one of ``codes``. A string or nil
    reply is never one."""
    status = reply[0] if type(reply) is list and reply else reply
    return type(status) is int and status in codes


def _recognised(codes: frozenset[int], reply: Any) -> None:
    """Note a resend the server recognised on the current operation."""
    if _is_resend(codes, reply):
        telemetry.note(telemetry.RESENT)


# Commands redistate sends itself, outside Lua (ACL names: lowercase, "cmd|sub"), and
# why. With the commands the scripts call, this is the whole ACL of a namespace.
CLIENT_COMMANDS: Final[dict[str, str]] = {
    "fcall": "runs every script on a server with functions (Redis 7+, Valkey)",
    "function|load": "loads redistate's function library where a server lacks it (first "
    "use, restart, FUNCTION FLUSH); without it, scripts run by EVALSHA",
    "evalsha": "runs every script on a server without functions (Redis 6), or where "
    "this user may not load them",
    "script|load": "loads a script the server does not know (first use, restart, flush)",
    "get": "reads a record or a lease",
    "mget": "get_many and migrations read many records in one command",
    "scan": "lists the keys of a kind or of the namespace (never KEYS)",
    "pttl": "a record's or a key's time left",
    "multi": "reads a task's lists in one consistent view",
    "exec": "reads a task's lists in one consistent view",
    "lrange": "reads a task's lists, an agents session",
    "hgetall": "reads step records, event anchors, LangGraph threads (export)",
    "xrange": "reads events",
    "zrangebyscore": "export reads sorted sets: LangGraph threads, ADK, Claude and "
    "Pydantic AI indexes, Claude transcripts",
    "blpop": "waits for a lease to be released",
    "wait": 'durability="replicated": waits for replicas',
    "sadd": "indexes a user's records (erasure)",
    "smembers": "erasure and export read a user's index; export, a Claude session's subpaths",
    "srem": "erasure",
    "del": "erasure, removing a LangGraph thread",
    "exists": "a cluster client finds a key's new owner after a failover",
    "llen": "the CLI's ls (checkpoints of a task)",
    "strlen": "the CLI's ls (size of a record)",
    "memory|usage": "the CLI's stats (bytes of a kind)",
    "info": "server facts on first contact (eviction policy, persistence, replication)",
    "select": "a URL naming a database other than 0",
    "cluster|slots": "a cluster client learns the slot map",
    "cluster|shards": "a cluster client learns the slot map (newer redis-py)",
    "command": "a cluster client reads the command table (where each command's keys are)",
}

# Lua comments, then the command names of redis.call('NAME', ...) / redis.pcall.
# Patterns are strings, compiled (and cached) by re on first use: compiling them at
# import would cost every cold start, and most serve only the library and ACL checks.
_LUA_COMMENT: Final = r"(?s)--\[\[.*?\]\]|--[^\n]*"
_LUA_CALL: Final = r"redis\.p?call\(\s*(['\"])([A-Za-z]+)\1"
_LUA_ANY_CALL: Final = r"redis\.p?call\("


@cache
def _root() -> Any:
    """The package's folder, found once (every file read starts from it). Installed as
    files (the usual case), a plain path: reading through importlib.resources would
    cost a cold start ~1 ms of imports."""
    here = Path(__file__).parent.parent
    if here.is_dir():
        return here
    from importlib import resources  # a zip: only importlib.resources can read it

    return resources.files("redistate")


def _files() -> dict[str, str]:
    """Every Lua file of the package by name: its path under the package, from the
    generated index (``_lua_index.py``), so no call walks the package tree."""
    return _lua_index.FILES


def scan() -> dict[str, str]:
    """Every Lua file of the package by name, as found in the package: each concept
    folder's ``lua/`` holds its own scripts (names are unique across folders). What
    ``scripts/lua_index.py`` writes into the index."""
    found: dict[str, str] = {}
    todo: list[tuple[Any, str]] = [(_root(), "")]
    while todo:
        folder, under = todo.pop()
        for item in folder.iterdir():
            if item.is_dir():
                if item.name != "__pycache__":
                    todo.append((item, f"{under}{item.name}/"))
            elif item.name.endswith(".lua") and folder.name == "lua":
                name = item.name.removesuffix(".lua")
                if name in found:
                    raise RuntimeError(f"two Lua scripts called {name!r}")
                found[name] = under + item.name
    return dict(sorted(found.items()))


@cache
def _read(name: str) -> str:
    return str(_root().joinpath(*_files()[name].split("/")).read_text("utf-8"))


@cache
def _code(name: str) -> str:
    """A Lua file without its comments."""
    return re.sub(_LUA_COMMENT, "", _read(name))


_LUA_FUNCTION: Final = r"(?m)^local function (rs_\w+)\("
_LUA_FUNCTION_CALL: Final = r"\b(rs_\w+)\("


@cache
def _libraries() -> dict[str, tuple[str, ...]]:
    """Each script's libraries (``_*.lua``), in the order they are prepended: those
    whose functions it calls, and theirs before them. Read from the sources, so a new
    script needs no entry anywhere."""
    files = _files()
    defined = {
        lib: frozenset(re.findall(_LUA_FUNCTION, _read(lib)))
        for lib in sorted(files)
        if lib[0] == "_"
    }

    def needs(name: str, seen: tuple[str, ...]) -> tuple[str, ...]:
        # Library functions are all rs_*: one scan finds every one this file calls.
        called = frozenset(re.findall(_LUA_FUNCTION_CALL, _code(name)))
        out: list[str] = []
        for lib, functions in defined.items():
            if lib != name and lib not in seen and functions & called:
                out += [*needs(lib, (*seen, name)), lib]
        return tuple(dict.fromkeys(out))

    return {name: needs(name, ()) for name in sorted(files) if name[0] != "_"}


def _calls(text: str) -> frozenset[str]:
    """The commands a Lua file calls. Every call must name its command as a literal:
    one built at run time would escape the ACL check and the documented list."""
    code = re.sub(_LUA_COMMENT, "", text)
    found = [m.group(2).lower() for m in re.finditer(_LUA_CALL, code)]
    if len(found) != len(re.findall(_LUA_ANY_CALL, code)):
        raise ValueError("a redis.call whose command is not a string literal")
    return frozenset(found)


@cache
def lua_commands(name: str) -> frozenset[str]:
    """Every command script ``name`` may call (lowercase): its own, and those of each
    library function it can reach (calls, and theirs). Each is checked by the ACL
    prelude on every call, so a library command the script never reaches costs
    nothing (lock_acquire checks 5 commands, not the 11 of its libraries' files)."""
    libraries = _libraries()
    if name not in libraries:
        raise KeyError(f"no Lua script named {name!r}")
    bodies = _library_functions()
    todo = set(re.findall(_LUA_NAME, _code(name))) & bodies.keys()
    reached: set[str] = set()
    while todo:
        function = todo.pop()
        reached.add(function)
        todo |= (bodies[function][1] & bodies.keys()) - reached
    return _file_calls(name).union(*(bodies[f][0] for f in reached))


_LUA_DEFINITION: Final = r"(?m)^local function (\w+)\("
_LUA_NAME: Final = r"\b([A-Za-z_]\w*)\b"
# Top-level code a library may hold besides "local function" definitions: constants.
_LUA_OTHER_FUNCTION: Final = r"(?m)^(?:local +)?[\w.]+ *= *function\b|^function\b"


@cache
def _library_functions() -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Each library function: the commands its body calls and the names it uses. A
    body runs from its ``local function`` line to the next one's (library files hold
    nothing else that calls a command: FUNCTION LOAD would refuse it)."""
    out: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    for lib in sorted(_files()):
        if lib[0] != "_":
            continue
        code = _code(lib)
        if re.search(_LUA_OTHER_FUNCTION, code):
            raise ValueError(f"{lib}: define library functions as 'local function name('")
        starts = [m.start() for m in re.finditer(_LUA_DEFINITION, code)]
        if _calls(code[: starts[0] if starts else len(code)]):
            raise ValueError(f"{lib}: a redis.call outside any function")
        for at, end in zip(starts, [*starts[1:], len(code)], strict=True):
            body = code[at:end]
            match = re.match(_LUA_DEFINITION, body)
            assert match is not None
            if match.group(1) in out:
                raise ValueError(f"two library functions called {match.group(1)!r}")
            names = frozenset(re.findall(_LUA_NAME, body)) - {match.group(1)}
            out[match.group(1)] = (_calls(body), names)
    return out


@cache
def _file_calls(name: str) -> frozenset[str]:
    return _calls(_read(name))


def acl_commands() -> tuple[str, ...]:
    """Every command a namespace's user must be allowed, sorted (``+name`` each)."""
    lua = frozenset().union(*(lua_commands(name) for name in _libraries()))
    return tuple(sorted(lua | CLIENT_COMMANDS.keys()))


# Arguments after its name each command the scripts call needs at least (its arity in
# COMMAND INFO, less one): redis.acl_check_cmd is given that many, all KEYS[1]. Redis
# 7.0 crashes (SIGSEGV) when it is given fewer and the user has key patterns.
_ARGS: Final[dict[str, int]] = {
    "append": 2, "del": 1, "exists": 1, "get": 1, "getrange": 3, "hdel": 2,
    "hexists": 2, "hget": 2, "hgetall": 1, "hincrby": 3, "hlen": 1, "hmget": 2, "hset": 3,
    "hsetnx": 3, "lindex": 2, "llen": 1, "lpush": 2, "lrange": 3,
    "lset": 3, "ltrim": 3, "persist": 1, "pexpire": 2, "pexpireat": 2, "pttl": 1, "rename": 2,
    "rpop": 1, "rpush": 2, "sadd": 2, "set": 2, "smembers": 1, "setrange": 3, "srem": 2,
    "strlen": 1,
    "time": 0,
    "xadd": 4, "xdel": 2, "xlen": 1, "xrange": 3, "xrevrange": 3, "xtrim": 3, "zadd": 3,
    "zcard": 1, "zlexcount": 3, "zrange": 3, "zrangebylex": 3, "zrangebyscore": 3, "zrem": 2,
    "zremrangebylex": 3, "zremrangebyscore": 3, "zrevrangebylex": 3, "zscore": 2,
}  # fmt: skip


_UNCHECKED: Final = r"(?m)^unchecked +([a-z|]+(?: +[a-z|]+)*) *$"  # one line
# A script run in phases (one operation, several calls) checks everything on each call.
_EVERY_COMMAND: Final = r"(?m)^acl +every command checked: \S"


@cache
def unchecked(name: str) -> frozenset[str]:
    """The commands script ``name``'s ACL check leaves out: those its header's
    ``unchecked`` line names, which never run once the script may have written (a
    denial of one stops it with nothing written). tests/lua_flow.py derives the set
    from each script's control flow, and the unit tests hold every header to it."""
    header = _read(name).split("]]", 1)[0]
    found = re.search(_UNCHECKED, header)
    named = frozenset(found.group(1).split()) if found else frozenset()
    if named and re.search(_EVERY_COMMAND, header):
        raise KeyError(f"{name}: both 'unchecked' and 'acl every command checked'")
    unknown = named - lua_commands(name)
    if unknown:
        raise KeyError(f"{name}: 'unchecked' names {sorted(unknown)}, which it never calls")
    return named


def _acl_prelude(name: str) -> str:
    """Lua run before anything else in the script: fail, naming the command, if the
    user may not run one the script may call once it may have written (on its first
    key), so that no denial comes after a first write; a command that only runs before
    (:func:`unchecked`) stops the script harmlessly if denied, and is not checked. ""
    when none is left. redis.acl_check_cmd is Redis 7.0+ and Valkey; without it
    (fakeredis, Redis 6) the check is skipped."""
    missing = sorted(lua_commands(name) - _ARGS.keys())
    if missing:
        raise KeyError(f"{name} calls {missing}: add their arity - 1 to scripts._ARGS")
    checked = sorted(lua_commands(name) - unchecked(name))
    if not checked:
        return ""
    checks = [
        f"  {'if' if i == 0 else 'elseif'} not redis.acl_check_cmd('{c}'"
        + ", k" * _ARGS[c]
        + f") then denied = '{c}'\n"
        for i, c in enumerate(checked)
    ]
    return (
        f"-- ACL check, generated by redistate/scripts.py from {name}'s redis.call list.\n"
        "if redis.acl_check_cmd and KEYS[1] then\n"
        "  local k, denied = KEYS[1], nil\n" + "".join(checks) + "  end\n"
        "  if denied then\n"
        '    return redis.error_reply("NOPERM this user has no permissions to run the \'" ..\n'
        f'      denied .. "\' command ({name} checked before any write)")\n'
        "  end\n"
        "end\n"
    )


@cache
def script(name: str) -> Script:
    """The script called ``name`` (read on first use: see :class:`Script`). Its
    replies come back as the server sent them (see :meth:`Script.replying`)."""
    if name not in _files() or name[0] == "_":
        raise KeyError(f"no Lua script named {name!r} (a new file? run scripts/lua_index.py)")
    return Script(name)


@cache
def _make(name: str) -> Made:
    return Made(_memory(name), f"{library_name()}_{name}", _resent(name))


@cache
def _compiled(name: str) -> tuple[str, str]:
    """(source, SHA-1) of script ``name``: its ACL check, its libraries, then its file."""
    needed = _libraries().get(name)
    if needed is None:
        raise KeyError(f"no Lua script named {name!r}")
    libraries = "".join(_read(lib) for lib in needed)
    source = _acl_prelude(name) + libraries + _read(name)
    return source, hashlib.sha1(source.encode("utf-8")).hexdigest()


# Commands that never write: a script calling only these is registered "no-writes"
# (it runs over maxmemory, and FCALL_RO or a replica could run it).
_READS: Final = frozenset(
    {
        "exists", "get", "getrange", "hexists", "hget", "hgetall", "hmget", "lindex",
        "llen", "lrange", "pttl", "strlen", "time", "xlen", "xrange", "xrevrange",
        "zlexcount", "zrangebylex", "zrangebyscore", "zrevrangebylex", "zscore",
    }
)  # fmt: skip
_FLAGS: Final = r"(?m)^flags +([\w-]+(?: +[\w-]+)*)$"
_KNOWN_FLAGS: Final = frozenset({"allow-oom"})


def flags(name: str) -> tuple[str, ...]:
    """The function flags of script ``name``: "no-writes" for a pure reader, and what
    its header's ``flags`` line declares. Only "allow-oom" may be declared, by a script
    that frees memory (a delete, a release): a function without it is refused whole
    over maxmemory, where EVALSHA refused only a first write that adds data."""
    header = _read(name).split("]]", 1)[0]
    found = re.search(_FLAGS, header)
    declared = tuple(found.group(1).split()) if found else ()
    unknown = set(declared) - _KNOWN_FLAGS
    if unknown:
        raise KeyError(f"{name} declares unknown flags {sorted(unknown)}")
    if lua_commands(name) <= _READS:
        return ("no-writes", *declared)
    return declared


@cache
def library() -> tuple[str, str]:
    """The server-side library of every script (FUNCTION LOAD): its name and its
    source. The ``_*.lua`` libraries are defined once at its top level; each script is
    a function whose body sets KEYS and ARGV (locals of the library) to its arguments,
    then runs its ACL check and its file: the text EVALSHA runs, less the libraries.
    The name is :func:`library_name`, and each function is named ``<library
    name>_<script>``: a new version loads beside an old one (no REPLACE), and a
    rolling upgrade never calls the other's."""
    text = library_text()
    _check_digest(text)
    lib = library_name()
    return lib, f"#!lua name={lib}\n" + text.replace("'@@_", f"'{lib}_")


@cache
def library_text() -> str:
    """The library's source without its name: ``@@`` where the name goes."""
    # KEYS and ARGV: the call's, set first by each function, so that library code
    # reads them as in a script (_graph's helpers do). One call runs at a time.
    body = [
        "-- Generated by redistate/core/scripts.py from the package's Lua files.\n"
        "local KEYS, ARGV\n"
    ]
    # Each library after those it calls: a function sees only the locals defined above it.
    ordered = [lib for name in names() for lib in _libraries()[name]]
    ordered += sorted(lib for lib in _files() if lib[0] == "_")
    body += [_read(lib) for lib in dict.fromkeys(ordered)]
    registered = []
    for name in names():
        registered.append(
            f"redis.register_function{{function_name = '@@_{name}', flags = "
            + "{" + ", ".join(f"'{f}'" for f in flags(name)) + "}"
            + ", callback = function(keys, args)\nKEYS, ARGV = keys, args\n"
            + _acl_prelude(name) + _read(name) + "\nend}\n"
        )  # fmt: skip
    return "".join(body + registered)


def library_digest(text: str) -> str:
    """What names a library text: the first 16 hex digits of its SHA-1."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


@cache
def library_name() -> str:
    """``redistate_<digest>`` of the library's text (:func:`library_text`), as the
    generated index records it: whatever changes the library changes its name, and a
    process's first FCALL reads no Lua file but its script's (only a server that lacks
    the library needs its text)."""
    _check_checkout(_root())
    return f"redistate_{_lua_index.DIGEST}"


def _check_digest(text: str) -> None:
    if library_digest(text) != _lua_index.DIGEST:
        # Only a checkout can get here (a build checks the index): a name that does not
        # change with the text would let a server that holds the library under that
        # name go on running the old functions.
        raise RuntimeError(
            "redistate/core/_lua_index.py is stale (the Lua library changed): "
            "run python scripts/lua_index.py"
        )


def _check_checkout(root: Any) -> None:
    """In a source checkout, check the index's digest against the library's text once
    per state of the files: a Lua file or this module edited since the index was
    written must not reach a server under the index's name. The state last checked (a
    hash of each file's modification time and size) is kept in ``__pycache__``, written
    whatever PYTHONDONTWRITEBYTECODE says (it is not bytecode), so later processes pay
    one stat per file. An installed package is built with a checked index: it pays
    nothing."""
    if not isinstance(root, Path) or not (root.parent / "pyproject.toml").is_file():
        return
    stamp = root / "core" / "__pycache__" / "_lua_index.checked"
    paths = [root / path for path in _files().values()]
    paths += [root / "core" / "scripts.py", root / "core" / "_lua_index.py"]
    try:
        stats = [path.stat() for path in paths]
        state = hashlib.sha1(repr([(s.st_mtime_ns, s.st_size) for s in stats]).encode())
    except FileNotFoundError:
        state = None  # a file the index names is gone: check (the text cannot be made)
    try:
        if state and stamp.read_text() == state.hexdigest():
            return
    except OSError:
        pass
    _check_digest(library_text())
    try:
        stamp.parent.mkdir(exist_ok=True)
        stamp.write_text(state.hexdigest() if state else "")
    except OSError:  # a read-only checkout: checked again by the next process
        pass


_MEMORY: Final = r"(?m)^memory +KEYS\[(\d+)\] +ARGV\[(\d+)\]"


def _memory(name: str) -> tuple[int, int] | None:
    """The 0-based (key, argument) positions of a script's write memory, from the
    ``memory KEYS[k] ARGV[a]`` line of its header; None without one. A script that
    parses a memory argument (calls rs_memory) must declare it."""
    header = _read(name).split("]]", 1)[0]
    found = re.search(_MEMORY, header)
    if found is None:
        if "rs_memory(" in _code(name):
            raise KeyError(f"{name} calls rs_memory but its header has no 'memory' line")
        return None
    return int(found.group(1)) - 1, int(found.group(2)) - 1


_RESENT: Final = r"(?m)^resent +(never|-?\d+(?: +-?\d+)*)$"


def _resent(name: str) -> frozenset[int]:
    """The replies by which script ``name`` says it recognised a resend, from its
    header's ``resent`` line: numbers, or ``never`` (a script whose write memory only
    remembers). A script with a ``memory`` line must have one: a resend it recognises
    and does not say would go uncounted."""
    header = _read(name).split("]]", 1)[0]
    found = re.search(_RESENT, header)
    if found is None:
        if re.search(_MEMORY, header):
            raise KeyError(f"{name} has a 'memory' line but no 'resent' line")
        return frozenset()
    if found.group(1) == "never":
        return frozenset()
    return frozenset(int(code) for code in found.group(1).split())


def names() -> tuple[str, ...]:
    """Every script name, for preloading and for the header test."""
    return tuple(_libraries())
