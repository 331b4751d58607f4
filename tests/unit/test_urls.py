"""Store URLs: which server, cluster or Sentinel service they name."""

from __future__ import annotations

import pytest

from redistate.core.urls import Target, parse_url


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("redis://localhost:6379/0", Target("standalone", "redis://localhost:6379/0")),
        ("rediss://h:1/2", Target("standalone", "rediss://h:1/2", tls=True)),
        ("unix:///tmp/redis.sock", Target("standalone", "unix:///tmp/redis.sock")),
        (
            "redis+cluster://10.0.0.1:7000,10.0.0.2:7001",
            Target(
                "cluster",
                "redis+cluster://10.0.0.1:7000,10.0.0.2:7001",
                hosts=(("10.0.0.1", 7000), ("10.0.0.2", 7001)),
            ),
        ),
        (
            "rediss+cluster://user:p%40ss@node:7000",
            Target(
                "cluster",
                "rediss+cluster://user:p%40ss@node:7000",
                hosts=(("node", 7000),),
                username="user",
                password="p@ss",
                tls=True,
            ),
        ),
        (
            "redis+sentinel://s1:26379,s2,[::1]:26380/mymaster/3",
            Target(
                "sentinel",
                "redis+sentinel://s1:26379,s2,[::1]:26380/mymaster/3",
                hosts=(("s1", 26379), ("s2", 26379), ("::1", 26380)),
                service="mymaster",
                db=3,
            ),
        ),
        (
            "redis+sentinel://:secret@s1/svc",
            Target(
                "sentinel",
                "redis+sentinel://:secret@s1/svc",
                hosts=(("s1", 26379),),
                password="secret",
                service="svc",
            ),
        ),
        (
            "redis+cluster://node",
            Target("cluster", "redis+cluster://node", hosts=(("node", 6379),)),
        ),
    ],
)
def test_urls_name_their_target(url: str, target: Target) -> None:
    assert parse_url(url) == target


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://h:1", "unknown scheme"),
        ("h:6379", "unknown scheme"),
        ("redis+cluster://", "names no host"),
        ("redis+cluster://h:0", "port '0'"),
        ("redis+cluster://h:70000", "port '70000'"),
        ("redis+cluster://h:x", "port 'x'"),
        ("redis+cluster://h:1/0", "unexpected path '0'"),
        ("redis+sentinel://h:1", "needs a service name"),
        ("redis+sentinel://h:1/svc/x", "unexpected path 'x'"),
        ("redis+cluster://h:1?ssl_cert_reqs=none", "options in a redis\\+cluster:// URL"),
        # redis-py would take a path it cannot read as database 0.
        ("redis://h:1/x", "path '/x' is not a database number"),
        ("rediss://h:1/0/1", "path '/0/1' is not a database number"),
        ("redis://h:1/-1", "path '/-1' is not a database number"),
    ],
)
def test_bad_urls_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        parse_url(url)
    assert url in str(info.value) or "://" in str(info.value)


def test_a_url_must_be_a_str() -> None:
    with pytest.raises(TypeError, match="url must be a str, got bytes"):
        parse_url(b"redis://h")


def test_a_password_never_shows_in_an_error() -> None:
    with pytest.raises(ValueError) as info:
        parse_url("redis+cluster://user:s3cret@host:99999")
    assert "s3cret" not in str(info.value) and "user:***@host" in str(info.value)
