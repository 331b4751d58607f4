"""``redistate export`` / ``import`` of the Claude Agent SDK's sessions and project
indexes and of Pydantic AI's conversations and their indexes: they round-trip key for
key and read back the same through the frameworks' own APIs, what the stores guarantee
holds after an import (a uuid stored once, a save at the revision read, erasure), a
different stored entity is refused unless forced while an index is merged, and crafted
lines of each kind are refused, naming the line, with nothing written."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationRecord

from redistate import EncryptedCodec, RedistateError, Store
from redistate.admin.backup_codec import codec_of
from redistate.admin.backup_format import BadFile
from redistate.claude import RedistateSessionStore
from redistate.core import kinds
from redistate.pydantic_ai import RedistateConversationStore
from tests.backup_edits import edit_line
from tests.conftest import Backend
from tests.test_backup_kinds import contents
from tests.test_cli_backup import Cli, _dump, _rewrite, _server_us, delete_namespace
from tests.workers import pai_turn

CLAUDE, PROJECT = kinds.CLAUDE.name, kinds.CLAUDE_PROJECT.name
PAI, PAI_LIST = kinds.PYDANTIC_AI.name, kinds.PYDANTIC_AI_LIST.name
KEY: Any = {"project_key": "proj", "session_id": "s1"}
SUB: Any = {**KEY, "subpath": "subagents/a"}


async def seed(store: Store) -> None:
    """A Claude session registered to bob (a main transcript folded into a summary, a
    subagent's, an entry sent twice) and bob's Pydantic AI conversation with a title,
    two turns and a fork of its first."""
    sessions = RedistateSessionStore(store, ttl=600, user="bob")
    first: Any = {"type": "user", "uuid": "e1", "message": {"text": "hi"}}
    await sessions.append(KEY, [first])
    await sessions.append(KEY, [{"type": "assistant", "uuid": "e2"}, {"type": "x"}])
    await sessions.append(KEY, [first])  # sent again: stored once
    await sessions.append(SUB, [{"type": "x", "uuid": "x1"}])
    conversations = RedistateConversationStore(store, ttl=600, register_scopes=True)
    conversation = Conversation(conversation_id="c1")
    conversation.messages.extend([*pai_turn(0, 0), *pai_turn(0, 1)])
    await conversations.save(conversation, scope="bob")
    await conversations.update("c1", title="Trip", expected_title=None)
    await conversations.fork("c1", at=2, new_conversation_id="c2", scope="bob")


async def read(store: Store) -> Any:
    """Everything seed() wrote, as the frameworks' stores read it."""
    sessions = RedistateSessionStore(store)
    conversations = RedistateConversationStore(store)
    loaded = {}
    for cid in ("c1", "c2"):
        conversation = await conversations.load(cid)
        loaded[cid] = None if conversation is None else conversation.messages
    return {
        "main": await sessions.load(KEY),
        "sub": await sessions.load(SUB),
        "subkeys": await sessions.list_subkeys(KEY),
        "listed": await sessions.list_sessions("proj"),
        "summaries": await sessions.list_session_summaries("proj"),
        "conversations": loaded,
        "records": [dataclasses.asdict(r) for r in await conversations.list_conversations()],
        "bob": [r.conversation_id for r in await conversations.list_conversations(scope="bob")],
    }


def _export(store: Store, path: Path) -> Path:
    with open(path, "wb") as sink:
        store.admin.export(sink)
    return path


def test_sessions_and_conversations_round_trip_and_go_on_as_before(
    backend: Backend, namespace: str, tmp_path: Path
) -> None:
    cli = Cli(backend, namespace)
    with cli.store() as store:
        asyncio.run(seed(store))
        before = asyncio.run(read(store))
    keys = contents(backend, namespace)
    assert f":{PROJECT}:{{proj}}" in keys and f":{PAI_LIST}:{{=bob}}" in keys
    assert len(before["main"]) == 3 and len(before["summaries"]) == 1
    path = tmp_path / "backup.jsonl"

    exported = cli.export(path)

    assert exported["left_out"] == {}, exported
    assert exported["claudes"] == 1 and exported["claude_projects"] == 1, exported
    assert exported["pydantic_ais"] == 2 and exported["pydantic_ai_lists"] == 2, exported
    # The unchanged file into the same namespace: nothing refused, nothing changed.
    code, report, _ = cli.import_(path)
    assert code == 0 and report["refused"] == 0, report
    assert contents(backend, namespace) == keys

    delete_namespace(backend, namespace)
    code, report, _ = cli.import_(path)

    assert code == 0 and report["refused"] == 0 and report["failed"] == 0, report
    assert contents(backend, namespace) == keys
    with cli.store() as store:
        assert asyncio.run(read(store)) == before

        async def go_on() -> None:
            # The uuid marks came along: an entry sent again is stored once.
            sessions = RedistateSessionStore(store, ttl=600)
            await sessions.append(KEY, [{"type": "user", "uuid": "e2"}, {"type": "y"}])
            assert [e.get("type") for e in await sessions.load(KEY) or []] == [
                "user", "assistant", "x", "y"
            ]  # fmt: skip
            # The revision came along: a save from what was loaded goes through.
            conversations = RedistateConversationStore(store, ttl=600)
            conversation = await conversations.load("c1")
            assert conversation is not None
            conversation.messages.extend(pai_turn(0, 2))
            await conversations.save(conversation)
            again = await conversations.load("c1")
            assert again is not None and len(again.messages) == 6

        asyncio.run(go_on())
        # The user index came along: erasing bob deletes both.
        report_ = store.users.erase("bob")
        assert sorted(report_.deleted[PAI]) == ["c1", "c2"]
        assert report_.deleted[CLAUDE] == ["proj/s1"]
        after = asyncio.run(read(store))
        assert after["main"] is None and after["conversations"] == {"c1": None, "c2": None}


def test_a_different_session_or_conversation_is_refused_unless_forced_and_indexes_merge(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    cli = Cli(server_backend, namespace)
    with cli.store() as store:
        asyncio.run(seed(store))
        path = _export(store, tmp_path / "backup.jsonl")
        exported = contents(server_backend, namespace)

        async def more() -> None:
            sessions = RedistateSessionStore(store, ttl=600)
            await sessions.append(KEY, [{"type": "later"}])
            other: Any = {**KEY, "session_id": "s2"}
            await sessions.append(other, [{"type": "new"}])
            conversations = RedistateConversationStore(store, ttl=600)
            conversation = await conversations.load("c1")
            assert conversation is not None
            conversation.messages.extend(pai_turn(1, 0))
            await conversations.save(conversation)
            await conversations.save(Conversation(conversation_id="c3"), scope="bob")

        asyncio.run(more())
    changed = contents(server_backend, namespace)

    code, report, _ = cli.import_(path)

    assert code == 1, report
    assert sorted(report["refused_ids"]) == [f"{CLAUDE} proj/s1", f"{PAI} c1"]
    after = contents(server_backend, namespace)
    assert after == changed  # indexes too: they hold the file's members already
    for index in (f":{PROJECT}:{{proj}}", f":{PAI_LIST}:{{=bob}}", f":{PAI_LIST}:{{all}}"):
        stored = {m for m, _ in after[index][1]}
        assert {m for m, _ in exported[index][1]} < stored, index  # a union, never shrunk

    code, report, _ = cli.import_(path, force=True)

    assert code == 0 and report["refused"] == 0, report
    after = contents(server_backend, namespace)
    for key in (":claude:{proj/s1}", ":claude:{proj/s1}:log", ":pydantic-ai:{c1}"):
        assert after[key] == exported[key], key
    for key in (":claude:{proj/s2}", f":{PROJECT}:{{proj}}", f":{PAI_LIST}:{{all}}"):
        assert after[key] == changed[key], key  # not in the file: kept; indexes not shrunk


def test_an_encrypted_export_needs_the_stores_keys(
    server_backend: Backend, namespace: str, tmp_path: Path
) -> None:
    codec = EncryptedCodec(keys={"k1": b"k" * 32}, primary="k1")
    with Store(server_backend.sync_client(), namespace=namespace, codec=codec) as store:
        asyncio.run(seed(store))
        before = asyncio.run(read(store))
        path = _export(store, tmp_path / "backup.jsonl")
    delete_namespace(server_backend, namespace)
    other = EncryptedCodec(keys={"k1": b"o" * 32}, primary="k1")
    with (
        Store(server_backend.sync_client(), namespace=namespace, codec=other) as store,
        pytest.raises(BadFile, match="does not decode with the store's codec"),
    ):
        store.admin.import_file(path)
    assert _dump(server_backend, namespace) == {}
    with Store(server_backend.sync_client(), namespace=namespace, codec=codec) as store:
        assert store.admin.import_file(path).refused_count == 0
        assert asyncio.run(read(store)) == before


def test_what_the_stores_accept_exports_and_imports(
    backend: Backend, namespace: str, tmp_path: Path
) -> None:
    """Data the stores take that a strict reading would not: a save time hours ahead of
    the server (the client's clock) or before 1970, a subpath holding a lone surrogate,
    a conversation saved with no messages."""
    odd: Any = {"project_key": "p", "session_id": "s1"}
    odd_sub: Any = {**odd, "subpath": "sub\ud800"}

    async def seed_odd(store: Store) -> Any:
        sessions = RedistateSessionStore(store, ttl=600)
        await sessions.append(odd, [{"type": "user", "uuid": "u1"}])
        await sessions.append(odd_sub, [{"type": "x"}])
        conversations = RedistateConversationStore(store)
        for cid, at in (("ahead", dt.timedelta(hours=3)), ("old", -dt.timedelta(days=60 * 365))):
            record = ConversationRecord(
                conversation_id=cid, head_id=None, updated_at=dt.datetime.now(dt.timezone.utc) + at
            )
            await conversations.write_record(record, expected_revision=None)
        await conversations.save(Conversation(conversation_id="empty"))
        return (
            await sessions.load(odd),
            await sessions.load(odd_sub),
            await sessions.list_subkeys(odd),
            [dataclasses.asdict(r) for r in await conversations.list_conversations()],
        )

    async def read_odd(store: Store) -> Any:
        sessions = RedistateSessionStore(store)
        conversations = RedistateConversationStore(store)
        return (
            await sessions.load(odd),
            await sessions.load(odd_sub),
            await sessions.list_subkeys(odd),
            [dataclasses.asdict(r) for r in await conversations.list_conversations()],
        )

    cli = Cli(backend, namespace)
    with cli.store() as store:
        before = asyncio.run(seed_odd(store))
    keys = contents(backend, namespace)
    path = tmp_path / "backup.jsonl"
    exported = cli.export(path)
    assert exported["damaged"] == 0 and exported["pydantic_ais"] == 3, exported
    delete_namespace(backend, namespace)
    code, report, _ = cli.import_(path)
    assert code == 0 and report["refused"] == 0 and report["failed"] == 0, report
    assert contents(backend, namespace) == keys
    with cli.store() as store:
        assert asyncio.run(read_odd(store)) == before


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        ((0, 0, "whole", "hzs", 1, 1, 0, "seq", "1", "m", "nan"), "score nan"),
        ((0, 0, "whole", "hzs", 1, 1, 0, "seq", "1", "m", "inf"), "score inf"),
        ((0, 0, "whole", "hzs", 1, 1, 0, "seq", "1", "m", "0x10"), "score 0x10"),
        ((0, 0, "whole", "hzs", 1, 2, 0, "seq", "1", "m", "0"), "arguments"),
        ((0, 0, "whole", "hzx", 1, 1, 0, "seq", "1", "m", "0"), "arguments"),
        ((0, 0, "merge", "hzs", 1, 1, 0, "seq", "1", "m", "0"), "arguments"),
        ((0, 2, "whole", "hzs", 1, 1, 0, "seq", "1", "m", "0"), "arguments"),
    ],
)
def test_import_parts_refuses_malformed_arguments_before_any_write(
    server_backend: Backend, namespace: str, argv: tuple[Any, ...], what: str
) -> None:
    """The Python side never sends these; a script called otherwise writes nothing."""
    from redistate.admin.backup_parts import PartsCodec

    with Store(server_backend.sync_client(), namespace=namespace) as store:
        codec = codec_of(kinds.CLAUDE)
        assert isinstance(codec, PartsCodec)
        keys = codec.keys(store.keys, CLAUDE, "p/x")
        with pytest.raises(RedistateError, match=f"RSARG malformed {what} to import_parts"):
            store._conn.script(codec.script(), keys, argv)
        assert _dump(server_backend, namespace) == {}


