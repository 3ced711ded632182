"""SASL on SASL_PLAINTEXT / SASL_SSL listeners: PLAIN and SCRAM-SHA-256/512, as Kafka's SaslServerAuthenticator.

Theory of operation: a connection on a SASL listener starts unauthenticated
with an ``Authenticator``.  Until it completes, the dispatcher lets through only
ApiVersions, SaslHandshake and SaslAuthenticate (anything else closes the
connection, as Kafka's "Unexpected Kafka request of type ... during SASL
handshake"); after a SaslHandshake v0 the client's tokens come as bare
size-prefixed frames instead of SaslAuthenticate requests (KIP-43), and the
authenticator answers them the same way.  Success sets the connection's
principal to ``User:<name>``.

Failure (KIP-152): SaslAuthenticate is answered SASL_AUTHENTICATION_FAILED with
a message, after ``connection.failed.authentication.delay.ms``, and the
connection closes.  The answer does not tell whether the user exists: an
unknown SCRAM user gets a server-first message with a salt derived from the
name and the cluster's mock secret (``scram.fake_credential``: stable across
attempts, listeners, brokers and restarts, as a real user's, with an iteration
count drawn from the real users' counts in their proportions) and fails at the proof like a wrong password; an unknown PLAIN user's password is
compared against a dummy in constant time.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0, SaslAuthenticate
v1+ tells the client its session lifetime; the client re-authenticates on the
same connection (SaslHandshake + SaslAuthenticate again; the principal may not
change), and a connection whose session expired is closed at its next request.

Configs, Kafka's names: ``sasl.enabled.mechanisms`` (per listener as
``listener.name.<l>.sasl.enabled.mechanisms``), PLAIN users from
``listener.name.<l>.plain.sasl.jaas.config`` =
``org.apache.kafka.common.security.plain.PlainLoginModule required username="admin"
password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";``
(``username``/``password`` are what this broker itself logs in with on the
inter-broker listener), SCRAM credentials from ``EntityConfigs`` (ZooKeeper
``/config/users/<user>`` in a cluster, the data dir on a single node).
"""
from __future__ import annotations

import base64
import hmac
import re
import secrets
import time
from dataclasses import dataclass

from broker_sim.config import BrokerConfig, ConfigError
from broker_sim.security import scram
from broker_sim.security.entity_configs import EntityConfigs

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
UNSUPPORTED_KNOWN = ("GSSAPI", "OAUTHBEARER")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


class AuthenticationFailed(Exception):
    """The client's credentials were refused (SASL_AUTHENTICATION_FAILED with this message)."""


class IllegalSaslState(Exception):
    """A SASL message out of order (ILLEGAL_SASL_STATE); the connection closes."""


# --- JAAS -----------------------------------------------------------------------------------------

_JAAS = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)(?P<options>.*?);?\s*$",
                   re.S)
_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')


def parse_jaas(text: str, config: str = "sasl.jaas.config") -> tuple[str, dict[str, str]]:
    """A one-module JAAS string -> (login module class, options); ConfigError naming ``config`` otherwise."""
    match = _JAAS.match(text)
    if match is None:
        raise ConfigError(f"{config}: expected '<LoginModule class> required key=\"value\" ...;'")
    options: dict[str, str] = {}
    rest = match["options"].strip().rstrip(";").strip()
    position = 0
    while position < len(rest):
        option = _OPTION.match(rest, position)
        if option is None:  # the text is not shown: it may hold a password
            after = f"after option {list(options)[-1]!r}" if options else "at the first option"
            raise ConfigError(f"{config}: cannot parse the options {after} (expected key=\"value\")")
        value = option.group(2) if option.group(2) is not None else option.group(3)
        options[option.group(1)] = re.sub(r"\\(.)", r"\1", value)
        position = option.end()
        while position < len(rest) and rest[position].isspace():
            position += 1
    return match["module"], options


def jaas_credentials(text: str, config: str = "sasl.jaas.config") -> tuple[str, str, str]:
    """(login module, username, password) of a client JAAS string (PlainLoginModule or ScramLoginModule)."""
    module, options = parse_jaas(text, config)
    if module not in (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE):
        raise ConfigError(f"{config}: login module {module} is not supported (use {PLAIN_LOGIN_MODULE} or "
                          f"{SCRAM_LOGIN_MODULE})")
    if "username" not in options or "password" not in options:
        raise ConfigError(f"{config}: username=\"...\" and password=\"...\" are required")
    return module, options["username"], options["password"]


