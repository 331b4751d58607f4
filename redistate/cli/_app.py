"""The Typer app, its global options and the state one command run shares."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import typer

from ._group import LazyGroup

if TYPE_CHECKING:
    from .. import Store
    from ..core.server import ServerCheck

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

# The Store, the embedded server and each command's module are imported when first used:
# `redistate --help` or `acl` connect to nothing, and `ls` needs none of the others.
app = typer.Typer(
    cls=LazyGroup,
    add_completion=False,
    no_args_is_help=True,
    help=HELP,
    pretty_exceptions_enable=False,
)


class Context:
    """The server and namespace of this run; the embedded server starts on first use."""

    def __init__(
        self, url: str | None, namespace: str | None, tls: dict[str, str] | None = None
    ) -> None:
        self._url = url
        self.tls: dict[str, Any] = dict(tls or {})  # redis-py's ssl_* options (rediss URLs)
        self.namespace_given = namespace is not None
        self.namespace = DEFAULT_NAMESPACE if namespace is None else namespace
        self._store: Store | None = None
        self._stack = contextlib.ExitStack()
        self.server_check: ServerCheck = "warn"  # doctor reports the facts itself: "off"

    @property
    def url(self) -> str:
        if self._url is None:
            from ._embedded import embedded_url

            self._url = self._stack.enter_context(embedded_url())
            # The CLI's own server, started with noeviction; its fakeredis fallback
            # answers neither CONFIG nor INFO (it would be "unknown").
            self.server_check = "off"
        return self._url

    @property
    def store(self) -> Store:
        if self._store is None:
            from .. import Store
            from ._keys import codec_from_env, signing_from_env

            codec = codec_from_env()  # before the server starts: bad keys change nothing
            signing = signing_from_env()
            url = self.url  # first: starting the embedded server sets server_check
            self._store = Store.from_url(
                url,
                namespace=self.namespace,
                timeout=5,
                codec=codec,
                signing=signing,
                server_check=self.server_check,
                **self.tls,
            )
            self._stack.callback(self._store.close)
        return self._store

    @property
    def address(self) -> str:
        """The server a failed command was talking to, for its error message."""
        return "the embedded server" if self._store is None else self._store.address

    def close(self) -> None:
        self._stack.close()


_current: Context | None = None


def current() -> Context | None:
    """This run's context (None before the options were parsed)."""
    return _current


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"redistate {__version__}")
        raise typer.Exit()


@app.callback()
def options(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_version, help="print the version and exit"
    ),
    url: str | None = typer.Option(
        None, envvar="REDISTATE_URL", help="redis://, rediss://, unix://, redis+cluster:// …"
    ),
    namespace: str | None = typer.Option(
        None, help=f"the namespace to work on (default: {DEFAULT_NAMESPACE}; demo: demo)"
    ),
    tls_ca_file: str | None = typer.Option(
        None,
        envvar="REDISTATE_TLS_CA_FILE",
        metavar="FILE",
        help="rediss URLs: the CA certificate(s) that signed the server's (PEM)",
    ),
    tls_cert: str | None = typer.Option(
        None,
        envvar="REDISTATE_TLS_CERT",
        metavar="FILE",
        help="rediss URLs: this client's certificate (PEM), for tls-auth-clients",
    ),
    tls_key: str | None = typer.Option(
        None,
        envvar="REDISTATE_TLS_KEY",
        metavar="FILE",
        help="rediss URLs: the private key of --tls-cert (PEM)",
    ),
) -> None:
    global _current
    given = {"ssl_ca_certs": tls_ca_file, "ssl_certfile": tls_cert, "ssl_keyfile": tls_key}
    tls = {k: v for k, v in given.items() if v is not None}
    if tls and (url is None or not url.lower().startswith("rediss")):
        raise typer.BadParameter(
            "--tls-ca-file, --tls-cert and --tls-key need a rediss:// URL "
            "(rediss+cluster://, rediss+sentinel://)"
        )
    if (tls_cert is None) != (tls_key is None):
        raise typer.BadParameter("--tls-cert and --tls-key go together")
    ctx.obj = _current = Context(url, namespace, tls)
