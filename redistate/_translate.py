"""The one boundary where redis-py errors become redistate errors."""

from __future__ import annotations

import ssl
from typing import Any, Final

from redis import exceptions as rex

from .errors import IntegrityError, LockLost, RedistateError, StoreFull, StoreUnavailable
from .retry import CREDENTIAL_ERRORS, _chain, is_transient, refused, tls_failure

__all__ = ["ERRORS", "describe", "first_contact", "translate", "unavailable"]

# What the I/O shells catch around every redis-py call (then pass to translate()).
ERRORS: Final = (rex.RedisError, OSError)


def describe(client: Any) -> str:
    """A human-readable address for error messages: ``host:port/db``, nodes, or embedded."""
    if type(client).__module__.startswith("fakeredis"):
        return "embedded (fakeredis)"
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None) or {}
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    if "host" in kwargs:
        return f"{kwargs['host']}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"
    service = getattr(pool, "service_name", None)
    if service:
        return f"sentinel service {service}"
    nodes = getattr(client, "startup_nodes", None)
    if nodes:
        listed = nodes.values() if isinstance(nodes, dict) else nodes
        return "cluster " + ",".join(f"{n.host}:{n.port}" for n in listed)
    return type(client).__name__


def unavailable(exc: BaseException, address: str, tries: int, seconds: float) -> StoreUnavailable:
    """The error for a call whose every try failed transiently; raise it ``from exc``."""
    return StoreUnavailable(
        f"redis at {address} is unavailable: {exc} (gave up after {tries} tries "
        f"in {seconds:.2f} s; RetryPolicy sets the bound)"
    )


def _tls(exc: BaseException, address: str) -> RedistateError | None:
    """The error for a TLS failure no retry cures, naming what to pass; else None."""
    cause = tls_failure(exc)
    if cause is None:
        return None
    if isinstance(cause, ssl.SSLCertVerificationError):
        return RedistateError(
            f"TLS to redis at {address} failed: the server's certificate did not verify "
            f"({getattr(cause, 'verify_message', None) or cause}). Pass the CA that signed it "
            f"(from_url(..., ssl_ca_certs='ca.pem'); the CLI: --tls-ca-file), and connect "
            f"with a host name the certificate names; not retried"
        )
    return RedistateError(
        f"TLS to redis at {address} failed: the server refused the client certificate "
        f"({getattr(cause, 'reason', None) or cause}). Pass one it trusts (ssl_certfile= "
        f"and ssl_keyfile=; the CLI: --tls-cert and --tls-key); not retried"
    )


def first_contact(exc: BaseException, address: str) -> RedistateError | None:
    """The error for a failure of a store's first contact that no retry cures: a
    refused connection (nothing listens there: a wrong host or port), a cluster none of
    whose startup nodes answers, or a TLS failure. None: retry it as usual."""
    found = _tls(exc, address)
    if found is not None:
        return found
    handshake = next((c for c in _chain(exc) if isinstance(c, ssl.SSLError)), None)
    if handshake is not None:
        # Before the server ever answered: not a dropped connection but a TLS setup
        # that does not work (a client certificate the server wants, a plain port).
        return RedistateError(
            f"TLS to redis at {address} failed on the store's first contact: {handshake}. "
            f"If the server wants a client certificate, pass ssl_certfile= and "
            f"ssl_keyfile= (the CLI: --tls-cert, --tls-key); if the port does not speak "
            f"TLS, use redis://; not retried"
        )
    if refused(exc) or isinstance(exc, rex.RedisClusterException):
        # StoreUnavailable: no server answers. Raised at once: on first contact this is
        # a wrong address far more often than a server that is about to come up.
        return StoreUnavailable(
            f"redis at {address} is unavailable: {exc} (nothing accepted a connection on "
            f"the store's first contact: check the host and port; not retried)"
        )
    return None


def translate(exc: BaseException, address: str) -> RedistateError:
    """The redistate error for a redis-py (or socket) error; raise it ``from exc``.

    StoreUnavailable only for conditions a retry may cure; StoreFull when maxmemory
    refuses a write; refused credentials and other error replies are RedistateError
    (IntegrityError for values that are not records).
    """
    if isinstance(exc, CREDENTIAL_ERRORS):
        return RedistateError(f"redis at {address} refused the credentials: {exc}")
    tls = _tls(exc, address)
    if tls is not None:
        return tls
    if is_transient(exc):
        return StoreUnavailable(f"redis at {address} is unavailable: {exc}")
    if isinstance(exc, rex.OutOfMemoryError):
        reason = str(exc).rstrip(".")
        return StoreFull(
            f"redis at {address} refused the write: {reason}. Nothing was written; "
            f"free memory, raise maxmemory or choose an eviction policy"
        )
    if isinstance(exc, rex.ResponseError):
        # redis-py prefixes an error inside MULTI/EXEC with the command that caused it.
        message = str(exc).rpartition("of pipeline caused error: ")[2]
        if message.startswith("RSLOCKLOST"):
            return LockLost(f"{message} (at {address})")
        if message.startswith(("RSINTEGRITY", "WRONGTYPE")):
            return IntegrityError(f"{message} (at {address})")
        return RedistateError(f"redis at {address} replied with an error: {message}")
    return RedistateError(f"redis at {address}: {exc}")
