"""Server facts, the pure half: replies parsed, what each fact means, the judgement."""

from __future__ import annotations

import warnings

import pytest
import redis

from redistate import RedistateWarning, UnsafeServer
from redistate.core.server import (
    CONFIG_FIELDS,
    INFO_SECTIONS,
    check_server_check,
    judge,
    parse_facts,
    policy_meaning,
)

DENIED = redis.exceptions.NoPermissionError("no permissions to run the 'config|get' command")
RENAMED = redis.ResponseError("unknown command 'CONFIG'")

CONFIG = {
    "maxmemory-policy": b"volatile-lru",
    "maxmemory": b"12582912",
    "appendonly": b"yes",
    "appendfsync": b"everysec",
    "save": b"3600 1",
    "min-replicas-to-write": b"1",
}
INFO = [
    {"run_id": "abc", "redis_version": "7.2.4", "valkey_version": "9.1.2", "server_name": "valkey"},
    {"maxmemory": 12582912, "maxmemory_policy": "volatile-lru"},
    {"aof_enabled": 1},
    {"role": "master", "connected_slaves": 2, "min_slaves_good_slaves": 2},
]


def replies(config: object = None, info: object = None) -> list[object]:
    got = [{k.encode(): v} for k, v in CONFIG.items()] if config is None else [config] * 6
    return [*got, *(INFO if info is None else [info] * 4)]


def test_the_reply_layout_is_what_the_client_sends() -> None:
    assert len(CONFIG_FIELDS) == 6 and len(INFO_SECTIONS) == 4


def test_config_is_read_first() -> None:
    facts = parse_facts("h:1", replies())
    assert (facts.source, facts.policy, facts.maxmemory) == ("config", "volatile-lru", 12582912)
    assert facts.appendonly is True and facts.appendfsync == "everysec" and facts.save == "3600 1"
    assert (facts.role, facts.replicas, facts.min_replicas) == ("master", 2, 1)
    assert facts.version == "valkey 9.1.2" and facts.identity == "abc" and not facts.safe


@pytest.mark.parametrize("error", [DENIED, RENAMED])
def test_info_is_the_fallback(error: Exception) -> None:
    facts = parse_facts("h:1", replies(config=error))
    assert (facts.source, facts.policy, facts.maxmemory) == ("info", "volatile-lru", 12582912)
    assert facts.appendonly is True and facts.appendfsync is None and facts.save is None
    assert facts.min_replicas is None  # set (good replicas reported), count unknown


def test_both_denied_is_unknown_and_keyed_by_address() -> None:
    facts = parse_facts("h:1", replies(config=DENIED, info=DENIED))
    assert (facts.source, facts.policy, facts.identity) == ("none", "unknown", "h:1")
    assert [f.status for f in facts.findings()][:2] == ["fail", "warn"]


def test_a_flat_list_config_reply_is_read_too() -> None:
    facts = parse_facts("h:1", replies(config=[b"maxmemory-policy", b"noeviction"]))
    assert facts.policy == "noeviction" and facts.safe


@pytest.mark.parametrize(
    ("policy", "words"),
    [
        ("volatile-lru", ["lock key", "write-id memories", "sessions"]),
        ("allkeys-random", ["fences still grow", "task's lists", "users"]),
        ("unknown", ["could not be read"]),
        ("noeviction", ["every guarantee holds"]),
        ("made-up", ["not a policy redistate knows"]),
    ],
)
def test_each_policy_says_what_it_breaks(policy: str, words: list[str]) -> None:
    text = policy_meaning(policy)
    assert all(w in text for w in words), text


def test_findings_fail_only_on_eviction_and_replicas() -> None:
    facts = parse_facts("h:1", replies())
    status = {f.name: f.status for f in facts.findings()}
    assert status == {
        "maxmemory-policy": "fail",
        "persistence": "ok",
        "appendfsync": "warn",
        "replicas": "ok",
        "min-replicas-to-write": "ok",
    }
    replica = parse_facts("h:1", [*replies()[:6], {}, {}, {}, {"role": "slave"}])
    assert {f.name: f.status for f in replica.findings()}["role"] == "fail"


def test_strict_raises_and_warn_warns_once_per_server() -> None:
    facts = parse_facts("h:1", replies(info={"run_id": "judge-test-1"}))
    with pytest.raises(UnsafeServer) as info:
        judge([facts], "strict")
    assert info.value.policy == "volatile-lru" and "h:1" in str(info.value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        judge([facts, facts], "warn")
        judge([facts], "warn")
        judge([facts], "off")
    assert [issubclass(w.category, RedistateWarning) for w in caught] == [True]


def test_server_check_values() -> None:
    assert check_server_check("strict") == "strict"
    with pytest.raises(ValueError, match=r"server_check must be one of .*'warn'.* got 'on'"):
        check_server_check("on")
