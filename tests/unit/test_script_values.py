"""Each script's argument value and reply parser against its Lua header: argv() in the
documented ARGV order, every documented reply shape to the right named value, and
``wrote`` (whether a replicated call WAITs) as the connection has always decided it."""

from __future__ import annotations

import re
from typing import Any

import pytest

from redistate.adapters.agents import rotate_async as async_agents_rotate
from redistate.adapters.agents import session as agents_session
from redistate.adapters.agents.spec import (
    AddStatus,
    AgentsAddArgs,
    AgentsAddReply,
    AgentsClearArgs,
    AgentsClearReply,
    AgentsPopArgs,
    AgentsPopReply,
    AgentsRecodeArgs,
    AgentsRecodeReply,
    ClearStatus,
    PopStatus,
)
from redistate.adapters.langgraph import threads_async as async_graph
from redistate.adapters.langgraph.graph import (
    DUMP_ARGS,
    GraphDumpReply,
    GraphHistoryArgs,
    GraphHistoryReply,
    GraphLoadArgs,
    GraphLoadReply,
    GraphPutArgs,
    GraphPutReply,
    GraphReadArgs,
    GraphReadReply,
    GraphRemoveArgs,
    GraphRemoveReply,
    GraphWritesArgs,
    GraphWritesReply,
    Stored,
)
from redistate.admin.backup_codec import ImportReply, codecs
from redistate.checkpoints import migrate_async as async_checkpoint_migrate
from redistate.checkpoints import rotate_async as async_checkpoint_rotate
from redistate.checkpoints import tasks_async as async_checkpoints
from redistate.checkpoints.spec import (
    CheckpointDeleteArgs,
    CheckpointDeleteReply,
    CheckpointFindArgs,
    CheckpointFindReply,
    CheckpointLogArgs,
    CheckpointLogReply,
    CheckpointMigrateArgs,
    CheckpointMigrateReply,
    CheckpointRecodeArgs,
    CheckpointRecodeReply,
    CheckpointSaveArgs,
    CheckpointSaveReply,
    LogStatus,
    SaveStatus,
)
from redistate.core.scripts import Parsed, _files, _read, script
from redistate.events import stream_async as async_events
from redistate.events.spec import (
    AppendStatus,
    EventAppendArgs,
    EventAppendReply,
    EventStageArgs,
    EventStageReply,
    EventSwapArgs,
    EventSwapReply,
    EventTrimArgs,
    EventTrimReply,
)
from redistate.leases import lease_async as async_leases
from redistate.leases.spec import (
    LockAbandonArgs,
    LockAbandonReply,
    LockAcquireArgs,
    LockAcquireReply,
    LockExtendArgs,
    LockExtendReply,
    LockReleaseArgs,
    LockReleaseReply,
)
from redistate.records import collection_async as async_records
from redistate.records.spec import (
    MergeStatus,
    PutStatus,
    RecordCompactArgs,
    RecordCompactReply,
    RecordDeleteArgs,
    RecordDeleteReply,
    RecordMergeArgs,
    RecordMergeReply,
    RecordPutArgs,
    RecordPutReply,
    RecordTouchArgs,
    RecordTouchReply,
)
from redistate.steps import rotate_async as async_steps
from redistate.steps.spec import StepRecodeArgs, StepRecodeReply, StepRecordArgs, StepRecordReply

_ARGV_LINE = re.compile(r"^ARGV\[(\d+)\]\s+(.*)$", re.M)


def header_argv(name: str) -> dict[int, str]:
    """ARGV index -> the first line of its description, from the script's header."""
    text = _read(name)
    header = text[: text.index("]]")]
    return {int(n): line for n, line in _ARGV_LINE.findall(header)}


