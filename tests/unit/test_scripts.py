"""Lua scripts as package data: headers, SHAs, libraries."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from redistate.core import _lua_index, scripts
from redistate.core.scripts import Made, Script, script
from tests.lua_flow import Flow


def _lua_files() -> dict[str, str]:
    """Every ``.lua`` file shipped in the package (each folder's lua/): stem -> text."""
    root = Path(str(resources.files("redistate")))
    return {f.stem: f.read_text("utf-8") for f in root.rglob("lua/*.lua")}


def _header(text: str) -> str:
    assert text.startswith("--[["), text[:40]
    end = text.find("]]")
    assert end > 0, "header comment is never closed"
    return text[: end + 2]


def test_there_are_scripts_and_libraries() -> None:
    files = _lua_files()
    assert {"record_put", "record_touch", "record_delete"} <= set(scripts.names())
    assert "_envelope" in files
    assert len(set(scripts.names())) == len(scripts.names())


@pytest.mark.parametrize("name", scripts.names())
def test_script_loads(name: str) -> None:
    loaded = script(name)
    assert isinstance(loaded, Script)
    assert loaded.name == name
    assert loaded.source.strip()
    assert script(name) is loaded  # cached


@pytest.mark.parametrize("name", scripts.names())
def test_script_file_has_a_header(name: str) -> None:
    text = _lua_files()[name]
    header = _header(text)
    assert header.startswith(f"--[[ {name}:")
    for word in ("KEYS", "ARGV", "returns"):
        assert word in header, f"{name}.lua header does not mention {word}"


@pytest.mark.parametrize("name", scripts.names())
def test_sha_is_sha1_of_the_source(name: str) -> None:
    loaded = script(name)
    assert loaded.sha == hashlib.sha1(loaded.source.encode("utf-8")).hexdigest()
    assert len(loaded.sha) == 40
    assert loaded.sha == loaded.sha.lower()


@pytest.mark.parametrize("name", scripts.names())
def test_source_is_the_acl_check_then_libraries_then_the_script_file(name: str) -> None:
    files = _lua_files()
    source = script(name).source
    assert source.endswith(files[name])
    prelude = scripts._acl_prelude(name)
    assert source.startswith(prelude)
    prefix = source[len(prelude) : -len(files[name])]
    libraries = {stem: text for stem, text in files.items() if stem.startswith("_")}
    # The prefix is a concatenation of whole library files, nothing else.
    rest = prefix
    while rest:
        match = [stem for stem, text in libraries.items() if rest.startswith(text)]
        assert match, f"{name}: unexpected text before the script: {rest[:60]!r}"
        rest = rest[len(libraries[match[0]]) :]


def test_record_scripts_use_the_envelope_library() -> None:
    envelope = _lua_files()["_envelope"]
    for name in ("record_put", "record_touch", "record_delete"):
        assert script(name).source[len(scripts._acl_prelude(name)) :].startswith(envelope)


def test_scripts_differ() -> None:
    shas = {script(name).sha for name in scripts.names()}
    assert len(shas) == len(scripts.names())


@pytest.mark.parametrize("name", ["nope", "", "record_put.lua", "RECORD_PUT", "_envelope"])
def test_unknown_name_is_a_key_error(name: str) -> None:
    with pytest.raises(KeyError):
        script(name)


def test_library_files_are_not_scripts() -> None:
    libraries = [stem for stem in _lua_files() if stem.startswith("_")]
    assert libraries
    for stem in libraries:
        assert stem not in scripts.names()
        with pytest.raises(KeyError):
            script(stem)


def test_every_script_name_has_a_file() -> None:
    files = _lua_files()
    for name in scripts.names():
        assert name in files
        assert not name.startswith("_")


def test_every_lua_file_is_a_script_or_a_library_used_by_one() -> None:
    names = set(scripts.names())
    sources = [script(name).source for name in names]
    for stem, text in _lua_files().items():
        if stem.startswith("_"):
            users = [source for source in sources if text in source]
            assert users, f"library {stem}.lua is used by no script"
        else:
            assert stem in names, f"{stem}.lua is not a registered script"


def test_library_headers_say_they_are_not_scripts() -> None:
    for stem, text in _lua_files().items():
        if stem.startswith("_"):
            assert _header(text).startswith(f"--[[ {stem}:")


# -- the ACL: one list, read out of the Lua sources ----------------------------------


def _called(text: str) -> set[str]:
    """Commands called in Lua text, found independently of scripts.py: every
    redis.call / redis.pcall outside comments, whatever its quoting."""
    code = re.sub(r"--\[\[.*?\]\]|--[^\n]*", "", text, flags=re.S)
    calls = re.findall(r"redis\.p?call\(([^,)]*)", code)
    names = {c.strip().strip("'\"").lower() for c in calls}
    assert all(n.isalpha() for n in names), names  # literals only: the check names them
    return names


@pytest.mark.parametrize("name", scripts.names())
def test_each_scripts_acl_check_lists_exactly_the_commands_its_lua_calls(name: str) -> None:
    files = _lua_files()
    libraries = [
        stem for stem in files if stem.startswith("_") and files[stem] in script(name).source
    ]
    # What the script can run: its own calls and those of each library function it
    # reaches (a body runs to its closing "end" at the margin), and theirs.
    bodies: dict[str, str] = {}
    for lib in libraries:
        for m in re.finditer(r"^local function (\w+)\(.*?^end$", files[lib], re.M | re.S):
            bodies[m.group(1)] = m.group(0)
    reached: set[str] = set()
    todo = [files[name]]
    while todo:
        for fn in set(re.findall(r"\b(rs_\w+)\(", todo.pop())) & bodies.keys() - reached:
            reached.add(fn)
            todo.append(bodies[fn])
    called = set().union(_called(files[name]), *(_called(bodies[f]) for f in reached))
    everything = set().union(*(_called(files[f]) for f in [*libraries, name]))
    assert called and scripts.lua_commands(name) == called
    assert _called(files[name]) <= called <= everything
    prelude = scripts._acl_prelude(name)
    checked = set(re.findall(r"acl_check_cmd\('([a-z]+)'", prelude))
    assert checked == called - scripts.unchecked(name)
    # Before the first line of the script itself: nothing can run (or write) first.
    assert script(name).source.index(prelude) == 0
    assert "redis.call(" not in prelude and "redis.pcall(" not in prelude


def test_the_acl_is_the_lua_commands_and_the_clients_own() -> None:
    lua = set().union(*(scripts.lua_commands(n) for n in scripts.names()))
    every = scripts.acl_commands()
    assert list(every) == sorted(set(every))
    assert set(every) == lua | set(scripts.CLIENT_COMMANDS)
    for command in ("fcall", "function|load", "evalsha", "script|load", "get", "scan", "wait"):
        assert command in every
    assert 40 <= len(every) <= 80  # printed on one line by `redistate acl`


def test_every_lua_command_has_an_argument_count_for_the_check() -> None:
    lua = set().union(*(scripts.lua_commands(n) for n in scripts.names()))
    assert lua <= set(scripts._ARGS), lua - set(scripts._ARGS)


def test_a_command_that_is_not_a_literal_is_refused() -> None:
    with pytest.raises(ValueError, match="literal"):
        scripts._calls("local c = 'GET'\nreturn redis.call(c, KEYS[1])")
    assert scripts._calls("-- redis.call('DEL', k)\nreturn redis.pcall(\"GET\", k)") == {"get"}


def test_each_script_gets_the_libraries_whose_functions_it_calls() -> None:
    libraries = scripts._libraries()
    assert libraries["record_put"] == ("_envelope",)
    assert libraries["graph_put"] == ("_envelope", "_graph")  # _graph after what it uses
    assert libraries["graph_read"] == ("_envelope", "_graph")  # rs_ttl, for refresh_on_read
    assert libraries["memory_announce"] == ()
    assert libraries["memory_put"] == ("_envelope", "_memory")
    assert libraries["lock_abandon"] == ()
    assert libraries["checkpoint_find"] == ("_envelope", "_checkpoint_index")
    # Every script that calls an rs_ function gets the library defining it, and the
    # libraries those call, each after the ones it calls; no other.
    files = _lua_files()
    defines = {
        lib: re.findall(r"^local function (rs_\w+)\(", files[lib], re.M)
        for lib in files
        if lib.startswith("_")
    }

    def called(text: str) -> set[str]:
        return {
            lib for lib, fns in defines.items() if any(re.search(rf"\b{f}\(", text) for f in fns)
        }

    for name, needed in libraries.items():
        want, todo = set(), called(files[name])
        while todo:
            lib = todo.pop()
            want.add(lib)
            todo |= called(files[lib]) - want - {lib}
        assert set(needed) == want, name
        for at, lib in enumerate(needed):
            assert called(files[lib]) - {lib} <= set(needed[:at]), (name, lib)


@pytest.mark.parametrize("name", scripts.names())
def test_a_declared_write_memory_names_the_memory_key_and_its_argument(name: str) -> None:
    run = script(name)
    text = _lua_files()[name]
    parses = "rs_memory(" in re.sub(r"--\[\[.*?\]\]|--[^\n]*", "", text, flags=re.S)
    assert (run.memory is not None) == parses, name
    if run.memory is None:
        return
    key_at, arg_at = run.memory
    header = text.split("]]", 1)[0]
    # The KEYS line is the memory's key, the ARGV line the rs_memory argument.
    key_line = re.search(rf"^KEYS\[{key_at + 1}\]\s+(.*)$", header, re.M)
    arg_line = re.search(rf"^ARGV\[{arg_at + 1}\]\s+(.*)$", header, re.M)
    assert key_line and "writes" in key_line.group(1), (name, key_line)
    assert arg_line and "write memory (rs_memory)" in arg_line.group(1), (name, arg_line)
    assert f"rs_memory(ARGV[{arg_at + 1}])" in text, name


def test_a_script_parsing_a_memory_argument_must_declare_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scripts, "_read", lambda name: "--[[ x\n]]\nlocal m = rs_memory(ARGV[1])")
    monkeypatch.setattr(scripts, "_code", lambda name: "local m = rs_memory(ARGV[1])")
    with pytest.raises(KeyError, match="no 'memory' line"):
        scripts._memory("x")


