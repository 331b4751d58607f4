"""Dropping an async client's connections when the event loop they belong to has
ended (or will not run again), so that the next call connects anew in the caller's.

A serverless function keeps a module-level ``AsyncStore`` and runs each invocation in a
fresh ``asyncio.run``: every socket of the previous invocation belongs to a closed loop
and cannot be used (or even closed through it) again. redis-py keeps them in its pools;
this closes their sockets directly and empties the pools (redis-py's own pools,
cluster nodes and Sentinel clients: the only places connections live).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from typing import Any

__all__ = ["drop_connections", "unusable"]


def unusable(loop: object) -> bool:
    """Whether ``loop`` (an event loop, or None) can no longer run its connections'
    I/O here: closed, or not running (another thread's running loop may be using
    them right now)."""
    return not (isinstance(loop, asyncio.AbstractEventLoop) and loop.is_running())


def drop_connections(*clients: Any) -> int:
    """Close the socket of every connection ``clients`` hold, without their loop, and
    forget them. Returns how many were open."""
    dropped = 0
    for conn in _connections(clients):
        writer = getattr(conn, "_writer", None)
        transport = getattr(writer, "transport", None)
        if transport is not None:
            # The transport's own close() would schedule on its (closed) loop. The
            # socket, TLS included: asyncio wraps it (TransportSocket) around the one
            # its selector transport holds.
            found = transport.get_extra_info("socket")
            sock = getattr(found, "_sock", found)
            if isinstance(sock, socket.socket):
                sock.close()
                dropped += 1
            elif found is not None:  # uvloop's PseudoSocket: no close(); end the TCP
                _shut(found.fileno())  # connection through a copy of its descriptor
                dropped += 1
        conn._reader = conn._writer = None
    return dropped


def _shut(fd: int) -> None:
    """Shut down the connection on descriptor ``fd`` through a duplicate of it (the
    owner's descriptor stays for it to close; the server sees the connection end)."""
    try:
        dup = socket.socket(fileno=os.dup(fd))
    except OSError:
        return  # already closed
    try:
        dup.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected any more
    finally:
        dup.close()


def _connections(clients: tuple[Any, ...]) -> Iterator[Any]:
    for client in clients:
        pool = getattr(client, "connection_pool", None)
        if pool is not None:
            yield from list(getattr(pool, "_available_connections", ()))
            yield from list(getattr(pool, "_in_use_connections", ()))
            pool.reset()
            manager = getattr(pool, "sentinel_manager", None)
            if manager is not None:
                yield from _connections(tuple(manager.sentinels))
        manager = getattr(client, "nodes_manager", None)
        for held in ("nodes_cache", "startup_nodes"):  # not always the same objects
            for node in (getattr(manager, held, None) or {}).values():
                yield from list(node._connections)
                node._connections.clear()
                node._free.clear()