# (script, argument value, [(argv element, a phrase of that ARGV's header line)...])
ARGV_CASES: list[tuple[str, Any, list[tuple[Any, str]]]] = [
    (
        "record_put",
        RecordPutArgs(7, 1000, b"value", b"1,w\n", True, "tok,3", 9),
        [
            (7, "expected version"),
            (1000, "ttl in ms"),
            (b"value", "the new value"),
            (b"1,w\n", "header tail"),
            (1, "keep the record's current TTL"),
            ("tok,3", "lease value"),
            (9, "write id is remembered"),
        ],
    ),
    (
        "record_merge",
        RecordMergeArgs(b"2:{}", 1000, False, b"1,w\n", "tok,3", 9, 4096, brief=True),
        [
            (b"2:{}", "the patch as one frame"),
            (1000, "ttl in ms"),
            (0, "keep the record's TTL"),
            (b"1,w\n", "header tail"),
            ("tok,3", "lease value"),
            (9, "write ids are remembered"),
            (4096, "the most payload bytes"),
            ("1", "optional"),
        ],
    ),
    (
        "record_delete",
        RecordDeleteArgs(5, "tok,3", "d1", 9),
        [
            (5, "expected version"),
            ("tok,3", "lease value"),
            ("d1", "the delete's own id"),
            (9, "ids are remembered"),
        ],
    ),
    (
        "record_touch",
        RecordTouchArgs(1000, True, "tok,3"),
        [(1000, "ttl in ms"), (1, "also return the value"), ("tok,3", "lease value")],
    ),
    (
        "record_compact",
        RecordCompactArgs(b"1,w\n", 40, b"{}", b"1,x\n", 9),
        [
            (b"1,w\n", "header tail of the value that was read"),
            (40, "length in bytes"),
            (b"{}", "the new payload"),
            (b"1,x\n", "the new header tail"),
            (9, "write ids are remembered"),
        ],
    ),
    (
        "checkpoint_save",
        CheckpointSaveArgs("c1", b"blob", 10, 1000, 42, "tok,42", 9, True),
        [
            ("c1", "checkpoint id"),
            (b"blob", "the checkpoint blob"),
            (10, "keep"),
            (1000, "ttl in ms"),
            (42, "fence of the lease"),
            ("tok,42", "lease value"),
            (9, "checkpoint id is remembered"),
            (1, "the caller chose the id"),
        ],
    ),
    (
        "checkpoint_log",
        CheckpointLogArgs("d1", b"blob", 100, 1000, True, "tok,3", 9, "c1"),
        [
            ("d1", "delta id"),
            (b"blob", "the delta blob"),
            (100, "the most deltas"),
            (1000, "ttl in ms"),
            (1, "follow the task's current expiry"),
            ("tok,3", "lease value"),
            (9, "delta id is remembered"),
            ("=c1", "optional"),
        ],
    ),
    (
        "checkpoint_delete",
        CheckpointDeleteArgs("tok,3", "d1", 9),
        [("tok,3", "lease value"), ("d1", "the delete's own id"), (9, "ids are remembered")],
    ),
    ("checkpoint_find", CheckpointFindArgs("c1"), [("c1", "the checkpoint id")]),
    (
        "lock_acquire",
        LockAcquireArgs("ab" * 16, 30_000),
        [("ab" * 16, "token"), (30_000, "ttl in ms")],
    ),
    (
        "lock_release",
        LockReleaseArgs("tok,3", 9),
        [("tok,3", "the lease's value"), (9, "released values are remembered")],
    ),
    (
        "lock_extend",
        LockExtendArgs("tok,3", 30_000),
        [("tok,3", "the lease's value"), (30_000, "new ttl in ms")],
    ),
    ("lock_abandon", LockAbandonArgs("ab" * 16), [("ab" * 16, "the token")]),
    (
        "step_record",
        StepRecordArgs("fetch", b"S1,d", "tok,3", 1000),
        [
            ("fetch", "the step's name"),
            (b"S1,d", "the record"),
            ("tok,3", "lease value"),
            (1000, "ttl in ms"),
        ],
    ),
    (
        "event_append",
        EventAppendArgs("p" * 64, 4, "updated", 2, 1700, b"{}", "d" * 64, "tok,3", "w1", 9),
        [
            ("p" * 64, "the digest the caller believes ends the chain"),
            (4, "this event's position"),
            ("updated", "type"),
            (2, "schema"),
            (1700, "the appender's clock"),
            (b"{}", "payload"),
            ("d" * 64, "this event's digest"),
            ("tok,3", "lease value"),
            ("w1", "write id"),
            (9, "write ids are remembered"),
        ],
    ),
    (
        "agents_pop",
        AgentsPopArgs(9, "w1"),
        [(9, "how long (ms) write ids are remembered"), ("w1", "the pop's write id")],
    ),
    (
        "agents_clear",
        AgentsClearArgs(9, "w1"),
        [(9, "how long (ms) write ids are remembered"), ("w1", "the clear's write id")],
    ),
    (
        "graph_read",
        GraphReadArgs(b"+", b"-", 10, 60_000),
        [
            (b"+", "the upper end"),
            (b"-", "the lower end"),
            (10, "the most checkpoints"),
            (60_000, "ttl in ms to restart"),
        ],
    ),
    (
        "event_trim",
        EventTrimArgs("1-0", "d" * 64, b"3", b"{}", "s" * 64),
        [
            ("1-0", "the stream id of the last event"),
            ("d" * 64, "its digest"),
            (b"3", "its position"),
            (b"{}", "the state folded"),
            ("s" * 64, "SHA-256 hex over ARGV[2] and ARGV[4]"),
        ],
    ),
]


@pytest.mark.parametrize(("name", "args", "expected"), ARGV_CASES, ids=[c[0] for c in ARGV_CASES])
def test_argv_is_in_the_order_the_header_documents(
    name: str, args: Any, expected: list[tuple[Any, str]]
) -> None:
    documented = header_argv(name)
    assert sorted(documented) == list(range(1, len(expected) + 1)), documented
    assert args.argv() == tuple(value for value, _ in expected)
    for n, (_, phrase) in enumerate(expected, 1):
        assert phrase in documented[n], f"{name} ARGV[{n}]: {documented[n]!r}"


