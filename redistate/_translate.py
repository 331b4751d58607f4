"""The one boundary where redis-py errors become redistate errors."""

from __future__ import annotations

from typing import Any, Final

from redis import exceptions as rex

from .errors import IntegrityError, LockLost, RedistateError, StoreFull, StoreUnavailable
from .retry import CREDENTIAL_ERRORS, is_transient

__all__ = ["ERRORS", "describe", "translate", "unavailable"]

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


def translate(exc: BaseException, address: str) -> RedistateError:
    """The redistate error for a redis-py (or socket) error; raise it ``from exc``.

    StoreUnavailable only for conditions a retry may cure; StoreFull when maxmemory
    refuses a write; refused credentials and other error replies are RedistateError
    (IntegrityError for values that are not records).
    """
    if isinstance(exc, CREDENTIAL_ERRORS):
        return RedistateError(f"redis at {address} refused the credentials: {exc}")
    if is_transient(exc):
        return StoreUnavailable(f"redis at {address} is unavailable: {exc}")
    if isinstance(exc, rex.OutOfMemoryError):
        reason = str(exc).rstrip(".")
        return StoreFull(
            f"redis at {address} refused the write: {reason}. Nothing was written; "
            f"free memory (delete or expire state) or raise maxmemory, and keep "
            f"maxmemory-policy noeviction: evicting keys breaks redistate's guarantees "
            f"(see `redistate doctor`)"
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
