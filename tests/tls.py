"""A private CA and certificates for TLS tests, made in the test (``cryptography``),
and Redis servers that speak TLS with them."""

from __future__ import annotations

import datetime as dt
import ipaddress
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.servers import Server, bus_free_port, start_server

__all__ = ["Pki", "TlsCluster", "make_pki", "start_tls_cluster", "start_tls_server", "tls_port"]


@dataclass(frozen=True)
class Pki:
    """PEM files: the CA, a server certificate for ``localhost``/127.0.0.1, a client
    certificate, all signed by the CA, and another CA that signed none of them."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path
    wrong_name_cert: Path  # signed by the CA, for "redis.invalid" only
    wrong_name_key: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Path:
    path.with_suffix(".key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _ca(common: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(_name(common))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    common: str,
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    usage: list[x509.ObjectIdentifier],
    names: list[x509.GeneralName],
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(ca[0].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca[1], hashes.SHA256()), key


def make_pki(directory: Path) -> Pki:
    """A fresh CA and certificates in ``directory``."""
    ca = _ca("redistate test CA")
    other = _ca("another CA")
    names: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    # A node is a client of its peers on the TLS cluster bus: both usages.
    both = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    server = _leaf("localhost", ca, both, names)
    client = _leaf("client", ca, [ExtendedKeyUsageOID.CLIENT_AUTH], [])
    wrong = _leaf("redis.invalid", ca, both, [x509.DNSName("redis.invalid")])
    return Pki(
        ca=_write(directory / "ca.pem", *ca),
        server_cert=_write(directory / "server.pem", *server),
        server_key=directory / "server.key",
        client_cert=_write(directory / "client.pem", *client),
        client_key=directory / "client.key",
        other_ca=_write(directory / "other-ca.pem", *other),
        wrong_name_cert=_write(directory / "wrong-name.pem", *wrong),
        wrong_name_key=directory / "wrong-name.key",
    )


def tls_port() -> int:
    """A free loopback port whose cluster bus port (port + 10000) is free too."""
    return bus_free_port()


def start_tls_server(
    binary: str, pki: Pki, port: int, *extra: str, wrong_name: bool = False
) -> Server:
    """``binary`` with TLS on ``port`` (and plain TCP on the Server's own port, which
    the tests use to look at it); clients need a certificate (Redis's default)."""
    cert, key = (
        (pki.wrong_name_cert, pki.wrong_name_key)
        if wrong_name
        else (pki.server_cert, pki.server_key)
    )
    return start_server(
        binary,
        "--tls-port",
        str(port),
        "--tls-cert-file",
        str(cert),
        "--tls-key-file",
        str(key),
        "--tls-ca-cert-file",
        str(pki.ca),
        *extra,
    )


@dataclass
class TlsCluster:
    """Primaries that speak TLS to clients and to each other (``tls-cluster yes``)."""

    nodes: list[Server]
    tls_ports: list[int]

    @property
    def url(self) -> str:
        return "rediss+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.tls_ports)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def start_tls_cluster(binary: str, pki: Pki, primaries: int = 3) -> TlsCluster:
    """``primaries`` primaries (no replicas) over TLS, formed through their plain ports
    (CLUSTER MEET names the TLS port: the bus listens on it + 10000)."""
    nodes: list[Server] = []
    ports: list[int] = []
    try:
        for _ in range(primaries):
            ports.append(tls_port())
            nodes.append(
                start_tls_server(
                    binary,
                    pki,
                    ports[-1],
                    "--cluster-enabled",
                    "yes",
                    "--tls-cluster",
                    "yes",
                    "--cluster-node-timeout",
                    "2000",
                )
            )
        clients = [n.client() for n in nodes]
        commands: list[Any] = [c.execute_command for c in clients]  # untyped in redis-py
        try:
            for port in ports[1:]:
                commands[0]("CLUSTER", "MEET", "127.0.0.1", port)
            size = 16384 // primaries
            for i, command in enumerate(commands):
                last = 16383 if i == primaries - 1 else (i + 1) * size - 1
                command("CLUSTER", "ADDSLOTSRANGE", i * size, last)
            deadline = time.monotonic() + 30
            while not all(
                b"cluster_state:ok" in c("CLUSTER", "INFO")
                and len(c("CLUSTER", "NODES").strip().splitlines()) == primaries
                for c in commands
            ):
                if time.monotonic() > deadline:
                    raise RuntimeError("the TLS cluster did not reach cluster_state:ok")
                time.sleep(0.02)  # readiness poll of a forming cluster, bounded
        finally:
            for c in clients:
                c.close()
    except Exception:
        for node in nodes:
            node.stop()
        raise
    return TlsCluster(nodes, ports)