def test_every_script_operation_has_an_argument_case() -> None:
    named = {name for name, _, _ in ARGV_CASES}
    assert named == {
        "record_put", "record_merge", "record_delete", "record_touch", "record_compact",
        "checkpoint_save", "checkpoint_log", "checkpoint_delete", "checkpoint_find",
        "lock_acquire", "lock_release", "lock_extend", "lock_abandon",
        "step_record", "event_append", "event_trim",
        "agents_pop", "agents_clear", "graph_read",
    }  # fmt: skip


def header(name: str) -> str:
    text = _read(name)
    return str(text[: text.index("]]")])


# Scripts whose ARGV after the fixed ones repeats: (script, argument value, argv, how
# many fixed ARGV the header numbers, a phrase naming the group).
VARIADIC_CASES: list[tuple[str, Any, tuple[Any, ...], int, str]] = [
    (
        "checkpoint_migrate",
        CheckpointMigrateArgs(3, (b"K1,d", "c1", b"K1,e")),
        (3, b"K1,d", "c1", b"K1,e"),
        1,
        "then triples: a prefix naming one checkpoint",
    ),
    (
        "checkpoint_recode",
        CheckpointRecodeArgs((b"K1,d", b"K1,e", b"D1,x,", b"D1,y")),
        (b"K1,d", b"K1,e", b"D1,x,", b"D1,y"),
        0,
        "pairs: a prefix naming one element",
    ),
    (
        "recode_fields",
        StepRecodeArgs((b"fetch", b"S1,old", b"S1,new")),
        (b"fetch", b"S1,old", b"S1,new"),
        0,
        "triples: a field, its value as read, the value to put",
    ),
    (
        "agents_add",
        AgentsAddArgs(1000, 50, 9, "w1", (b"a", b"b")),
        (1000, 50, 9, "w1", b"a", b"b"),
        4,
        "ARGV[5…] the items, each encoded by the store's codec, oldest first",
    ),
    (
        "recode_items",
        AgentsRecodeArgs((b"old", b"new")),
        (b"old", b"new"),
        0,
        "pairs: an item as it was read, then the item to put in its place",
    ),
    (
        "graph_put",
        GraphPutArgs(
            b"\0c1", b"P", b"r1", 1000, "tok,3", 5, True, (b"f1", b"f2"), ((b"f2", b"v2"),)
        ),
        (b"\0c1", b"P", b"r1", 1000, "tok,3", 5, 1, 2, b"f1", b"f2", b"f2", b"v2"),
        8,
        "ARGV[8] n: how many blob fields the checkpoint uses; ARGV[9 .. 8+n] those fields "
        "ARGV then pairs (blob field, packed value)",
    ),
    (
        "graph_writes",
        GraphWritesArgs(b"\0c1", 1000, "", ((b"p\0t\0i", True, b"W"), (b"q", False, b"X"))),
        (b"\0c1", 1000, "", b"p\0t\0i", 1, b"W", b"q", 0, b"X"),
        3,
        "then triples: the write's field suffix",
    ),
    (
        "graph_history",
        GraphHistoryArgs(b"[\0c1", b"[\0c1", 60_000, (b"notes", b"count")),
        (b"[\0c1", b"[\0c1", 60_000, b"notes", b"count"),
        3,
        "ARGV[4…] the channels, each once",
    ),
    (
        "graph_remove",
        GraphRemoveArgs((b"r1", b"r2")),
        ("runs", b"r1", b"r2"),
        1,
        '"runs": remove every checkpoint whose run id is one of ARGV[2..]',
    ),
]


@pytest.mark.parametrize(
    ("name", "args", "argv", "fixed", "phrase"), VARIADIC_CASES, ids=[c[0] for c in VARIADIC_CASES]
)
def test_variadic_argv_is_in_the_order_the_header_documents(
    name: str, args: Any, argv: tuple[Any, ...], fixed: int, phrase: str
) -> None:
    assert sorted(header_argv(name)) == list(range(1, fixed + 1))
    assert " ".join(header(name).split()).count(" ".join(phrase.split())) == 1
    assert args.argv() == argv


