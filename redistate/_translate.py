"""The one boundary where redis-py errors become redistate errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from redis import exceptions as rex

from .errors import IntegrityError, RedistateError, StoreUnavailable

__all__ = ["describe", "translate"]


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


@contextmanager
def translate(address: str) -> Iterator[None]:
    """Map redis-py errors raised inside the block, chaining the original."""
    try:
        yield
    except rex.NoScriptError:
        raise  # handled by the script runner, which reloads and resends
    except (rex.ConnectionError, rex.TimeoutError, TimeoutError, ConnectionError) as exc:
        raise StoreUnavailable(f"redis at {address} is unavailable: {exc}") from exc
    except rex.ResponseError as exc:
        message = str(exc)
        if message.startswith(("RSINTEGRITY", "WRONGTYPE")):
            raise IntegrityError(f"{message} (at {address})") from exc
        raise RedistateError(f"redis at {address} replied with an error: {message}") from exc
    except rex.RedisError as exc:
        raise RedistateError(f"redis at {address}: {exc}") from exc
