"""SCRAM credentials (RFC 5802 / RFC 7677) as Kafka stores and checks them.

A credential is what the broker keeps instead of a password: a random salt,
the iteration count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``, where
``SaltedPassword = PBKDF2-HMAC(password, salt, iterations)``.  Its text form is
Kafka's (``ScramCredentialUtils``): ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``,
the value ZooKeeper keeps at ``/config/users/<user>`` under the mechanism name.

An unknown user gets :func:`fake_credential`: a salt and keys derived from the
name and the cluster's mock secret (``EntityConfigs.mock_secret``, kept with the
credentials: the same on every listener and broker and after a restart), so the
server-first message does not tell whether the user exists (RFC 5802 section 9,
as PostgreSQL's mock authentication; Kafka itself fails an unknown user at once).
Its iteration count is drawn, by a value derived from the name and the secret,
from the counts the cluster's real credentials have, each as often as real users
have it (:func:`iteration_shares`): a real user whose count few others share
answers what that share of unknown names answers too, so a prober cannot tell
it from them (one fixed count for every unknown name would single it out).  A
real credential's count cannot be hidden (the client needs it); a change of the
shares moves only the unknown names whose draw falls where the shares moved.

``parse_add_scram`` reads Kafka's ``kafka-storage format --add-scram`` syntax
(``SCRAM-SHA-256=[name=admin,password=admin-secret]``, optionally with
``iterations=8192`` and ``salt=<b64>``), used by ``pylog-broker --add-scram``.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# the mechanism numbers of DescribeUserScramCredentials / AlterUserScramCredentials (KIP-554)
MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {number: name for name, number in MECHANISM_IDS.items()}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # KIP-554: AlterUserScramCredentials refuses more
DEFAULT_ITERATIONS = 4096


class CredentialError(ValueError):
    """A credential that cannot be stored (unknown mechanism, iterations out of range, bad text)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hmac_digest(mechanism: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, MECHANISMS[mechanism]).digest()


def hash_digest(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(MECHANISMS[mechanism], data).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode("utf-8"), salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> "ScramCredential":
        fields = {}
        for item in text.split(","):
            key, sep, value = item.partition("=")
            if not sep:
                raise CredentialError(f"SCRAM credential field {item!r} is not key=value")
            fields[key.strip()] = value.strip()
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise CredentialError(f"SCRAM credential with fields {sorted(fields)}: missing or bad field "
                                  f"({type(exc).__name__})") from None  # its values are secrets: not shown

    @classmethod
    def from_salted_password(cls, mechanism: str, salted: bytes, salt: bytes, iterations: int) -> "ScramCredential":
        client_key = hmac_digest(mechanism, salted, b"Client Key")
        return cls(salt, hash_digest(mechanism, client_key), hmac_digest(mechanism, salted, b"Server Key"),
                   iterations)

    @classmethod
    def generate(cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                 salt: bytes | None = None) -> "ScramCredential":
        check_mechanism(mechanism)
        check_iterations(iterations)
        salt = os.urandom(24) if salt is None else salt
        return cls.from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations), salt,
                                        iterations)


SALT_BYTES = 24  # os.urandom(24): the salt of every credential pylog generates


def fake_credential(secret: bytes, mechanism: str, name: str,
                    shares: tuple[tuple[int, int], ...]) -> ScramCredential:
    """The credential an unknown ``name`` appears to have: the same for the same secret, whichever broker,
    listener or process computes it, and shaped as a real one (salt length, key lengths), with an iteration
    count drawn from ``shares`` (``iteration_shares`` of the real credentials)."""
    def derive(purpose: str, size: int) -> bytes:
        digest = hmac.new(secret, f"pylog scram mock {purpose}\x00{mechanism}\x00{name}".encode(), "sha512").digest()
        return digest[:size]
    size = hashlib.new(MECHANISMS[mechanism]).digest_size
    total = sum(users for _, users in shares)
    draw = int.from_bytes(derive("iterations", 8), "big") * total >> 64  # uniform in [0, total)
    for iterations, users in shares:
        if draw < users:
            break
        draw -= users
    return ScramCredential(derive("salt", SALT_BYTES), derive("stored key", size), derive("server key", size),
                           iterations)


def iteration_shares(texts) -> tuple[tuple[int, int], ...]:
    """(iteration count, how many of these credential texts have it), by count; ``((DEFAULT_ITERATIONS, 1),)``
    for none: the draw an unknown user's fake credential makes, so it looks like one of the cluster's users."""
    counts: dict[int, int] = {}
    for text in texts:
        _, _, rest = text.rpartition("iterations=")
        if rest.isdigit():
            counts[int(rest)] = counts.get(int(rest), 0) + 1
    return tuple(sorted(counts.items())) or ((DEFAULT_ITERATIONS, 1),)


def check_mechanism(mechanism: str) -> None:
    if mechanism not in MECHANISMS:
        raise CredentialError(f"unknown SCRAM mechanism {mechanism!r}; supported: {', '.join(MECHANISMS)}")


def check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise CredentialError(f"iterations={iterations}: must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")


def _shown(text: str) -> str:
    """An --add-scram argument as errors may show it: every value but name's and iterations' hidden (a misspelt
    field may hold the password)."""
    def hide(field):
        return field[0] if field[1].lower() in ("name", "iterations") else f"{field[1]}=[hidden]"
    return re.sub(r'([A-Za-z]+)\s*=\s*(?:"(?:[^"\\]|\\.)*"?|[^,\]]*)', hide, text)


_ADD_SCRAM = re.compile(r"^\s*(?P<mechanism>[A-Z0-9-]+)\s*=\s*\[(?P<body>.*)\]\s*$", re.S)


def parse_add_scram(text: str) -> tuple[str, str, ScramCredential]:
    """``SCRAM-SHA-256=[name=admin,password=admin-secret]`` -> (user, mechanism, credential).

    Kafka's ``--add-scram`` syntax: ``name`` and ``password`` (values may be
    double-quoted), optional ``iterations`` and ``salt`` (base64).
    """
    match = _ADD_SCRAM.match(text)
    if match is None:
        raise CredentialError("--add-scram: expected MECHANISM=[name=USER,password=PASSWORD] (the argument is not "
                              "shown: it may hold a password)")
    mechanism = match["mechanism"]
    check_mechanism(mechanism)
    fields: dict[str, str] = {}
    for key, quoted, bare in re.findall(r'\s*([a-z]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,]*))\s*(?:,|$)',
                                        match["body"]):
        fields[key] = quoted if quoted or not bare else bare.strip()
    unknown = set(fields) - {"name", "password", "iterations", "salt", "saltedpassword"}
    if unknown:
        raise CredentialError(f"--add-scram {_shown(text)!r}: unknown field(s) {', '.join(sorted(unknown))}")
    if not fields.get("name"):
        raise CredentialError(f"--add-scram {_shown(text)!r}: name= is required")
    if "password" not in fields:
        raise CredentialError(f"--add-scram {_shown(text)!r}: password= is required")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
        salt = base64.b64decode(fields["salt"], validate=True) if "salt" in fields else None
    except ValueError as exc:
        raise CredentialError(f"--add-scram {_shown(text)!r}: {exc}") from None
    return fields["name"], mechanism, ScramCredential.generate(mechanism, fields["password"], iterations, salt)