def test_event_rewrite_argv_in_each_mode() -> None:
    text = " ".join(header("event_rewrite").split())
    assert 'ARGV[1] "add" or "swap"' in text
    assert 'add: ARGV[2] "1" for the first page' in text
    assert "groups of 8: stream id, n, t, s, at, p, prev, d" in text
    for phrase in (
        "ARGV[2] the stream id of the last event read",
        "ARGV[3] its digest",
        "ARGV[4] how many events were read",
        "ARGV[5] the new chain's last digest",
        "ARGV[6] the anchor's new state",
        "ARGV[7] its state digest",
    ):
        assert phrase in text
    page = ("1-0", b"1", b"t", b"1", b"0", b"{}", b"", b"d")
    assert EventStageArgs(True, page).argv() == ("add", 1, *page)
    assert EventStageArgs(False, ()).argv() == ("add", 0)
    swap = EventSwapArgs("1-0", b"d", 3, b"e", b"{}", "s")
    assert swap.argv() == ("swap", "1-0", b"d", 3, b"e", b"{}", "s")
    # Nothing read, the anchor kept: every ARGV but the mode and count is "".
    assert EventSwapArgs().argv() == ("swap", "", "", 0, "", "", "")


def test_the_fixed_argv_of_the_variadic_ones() -> None:
    documented = header_argv("graph_put")
    for n, phrase in enumerate(
        ("<m>", "the packed checkpoint", "the run id", "ttl in ms", "lease value", "keep",
         "uses a DeltaChannel", "how many blob fields"),
        1,
    ):  # fmt: skip
        assert phrase in documented[n], (n, documented[n])
    documented = header_argv("graph_writes")
    for n, phrase in enumerate(("<m>", "ttl in ms", "lease value"), 1):
        assert phrase in documented[n]
    documented = header_argv("graph_history")
    for n, phrase in enumerate(("the upper end", "the lower end", "ttl in ms to restart"), 1):
        assert phrase in documented[n]
    documented = header_argv("agents_add")
    for n, phrase in enumerate(("ttl in ms", "the most items", "write ids are", "write id"), 1):
        assert phrase in documented[n]
    assert '"latest": keep only the newest' in header_argv("graph_remove")[1]
    assert GraphRemoveArgs().argv() == ("latest",)


def test_graph_copy_argv_in_each_half() -> None:
    text = " ".join(header("graph_copy").split())
    assert 'ARGV[1] "dump": returns {cp hash, blobs hash, writes hash}' in text
    assert (
        '"load": ARGV[2] ttl in ms ("0": none), ARGV[3] how many cp pairs follow, '
        "ARGV[4] how many blobs pairs follow them, then the writes pairs"
    ) in text
    assert DUMP_ARGS == ("dump",)
    dump = GraphDumpReply((b"c|m", b"P", b"delta", b"1"), (b"f", b"v"), (b"w", b"W"))
    assert GraphLoadArgs(1000, dump).argv() == (
        "load", 1000, 2, 1, b"c|m", b"P", b"delta", b"1", b"f", b"v", b"w", b"W",
    )  # fmt: skip


def test_optional_and_empty_arguments() -> None:
    # An unsealed delta has no ARGV[8]; "" (no checkpoint yet) is "=" alone.
    log = CheckpointLogArgs("d1", b"b", 100, 0, False, "", 0)
    assert log.argv() == ("d1", b"b", 100, 0, 0, "", 0)
    assert CheckpointLogArgs("d1", b"b", 100, 0, False, "", 0, "").argv()[-1] == "="
    # No expected version: "" (any); 0 is create-only and stays 0.
    assert RecordPutArgs(None, 0, b"v", b"t", False, "", 0).argv()[0] == ""
    assert RecordPutArgs(0, 0, b"v", b"t", False, "", 0).argv()[0] == 0
    assert RecordDeleteArgs(None, "", "d", 0).argv()[0] == ""
    assert CheckpointSaveArgs("c", b"b", 1, 0, 0, "", 0, False).argv()[-1] == 0


