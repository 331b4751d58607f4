"""The one boundary where redis-py errors become redistate errors."""

from __future__ import annotations

import re
import ssl
from typing import Any, Final

from redis import exceptions as rex

from .errors import (
    IntegrityError,
    LockLost,
    PermissionDenied,
    RedistateError,
    StoreFull,
    StoreUnavailable,
    TransportRefused,
)
from .retry import CREDENTIAL_ERRORS, _chain, is_transient, refused, tls_failure

__all__ = ["ERRORS", "describe", "first_contact", "translate", "unavailable"]

# What the I/O shells catch around every redis-py call (then pass to translate()).
ERRORS: Final = (rex.RedisError, OSError)


def describe(client: Any) -> str:
    """A human-readable address for error messages: ``host:port/db``, nodes, or embedded."""
    if type(client).__module__.startswith("fakeredis"):
        return "embedded (fakeredis)"
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None) or {}
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    if "rest" in kwargs:  # redistate.core.rest
        return f"REST API {kwargs['rest'].url}"
    if "host" in kwargs:
        return f"{kwargs['host']}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"
    service = getattr(pool, "service_name", None)
    if service:
        return f"sentinel service {service}"
    nodes = getattr(client, "startup_nodes", None)
    if nodes:
        listed = nodes.values() if isinstance(nodes, dict) else nodes
        return "cluster " + ",".join(f"{n.host}:{n.port}" for n in listed)
    return type(client).__name__


# An ACL denial, as Redis 7 and Valkey word it outside and inside scripts ("NOPERM" is
# stripped by redis-py); Redis 7.0 names no command inside a script, hence the check
# every script starts with (scripts.py), which names it.
# Patterns are strings, compiled (and cached) by re when an error first needs one.
_DENIED: Final = (
    r"(?i)no permissions to|can't run this command|can't access at least one of the keys"
    r"|^ACL failure in script"
)
_DENIED_COMMAND: Final = r"permissions to run the '([^']+)' command"
_PIPELINE_COMMAND: Final = r"^Command # \d+ \((\S+)"
# Redis 7.0 names the line of a call it refused inside a script, not its command.
_SCRIPT_LINE: Final = r"script: (\w+), on @user_(function|script):(\d+)"
_LUA_CALL: Final = r"redis\.p?call\(\s*['\"](\w+)['\"]"


def _script_command(text: str) -> str | None:
    """The command on the line of redistate's script or library that a refusal inside
    a script names (each line calls at most one: tests/unit/test_scripts.py), or None."""
    found = re.search(_SCRIPT_LINE, text)
    if found is None:
        return None
    from . import scripts  # the scripts module reads its Lua only when first asked

    name, kind, line = found.group(1), found.group(2), int(found.group(3))
    if kind == "function":
        library, source = scripts.library()
        if not name.startswith(library + "_"):
            return None
    else:
        sources = {scripts.script(n).sha: scripts.script(n).source for n in scripts.names()}
        if name not in sources:
            return None
        source = sources[name]
    lines = source.split("\n")
    if not 0 < line <= len(lines):
        return None
    called = {c.lower() for c in re.findall(_LUA_CALL, lines[line - 1].split("--")[0])}
    return called.pop() if len(called) == 1 else None


def _denied(exc: BaseException, address: str, command: str) -> PermissionDenied | None:
    """PermissionDenied for an ACL refusal, naming the command; else None."""
    text = str(exc)
    if isinstance(exc, rex.ResponseError) and text.endswith("EXEC without MULTI"):
        # redis-py's transactions always send MULTI first: only a denial refuses it.
        return PermissionDenied(
            "multi",
            f"redis at {address} refused 'multi' to this user (ACL): EXEC without MULTI. "
            f"No command was run in a transaction; `redistate acl` prints the ACL a "
            f"namespace needs",
        )
    if not isinstance(exc, rex.NoPermissionError) and not (
        isinstance(exc, rex.ResponseError) and re.search(_DENIED, text)
    ):
        return None
    named = re.search(_DENIED_COMMAND, text)
    queued = re.match(_PIPELINE_COMMAND, text)
    if named:
        command = named.group(1)
    elif queued:
        command = queued.group(1).lower()
    elif "script" in text:
        # A call inside a script: Redis 7.0 names its line (Valkey names the command).
        command = _script_command(text) or "?"
    message = text.rpartition("of pipeline caused error: ")[2].rstrip(".")
    command = command or "?"
    return PermissionDenied(
        command,
        f"redis at {address} refused {command!r} to this user (ACL): {message}. The "
        f"command was not run; `redistate acl` prints the ACL a namespace needs",
    )


