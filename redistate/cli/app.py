"""``redistate [--url URL] [--namespace NS] COMMAND``: the console entry point."""

from __future__ import annotations

import sys

from ..core.errors import RedistateError
from ._app import app, current  # each command's module is imported when it runs (_group)

__all__ = ["app", "main"]


def main() -> None:
    """Run the app: one-line errors, exit 1 for failures (usage errors: 2)."""
    try:
        app()  # exits 2 itself on a usage error
    except RedistateError as exc:
        sys.stderr.write(f"redistate: {exc}\n")
        sys.exit(1)
    except _redis_error() as exc:  # evaluated only when an exception gets this far
        from ..core._translate import translate

        context = current()
        address = "the embedded server" if context is None else context.address
        sys.stderr.write(f"redistate: {translate(exc, address)}\n")
        sys.exit(1)
    except OSError as exc:  # a file of the user's (redis-py wraps socket errors)
        where = f"{exc.filename}: " if exc.filename else ""
        sys.stderr.write(f"redistate: {where}{exc.strerror or exc}\n")
        sys.exit(1)
    except ValueError as exc:  # an option's value, e.g. a malformed --url
        sys.stderr.write(f"redistate: {exc}\n")
        sys.exit(2)
    finally:
        context = current()
        if context is not None:
            context.close()


class _NoRedisError(Exception):
    """Raised by nothing: what a run that never imported redis-py can fail with."""


def _redis_error() -> type[Exception]:
    """redis-py's RedisError, or a class nothing raises if redis-py was never imported
    (``--help``, ``acl``): importing it only to catch it would cost ~0.2 s."""
    exceptions = sys.modules.get("redis.exceptions")
    return _NoRedisError if exceptions is None else exceptions.RedisError