# (parser, raw reply as redis-py returns it, the parsed value, wrote)
REPLY_CASES: list[tuple[Any, Any, Any, bool]] = [
    # record_put: written (one string), resend of the current value, of one replaced
    # since, conflict.
    (
        RecordPutReply.parse,
        b"0000000000000042,1700000000000,1699999999000",
        RecordPutReply(PutStatus.WRITTEN, 42, 1700000000000, 1699999999000),
        True,
    ),
    (RecordPutReply.parse, [2, 43, 5000, 7], RecordPutReply(PutStatus.RESENT, 43, 5000, 7), True),
    (RecordPutReply.parse, [3, 43, 5000, 0], RecordPutReply(PutStatus.REPLACED, 43, 5000), True),
    (RecordPutReply.parse, [0, 9, 0, 0], RecordPutReply(PutStatus.CONFLICT, 9), False),
    (RecordPutReply.parse, [0, 0, 0, 0], RecordPutReply(PutStatus.CONFLICT, 0), False),
    # record_merge: the stored value, a resend (with and without the current value,
    # fakeredis's nil too), refused.
    (RecordMergeReply.parse, b"M1,...", RecordMergeReply(MergeStatus.APPENDED, b"M1,..."), True),
    (
        RecordMergeReply.parse,
        [3, 12, b"M1,x"],
        RecordMergeReply(MergeStatus.RESENT, b"M1,x", 12),
        True,
    ),
    (RecordMergeReply.parse, [3, 12], RecordMergeReply(MergeStatus.RESENT, None, 12), True),
    (RecordMergeReply.parse, [3, 12, None], RecordMergeReply(MergeStatus.RESENT, None, 12), True),
    (RecordMergeReply.parse, [4, 5000], RecordMergeReply(MergeStatus.REFUSED, size=5000), False),
    (RecordMergeReply.parse, [4, 0], RecordMergeReply(MergeStatus.REFUSED, size=0), False),
    # record_delete: deleted, a resend of a delete made, absent or another version.
    (RecordDeleteReply.parse, [1, 17], RecordDeleteReply(True, 17), True),
    (RecordDeleteReply.parse, [2, 0], RecordDeleteReply(True, 0), True),
    (RecordDeleteReply.parse, [0, 0], RecordDeleteReply(False, 0), False),
    (RecordDeleteReply.parse, [0, 18], RecordDeleteReply(False, 18), False),
    # record_touch: nil, with the value, without it ("").
    (RecordTouchReply.parse, None, RecordTouchReply(False), False),
    (RecordTouchReply.parse, [1700, b"R1,x"], RecordTouchReply(True, 1700, b"R1,x"), True),
    (RecordTouchReply.parse, [0, b""], RecordTouchReply(True, 0, None), True),
    # record_compact
    (RecordCompactReply.parse, 1, RecordCompactReply(True), True),
    (RecordCompactReply.parse, 0, RecordCompactReply(False), False),
    # checkpoint_save: saved, resent (the stored one), saved earlier and gone. Every
    # reply counts as a write (a resend notes itself again).
    (CheckpointSaveReply.parse, [1, b"e"], CheckpointSaveReply(SaveStatus.SAVED, b"e"), True),
    (
        CheckpointSaveReply.parse,
        [0, b"e", b"K1,b"],
        CheckpointSaveReply(SaveStatus.RESENT, b"e", b"K1,b"),
        True,
    ),
    (CheckpointSaveReply.parse, [2], CheckpointSaveReply(SaveStatus.GONE), True),
    # checkpoint_log: appended, resent, sealed for another checkpoint (or none).
    (CheckpointLogReply.parse, [1, 3], CheckpointLogReply(LogStatus.APPENDED, 3), True),
    (CheckpointLogReply.parse, [0, 3], CheckpointLogReply(LogStatus.RESENT, 3), True),
    (
        CheckpointLogReply.parse,
        [2, b"c2"],
        CheckpointLogReply(LogStatus.RESEAL, snapshot="c2"),
        False,  # a reseal wrote nothing: the delta is sent again
    ),
    (CheckpointLogReply.parse, [2, b""], CheckpointLogReply(LogStatus.RESEAL), False),
    # checkpoint_delete: keys deleted; a resend; nothing.
    (CheckpointDeleteReply.parse, 4, CheckpointDeleteReply(4), True),
    (CheckpointDeleteReply.parse, 1, CheckpointDeleteReply(1), True),
    (CheckpointDeleteReply.parse, -1, CheckpointDeleteReply(-1), True),
    (CheckpointDeleteReply.parse, 0, CheckpointDeleteReply(0), False),
    # checkpoint_find: found, not found.
    (CheckpointFindReply.parse, [[b"e"], [b"b"]], CheckpointFindReply((b"e",), (b"b",)), False),
    (CheckpointFindReply.parse, [[], []], CheckpointFindReply((), ()), False),
    # lock_acquire: acquired (or a resend), held by another (-1: no expiry).
    (LockAcquireReply.parse, [1, 99, 30000], LockAcquireReply(True, 99, 30000), True),
    (LockAcquireReply.parse, [0, 1200], LockAcquireReply(False, remaining_ms=1200), False),
    (LockAcquireReply.parse, [0, -1], LockAcquireReply(False, remaining_ms=-1), False),
    (LockExtendReply.parse, 1, LockExtendReply(True), True),
    (LockExtendReply.parse, 0, LockExtendReply(False), False),
    (LockReleaseReply.parse, 1, LockReleaseReply(True), True),
    (LockReleaseReply.parse, 2, LockReleaseReply(True), True),
    (LockReleaseReply.parse, 0, LockReleaseReply(False), False),
    (LockAbandonReply.parse, 1, LockAbandonReply(True), True),
    (LockAbandonReply.parse, 0, LockAbandonReply(False), False),
    # step_record: recorded, already has a result.
    (StepRecordReply.parse, [1], StepRecordReply(True), True),
    (StepRecordReply.parse, [2], StepRecordReply(True, resent=True), True),
    (StepRecordReply.parse, [0, b"S1,d"], StepRecordReply(False, b"S1,d"), False),
    # event_append: appended, the chain ends elsewhere (or is empty), resent (id "" when
    # no longer among the newest).
    (EventAppendReply.parse, [1, b"1-0"], EventAppendReply(AppendStatus.APPENDED, "1-0"), True),
    (
        EventAppendReply.parse,
        [0, b"d" * 64, 7],
        EventAppendReply(AppendStatus.MOVED, end="d" * 64, seq=7),
        False,
    ),
    (EventAppendReply.parse, [0, b"", 0], EventAppendReply(AppendStatus.MOVED), False),
    (EventAppendReply.parse, [2, b"1-0"], EventAppendReply(AppendStatus.RESENT, "1-0"), True),
    (EventAppendReply.parse, [2, b""], EventAppendReply(AppendStatus.RESENT, ""), True),
    # event_rewrite: add (the staging stream's length), swap (swapped, or the stream
    # changed: the staging stream is deleted, a write).
    (EventStageReply.parse, 8, EventStageReply(8), True),
    (EventStageReply.parse, 0, EventStageReply(0), True),
    (EventSwapReply.parse, 1, EventSwapReply(True), True),
    (EventSwapReply.parse, 0, EventSwapReply(False), True),
    # checkpoint_migrate: {replaced, held}
    (CheckpointMigrateReply.parse, [2, 1], CheckpointMigrateReply(2, 1), True),
    (CheckpointMigrateReply.parse, [0, 1], CheckpointMigrateReply(0, 1), False),
    (CheckpointMigrateReply.parse, [0, 0], CheckpointMigrateReply(0, 0), False),
    # checkpoint_recode, recode_fields: how many were replaced
    (CheckpointRecodeReply.parse, 3, CheckpointRecodeReply(3), True),
    (CheckpointRecodeReply.parse, 0, CheckpointRecodeReply(0), False),
    (StepRecodeReply.parse, 2, StepRecodeReply(2), True),
    (StepRecodeReply.parse, 0, StepRecodeReply(0), False),
    # agents_add: appended, resent (length afterwards); a resend notes itself again.
    (AgentsAddReply.parse, [1, 3], AgentsAddReply(AddStatus.APPENDED, 3), True),
    (AgentsAddReply.parse, [2, 3], AgentsAddReply(AddStatus.RESENT, 3), True),
    # agents_pop: removed, empty, resent with and without what it removed. The write
    # memory notes every pop, so each counts as a write.
    (AgentsPopReply.parse, [1, b"I"], AgentsPopReply(PopStatus.REMOVED, b"I"), True),
    (AgentsPopReply.parse, [0], AgentsPopReply(PopStatus.EMPTY), True),
    (AgentsPopReply.parse, [2, b"I"], AgentsPopReply(PopStatus.RESENT, b"I"), True),
    (AgentsPopReply.parse, [2], AgentsPopReply(PopStatus.RESENT), True),
    # agents_clear: deleted, none, resent
    (AgentsClearReply.parse, 1, AgentsClearReply(ClearStatus.DELETED), True),
    (AgentsClearReply.parse, 0, AgentsClearReply(ClearStatus.NONE), True),
    (AgentsClearReply.parse, 2, AgentsClearReply(ClearStatus.RESENT), True),
    # recode_items
    (AgentsRecodeReply.parse, 4, AgentsRecodeReply(4), True),
    (AgentsRecodeReply.parse, 0, AgentsRecodeReply(0), False),
    # graph_put (old checkpoints the cap removed; 0 for a resend), graph_writes
    (GraphPutReply.parse, 2, GraphPutReply(2), True),
    (GraphPutReply.parse, 0, GraphPutReply(0), True),
    (GraphPutReply.parse, -1, GraphPutReply(-1), True),
    (GraphWritesReply.parse, 3, GraphWritesReply(3), True),
    (GraphWritesReply.parse, 0, GraphWritesReply(0), True),
    # graph_read: one entry per checkpoint; none
    (
        GraphReadReply.parse,
        [
            [
                b"ns\0c1",
                b"P",
                [b"ns\0ch\0v1", b"ns\0ch\0v2"],
                [b"B", b""],
                [b"ns\0c1\0path\0task\0" + b"1000000000"],
                [b"W"],
            ]
        ],
        GraphReadReply(
            (
                (
                    b"ns\0c1",
                    Stored("ns", "c1", b"P", {("ch", "v1"): b"B"}, [("task", "path", b"W")]),
                ),
            )
        ),
        False,
    ),
    (GraphReadReply.parse, [], GraphReadReply(()), False),
    # graph_history: writes oldest first with the numbers of the channels seeded; none
    (
        GraphHistoryReply.parse,
        [[b"\0c1\0path\0task\0" + b"1000000000"], [b"W"], [2], [b"V"]],
        GraphHistoryReply((("task", b"W"),), ((2, b"V"),)),
        False,
    ),
    (GraphHistoryReply.parse, [[], [], [], []], GraphHistoryReply((), ()), False),
    # graph_remove: removed, nothing, "latest" refused
    (GraphRemoveReply.parse, 3, GraphRemoveReply(3), True),
    (GraphRemoveReply.parse, 0, GraphRemoveReply(0), False),
    (GraphRemoveReply.parse, -1, GraphRemoveReply(0, refused=True), False),
    # graph_copy: dump (a read), load (added; the TTL is set even when 0)
    (
        GraphDumpReply.parse,
        [[b"c|m", b"P"], [b"f", b"v"], []],
        GraphDumpReply((b"c|m", b"P"), (b"f", b"v"), ()),
        False,
    ),
    (GraphDumpReply.parse, [[], [], []], GraphDumpReply((), (), ()), False),
    (GraphLoadReply.parse, 2, GraphLoadReply(2), True),
    (GraphLoadReply.parse, 0, GraphLoadReply(0), True),
    # event_trim
    (EventTrimReply.parse, 5, EventTrimReply(5), True),
    (EventTrimReply.parse, 0, EventTrimReply(0), False),
    # import_record: written or already there (its version), refused (the stored one's)
    (ImportReply.parse, [1, 42], ImportReply(True, 42), True),
    (ImportReply.parse, [0, 43], ImportReply(False, 43), False),
    # import_task: written (the newest seq, 0 if none; step records written), refused
    # (the stored seq) with and without step records written
    (ImportReply.parse, [1, 3, 2], ImportReply(True, 3, 2), True),
    (ImportReply.parse, [1, 0, 0], ImportReply(True, 0, 0), True),
    (ImportReply.parse, [0, 5, 2], ImportReply(False, 5, 2), True),
    (ImportReply.parse, [0, 5, 0], ImportReply(False, 5, 0), False),
    # import_fence: raised to the file's, already at or above it (the current fence)
    (ImportReply.parse, [1, 7], ImportReply(True, 7), True),
    (ImportReply.parse, [0, 9], ImportReply(False, 9), False),
    # import_events: written (count), the same events, refused (the stored last id,
    # "" for none)
    (ImportReply.parse, [1, 4], ImportReply(True, 4), True),
    (ImportReply.parse, [1, 0], ImportReply(True, 0), True),
    (ImportReply.parse, [0, b"5-1"], ImportReply(False, "5-1"), False),
    (ImportReply.parse, [0, b""], ImportReply(False, ""), False),
    # import_user_index: how many entries were not there yet
    (ImportReply.parse, [1, 2], ImportReply(True, 2), True),
    (ImportReply.parse, [1, 0], ImportReply(True, 0), True),
    # import_agents: written (count), the same items, refused (how many are stored)
    (ImportReply.parse, [1, 3], ImportReply(True, 3), True),
    (ImportReply.parse, [0, 2], ImportReply(False, 2), False),
    # import_parts: written (an index: changed), the same content, refused
    (ImportReply.parse, [1, 1], ImportReply(True, 1), True),
    (ImportReply.parse, [0, 0], ImportReply(False, 0), False),
    # import_memory: written (items changed), refused (stored items newer), announce again
    (ImportReply.parse, [1, 2], ImportReply(True, 2), True),
    (ImportReply.parse, [0, 1], ImportReply(False, 1), False),
    (ImportReply.parse, [0, b"unannounced"], ImportReply(False, "unannounced"), False),
]

