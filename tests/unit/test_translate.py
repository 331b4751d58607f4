"""Error translation: retryable conditions become StoreUnavailable, nothing else does."""

from __future__ import annotations

import pytest
from redis import exceptions as rex

from redistate.core._translate import describe, translate
from redistate.core.errors import IntegrityError, PermissionDenied, RedistateError, StoreUnavailable
from redistate.core.retry import is_transient


@pytest.mark.parametrize(
    "exc",
    [
        rex.ConnectionError("reset"),
        rex.TimeoutError("timed out"),
        rex.BusyLoadingError("LOADING"),
        rex.ReadOnlyError("READONLY You can't write against a read only replica."),
        rex.ClusterDownError("CLUSTERDOWN"),
        rex.TryAgainError("TRYAGAIN"),
        ConnectionRefusedError(111, "refused"),
        TimeoutError("socket"),
    ],
)
def test_conditions_a_retry_may_cure_are_store_unavailable(exc: Exception) -> None:
    err = translate(exc, "h:1/0")
    assert type(err) is StoreUnavailable
    assert "h:1/0" in str(err)


@pytest.mark.parametrize(
    "exc",
    [
        rex.AuthenticationError("invalid password"),
        rex.AuthorizationError("no auth"),
    ],
)
def test_refused_credentials_are_not_retryable(exc: Exception) -> None:
    err = translate(exc, "h:1/0")
    assert type(err) is RedistateError
    assert "credentials" in str(err)


@pytest.mark.parametrize(
    "message",
    ["WRONGTYPE Operation against a key", "RSINTEGRITY value at k is not a redistate record"],
)
def test_foreign_values_are_integrity_errors(message: str) -> None:
    assert type(translate(rex.ResponseError(message), "h:1/0")) is IntegrityError


def test_other_replies_are_plain_redistate_errors() -> None:
    err = translate(rex.ResponseError("OOM command not allowed"), "h:1/0")
    assert type(err) is RedistateError
    assert "OOM" in str(err) and "h:1/0" in str(err)


def test_describe_names_the_address() -> None:
    import redis

    assert describe(redis.Redis(host="10.1.2.3", port=7000, db=2)) == "10.1.2.3:7000/2"
    assert describe(redis.Redis(unix_socket_path="/run/r.sock")) == "unix:///run/r.sock"


def test_an_error_inside_multi_exec_is_classified_by_its_own_message() -> None:
    wrapped = rex.ResponseError(
        "Command # 2 (LRANGE n:task:{w} 0 -1) of pipeline caused error: "
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    )
    error = translate(wrapped, "here")
    assert isinstance(error, IntegrityError) and str(error).startswith("WRONGTYPE")


# The exact texts of Redis 7.0.15 and Valkey 9 (redis-py strips the NOPERM code), of the
# check every script starts with, and of a denial inside MULTI/EXEC.
DENIALS = [
    (rex.NoPermissionError("this user has no permissions to run the 'setrange' command"),
     "setrange"),
    (rex.NoPermissionError("User u has no permissions to run the 'script|load' command"),
     "script|load"),
    (rex.NoPermissionError(
        "this user has no permissions to access one of the keys used as arguments"), "evalsha"),
    (rex.NoPermissionError("No permissions to access a key"), "evalsha"),
    (
        rex.NoPermissionError(
            "this user has no permissions to run the 'pexpire' command (record_put "
            "checked before any write)"
        ),
        "pexpire",
    ),
    (
        rex.ResponseError(
            "ACL failure in script: User u has no permissions to run the 'setrange' "
            "command script: on @user_script:1."
        ),
        "setrange",
    ),
    (rex.ResponseError(
        "ACL failure in script: No permissions to access a key script: on @user_script:1."), "?"),
    (
        rex.ResponseError(
            "The user executing the script can't run this command or subcommand script: "
            "a050e9e5bce9ce26a6715530e025cdeee1d83851, on @user_script:1."
        ),
        "?",
    ),
    (
        rex.ResponseError(
            "The user executing the script can't access at least one of the keys "
            "mentioned in the command arguments script: 3b0b, on @user_script:1."
        ),
        "?",
    ),
    (
        rex.NoPermissionError(
            "Command # 2 (LRANGE ns:task:{t} 0 -1) of pipeline caused error: this user "
            "has no permissions to access one of the keys used as arguments"
        ),
        "lrange",
    ),
    (rex.ResponseError("EXEC without MULTI"), "multi"),
]  # fmt: skip


@pytest.mark.parametrize(("exc", "command"), DENIALS)
def test_an_acl_denial_is_permission_denied_naming_the_command(
    exc: Exception, command: str
) -> None:
    err = translate(exc, "h:1/0", "evalsha")
    assert type(err) is PermissionDenied
    assert err.command == command
    assert "credentials" not in str(err) and "h:1/0" in str(err) and "ACL" in str(err)
    assert not is_transient(exc)  # never retried
