"""Error translation: retryable conditions become StoreUnavailable, nothing else does."""

from __future__ import annotations

import pytest
from redis import exceptions as rex

from redistate._translate import describe, translate
from redistate.errors import IntegrityError, RedistateError, StoreUnavailable


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
        rex.NoPermissionError("NOPERM"),
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