# -- crafted lines ---------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _un(text: str) -> bytes:
    return base64.b64decode(text)


def _parts(kind: str, entity: str, change: Any) -> Any:
    """An edit of the ``kind`` line of ``entity``: ``change(parts)`` -> its new parts."""
    return edit_line(kind, entity, lambda line, now: {**line, "parts": change(dict(line["parts"]))})


def _hash(part: dict[str, str], name: bytes, value: bytes | None) -> dict[str, str]:
    """A hash part with field ``name`` set to ``value`` (None: removed)."""
    found = {_un(f): v for f, v in part.items()}
    if value is None:
        del found[name]
    else:
        found[name] = _b64(value)
    return {_b64(f): v for f, v in found.items()}


def _log(parts: dict[str, Any], member: bytes) -> dict[str, Any]:
    return {**parts, "log": [*parts["log"], [_b64(member), 0]]}


def _garbled(parts: dict[str, Any]) -> dict[str, Any]:
    """A session's parts with its first main-transcript entry's payload replaced."""
    log = [[_un(m), at] for m, at in parts["log"]]
    n = next(i for i, (m, _) in enumerate(log) if m[:1] == b"\0")
    log[n][0] = log[n][0][:17] + b"\xff"
    return {**parts, "log": [[_b64(m), at] for m, at in log]}