IMPORT_SCRIPTS = frozenset(name for name in _files() if name.startswith("import_"))


@pytest.mark.parametrize(("parse", "raw", "expected", "wrote"), REPLY_CASES)
def test_each_documented_reply_parses_to_its_named_value(
    parse: Any, raw: Any, expected: Any, wrote: bool
) -> None:
    parsed = parse(raw)
    assert parsed == expected
    assert parsed.wrote is wrote


def test_named_fields() -> None:
    assert RecordPutReply.parse([0, 9, 0, 0]).conflict
    assert not RecordPutReply.parse(b"1,0,0").conflict
    assert CheckpointDeleteReply.parse(3).deleted and not CheckpointDeleteReply.parse(0).deleted


def test_an_undocumented_status_is_refused() -> None:
    with pytest.raises(ValueError):
        RecordPutReply.parse([9, 1, 0, 0])
    with pytest.raises(ValueError):
        EventAppendReply.parse([5, b""])


def test_the_shells_scripts_parse_with_their_reply_types() -> None:
    # Where a replicated call learns whether to WAIT: the script's own reply type.
    bound: dict[Parsed[Any], Any] = {
        async_records._PUT: RecordPutReply,
        async_records._MERGE: RecordMergeReply,
        async_records._DELETE: RecordDeleteReply,
        async_records._TOUCH: RecordTouchReply,
        async_records._COMPACT: RecordCompactReply,
        async_checkpoints._SAVE: CheckpointSaveReply,
        async_checkpoints._LOG: CheckpointLogReply,
        async_checkpoints._DELETE: CheckpointDeleteReply,
        async_checkpoints._FIND: CheckpointFindReply,
        async_checkpoints._STEP: StepRecordReply,
        async_leases._ACQUIRE: LockAcquireReply,
        async_leases._RELEASE: LockReleaseReply,
        async_leases._EXTEND: LockExtendReply,
        async_leases._ABANDON: LockAbandonReply,
        async_events._APPEND: EventAppendReply,
        async_events._TRIM: EventTrimReply,
        async_events._STAGE: EventStageReply,
        async_events._SWAP: EventSwapReply,
        async_checkpoint_migrate._MIGRATE: CheckpointMigrateReply,
        async_checkpoint_rotate._RECODE: CheckpointRecodeReply,
        async_steps._STEPS: StepRecodeReply,
        agents_session._ADD: AgentsAddReply,
        agents_session._POP: AgentsPopReply,
        agents_session._CLEAR: AgentsClearReply,
        async_agents_rotate._AGENTS: AgentsRecodeReply,
        async_graph._PUT: GraphPutReply,
        async_graph._WRITES: GraphWritesReply,
        async_graph._READ: GraphReadReply,
        async_graph._HISTORY: GraphHistoryReply,
        async_graph._REMOVE: GraphRemoveReply,
        async_graph._DUMP: GraphDumpReply,
        async_graph._LOAD: GraphLoadReply,
    }
    for lua, reply in bound.items():
        assert isinstance(lua, Parsed)
        assert lua.parse == reply.parse
        assert lua.sha == script(lua.name).sha  # the same script, only read differently


