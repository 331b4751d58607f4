"""Which errors are retried, and the policy's bounds (pure)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from redis import exceptions as rex

from redistate import RetryPolicy, StoreFull, StoreUnavailable
from redistate.core._translate import translate
from redistate.core.retry import is_transient


@pytest.mark.parametrize(
    "exc",
    [
        rex.ConnectionError("Connection reset by peer"),
        rex.TimeoutError("Timeout reading from socket"),
        rex.BusyLoadingError("Redis is loading the dataset in memory"),
        rex.ReadOnlyError("You can't write against a read only replica."),
        rex.ClusterDownError("The cluster is down"),
        rex.MasterDownError("Link with MASTER is down"),
        rex.TryAgainError("Multiple keys request during rehashing of slot"),
        rex.MovedError("3999 127.0.0.1:6381"),
        rex.AskError("3999 127.0.0.1:6381"),
        rex.ClusterError("TTL exhausted."),
        rex.ResponseError("BUSY Redis is busy running a script."),
        rex.ResponseError("NOREPLICAS Not enough good replicas to write."),
        rex.MaxConnectionsError("Too many connections"),
        ConnectionRefusedError(111, "Connection refused"),
        BrokenPipeError(32, "Broken pipe"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_transient_errors_are_retried(exc: BaseException) -> None:
    assert is_transient(exc)
    assert isinstance(translate(exc, "h:1/0"), StoreUnavailable)


@pytest.mark.parametrize(
    "exc",
    [
        rex.AuthenticationError("invalid username-password pair"),
        rex.ExternalAuthProviderError("the token provider failed"),
        rex.AuthorizationError("not authorized"),
        rex.NoPermissionError("no permissions"),
        rex.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
        rex.ResponseError("WRONGTYPE Operation against a key holding the wrong kind"),
        rex.ResponseError("RSLOCKLOST lease a,1 no longer holds k"),
        rex.ResponseError("RSARG malformed arguments to record_put"),
        rex.ResponseError("ERR unknown command"),
        rex.DataError("Invalid input"),
        ValueError("not a redis error"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_refusals_are_not_retried(exc: BaseException) -> None:
    assert not is_transient(exc)


def test_out_of_memory_is_store_full_and_says_nothing_was_written() -> None:
    error = translate(
        rex.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."), "h:1/0"
    )
    assert isinstance(error, StoreFull)
    assert (
        "maxmemory" in str(error) and "Nothing was written" in str(error) and "h:1/0" in str(error)
    )


def test_the_default_policy() -> None:
    policy = RetryPolicy()
    assert (policy.attempts, policy.deadline, policy.base, policy.cap) == (30, 15.0, 0.05, 2.0)
    assert policy.retries
    assert policy.memory_ms(5.0) == 26_000  # deadline + 2 socket timeouts + 1 s
    assert policy.memory_ms(None) == 26_000  # 5 s assumed without a socket timeout
    assert policy.memory_ms(0.3) == 16_600


def test_a_policy_that_never_retries_remembers_nothing() -> None:
    policy = RetryPolicy(attempts=1)
    assert not policy.retries and policy.memory_ms(5.0) == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"attempts": 0}, "attempts must be from 1 to 1000, got 0"),
        ({"attempts": 1001}, "attempts must be from 1 to 1000, got 1001"),
        ({"attempts": 2.0}, "attempts must be an int, got 2.0"),
        ({"attempts": True}, "attempts must be an int, got True"),
        ({"deadline": -1}, "deadline must be from 0 to 3600 seconds, got -1"),
        ({"deadline": math.nan}, "deadline must be from 0 to 3600 seconds, got nan"),
        ({"deadline": math.inf}, "deadline must be from 0 to 3600 seconds, got inf"),
        ({"deadline": "10"}, "deadline must be seconds (a number), got '10'"),
        ({"base": 61}, "base must be from 0 to 60 seconds, got 61"),
        ({"cap": -0.5}, "cap must be from 0 to 600 seconds, got -0.5"),
    ],
)
def test_bad_policies_are_refused_with_the_value_and_the_limit(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises((ValueError, TypeError)) as info:
        RetryPolicy(**kwargs)
    assert str(info.value) == message


def test_a_store_refuses_what_is_not_a_policy() -> None:
    from redistate import Store

    with pytest.raises(TypeError, match="retry must be a RetryPolicy or None, got 3"):
        Store.embedded(retry=3)


def _chained(cause: BaseException) -> rex.ConnectionError:
    try:
        raise cause
    except OSError:
        try:
            raise rex.ConnectionError("Error 1 connecting to h:1.")  # implicit chaining
        except rex.ConnectionError as wrapped:
            return wrapped
    raise AssertionError("unreachable")


def test_a_certificate_failure_is_not_retried_and_says_what_to_pass() -> None:
    import ssl

    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verify.verify_message = "self-signed certificate in certificate chain"
    alert = ssl.SSLError(1, "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert")
    for cause, hint in ((verify, "ssl_ca_certs"), (alert, "ssl_certfile")):
        exc = _chained(cause)
        assert not is_transient(exc)
        error = translate(exc, "h:1/0")
        assert type(error).__name__ == "RedistateError" and hint in str(error)
        assert "h:1/0" in str(error) and "not retried" in str(error)


def test_a_refused_connection_stays_transient_for_the_policy() -> None:
    # A restart: AsyncConnection alone decides that a first contact is not retried.
    exc = _chained(ConnectionRefusedError(111, "Connection refused"))
    assert is_transient(exc) and isinstance(translate(exc, "h:1/0"), StoreUnavailable)