def _late(now_us: int) -> bytes:
    return b"%d" % (now_us + 2 * 3600 * 10**6)


def _session_v_late(line: dict[str, Any], now_us: int) -> dict[str, Any]:
    parts = dict(line["parts"])
    parts["session"] = _hash(parts["session"], b"v", _late(now_us))
    return {**line, "parts": parts}


def _entry(parts: dict[str, Any], data: bytes) -> dict[str, Any]:
    """A conversation's parts with one entry's bytes replaced."""
    entries = {f: v for f, v in parts["entries"].items()}
    first = sorted(entries)[0]
    return {**parts, "entries": {**entries, first: _b64(data)}}


def _renumbered(parts: dict[str, Any]) -> dict[str, Any]:
    """A session's parts with its second entry numbered as its first."""
    log = [[_un(m), at] for m, at in parts["log"]]
    entries = [i for i, (m, _) in enumerate(log) if m[:1] == b"\0"]
    first, second = log[entries[0]][0], log[entries[1]][0]
    log[entries[1]][0] = first[:17] + second[17:]
    return {**parts, "log": [[_b64(m), at] for m, at in log]}


def _project_late(line: dict[str, Any], now_us: int) -> dict[str, Any]:
    late = (now_us + 2 * 3600 * 10**6) // 1000
    return {**line, "parts": {"sessions": [[m, late] for m, _ in line["parts"]["sessions"]]}}


