"""A throwaway certificate authority for local TLS setups, tests and the security benchmark: PEM files.

>>> ca = CertificateAuthority(tmp_path)                                     # doctest: +SKIP
>>> server = ca.issue("broker", hosts=["localhost", "127.0.0.1"])           # doctest: +SKIP
>>> Broker(config={"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": server.keystore})

``issue`` writes ``<name>.pem`` (certificate chain then private key: a PEM
keystore, ``ssl.keystore.location``), ``<name>.crt`` and ``<name>.key``
separately (what librdkafka, kcat and aiokafka take), and ``ca.crt`` is the
truststore.  Keys are EC P-256: fast to make.
"""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    name: str
    keystore: str  # PEM: certificate chain + key (ssl.keystore.location)
    certificate: str  # PEM certificate chain only
    key: str  # PEM private key only
    subject: str  # as the broker prints it (RFC 2253)


def _name(common_name: str, organization: str | None) -> x509.Name:
    attributes = []
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


class CertificateAuthority:
    def __init__(self, directory: str | Path, name: str = "pylog test CA") -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        subject = _name(name, None)
        self._cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(minutes=5))
                      .not_valid_after(now + datetime.timedelta(days=2))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                      .sign(self._key, hashes.SHA256()))
        self.truststore = str(self.directory / "ca.crt")
        Path(self.truststore).write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, common_name: str, *, hosts: tuple[str, ...] | list[str] = ("localhost", "127.0.0.1"),
              organization: str | None = "pylog", expired: bool = False, password: str | None = None,
              file_name: str | None = None) -> Issued:
        """A certificate for ``common_name`` valid for ``hosts`` (server and client use), signed by this CA."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        start, end = ((now - datetime.timedelta(days=3), now - datetime.timedelta(days=1)) if expired
                      else (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1)))
        names = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = (x509.CertificateBuilder().subject_name(_name(common_name, organization))
                   .issuer_name(self._cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                         ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                      else serialization.NoEncryption())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        chain_pem = cert.public_bytes(serialization.Encoding.PEM) + self._cert.public_bytes(serialization.Encoding.PEM)
        stem = self.directory / (file_name or common_name)
        paths = {suffix: str(stem) + suffix for suffix in (".pem", ".crt", ".key")}
        Path(paths[".pem"]).write_bytes(chain_pem + key_pem)
        Path(paths[".crt"]).write_bytes(chain_pem)
        Path(paths[".key"]).write_bytes(key_pem)
        subject = f"CN={common_name}" + (f",O={organization}" if organization else "")
        return Issued(common_name, paths[".pem"], paths[".crt"], paths[".key"], subject)
