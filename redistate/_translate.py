"""The one boundary where redis-py errors become redistate errors."""

from __future__ import annotations

from typing import Any, Final

from redis import exceptions as rex

from .errors import IntegrityError, RedistateError, StoreUnavailable

__all__ = ["ERRORS", "describe", "translate"]

# What the I/O shells catch around every redis-py call (then pass to translate()).
ERRORS: Final = (rex.RedisError, OSError)


def describe(client: Any) -> str:
    """A human-readable address for error messages: ``host:port/db`` or a class name."""
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None) or {}
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    if "host" in kwargs:
        return f"{kwargs['host']}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"
    nodes = getattr(client, "startup_nodes", None)
    if nodes:
        return ",".join(f"{n.host}:{n.port}" for n in nodes)
    return type(client).__name__


def translate(exc: BaseException, address: str) -> RedistateError:
    """The redistate error for a redis-py (or socket) error; raise it ``from exc``."""
    if isinstance(exc, rex.ConnectionError | rex.TimeoutError | OSError):
        return StoreUnavailable(f"redis at {address} is unavailable: {exc}")
    if isinstance(exc, rex.ResponseError):
        message = str(exc)
        if message.startswith(("RSINTEGRITY", "WRONGTYPE")):
            return IntegrityError(f"{message} (at {address})")
        return RedistateError(f"redis at {address} replied with an error: {message}")
    return RedistateError(f"redis at {address}: {exc}")