def _looped(parts: dict[str, Any]) -> dict[str, Any]:
    """A conversation's parts whose first entry's parent is the last: a loop."""
    parents = {_un(f): _un(v) for f, v in parts["parents"].items()}
    first = next(f for f, v in parents.items() if not v)
    last = next(f for f in parents if f not in parents.values())
    parents[first] = last
    return {**parts, "parents": {_b64(f): _b64(v) for f, v in parents.items()}}


def _body(**change: Any) -> Any:
    """A conversation's parts with fields of its record's body (plain JSON) changed."""

    def edit(parts: dict[str, Any]) -> dict[str, Any]:
        record = {_un(f): _un(v) for f, v in parts["record"].items()}
        record[b"body"] = orjson.dumps({**orjson.loads(record[b"body"]), **change})
        return {**parts, "record": {_b64(f): _b64(v) for f, v in record.items()}}

    return edit


S1, C1 = "proj/s1", "c1"

# case -> (edit(lines, server µs), the label the message starts with, what it says)
CRAFTED: dict[str, tuple[Any, str, str]] = {
    "claude entry not decodable": (
        _parts(CLAUDE, S1, _garbled),
        f"{CLAUDE} {S1}",
        "does not decode with the store's codec",
    ),
    "claude log member without a separator": (
        _parts(CLAUDE, S1, lambda p: _log(p, b"no separator")),
        "",
        "is not '<subpath>\\0…' or '<subpath>\\1…'",
    ),
    "claude entry of an unknown subpath": (
        _parts(CLAUDE, S1, lambda p: _log(p, b"elsewhere\x000000000000000001{}")),
        "",
        "subpath not in subs",
    ),
    "claude entry without a sequence": (
        _parts(CLAUDE, S1, lambda p: _log(p, b"\x00{}")),
        "",
        "has no 16-digit sequence",
    ),
    "claude log score not 0": (
        _parts(CLAUDE, S1, lambda p: {**p, "log": [[m, 5] for m, _ in p["log"]]}),
        "",
        "has score b'5', not 0",
    ),
    "claude entry past seq": (
        _parts(CLAUDE, S1, lambda p: {**p, "session": _hash(p["session"], b"seq", b"1")}),
        "",
        "is repeated or not from 1 to seq 1",
    ),
    "claude seq past 2**53": (
        _parts(CLAUDE, S1, lambda p: {**p, "session": _hash(p["session"], b"seq", b"9" * 16)}),
        "",
        "parts.session seq b'9999999999999999' is not an integer from 0",
    ),
    "claude seq not canonical": (
        _parts(CLAUDE, S1, lambda p: {**p, "session": _hash(p["session"], b"seq", b"04")}),
        "",
        "is not an integer",
    ),
    "claude entry numbered twice": (_parts(CLAUDE, S1, _renumbered), "", "is repeated"),
    "claude main transcript without its time": (
        _parts(CLAUDE, S1, lambda p: {**p, "session": _hash(p["session"], b"mtime", None)}),
        "",
        "parts.session has no mtime for its main transcript",
    ),
    "claude uuid mark without its entry": (
        _parts(CLAUDE, S1, lambda p: _log(p, b"\x01ghost")),
        f"{CLAUDE} {S1}",
        "the uuids its entries carry and its marks differ",
    ),
    "claude summary not an object": (
        _parts(CLAUDE, S1, lambda p: {**p, "session": _hash(p["session"], b"sum", b"[1, 2]")}),
        f"{CLAUDE} {S1}",
        "the summary is list, not an object",
    ),
    "claude project time 2 h ahead": (
        edit_line(PROJECT, "proj", _project_late),
        f"{PROJECT} proj",
        "over the limit",
    ),
    "claude session field foreign": (
        _parts(CLAUDE, S1, lambda p: {**p, "session": _hash(p["session"], b"x", b"1")}),
        "",
        "is not seq, v, sum or mtime",
    ),
    "claude summary version 2 h ahead": (
        edit_line(CLAUDE, S1, _session_v_late),
        f"{CLAUDE} {S1}",
        "over the limit",
    ),
    "claude summary not decodable": (
        _parts(CLAUDE, S1, lambda p: {**p, "session": _hash(p["session"], b"sum", b"\xff")}),
        f"{CLAUDE} {S1}",
        "does not decode with the store's codec",
    ),
    "claude subpath with a control character": (
        _parts(CLAUDE, S1, lambda p: {**p, "subs": [_b64(b"a\nb")]}),
        "",
        "holds a control character",
    ),
    "claude id without a session": (
        edit_line(CLAUDE, S1, lambda line, now: {**line, "id": "proj"}),
        "",
        "is not '<project key>/<session id>'",
    ),
    "claude part missing": (
        _parts(CLAUDE, S1, lambda p: {k: v for k, v in p.items() if k != "subs"}),
        "",
        "parts must name exactly",
    ),
    "claude project member not an id": (
        _parts(PROJECT, "proj", lambda p: {"sessions": [[_b64(b"\xff"), 1]]}),
        "",
        "is not UTF-8",
    ),
    "claude project score not a number": (
        _parts(PROJECT, "proj", lambda p: {"sessions": [[m, "soon"] for m, _ in p["sessions"]]}),
        "",
        "score must be a finite number",
    ),
    "claude project empty": (
        _parts(PROJECT, "proj", lambda p: {"sessions": []}),
        "",
        "every part is empty",
    ),
    "conversation entry not decodable": (
        _parts(PAI, C1, lambda p: _entry(p, b"\xff")),
        f"{PAI} {C1}",
        "does not decode with the store's codec",
    ),
    "conversation parent not stored": (
        _parts(
            PAI,
            C1,
            lambda p: {
                **p,
                "parents": {f: _b64(b"gone") for f in p["parents"]},
            },
        ),
        "",
        "is not stored",
    ),
    "conversation entry without a parent": (
        _parts(PAI, C1, lambda p: {**p, "parents": dict(sorted(p["parents"].items())[1:])}),
        "",
        "is in only one of parts.entries and parents",
    ),
    "conversation head not stored": (
        _parts(PAI, C1, lambda p: {**p, "entries": {}, "parents": {}}),
        f"{PAI} {C1}",
        "the record's head",
    ),
    "conversation record field foreign": (
        _parts(PAI, C1, lambda p: {**p, "record": _hash(p["record"], b"x", b"1")}),
        "",
        "is not one of",
    ),
    "conversation without a revision": (
        _parts(PAI, C1, lambda p: {**p, "record": _hash(p["record"], b"rev", None)}),
        "",
        "parts.record has no rev",
    ),
    "conversation save time not an integer": (
        _parts(PAI, C1, lambda p: {**p, "record": _hash(p["record"], b"upd", b"soon")}),
        "",
        "parts.record upd b'soon' is not an integer",
    ),
    "conversation title not decodable": (
        _parts(PAI, C1, lambda p: {**p, "record": _hash(p["record"], b"title", b"\xff")}),
        f"{PAI} {C1}",
        "does not decode with the store's codec",
    ),
    "conversation parents in a loop": (_parts(PAI, C1, _looped), "", "lead back to it"),
    "conversation body of another conversation": (
        _parts(PAI, C1, _body(conversation_id="c2")),
        f"{PAI} {C1}",
        "the record's body has conversation_id 'c2', not 'c1'",
    ),
    "conversation revision apart from its body's": (
        _parts(PAI, C1, lambda p: {**p, "record": _hash(p["record"], b"rev", b"other")}),
        f"{PAI} {C1}",
        "the record's body has revision",
    ),
    "conversation moved to another scope": (
        _parts(PAI, C1, lambda p: {**p, "record": _hash(p["record"], b"scope", b"alice")}),
        f"{PAI} {C1}",
        "the record's body has scope 'bob', not 'alice'",
    ),
    "conversation body not a record": (
        _parts(PAI, C1, lambda p: {**p, "record": _hash(p["record"], b"body", b"[1, 2]")}),
        f"{PAI} {C1}",
        "the record's body is list, not an object",
    ),
    "conversation branch not stored": (
        _parts(PAI, C1, _body(branches=["gone"])),
        f"{PAI} {C1}",
        "the record's branch 'gone' is not in parts.entries",
    ),
    "conversation details version not canonical": (
        _parts(PAI, C1, lambda p: {**p, "record": _hash(p["record"], b"dver", b"01")}),
        "",
        "parts.record dver b'01' is not an integer",
    ),
    "conversation entry not an entry": (
        _parts(PAI, C1, lambda p: _entry(p, b'{"kind": "message"}')),
        f"{PAI} {C1}",
        "is not {kind, message}",
    ),
    "conversation index time not an integer": (
        _parts(
            PAI_LIST, "=bob", lambda p: {"conversations": [[m, 1.5] for m, _ in p["conversations"]]}
        ),
        "",
        "time b'1.5' is not an integer",
    ),
    "conversation index of no scope": (
        edit_line(PAI_LIST, "=bob", lambda line, now: {**line, "id": "bob"}),
        "",
        "is not 'all' or '=<scope>'",
    ),
    "conversation index member not an id": (
        _parts(PAI_LIST, "=bob", lambda p: {"conversations": [[_b64(b""), 1]]}),
        "",
        "parts.conversations member",
    ),
}


