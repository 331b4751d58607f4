"""Why a TLS server dropped a store's first connection: a refused client certificate.

With TLS 1.3 a client finishes its handshake before the server has checked the client's
certificate, and redis-py sends its first command at once. A server that refuses the
certificate (or its absence) answers with an alert and closes a socket holding that
unread command, so its kernel resets the connection: the alert is often discarded
unread and the client sees only "connection reset" (asyncio's TLS transport nearly half
the time), which looks transient. The probe repeats the handshake and sends nothing, so
the alert arrives intact; it runs only after such a failure on first contact.
"""

from __future__ import annotations

import re
import socket
import ssl
from typing import Any

__all__ = ["certificate_alert", "probe_target"]

# redis-py's names for the certificate requirement, as in its SSLConnection.
_ALERT_WAIT = 2.0  # seconds
# The server's alerts about the client's certificate, as OpenSSL names them.
_ALERT = re.compile(r"ALERT_(CERTIFICATE|BAD_CERTIFICATE|UNKNOWN_CA|ACCESS_DENIED)", re.I)
_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def probe_target(client: Any) -> dict[str, Any] | None:
    """The host, port and TLS options of a plain client's server, or None when the
    client does not speak TLS to one known address (a cluster or Sentinel service is
    not probed: its failure is retried, or reported, as before)."""
    pool: Any = getattr(client, "connection_pool", None)
    kwargs: dict[str, Any] = dict(getattr(pool, "connection_kwargs", None) or {})
    connection_class = getattr(pool, "connection_class", None)
    if connection_class is None or "SSL" not in connection_class.__name__:
        return None
    if hasattr(pool, "get_master_address") or "host" not in kwargs:
        return None
    return kwargs


def _context(options: dict[str, Any]) -> ssl.SSLContext:
    context = ssl.create_default_context(
        cafile=options.get("ssl_ca_certs"),
        capath=options.get("ssl_ca_path"),
        cadata=options.get("ssl_ca_data"),
    )
    reqs = options.get("ssl_cert_reqs", ssl.CERT_REQUIRED)
    reqs = _REQS.get(reqs, ssl.CERT_REQUIRED) if isinstance(reqs, str) else reqs
    context.check_hostname = bool(options.get("ssl_check_hostname", True)) and (
        reqs == ssl.CERT_REQUIRED
    )
    context.verify_mode = reqs
    if options.get("ssl_certfile"):
        context.load_cert_chain(
            options["ssl_certfile"], options.get("ssl_keyfile"), options.get("ssl_password")
        )
    return context


def certificate_alert(options: dict[str, Any]) -> ssl.SSLError | None:
    """Connect as the client would, send nothing, and return the server's alert if it
    refuses the client's certificate; None when it does not (it waits for a command:
    the probe gives up after a short wait), or the probe itself cannot connect."""
    timeout = options.get("socket_connect_timeout") or options.get("socket_timeout") or 5.0
    host, port = options["host"], int(options["port"])
    try:
        context = _context(options)
        raw = socket.create_connection((host, port), timeout=timeout)
        with raw, context.wrap_socket(raw, server_hostname=host) as tls:
            # The alert follows the handshake at once; a server that accepted the
            # certificate sends nothing, so the wait is bounded, and short.
            tls.settimeout(min(timeout, _ALERT_WAIT))
            tls.recv(1)
    except ssl.SSLCertVerificationError:
        return None  # the server's certificate: translated from the first error already
    except ssl.SSLError as exc:
        return exc if _ALERT.search(str(exc)) else None
    except OSError:  # a timeout, a reset, a refusal: nothing the probe can name
        return None
    return None
