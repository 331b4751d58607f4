"""The embedded backend: an in-process fakeredis server with Lua, for demos and tests.

Imported only when ``Store.embedded()`` is called, so ``import redistate`` stays light.
"""

from __future__ import annotations

from typing import Any

__all__ = ["async_client", "sync_client"]


def _fakeredis() -> Any:
    try:
        import fakeredis
        import lupa  # noqa: F401  (fakeredis needs it for EVAL)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Store.embedded() needs the embedded extra: pip install 'redistate[embedded]'"
        ) from exc
    return fakeredis


def sync_client(server: Any = None) -> Any:
    """A fakeredis client; clients given the same ``server`` share data."""
    fakeredis = _fakeredis()
    return fakeredis.FakeRedis(server=server or fakeredis.FakeServer())


def async_client(server: Any = None) -> Any:
    """An asyncio fakeredis client; clients given the same ``server`` share data."""
    fakeredis = _fakeredis()
    return fakeredis.FakeAsyncRedis(server=server or fakeredis.FakeServer())
