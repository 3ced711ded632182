"""Inter-broker identity: how a broker tells the other brokers of its cluster from clients.

Theory of operation: Kafka lets only the inter-broker principal (the CLUSTER_ACTION
ACL) use the APIs brokers send each other — WriteTxnMarkers, a Fetch with a
replica id (a follower's), and the like; a client gets CLUSTER_AUTHORIZATION_FAILED.
Until pylog's listeners authenticate (SASL/TLS), the brokers of one cluster prove
membership with a shared secret that ZooKeeper keeps at
``/pylog/inter_broker_secret`` (created by the first broker to start): every
request a broker sends another carries, at the end of its client id, a proof
derived from the secret (HMAC-SHA256).  The dispatcher checks a connection's
client ids until one carries the proof; from then on the connection is a
broker's (``KafkaConnection.inter_broker``).  Only connections on
``inter.broker.listener.name`` are checked: on an authenticated inter-broker
listener a peer must log in before it can present the proof, and a client
listener never makes a broker of anyone.  A single broker has no peers, so
none of its connections is ever inter-broker.

This guards the cluster against clients, not against whoever can read
ZooKeeper — as in a ZooKeeper-mode Kafka cluster, where ZooKeeper access owns
the cluster anyway.
"""
from __future__ import annotations

import hashlib
import hmac

_PROOF_MARK = ";inter-broker-proof="
_PROOF_CONTEXT = b"pylog inter-broker client id"


class InterBrokerIdentity:
    """Builds the client ids a broker's inter-broker clients send, and recognises them.

    >>> identity = InterBrokerIdentity("0123abcd")
    >>> identity.proves(identity.client_id("broker-1-fetcher-0"))
    True
    >>> identity.proves("broker-1-fetcher-0")
    False
    """

    def __init__(self, secret: str) -> None:
        if not secret:
            raise ValueError("the inter-broker secret is empty")
        self._proof = hmac.new(secret.encode(), _PROOF_CONTEXT, hashlib.sha256).hexdigest()

    def client_id(self, role: str) -> str:
        """``role`` with the proof appended (what BrokerClient sends as its client id)."""
        return f"{role}{_PROOF_MARK}{self._proof}"

    def proves(self, client_id: str | None) -> bool:
        """True when ``client_id`` ends with this cluster's proof (compared in constant time)."""
        if not client_id:
            return False
        at = client_id.rfind(_PROOF_MARK)
        return at >= 0 and hmac.compare_digest(client_id[at + len(_PROOF_MARK):], self._proof)