# --- per-listener configuration ---------------------------------------------------------------------

def jaas_config(config: BrokerConfig, listener: str, mechanism: str) -> str:
    """``listener.name.<l>.<mechanism>.sasl.jaas.config``, else ``listener.name.<l>.sasl.jaas.config``, else
    ``sasl.jaas.config``."""
    name = f"{mechanism.lower()}.sasl.jaas.config"
    return (config.listener_override(listener, name) or config.listener_override(listener, "sasl.jaas.config")
            or config.raw("sasl.jaas.config"))


def enabled_mechanisms(config: BrokerConfig, listener: str) -> tuple[str, ...]:
    """``sasl.enabled.mechanisms`` of a listener.  Unset: SCRAM-SHA-256 and SCRAM-SHA-512, plus PLAIN where the
    listener has a PLAIN JAAS config (Kafka's default, GSSAPI, is not served)."""
    value = config.listener_override(listener, "sasl.enabled.mechanisms")
    if value is None:
        value = config.raw("sasl.enabled.mechanisms")
    if not value.strip():
        plain = jaas_config(config, listener, "PLAIN")
        return (("PLAIN",) if plain.strip() else ()) + ("SCRAM-SHA-256", "SCRAM-SHA-512")
    mechanisms = tuple(m.strip().upper() for m in value.split(",") if m.strip())
    for mechanism in mechanisms:
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ConfigError(f"sasl.enabled.mechanisms={value} on listener {listener}: {mechanism} is not served "
                              f"by pylog (supported: {', '.join(SUPPORTED_MECHANISMS)})")
    if not mechanisms:
        raise ConfigError(f"sasl.enabled.mechanisms on listener {listener} is empty")
    return mechanisms


def plain_users(config: BrokerConfig, listener: str) -> dict[str, str]:
    """PLAIN's ``user_<name>="<password>"`` entries of a listener's PlainLoginModule JAAS config."""
    text = jaas_config(config, listener, "PLAIN")
    where = f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
    if not text.strip():
        raise ConfigError(f"listener {listener} enables PLAIN but has no users: set {where}="
                          f"'{PLAIN_LOGIN_MODULE} required user_admin=\"admin-secret\";'")
    module, options = parse_jaas(text, where)
    if module != PLAIN_LOGIN_MODULE:
        raise ConfigError(f"{where}: PLAIN users come from {PLAIN_LOGIN_MODULE}, not {module}")
    return {key[len("user_"):]: value for key, value in options.items() if key.startswith("user_")}


@dataclass
class SaslListener:
    """What a SASL listener offers: its mechanisms, PLAIN users and the SCRAM credential store."""
    name: str
    mechanisms: tuple[str, ...]
    plain: dict[str, str]
    credentials: EntityConfigs
    reauth_ms: int
    failure_delay_ms: int
    max_receive_size: int = 524288

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str, credentials: EntityConfigs) -> "SaslListener":
        mechanisms = enabled_mechanisms(config, listener)
        plain = plain_users(config, listener) if "PLAIN" in mechanisms else {}
        return cls(listener, mechanisms, plain, credentials, config.get("connections.max.reauth.ms"),
                   config.get("connection.failed.authentication.delay.ms"), config.get("sasl.server.max.receive.size"))

    def authenticator(self) -> "Authenticator":
        return Authenticator(self)


def client_login(config: BrokerConfig, listener: str, mechanism: str) -> tuple[str, str]:
    """(username, password) this broker logs in with to its peers' SASL inter-broker listener."""
    text = jaas_config(config, listener, mechanism)
    where = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    if not text.strip():
        raise ConfigError(f"inter-broker listener {listener} uses SASL {mechanism}: set {where} with "
                          f"username=\"...\" password=\"...\" (the broker's own login)")
    _, username, password = jaas_credentials(text, where)
    return username, password


# --- the server side of one connection ------------------------------------------------------------