def test_a_script_without_a_parser_returns_the_raw_reply_and_counts_as_a_write() -> None:
    raw = script("import_record")
    assert raw.read([1, 2]) == [1, 2]
    assert raw.wrote([0]) is True
    parsed = raw.replying(RecordCompactReply.parse)
    assert parsed.read(0) == RecordCompactReply(False)
    assert parsed.wrote(parsed.read(0)) is False


def test_every_import_script_is_read_as_an_import_reply() -> None:
    # An import batch (Connection.scripts) returns each reply as its script reads it.
    bound = {codec.script().name: codec.script() for codec in codecs()}
    assert set(bound) == IMPORT_SCRIPTS and len(IMPORT_SCRIPTS) == 9
    for name, lua in bound.items():
        assert isinstance(lua, Parsed)
        assert lua.parse == ImportReply.parse
        assert lua.sha == script(name).sha
        assert lua.read([0, 5, 1]) == ImportReply(False, 5, 1)


def test_a_lock_lost_reply_is_read_from_its_end() -> None:
    """The holder is the word before the address translate appends, even when the lease
    name (so the lock key) holds " (at " and digits itself."""
    from redistate.leases.spec import refusal

    key = "rs:n:lock:a (at x) 7"
    assert refusal(f"RSLOCKLOST {key} 42 (at 127.0.0.1:1)", 41) == "was taken over by fence 42"
    assert refusal(f"RSLOCKLOST {key} free (at h:1)", 41).startswith("expired")
    assert refusal("RSLOCKLOST rs:n:lock:b 42", 41) == "was taken over by fence 42"