@pytest.mark.parametrize("name", scripts.names())
def test_a_script_with_a_write_memory_says_which_replies_are_resends(name: str) -> None:
    """Each code of the ``resent`` line is a reply its ``returns`` line describes as a
    resend, and each ``rs_resent`` call returns one of them (or the script answers a
    resend without noting it: record_compact, which only remembers)."""
    run = script(name)
    header = _lua_files()[name].split("]]", 1)[0]
    declared = re.search(r"^resent +(.*)$", header, re.M)
    assert (run.memory is None) or declared, name
    if declared is None:
        assert not run.resent
        return
    returns = header.split("\nreturns", 1)[1].split("\nerrors", 1)[0]
    for code in run.resent:
        # "{2": a table whose first element is the code; "2:" / "-1:" a bare reply.
        assert re.search(rf"(\{{{code}\b|(^|\s|;){code}[:;= ])", returns), (name, code)
    assert "resen" in returns or declared.group(1) == "never", name


def test_a_script_with_a_write_memory_must_say_how_it_answers_a_resend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scripts, "_read", lambda name: "--[[ x\nmemory   KEYS[1] ARGV[1]\n]]")
    with pytest.raises(KeyError, match="no 'resent' line"):
        scripts._resent("x")


@pytest.mark.parametrize(
    ("reply", "noted"),
    [([2, 5], True), (2, True), ([1, 5], False), (b"2,0,0", False), (None, False), ([], False)],
)
def test_only_a_reply_the_script_declares_is_noted_as_a_resend(reply: Any, noted: bool) -> None:
    from tests.telemetry import watch

    run = Script("x", Made(None, "f", frozenset({2})))
    with watch() as seen:
        assert run.read(reply) == reply
        assert seen.total("redistate.resends") == (1 if noted else 0)


