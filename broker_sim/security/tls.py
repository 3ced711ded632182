"""TLS for SSL listeners (and inter-broker connections to them), from Kafka's ``ssl.*`` configs.

Kafka's names and semantics, with PEM stores only (KIP-651):

* ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (one file: the
  certificate chain and the private key) or the inline
  ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``; ``ssl.key.password``
  decrypts an encrypted key.
* ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` or the inline
  ``ssl.truststore.certificates``: the CAs client certificates (and, for a
  broker's own connections to its peers, their server certificates) must chain to.
* ``ssl.client.auth=none|requested|required`` — mutual TLS.  A client's
  principal is ``User:`` + its certificate's subject as an RFC 2253 name
  (Java's ``X500Principal.getName()``: ``CN=alice,OU=eng,O=acme``), mapped by
  ``ssl.principal.mapping.rules`` (``RULE:pattern/replacement/[LU]``, ``DEFAULT``);
  without a certificate it is ``User:ANONYMOUS``.
* ``ssl.enabled.protocols`` (TLSv1.2, TLSv1.3) and ``ssl.cipher.suites``.

Each setting may be given per listener as ``listener.name.<listener>.<config>``,
as in Kafka.  Everything is loaded when the broker is built, so a missing file,
a key that does not match its certificate or a wrong password fails the start
with a ConfigError naming the config — never the first handshake.
"""
from __future__ import annotations

import os
import re
import ssl
import tempfile
from dataclasses import dataclass

from broker_sim.config import BrokerConfig, ConfigError
from broker_sim.security.acl import ANONYMOUS

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# the attribute names Java prints in RFC 2253 names (others print as their OID)
_RDN_NAMES = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
              "localityName": "L", "stateOrProvinceName": "ST", "streetAddress": "STREET",
              "domainComponent": "DC", "userId": "UID"}


def setting(config: BrokerConfig, listener: str | None, name: str) -> str:
    """``listener.name.<listener>.<name>`` when set, else the broker-wide ``name``."""
    if listener:
        override = config.listener_override(listener, name)
        if override is not None:
            return override
    return config.raw(name)


def _pem(config: BrokerConfig, listener: str | None, location: str, inline: str) -> tuple[str, str]:
    """(PEM text, the config it came from) of a store given as a file or inline; ('', '') if neither."""
    path = setting(config, listener, location).strip()
    text = setting(config, listener, inline).strip()
    if path and text:
        raise ConfigError(f"{location} and {inline} are both set: give the store one way")
    if path:
        try:
            with open(path, encoding="ascii") as handle:
                return handle.read(), location
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{location}={path!r} cannot be read: {exc}") from None
    return text, inline


def _check_types(config: BrokerConfig, listener: str | None) -> None:
    for name in ("ssl.keystore.type", "ssl.truststore.type"):
        value = setting(config, listener, name).strip().upper()
        if value != "PEM":
            raise ConfigError(f"{name}={value}: pylog reads PEM stores only (convert a JKS or PKCS12 store with "
                              f"keytool/openssl, or pass the PEM text in ssl.keystore.certificate.chain/key)")


def _load_chain(context: ssl.SSLContext, pem: str, key_pem: str, password: str, what: str) -> None:
    """Load a certificate chain and key given as PEM text (ssl wants files: a private temporary one)."""
    fd, path = tempfile.mkstemp(prefix="pylog-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(pem if not key_pem else pem.rstrip() + "\n" + key_pem)
        # always a callable: with password=None OpenSSL would prompt on the terminal for an encrypted key
        context.load_cert_chain(path, password=lambda: password.encode())
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"{what}: the certificate chain and private key do not load ({exc.reason or exc}); "
                          f"check the PEM, that the key matches the certificate, and ssl.key.password") from None
    finally:
        os.unlink(path)


def _load_trust(context: ssl.SSLContext, pem: str, what: str) -> None:
    try:
        context.load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"{what}: the trusted certificates do not load ({exc})") from None