@pytest.mark.parametrize(
    ("reply", "guarded"),
    [
        (RecordPutReply(PutStatus.WRITTEN, 3), True),
        (RecordPutReply(PutStatus.CONFLICT, 3), True),
        (RecordPutReply(PutStatus.RESENT, 3), False),
        (RecordPutReply(PutStatus.REPLACED, 3), False),
        (RecordDeleteReply(True, 17), True),
        (RecordDeleteReply(True, 0), False),
        (RecordDeleteReply(False, 0), True),
        (CheckpointSaveReply(SaveStatus.SAVED, b"e"), True),
        (CheckpointSaveReply(SaveStatus.RESENT, b"e", b"K1,b"), False),
        (CheckpointSaveReply(SaveStatus.GONE), False),
        (CheckpointLogReply(LogStatus.APPENDED, 3), True),
        (CheckpointLogReply(LogStatus.RESENT, 3), False),
        (CheckpointDeleteReply(4), True),
        (CheckpointDeleteReply(-1), False),
        (EventAppendReply(AppendStatus.APPENDED, "1-0"), True),
        (EventAppendReply(AppendStatus.RESENT, "1-0"), False),
        (StepRecordReply(True), True),
        (StepRecordReply(True, resent=True), False),
        (StepRecordReply(False, b"S1,d"), True),
        (GraphPutReply(0), True),
        (GraphPutReply(-1), False),
    ],
)
def test_a_reply_says_whether_its_script_reached_the_fence_check(reply: Any, guarded: bool) -> None:
    """Only a script that reached rs_guard renewed an inline lease: the replies a
    resend gets before it say so, and the connection moves no deadline for them."""
    assert reply.guarded is guarded