# -- the function library --------------------------------------------------------------


def test_the_library_is_named_by_a_hash_of_what_makes_it_and_registers_every_script(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, source = scripts.library()
    assert re.fullmatch(r"redistate_[0-9a-f]{16}", name)
    first, _ = source.split("\n", 1)
    assert first == f"#!lua name={name}"
    # The digest of the library's text (as scripts/lua_index.py records it): a change to
    # any Lua file or to how they are assembled renames it.
    assert name == f"redistate_{hashlib.sha1(scripts.library_text().encode()).hexdigest()[:16]}"
    original = scripts._read
    monkeypatch.setattr(scripts, "_read", lambda n: original(n) + (" " if n == "_chain" else ""))
    scripts.library.cache_clear()
    scripts.library_text.cache_clear()
    try:
        # A Lua file changed and the index not rewritten: refused, never the old name.
        with pytest.raises(RuntimeError, match=r"_lua_index\.py is stale"):
            scripts.library()
    finally:
        monkeypatch.undo()
        scripts.library.cache_clear()
        scripts.library_text.cache_clear()
    assert scripts.library() == (name, source)
    registered = re.findall(r"function_name = '([\w]+)'", source)
    assert registered == [f"{name}_{n}" for n in scripts.names()]
    for n in scripts.names():
        run = script(n)
        assert run.function == f"{name}_{n}"
        assert re.fullmatch(r"\w+", run.function) and len(run.function) < 64
        # The function's body is the script's EVALSHA text less its libraries.
        start = source.index(f"function_name = '{run.function}'")
        callback = source[start : source.index("\nend}\n", start)]
        assert scripts._acl_prelude(n) + scripts._read(n) in callback
    # Each library is defined once, at the top, before any function.
    for lib in ("_envelope", "_graph"):
        assert source.count(scripts._read(lib)) == 1
        assert source.index(scripts._read(lib)) < source.index("redis.register_function")


def test_flags_pure_readers_are_no_writes_and_only_allow_oom_may_be_declared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert scripts.flags("read_lists") == ("no-writes",)
    assert scripts.flags("checkpoint_find") == ()  # it may rebuild its index
    assert scripts.flags("record_put") == ()
    assert scripts.flags("record_delete") == ("allow-oom",)
    for n in scripts.names():
        if "no-writes" in scripts.flags(n):
            assert scripts.lua_commands(n) <= scripts._READS, n
    monkeypatch.setattr(scripts, "_read", lambda name: "--[[ x\nflags    no-writes\n]]\n")
    with pytest.raises(KeyError, match="unknown flags"):
        scripts.flags("record_put")


@pytest.mark.parametrize("name", scripts.names())
def test_the_acl_check_leaves_out_exactly_the_commands_that_run_before_any_write(
    name: str,
) -> None:
    """A denied command stops a script where it is: harmless before its first write, a
    partial write after. The header's ``unchecked`` line must name every command that,
    on every path, runs before anything may have been written (so the check costs no
    more than it must) and none that may run after (tests/lua_flow.py, from the syntax
    tree: branches, loops, returns, and the library functions called)."""
    files = _lua_files()
    flow = Flow([files[lib] for lib in scripts._libraries()[name]], scripts._READS)
    after = flow.script(files[name])
    assert set(after) == scripts.lua_commands(name)  # the two readings agree
    before = {command for command, late in after.items() if not late}
    if re.search(r"^acl +every command checked: \S", _header(files[name]), re.M):
        # Run in phases: a later call's commands are checked by the earlier calls too.
        assert scripts.unchecked(name) == frozenset()
        return
    line = "unchecked " + " ".join(sorted(before)) if before else "(no unchecked line)"
    assert scripts.unchecked(name) == before, f"{name}'s header should say: {line}"


def test_each_line_of_the_lua_calls_at_most_one_command() -> None:
    """Redis 7.0 names the line of a command it refused inside a script, not the
    command: one command a line lets PermissionDenied name it."""
    library = scripts.library()[1].split("\n")
    texts = [library, *(script(n).source.split("\n") for n in scripts.names())]
    for lines in texts:
        for line in lines:
            code = line.split("--")[0]
            called = {c.lower() for c in re.findall(r"redis\.p?call\(\s*['\"](\w+)", code)}
            assert len(called) <= 1, line


def test_the_flow_analysis_follows_branches_loops_returns_and_functions() -> None:
    reads = scripts._READS
    lib = "local function rs_w(k)\n  redis.call('DEL', k)\nend\n"

    def late(text: str) -> set[str]:
        return {c for c, v in Flow([lib], reads).script(text).items() if v}

    assert late("redis.call('GET', 'a')\nredis.call('SET', 'a', 1)\nredis.call('GET', 'b')") == {
        "get"
    }
    # A branch that writes and returns leaves the rest unwritten; one that falls through
    # does not.
    assert late("if x then redis.call('SET', 'a', 1) return 1 end\nredis.call('TIME')") == set()
    assert late("if x then redis.call('SET', 'a', 1) end\nredis.call('TIME')") == {"time"}
    # A loop runs again after its body wrote: the read at its top may follow a write.
    text = "for i = 1, 3 do\n  redis.call('GET', 'a')\n  redis.call('SET', 'a', i)\nend"
    assert late(text) == {"get", "set"}
    assert late("repeat local v = redis.call('GET', 'a') until v") == set()
    # A library function's write counts where it is called.
    assert late("rs_w('a')\nredis.call('GET', 'a')") == {"get"}
    assert late("local function f() return redis.call('SET', 'a', 1) end\nf()\nf()") == {"set"}
    # Both sides of "or" may run; parts of one expression in any order.
    assert late("local v = redis.call('SET', 'a', 1) or redis.call('GET', 'a')") == {"get", "set"}
    with pytest.raises(NotImplementedError):
        late("local f = function() redis.call('DEL', 'a') end")
    # A function passed on runs where the analysis cannot see: refused, not ignored.
    with pytest.raises(NotImplementedError, match="as a value"):
        late("local function f() redis.call('SET', 'a', 1) end\npcall(f)")
    with pytest.raises(NotImplementedError, match="defined twice"):
        late("do local function f() end end\nlocal function f() end")
    # A target's key is evaluated before the value: either order counts.
    assert late("t[redis.call('SET', 'a', 1)] = redis.call('GET', 'b')") == {"get", "set"}


def test_the_generated_index_lists_every_lua_file() -> None:
    # What scripts/lua_index.py writes, recomputed: a stale index would give a changed
    # library an old name, which a server may already hold with the old functions.
    root = Path(str(resources.files("redistate")))
    on_disk = {f.stem: f.relative_to(root).as_posix() for f in root.rglob("lua/*.lua")}
    assert scripts._files() == on_disk == scripts.scan()


def test_a_checkout_edited_after_its_index_checks_the_digest_before_naming_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server may hold the library under the index's name: a Lua file changed since
    # must not reach it under that name, or the server runs the old functions. A copy
    # of the package's Lua files, scripts.py and index, in a checkout of its own.
    real, root = Path(scripts.__file__).parent.parent, tmp_path / "redistate"
    (tmp_path / "pyproject.toml").write_text("")
    for rel in [*scripts._files().values(), "core/scripts.py", "core/_lua_index.py"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(real / rel, root / rel)
    stamp = root / "core" / "__pycache__" / "_lua_index.checked"
    scripts._check_checkout(root)  # the digest is right: checked, and the state kept
    assert stamp.is_file()
    monkeypatch.setattr(_lua_index, "DIGEST", "0" * 16)  # the index now disagrees
    scripts._check_checkout(root)  # no file changed since the check: one stat each
    lua = root / scripts._files()["record_put"]
    later = lua.stat().st_mtime_ns + 10**9
    os.utime(lua, ns=(later, later))  # an edit
    for _ in range(2):  # a refusal keeps no state: refused again
        with pytest.raises(RuntimeError, match=r"_lua_index\.py is stale"):
            scripts._check_checkout(root)
    (root / scripts._files()["record_touch"]).unlink()  # a file the index names is gone
    with pytest.raises(RuntimeError, match=r"_lua_index\.py is stale"):
        scripts._check_checkout(root)
    (tmp_path / "pyproject.toml").unlink()  # an installed package trusts its index
    scripts._check_checkout(root)
    monkeypatch.undo()  # the index and the text agree again
    (tmp_path / "pyproject.toml").write_text("")
    stamp.unlink()
    shutil.copy2(real / scripts._files()["record_touch"], root / scripts._files()["record_touch"])
    scripts._check_checkout(root)
    assert stamp.read_text() != ""  # checked, and this state kept