def _restrict(context: ssl.SSLContext, config: BrokerConfig, listener: str | None) -> None:
    enabled = [p.strip() for p in setting(config, listener, "ssl.enabled.protocols").split(",") if p.strip()]
    unknown = [p for p in enabled if p not in _PROTOCOLS]
    if unknown or not enabled:
        raise ConfigError(f"ssl.enabled.protocols={','.join(enabled)}: accepted values are "
                          f"{', '.join(_PROTOCOLS)}")
    versions = sorted(_PROTOCOLS[p] for p in enabled)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    ciphers = [c.strip() for c in setting(config, listener, "ssl.cipher.suites").split(",") if c.strip()]
    if ciphers:
        try:
            context.set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            raise ConfigError(f"ssl.cipher.suites={','.join(ciphers)}: no cipher in the list is known to OpenSSL "
                              f"(use OpenSSL names such as ECDHE-RSA-AES128-GCM-SHA256)") from None


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The SSLContext of an SSL listener; ConfigError naming the setting when it cannot be built."""
    _check_types(config, listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    chain, chain_from = _pem(config, listener, "ssl.keystore.location", "ssl.keystore.certificate.chain")
    if not chain:
        raise ConfigError(f"listener {listener} uses TLS but has no keystore: set ssl.keystore.location "
                          f"(a PEM file with the certificate chain and key) or ssl.keystore.certificate.chain "
                          f"and ssl.keystore.key")
    key = setting(config, listener, "ssl.keystore.key").strip() if chain_from != "ssl.keystore.location" else ""
    _load_chain(context, chain, key, setting(config, listener, "ssl.key.password"), chain_from)
    auth = setting(config, listener, "ssl.client.auth").strip().lower()
    trust, trust_from = _pem(config, listener, "ssl.truststore.location", "ssl.truststore.certificates")
    if auth in ("requested", "required"):
        if not trust:
            raise ConfigError(f"ssl.client.auth={auth} on listener {listener} needs ssl.truststore.location "
                              f"(the CAs client certificates must chain to)")
        _load_trust(context, trust, trust_from)
        context.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
    _restrict(context, config, listener)
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """A broker's own TLS client (to a peer's SSL inter-broker listener): verifies the peer against the
    truststore (hostname checked when ssl.endpoint.identification.algorithm=https) and presents the
    keystore, so a peer asking for client certificates authenticates it."""
    _check_types(config, listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    trust, trust_from = _pem(config, listener, "ssl.truststore.location", "ssl.truststore.certificates")
    if trust:
        _load_trust(context, trust, trust_from)
    else:
        context.load_default_certs()
    context.check_hostname = setting(config, listener, "ssl.endpoint.identification.algorithm").strip().lower() \
        == "https"
    chain, chain_from = _pem(config, listener, "ssl.keystore.location", "ssl.keystore.certificate.chain")
    if chain:
        key = setting(config, listener, "ssl.keystore.key").strip() if chain_from != "ssl.keystore.location" else ""
        _load_chain(context, chain, key, setting(config, listener, "ssl.key.password"), chain_from)
    _restrict(context, config, listener)
    return context


# --- principals -----------------------------------------------------------------------------------

def _escape(value: str) -> str:
    """RFC 2253 escaping of an attribute value."""
    out = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def subject_name(peercert: dict) -> str:
    """A certificate's subject as Java's X500Principal.getName() prints it (RFC 2253: last RDN first)."""
    rdns = []
    for rdn in reversed(peercert.get("subject", ())):
        rdns.append("+".join(f"{_RDN_NAMES.get(key, key)}={_escape(value)}" for key, value in rdn))
    return ",".join(rdns)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(?:,|$)")


class PrincipalMapper:
    """``ssl.principal.mapping.rules`` as Kafka's SslPrincipalMapper applies them: the first rule whose
    pattern matches the whole name rewrites it (``$1``… are the groups; L/U lowercases/uppercases);
    DEFAULT keeps the name; no match keeps the name too."""

    def __init__(self, rules: str) -> None:
        self.rules: list[_Rule] = []
        text, position = rules.strip() or "DEFAULT", 0
        while position < len(text):
            match = _RULE.match(text, position)
            if match is None or match.end() == position:
                raise ConfigError(f"ssl.principal.mapping.rules={rules!r}: cannot parse the rule at "
                                  f"{text[position:]!r} (rules are RULE:pattern/replacement/[LU] or DEFAULT)")
            position = match.end()
            if match.group(1):
                self.rules.append(_Rule(None))
                continue
            try:
                pattern = re.compile(match.group(2).replace("\\/", "/"))
            except re.error as exc:
                raise ConfigError(f"ssl.principal.mapping.rules: bad pattern {match.group(2)!r}: {exc}") from None
            replacement = re.sub(r"\$(\d)", r"\\\1", match.group(3).replace("\\/", "/"))
            self.rules.append(_Rule(pattern, replacement, match.group(4)))

    def map(self, name: str) -> str:
        for rule in self.rules:
            if rule.pattern is None:
                return name
            if rule.pattern.fullmatch(name):
                mapped = rule.pattern.sub(rule.replacement, name, count=1)
                return mapped.lower() if rule.case == "L" else mapped.upper() if rule.case == "U" else mapped
        return name


def principal_of(transport, mapper: PrincipalMapper) -> str:
    """``User:<mapped subject>`` of a verified client certificate on this TLS transport, else ANONYMOUS."""
    ssl_object = transport.get_extra_info("ssl_object")
    cert = ssl_object.getpeercert() if ssl_object is not None else None
    if not cert:
        return ANONYMOUS
    return "User:" + mapper.map(subject_name(cert))
