"""Which server a URL names: one Redis, a Redis Cluster, or a Sentinel service (pure).

    redis://[user:password@]host:port[/db]            rediss:// for TLS; unix:///path
    redis+cluster://[user:password@]host:port[,host:port...]         rediss+cluster://
    redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]
                                                                     rediss+sentinel://
    upstash+https://host[:port]       Upstash's REST API (token= or UPSTASH_REDIS_REST_TOKEN)
                                      upstash+http:// for a local REST server

Several ``host:port`` pairs are startup nodes (cluster) or the sentinels to ask
(sentinel). A password in a sentinel URL is the data nodes'; pass
``sentinel_kwargs={...}`` to ``from_url`` when the sentinels need their own.
"""

from __future__ import annotations

from typing import Literal, NamedTuple
from urllib.parse import unquote

__all__ = ["Target", "parse_url", "shown_url"]

Kind = Literal["standalone", "cluster", "sentinel", "rest"]
_SCHEMES: dict[str, tuple[Kind, bool]] = {
    "redis": ("standalone", False),
    "rediss": ("standalone", True),
    "unix": ("standalone", False),
    "redis+cluster": ("cluster", False),
    "rediss+cluster": ("cluster", True),
    "redis+sentinel": ("sentinel", False),
    "rediss+sentinel": ("sentinel", True),
    "upstash+https": ("rest", True),
    "upstash+http": ("rest", False),
}


class Target(NamedTuple):
    """What :func:`parse_url` found. ``url`` is for standalone servers (redis-py
    parses those itself); the other fields are for cluster and sentinel URLs."""

    kind: Kind
    url: str
    hosts: tuple[tuple[str, int], ...] = ()
    username: str | None = None
    password: str | None = None
    tls: bool = False
    service: str | None = None
    db: int = 0


def _shown(url: str) -> str:
    """``url`` for an error message: a password in it is masked."""
    scheme, sep, rest = url.partition("://")
    # The last "@" ends the userinfo: a password (a REST token) may hold "/" and "@".
    userinfo, at, after = rest.rpartition("@")
    if not at:
        return url
    if ":" in userinfo:
        return f"{scheme}{sep}{userinfo.split(':', 1)[0]}:***@{after}"
    return f"{scheme}{sep}***@{after}"  # a lone name: a token given in the wrong place


def shown_url(url: str | bytes) -> str:
    """``url`` for an error message, its password masked."""
    text = url.decode("utf-8", "replace") if isinstance(url, bytes) else url
    return _shown(text)


def _host_port(text: str, url: str) -> tuple[str, int]:
    if text.startswith("["):  # [IPv6]:port
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    else:
        host, _, port_text = text.rpartition(":")
        if not host:
            host, port_text = text, ""
    if not host:
        raise ValueError(f"no host in {text!r} of {url!r}")
    if not port_text:
        return host, 26379 if "sentinel" in url.split("://", 1)[0].lower() else 6379
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"port {port_text!r} in {url!r} must be a number from 1 to 65535")
    return host, int(port_text)


def parse_url(url: object) -> Target:
    """Parse a store URL (forms in the module docstring).

    Raises:
        TypeError: ``url`` is not a str. ValueError: an unknown scheme, no host, a bad
        port, a sentinel URL without a service name, or a bad db number.
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, got {type(url).__name__}")
    try:
        return _parse(url)
    except ValueError as exc:
        raise ValueError(str(exc).replace(repr(url), repr(_shown(url)))) from None


def _rest(url: str, scheme: str, rest: str, tls: bool) -> Target:
    """``upstash+https://[:token@]host[:port]``: ``url`` becomes the API's https:// URL,
    a token in it ``password``. Nothing after the host is echoed: a token may hold
    "/" and "@"."""
    authority, at, after = rest.rpartition("@")
    if not at:
        authority, after = "", rest
    host, _, tail = after.partition("/")
    host = host.partition("?")[0].partition("#")[0]
    if tail.strip("/") or "?" in after or "#" in after:
        raise ValueError(
            f"a {scheme}:// URL names a host and nothing more: a REST API has one database "
            f"and takes no options in its URL (pass them to from_url)"
        )
    if authority and ":" not in authority:
        raise ValueError(
            f"the token in a {scheme}:// URL goes after a colon (:<token>@host), or in token="
        )
    name, _ = _host_port(host if ":" in host.lstrip("[").rpartition("]")[2] else host + ":443", url)
    if not tls and not _local_host(name):
        raise ValueError(
            f"upstash+http:// sends the token unencrypted: only to a local REST server "
            f"(loopback, a private address or a one-label name), not to {name!r}; use "
            f"upstash+https://"
        )
    token = unquote(authority.partition(":")[2]) or None
    return Target("rest", f"{'https' if tls else 'http'}://{host}", password=token, tls=tls)


def _local_host(name: str) -> bool:
    """Loopback, a private address, or a one-label name (a container's, "localhost")."""
    import ipaddress

    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return "." not in name
    return address.is_loopback or address.is_private


def _parse(url: str) -> Target:
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in _SCHEMES:
        known = ", ".join(f"{s}://" for s in _SCHEMES)
        raise ValueError(f"url {url!r} has an unknown scheme; use one of {known}")
    kind, tls = _SCHEMES[scheme.lower()]
    if kind == "rest":
        return _rest(url, scheme, rest, tls)
    if kind == "standalone":
        path = rest.partition("?")[0].partition("#")[0].partition("/")[2]
        if scheme.lower() != "unix" and path and not (path.isdigit() and path.isascii()):
            # redis-py would silently take a path it cannot read as database 0.
            raise ValueError(
                f"url {url!r}: path {'/' + path!r} is not a database number "
                f"(e.g. {scheme}://host:port/0)"
            )
        return Target(kind, url, tls=tls)
    location, _, query = rest.partition("?")
    if query:
        raise ValueError(
            f"url {url!r}: options in a {scheme}:// URL are not read; pass them to from_url"
        )
    netloc, _, path = location.partition("/")
    userinfo, at, hostlist = netloc.rpartition("@")
    if not at:
        hostlist, userinfo = netloc, ""
    username, colon, password = userinfo.partition(":")
    hosts = tuple(_host_port(h, url) for h in hostlist.split(",") if h)
    if not hosts:
        raise ValueError(f"url {url!r} names no host")
    parts = [p for p in path.split("/") if p]
    service, db = None, 0
    if kind == "sentinel":
        if not parts:
            raise ValueError(f"url {url!r} needs a service name: {scheme}://host:port/service")
        service = unquote(parts.pop(0))
    if parts:
        if kind == "cluster" or len(parts) > 1 or not parts[0].isdigit():
            raise ValueError(f"url {url!r}: unexpected path {'/'.join(parts)!r}")
        db = int(parts[0])
    return Target(
        kind,
        url,
        hosts=hosts,
        username=unquote(username) or None,
        password=unquote(password) if colon else None,
        tls=tls,
        service=service,
        db=db,
    )
