"""When a failed call is sent again: the one retry policy of a store (pure, no I/O).

redistate is the only layer that retries: ``Store.from_url`` builds its client with
redis-py's own retries off, and ``Store(client)`` turns them off on the client it
takes over. A resend is safe because every write carries a write id that the server
remembers for :attr:`RetryPolicy.memory_ms` (see RELIABILITY.md).
"""

from __future__ import annotations

import math
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from redis import exceptions as rex

__all__ = [
    "CREDENTIAL_ERRORS",
    "NO_RETRY",
    "RetryPolicy",
    "check_timeout",
    "is_transient",
    "refused",
    "tls_failure",
]

# Errors a retry may cure: the server is away, restarting, loading, busy with a long
# script, failing over, or resharding. Refused credentials and certificates are
# ConnectionError (or OSError) subclasses too, and never transient; a refused connection
# on first contact is not retried either (AsyncConnection decides: it needs the store's
# history).
_TRANSIENT: Final = (
    rex.ConnectionError,
    rex.TimeoutError,
    rex.ReadOnlyError,  # a write reached a replica: a failover is under way
    rex.ClusterError,  # CLUSTERDOWN, MASTERDOWN, too many MOVED/ASK redirections
    rex.TryAgainError,  # a multi-key command during resharding
    rex.AskError,  # MOVED/ASK left over after the cluster client's own redirections
    OSError,
)
# ExternalAuthProviderError is missing from older redis-py releases. An ACL denial of a
# command (NoPermissionError, NOPERM) is no credential error: _translate names it.
CREDENTIAL_ERRORS: Final[tuple[type[Exception], ...]] = tuple(
    getattr(rex, name)
    for name in ("AuthenticationError", "AuthorizationError", "ExternalAuthProviderError")
    if hasattr(rex, name)
)
# Error replies redis-py has no class for; the command was not run.
_TRANSIENT_REPLIES: Final = ("BUSY ", "NOREPLICAS ", "MASTERDOWN ", "LOADING ")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it was raised from or during: redis-py wraps socket and TLS
    errors in ConnectionError (implicitly chained), a cluster client those again."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def tls_failure(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error behind ``exc`` that no retry cures, or None: the server's
    certificate failed verification (unknown CA, host name mismatch, expired), or the
    server refused the client's certificate (or its absence)."""
    for cause in _chain(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            return cause
        # The server's alert: TLSV13_ALERT_CERTIFICATE_REQUIRED, SSLV3_ALERT_BAD_CERTIFICATE…
        # (asyncio's TLS transport keeps it only in the message, not in .reason).
        if isinstance(cause, ssl.SSLError) and "CERTIFICATE" in str(cause).upper():
            return cause
    return None


def refused(exc: BaseException) -> bool:
    """True when ``exc`` comes from a connection the server's host refused (nothing
    listens on the port). Transient once the store has reached its server (a restart);
    on first contact a wrong host or port, reported at once."""
    return any(isinstance(cause, ConnectionRefusedError) for cause in _chain(exc))


def is_transient(exc: BaseException) -> bool:
    """True for a failure a later try may not meet (as opposed to a refusal)."""
    if isinstance(exc, CREDENTIAL_ERRORS) or tls_failure(exc) is not None:
        return False
    if isinstance(exc, _TRANSIENT):
        return True
    return isinstance(exc, rex.ResponseError) and str(exc).startswith(_TRANSIENT_REPLIES)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a store retries a call that failed with a transient error.

    The first retry goes out at once (a killed connection is usually back at once);
    later ones wait a full-jitter exponential delay: uniform in [0, min(cap, base *
    2**n)] seconds. No try starts later than ``deadline`` seconds after the first was
    sent; a call then raises StoreUnavailable, chained to the last error, at most
    ``deadline`` plus one socket timeout after it began. With the defaults the
    deadline is what binds: 30 tries take longer than 15 s of backoff.

    Args:
        attempts: tries in all, the first included (1 = never retry).
        deadline: seconds after the first try was sent during which another may start.
        base: first backoff ceiling, seconds.
        cap: largest backoff ceiling, seconds.
    """

    attempts: int = 30
    deadline: float = 15.0
    base: float = 0.05
    cap: float = 2.0

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int):
            raise TypeError(f"attempts must be an int, got {self.attempts!r}")
        if not 1 <= self.attempts <= 1000:
            raise ValueError(f"attempts must be from 1 to 1000, got {self.attempts}")
        for name, limit in (("deadline", 3600.0), ("base", 60.0), ("cap", 600.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be seconds (a number), got {value!r}")
            if not 0 <= value <= limit:  # also refuses NaN
                raise ValueError(f"{name} must be from 0 to {limit:g} seconds, got {value!r}")

    @property
    def retries(self) -> bool:
        return self.attempts > 1

    def memory_ms(self, socket_timeout: float | None) -> int:
        """How long the server must remember a write id so that any resend of the
        write is recognised: the write was applied after its first try was sent, and
        the last resend starts by ``deadline`` after that and is read by the server
        within a socket timeout (5 s assumed when there is none); a second timeout
        and a second of margin cover slow hand-offs. 0 when never retrying: nothing
        is remembered then."""
        if not self.retries:
            return 0
        timeout = 5.0 if socket_timeout is None else socket_timeout
        return math.ceil((self.deadline + 2 * timeout + 1.0) * 1000)


NO_RETRY: Final = RetryPolicy(attempts=1)


def check_timeout(timeout: object) -> float:
    """Validate a socket timeout in seconds (connecting and each reply)."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be seconds (a number), got {timeout!r}")
    if not 0 < timeout <= 3600:  # also refuses NaN
        raise ValueError(f"timeout must be over 0 and at most 3600 seconds, got {timeout!r}")
    return float(timeout)
