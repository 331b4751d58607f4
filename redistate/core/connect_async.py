"""Build the redis-py client a store URL names (async source of truth)."""

from __future__ import annotations

from typing import Any, cast

from redis import exceptions as rex
from redis.asyncio import Redis
from redis.asyncio import cluster as cluster_module
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import Connection as PlainConnection
from redis.asyncio.connection import (
    ConnectionPool,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import (
    Sentinel,
    SentinelManagedConnection,
    SentinelManagedSSLConnection,
)
from redis.backoff import NoBackoff

from ._translate import first_contact, translate
from .options import (
    async_from_url_reads,
    async_pool_reads,
    check_options,
    init_names,
    named,
)
from .urls import Target, parse_url

__all__ = ["client_for"]


def client_for(
    url: str, timeout: float, options: dict[str, Any]
) -> tuple[Redis | RedisCluster, list[Any]]:
    """(client, other clients the store must close with it) for ``url``: a Redis, a
    RedisCluster over its startup nodes, or a Sentinel service's primary.

    ``timeout`` bounds connecting and each reply, on data nodes and sentinels alike;
    redis-py's own retries are off (the store retries). ``options`` go to redis-py.
    """
    target = parse_url(url)
    if target.kind == "rest":  # Upstash's REST API: a bridge per connection (core.rest)
        from .rest import AsyncRestConnection, pool_options  # only where it is used

        kwargs = pool_options(target.url, target.password, timeout, options)
        pool = ConnectionPool(connection_class=AsyncRestConnection, **kwargs)
        # from_pool: the client owns the pool, so closing the store ends the bridges.
        return Redis.from_pool(pool), []
    accepted_options(target, options)
    timeouts: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    credentials: dict[str, Any] = {"username": target.username, "password": target.password}
    # What the caller passes wins over what the URL and the defaults say.
    if target.kind == "standalone":
        defaults = {**timeouts, "retry": Retry(NoBackoff(), 0), **identity()}
        client = Redis.from_url(url, **{**defaults, **options})
        return client, []
    if target.kind == "cluster":
        node: Any = ClusterNode  # untyped in redis-py's sync flavour
        nodes = [node(host, port) for host, port in target.hosts]
        merged = {**credentials, **timeouts, "ssl": target.tls, **options}
        try:  # a sync RedisCluster connects here, when it is built
            return RedisCluster(startup_nodes=nodes, **merged), []
        except rex.RedisClusterException as exc:
            address = "cluster " + ",".join(f"{host}:{port}" for host, port in target.hosts)
            raise first_contact(exc, address) or translate(exc, address) from exc
    sentinel_options = {**timeouts, **options.pop("sentinel_kwargs", {})}
    sentinels: Any = Sentinel  # untyped in redis-py
    sentinel = sentinels(list(target.hosts), sentinel_kwargs=sentinel_options, **timeouts)
    assert target.service is not None  # parse_url requires it for sentinel URLs
    merged = {
        **credentials,
        "db": target.db,
        "ssl": target.tls,
        "retry": Retry(NoBackoff(), 0),
        **options,
    }
    primary = sentinel.master_for(target.service, **merged)
    return cast("Redis", primary), list(sentinel.sentinels)


def identity() -> dict[str, Any]:
    """What the connections name themselves with (CLIENT SETINFO): redis-py, and
    redistate as its upstream driver (CLIENT LIST shows which clients are redistate's).
    The version is given, not looked up: redis-py's own lookup reads the installed
    packages' metadata, ~10 ms of a cold start's first connection."""
    import redis

    from .. import __version__

    try:
        from redis.driver_info import DriverInfo
    except ImportError:  # redis-py before 7: the older keywords
        return {"lib_name": f"redis-py(redistate_v{__version__})", "lib_version": redis.__version__}
    info = DriverInfo(name="redis-py", lib_version=redis.__version__)
    return {"driver_info": info.add_upstream_driver("redistate", __version__)}


def accepted_options(target: Target, options: dict[str, Any]) -> None:
    """Refuse at once a keyword argument the client ``target`` needs would not take.

    Raises:
        TypeError: naming the argument, before any client is built.
    """
    given = options.get("connection_class")
    chosen = given if isinstance(given, type) else None
    if target.kind == "standalone":
        scheme = target.url.partition("://")[0].lower()
        default = {"rediss": SSLConnection, "unix": UnixDomainSocketConnection}
        connection = chosen or default.get(scheme, PlainConnection)
        accepted = named(Redis.from_url)[0] | async_from_url_reads()
        accepted |= init_names(ConnectionPool) | async_pool_reads()
        check_options(options, accepted | init_names(connection), "Redis.from_url")
    elif target.kind == "cluster":
        # The sync RedisCluster drops what its nodes' clients do not take, silently.
        extra = set(getattr(cluster_module, "REDIS_ALLOWED_KEYS", ()))
        check_options(options, init_names(RedisCluster) | extra, "RedisCluster")
    else:
        ssl = target.tls or bool(options.get("ssl"))
        tls = SentinelManagedSSLConnection if ssl else SentinelManagedConnection
        accepted = named(Sentinel.master_for)[0] | init_names(ConnectionPool)
        accepted |= async_pool_reads()
        # What SentinelConnectionPool pops before its connections see the rest.
        accepted |= {"ssl", "is_master", "check_connection", "sentinel_kwargs"}
        accepted |= init_names(chosen or tls) - {"connection_pool"}
        check_options(options, accepted, "Sentinel.master_for")
