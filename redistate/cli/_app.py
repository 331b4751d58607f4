"""The Typer app, its global options and the state one command run shares."""

from __future__ import annotations

import contextlib

import typer

from .. import Store
from ._embedded import embedded_url
from ._keys import codec_from_env, signing_from_env

__all__ = ["Context", "app", "current"]

HELP = """Look into, back up and demonstrate redistate state.

Without --url (or REDISTATE_URL) the embedded server is used: see `redistate demo`.
Listings print a table, or JSON lines with --json. Errors are one line on stderr:
exit code 2 for a usage error, 1 for a failure. An encrypted namespace needs its keys
in REDISTATE_KEYS ("k1=<base64>,k2=<base64>"; primary: REDISTATE_PRIMARY_KEY or the first).
A signed namespace needs its HMAC keys in REDISTATE_SIGNING_KEYS (same form; primary:
REDISTATE_SIGNING_PRIMARY or the first).
"""

DEFAULT_NAMESPACE = "redistate"

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help=HELP, pretty_exceptions_enable=False
)


class Context:
    """The server and namespace of this run; the embedded server starts on first use."""

    def __init__(self, url: str | None, namespace: str | None) -> None:
        self._url = url
        self.namespace_given = namespace is not None
        self.namespace = DEFAULT_NAMESPACE if namespace is None else namespace
        self._store: Store | None = None
        self._stack = contextlib.ExitStack()

    @property
    def url(self) -> str:
        if self._url is None:
            self._url = self._stack.enter_context(embedded_url())
        return self._url

    @property
    def store(self) -> Store:
        if self._store is None:
            codec = codec_from_env()  # before the server starts: bad keys change nothing
            signing = signing_from_env()
            self._store = Store.from_url(
                self.url, namespace=self.namespace, timeout=5, codec=codec, signing=signing
            )
            self._stack.callback(self._store.close)
        return self._store

    @property
    def address(self) -> str:
        """The server a failed command was talking to, for its error message."""
        return "the embedded server" if self._store is None else self._store._conn.address

    def close(self) -> None:
        self._stack.close()


_current: Context | None = None


def current() -> Context | None:
    """This run's context (None before the options were parsed)."""
    return _current


@app.callback()
def options(
    ctx: typer.Context,
    url: str | None = typer.Option(
        None, envvar="REDISTATE_URL", help="redis://, rediss://, unix://, redis+cluster:// …"
    ),
    namespace: str | None = typer.Option(
        None, help=f"the namespace to work on (default: {DEFAULT_NAMESPACE}; demo: demo)"
    ),
) -> None:
    global _current
    ctx.obj = _current = Context(url, namespace)