class Authenticator:
    """One connection's SASL state (see the module docstring)."""

    def __init__(self, listener: SaslListener) -> None:
        self.listener = listener
        self.mechanism: str | None = None
        self.principal: str | None = None  # User:<name> once authenticated
        self.raw_tokens = False  # SaslHandshake v0: the next frames are bare tokens
        self.expires_at: float | None = None  # monotonic deadline of the session (connections.max.reauth.ms)
        self._server = None
        self.reauthenticating = False

    @property
    def complete(self) -> bool:
        return self.principal is not None and not self.reauthenticating

    def expired(self, now: float | None = None) -> bool:
        return self.expires_at is not None and (time.monotonic() if now is None else now) >= self.expires_at

    def handshake(self, mechanism: str, version: int) -> bool:
        """SaslHandshake: True when ``mechanism`` is enabled (the client authenticates with it next)."""
        if self._server is not None:
            raise IllegalSaslState("SaslHandshake received while an authentication is in progress")
        if mechanism not in self.listener.mechanisms:
            return False
        if self.principal is not None:
            if version == 0:
                raise IllegalSaslState("re-authentication needs SaslHandshake v1 or later")
            self.reauthenticating = True
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._server = PlainServer(self.listener) if mechanism == "PLAIN" else ScramServer(self.listener, mechanism)
        return True

    def evaluate(self, token: bytes) -> bytes:
        """One client token -> the server's answer; the last step sets ``principal``.  AuthenticationFailed
        (wrong credentials) and IllegalSaslState (out of order) end the exchange."""
        if self._server is None:
            raise IllegalSaslState("SaslAuthenticate received before a SaslHandshake")
        try:
            answer = self._server.evaluate(token)
        except AuthenticationFailed:
            self._server = None
            raise
        if self._server.user is not None:
            principal = "User:" + self._server.user
            if self.reauthenticating and principal != self.principal:
                self._server = None
                raise AuthenticationFailed(f"Cannot change principals during re-authentication from "
                                           f"{self.principal}: {principal}")
            self.principal, self.reauthenticating, self._server = principal, False, None
            self.raw_tokens = False
            if self.listener.reauth_ms > 0:
                self.expires_at = time.monotonic() + self.listener.reauth_ms / 1000.0
        return answer

    def session_lifetime_ms(self) -> int:
        if self.expires_at is None:
            return 0
        return max(0, int((self.expires_at - time.monotonic()) * 1000))


class PlainServer:
    """RFC 4616: one message ``[authzid] NUL authcid NUL passwd``."""

    def __init__(self, listener: SaslListener) -> None:
        self.listener = listener
        self.user: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens separated by NUL")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self.listener.plain.get(user)
        # the same constant-time comparison whether the user exists or not
        match = hmac.compare_digest(password.encode(), (expected if expected is not None else
                                                        "\x00" + secrets.token_hex(16)).encode())
        if expected is None or not match:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self.user = user
        return b""


def _sasl_name(encoded: str) -> str:
    """RFC 5802 saslname: ``=2C`` is ',' and ``=3D`` is '='; any other '=' is malformed."""
    if re.search(r"=(?!2C|3D)", encoded):
        raise AuthenticationFailed("Invalid SCRAM username encoding")
    return encoded.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str) -> dict[str, str]:
    attributes = {}
    for item in message.split(","):
        key, sep, value = item.partition("=")
        if not sep or len(key) != 1 and key not in ("tokenauth",):
            continue  # extensions (KIP-86): ignored, as Kafka does for the ones it does not know
        attributes.setdefault(key, value)
    return attributes