def unavailable(exc: BaseException, address: str, tries: int, seconds: float) -> StoreUnavailable:
    """The error for a call whose every try failed transiently; raise it ``from exc``."""
    return StoreUnavailable(
        f"redis at {address} is unavailable: {exc} (gave up after {tries} tries "
        f"in {seconds:.2f} s; RetryPolicy sets the bound)"
    )


def _tls(exc: BaseException, address: str) -> RedistateError | None:
    """The error for a TLS failure no retry cures, naming what to pass; else None."""
    cause = tls_failure(exc)
    if cause is None:
        return None
    if isinstance(cause, ssl.SSLCertVerificationError):
        return RedistateError(
            f"TLS to redis at {address} failed: the server's certificate did not verify "
            f"({getattr(cause, 'verify_message', None) or cause}). Pass the CA that signed it "
            f"(from_url(..., ssl_ca_certs='ca.pem'); the CLI: --tls-ca-file), and connect "
            f"with a host name the certificate names; not retried"
        )
    return refused_certificate(cause, address)


def refused_certificate(alert: ssl.SSLError, address: str) -> RedistateError:
    """The error for a server's alert refusing the client certificate (or its absence)."""
    return RedistateError(
        f"TLS to redis at {address} failed: the server refused the client certificate "
        f"({getattr(alert, 'reason', None) or alert}). Pass one it trusts (ssl_certfile= "
        f"and ssl_keyfile=; the CLI: --tls-cert and --tls-key); not retried"
    )


def first_contact(exc: BaseException, address: str) -> RedistateError | None:
    """The error for a failure of a store's first contact that no retry cures: a
    refused connection (nothing listens there: a wrong host or port), a cluster none of
    whose startup nodes answers, or a TLS failure. None: retry it as usual."""
    found = _tls(exc, address)
    if found is not None:
        return found
    handshake = next((c for c in _chain(exc) if isinstance(c, ssl.SSLError)), None)
    if handshake is not None:
        # Before the server ever answered: not a dropped connection but a TLS setup
        # that does not work (a client certificate the server wants, a plain port).
        return RedistateError(
            f"TLS to redis at {address} failed on the store's first contact: {handshake}. "
            f"If the server wants a client certificate, pass ssl_certfile= and "
            f"ssl_keyfile= (the CLI: --tls-cert, --tls-key); if the port does not speak "
            f"TLS, use redis://; not retried"
        )
    if refused(exc) or isinstance(exc, rex.RedisClusterException):
        # StoreUnavailable: no server answers. Raised at once: on first contact this is
        # a wrong address far more often than a server that is about to come up.
        return StoreUnavailable(
            f"redis at {address} is unavailable: {exc} (nothing accepted a connection on "
            f"the store's first contact: check the host and port; not retried)"
        )
    return None


def translate(exc: BaseException, address: str, command: str = "") -> RedistateError:
    """The redistate error for a redis-py (or socket) error; raise it ``from exc``.

    StoreUnavailable only for conditions a retry may cure; StoreFull when maxmemory
    refuses a write; PermissionDenied for an ACL denial, naming the command (the
    server's words, else ``command``, the one sent); refused credentials and other
    error replies are RedistateError (IntegrityError for values that are not records).
    """
    denied = _denied(exc, address, command)
    if denied is not None:
        return denied
    if isinstance(exc, CREDENTIAL_ERRORS):
        return RedistateError(f"redis at {address} refused the credentials: {exc}")
    tls = _tls(exc, address)
    if tls is not None:
        return tls
    if is_transient(exc):
        return StoreUnavailable(f"redis at {address} is unavailable: {exc}")
    if isinstance(exc, rex.OutOfMemoryError):
        reason = str(exc).rstrip(".")
        return StoreFull(
            f"redis at {address} refused the write: {reason}. Nothing was written; "
            f"free memory (delete or expire state) or raise maxmemory, and keep "
            f"maxmemory-policy noeviction: evicting keys breaks redistate's guarantees "
            f"(see `redistate doctor`)"
        )
    if isinstance(exc, rex.ResponseError):
        # redis-py prefixes an error inside MULTI/EXEC with the command that caused it.
        message = str(exc).rpartition("of pipeline caused error: ")[2]
        if message.startswith("RSLOCKLOST"):
            return LockLost(f"{message} (at {address})")
        if message.startswith("RSREFUSED "):  # redistate.core.rest, before sending
            return TransportRefused(f"{message.removeprefix('RSREFUSED ')} ({address})")
        if message.startswith(("RSINTEGRITY", "WRONGTYPE")):
            return IntegrityError(f"{message} (at {address})")
        return RedistateError(f"redis at {address} replied with an error: {message}")
    return RedistateError(f"redis at {address}: {exc}")