# The checks run before anything is sent, the same whatever the server: one server, and
# through the library (tests/test_backup_kinds.py runs its crafted lines through the CLI).
@pytest.mark.parametrize("server_backend", ["redis7"], indirect=True)
@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_line_of_each_kind_is_named_and_nothing_is_imported(
    server_backend: Backend, namespace: str, tmp_path: Path, case: str
) -> None:
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        asyncio.run(seed(store))
        path = _export(store, tmp_path / "backup.jsonl")
    delete_namespace(server_backend, namespace)
    with Store(server_backend.sync_client(), namespace=namespace) as store:
        store.users.put("live", {"a": 1})  # live data, left as it is
    edit, label, message = CRAFTED[case]
    bad = _rewrite(path, lambda lines: edit(lines, _server_us(server_backend)))
    pairs = zip(path.read_bytes().splitlines(), bad.read_bytes().splitlines(), strict=True)
    line = 1 + next(n for n, (a, b) in enumerate(pairs) if a != b)
    before = _dump(server_backend, namespace)
    for force in (False, True):
        with (
            Store(server_backend.sync_client(), namespace=namespace) as store,
            pytest.raises(BadFile) as refused,
        ):
            store.admin.import_file(bad, force=force)
        assert str(refused.value).startswith(f"{bad}:{line}: {label}"), refused.value
        assert message in str(refused.value), refused.value
        assert _dump(server_backend, namespace) == before