class ScramServer:
    """RFC 5802's server: client-first -> server-first, client-final -> server-final (``v=`` signature)."""

    def __init__(self, listener: SaslListener, mechanism: str) -> None:
        self.listener = listener
        self.mechanism = mechanism
        self.user: str | None = None
        self._state = "first"
        self._name = ""

    def _credential(self, name: str) -> tuple[scram.ScramCredential, bool]:
        """The user's credential for this mechanism, or a fake one (same shape) and False."""
        from broker_sim.security.quotas import sanitize

        text = self.listener.credentials.get("users", sanitize(name)).get(self.mechanism)
        if text:
            try:
                return scram.ScramCredential.from_text(text), True
            except scram.CredentialError:
                pass
        credentials = self.listener.credentials
        return scram.fake_credential(credentials.mock_secret, self.mechanism, name,
                                     credentials.scram_iterations(self.mechanism)), False

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SCRAM message: not UTF-8") from None
        if self._state == "first":
            return self._first(message)
        if self._state == "final":
            return self._final(message)
        raise IllegalSaslState("SCRAM exchange already complete")

    def _first(self, message: str) -> bytes:
        gs2, _, rest = message.partition(",")
        authzid, sep, bare = rest.partition(",")
        if gs2 not in ("n", "y") or not sep:
            raise AuthenticationFailed("Invalid SCRAM client first message (channel binding is not supported)")
        self._gs2_header = f"{gs2},{authzid},"
        attributes = _attributes(bare)
        if "n" not in attributes or "r" not in attributes or not bare.startswith("n="):
            raise AuthenticationFailed("Invalid SCRAM client first message: no user name or nonce")
        if attributes.get("tokenauth", "false").lower() == "true":
            raise AuthenticationFailed("Authentication failed: delegation tokens are not supported")
        self._name = _sasl_name(attributes["n"])
        if authzid and authzid != "a=" + attributes["n"]:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self._credential_found = self._credential(self._name)
        credential = self._credential_found[0]
        self._nonce = attributes["r"] + secrets.token_urlsafe(18)
        self._client_first_bare = bare
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        self._state = "done"
        without_proof, sep, proof_text = message.rpartition(",p=")
        attributes = _attributes(without_proof)
        credential, found = self._credential_found
        try:
            proof = base64.b64decode(proof_text, validate=True)
            channel = base64.b64decode(attributes.get("c", ""), validate=True).decode()
        except (ValueError, UnicodeDecodeError):
            raise AuthenticationFailed("Invalid SCRAM client final message") from None
        # endswith, as Kafka's ScramSaslServer: librdkafka before 1.x sent the client nonce twice
        if not sep or channel != self._gs2_header or not attributes.get("r", "").endswith(self._nonce):
            raise AuthenticationFailed("Invalid SCRAM client final message: channel binding or nonce mismatch")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = scram.hmac_digest(self.mechanism, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthenticationFailed(FAILED.format(self.mechanism))
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        valid = hmac.compare_digest(scram.hash_digest(self.mechanism, client_key), credential.stored_key)
        if not (valid and found):
            raise AuthenticationFailed(FAILED.format(self.mechanism))
        self.user = self._name
        server_signature = scram.hmac_digest(self.mechanism, credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


# --- the client side (a broker logging in to its peers; tools) -------------------------------------

@dataclass(frozen=True)
class SaslLogin:
    """What a client authenticates with: mechanism, username, password."""
    mechanism: str
    username: str
    password: str

    def exchange(self):
        """A generator: yields each token to send, is sent each server answer; ends when authenticated.
        Raises AuthenticationFailed when the server's SCRAM signature does not verify."""
        if self.mechanism == "PLAIN":
            yield b"\x00" + self.username.encode() + b"\x00" + self.password.encode()
            return
        mechanism = self.mechanism
        nonce = secrets.token_urlsafe(18)
        name = self.username.replace("=", "=3D").replace(",", "=2C")
        client_first_bare = f"n={name},r={nonce}"
        server_first = (yield ("n,," + client_first_bare).encode()).decode()
        attributes = _attributes(server_first)
        if not attributes.get("r", "").startswith(nonce) or "s" not in attributes or "i" not in attributes:
            raise AuthenticationFailed(f"invalid SCRAM server first message {server_first!r}")
        salt, iterations = base64.b64decode(attributes["s"]), int(attributes["i"])
        salted = scram.salted_password(mechanism, self.password, salt, iterations)
        without_proof = f"c=biws,r={attributes['r']}"
        auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
        client_key = scram.hmac_digest(mechanism, salted, b"Client Key")
        signature = scram.hmac_digest(mechanism, scram.hash_digest(mechanism, client_key), auth_message)
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
        server_final = (yield f"{without_proof},p={proof}".encode()).decode()
        expected = scram.hmac_digest(mechanism, scram.hmac_digest(mechanism, salted, b"Server Key"), auth_message)
        if not hmac.compare_digest(server_final.encode(), b"v=" + base64.b64encode(expected)):
            raise AuthenticationFailed("the server's SCRAM signature does not verify")
