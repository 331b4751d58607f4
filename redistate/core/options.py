"""Which keyword arguments a redis-py client accepts (pure: reads signatures only).

redis-py hands most keyword arguments from class to class until a connection is made:
a misspelt one fails only then ("unexpected keyword argument" inside the pool), or is
dropped without a word (the sync RedisCluster). ``from_url`` checks them first.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "async_from_url_reads",
    "async_pool_reads",
    "check_options",
    "init_names",
    "named",
    "sync_from_url_reads",
    "sync_pool_reads",
]


def named(fn: Callable[..., Any]) -> tuple[set[str], bool]:
    """(the keyword names ``fn`` takes, whether it passes on other keywords too)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: no names known
        return set(), True
    names = {
        p.name
        for p in parameters
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
    }
    more = any(p.kind is p.VAR_KEYWORD for p in parameters)
    return names, more


def init_names(cls: type) -> set[str]:
    """The keyword names ``cls(...)`` takes: each ``__init__`` up its MRO for as long as
    one passes ``**kwargs`` on to ``super().__init__``."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is object:
            break
        init = vars(klass).get("__init__")
        if init is None:
            continue
        found, more = named(init)
        names |= found
        if not more:
            break
    return names


# What redis-py takes out of ``**kwargs`` in a body, not a signature: the sync
# Redis.from_url pops ``single_connection_client``; the sync ConnectionPool (and so
# SentinelConnectionPool) reads ``cache`` and ``cache_config``. The asyncio flavour
# names its own in signatures. scripts/unasync.py maps async_x onto sync_x.


def async_from_url_reads() -> set[str]:
    return set()


def sync_from_url_reads() -> set[str]:
    return {"single_connection_client"}


def async_pool_reads() -> set[str]:
    return set()


def sync_pool_reads() -> set[str]:
    return {"cache", "cache_config"}


def check_options(options: Iterable[str], accepted: set[str], where: str) -> None:
    """Raise TypeError naming the first of ``options`` not in ``accepted``.

    Raises:
        TypeError: an argument no class along the way takes (before any connection).
    """
    for name in options:
        if name in accepted:
            continue
        import difflib  # only for this message: a cold start does not pay for it

        close = difflib.get_close_matches(name, sorted(accepted), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TypeError(
            f"from_url() got an unexpected keyword argument {name!r}{hint}: neither "
            f"redistate nor redis-py's {where} takes it; nothing was connected"
        )
