"""HTTP Basic authentication of Schema Registry requests against the broker's SASL users.

Theory of operation: a secured broker already has users — PLAIN users in its
listeners' JAAS configs (``user_<name>="<password>"``) and SCRAM users in its
entity configs (``/config/users/<name>``: salted credentials, never
passwords).  The registry accepts the same users over HTTP Basic
(``Authorization: Basic base64(user:password)``), which is what Confluent's
clients send (``basic.auth.user.info``):

* a PLAIN user: the password compared with the JAAS one in constant time;
* a SCRAM user: for each SCRAM mechanism with a stored credential, the
  password salted with the credential's salt and iterations (RFC 5802's Hi),
  its ``StoredKey = H(HMAC(salted, "Client Key"))`` compared with the stored
  one in constant time.  PBKDF2 costs milliseconds, so a verified
  (user, credential, password digest) is remembered (bounded, keyed by a
  per-process secret HMAC of the password: the password itself is not kept);
  a changed or deleted credential no longer matches the remembered entry;
* the principal is ``User:<name>``, as a SASL login would give.

``BasicAuthenticator.authenticate(header)`` returns the principal or raises
``AuthenticationFailed`` (the REST glue answers 401 with
``WWW-Authenticate: Basic realm="pylog-schema-registry"`` and Confluent's
``{"error_code": 40101, ...}``); ``failures``/``successes`` count the outcomes.

When it is on: ``schema.registry.authentication.method=BASIC``, or, when that is
unset, automatically whenever the broker has a SASL listener (a broker that
authenticates Kafka clients does not serve its registry anonymously);
``NONE`` turns it off explicitly.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections import OrderedDict

from broker_sim.security import scram
from broker_sim.security.quotas import sanitize

REALM = "pylog-schema-registry"
UNAUTHORIZED_CODE = 40101
_CACHE_SIZE = 1024
_SCRAM_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")


class AuthenticationFailed(Exception):
    """No, malformed or wrong credentials (the message says which, for the log; the client sees 401)."""


class BasicAuthenticator:
    """Checks ``Authorization: Basic`` headers against PLAIN users and SCRAM credentials."""

    def __init__(self, plain_users: dict[str, str], credentials=None) -> None:
        self.plain_users = dict(plain_users)
        self.credentials = credentials  # EntityConfigs (SCRAM), or None
        self.successes = 0
        self.failures = 0
        self._secret = os.urandom(32)
        self._verified: OrderedDict[tuple, bool] = OrderedDict()

    def authenticate(self, header: str | None) -> str:
        try:
            user = self._check(header)
        except AuthenticationFailed:
            self.failures += 1
            raise
        self.successes += 1
        return f"User:{user}"

    def _check(self, header: str | None) -> str:
        if not header:
            raise AuthenticationFailed("no Authorization header")
        scheme, _, encoded = header.strip().partition(" ")
        if scheme.lower() != "basic":
            raise AuthenticationFailed(f"unsupported authorization scheme {scheme[:20]!r}")
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise AuthenticationFailed("malformed Basic credentials") from None
        user, colon, password = decoded.partition(":")
        if not colon or not user:
            raise AuthenticationFailed("malformed Basic credentials (no user:password)")
        if self._plain_matches(user, password) or self._scram_matches(user, password):
            return user
        raise AuthenticationFailed(f"invalid username or password (user {user[:100]!r})")

    def _plain_matches(self, user: str, password: str) -> bool:
        expected = self.plain_users.get(user)
        # the same constant-time comparison whether the user exists or not
        match = hmac.compare_digest(password.encode(), (expected if expected is not None else
                                                        "\x00" + os.urandom(8).hex()).encode())
        return expected is not None and match

    def _scram_matches(self, user: str, password: str) -> bool:
        if self.credentials is None:
            return False
        stored = self.credentials.get("users", sanitize(user))
        digest = hmac.new(self._secret, password.encode(), hashlib.sha256).digest()
        for mechanism in _SCRAM_MECHANISMS:
            text = stored.get(mechanism)
            if not text:
                continue
            key = (user, mechanism, text, digest)
            if key in self._verified:
                self._verified.move_to_end(key)
                return True
            try:
                credential = scram.ScramCredential.from_text(text)
            except scram.CredentialError:
                continue
            salted = scram.salted_password(mechanism, password, credential.salt, credential.iterations)
            client_key = scram.hmac_digest(mechanism, salted, b"Client Key")
            if hmac.compare_digest(scram.hash_digest(mechanism, client_key), credential.stored_key):
                self._verified[key] = True
                while len(self._verified) > _CACHE_SIZE:
                    self._verified.popitem(last=False)
                return True
        return False


def unauthorized_body(message: str = "Unauthorized") -> dict:
    return {"error_code": UNAUTHORIZED_CODE, "message": message}
