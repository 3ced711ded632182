"""TLS identity wherever pylog is the client (issue 24, item 5): a certificate whose name does not match is
refused with ``ssl.endpoint.identification.algorithm=https`` and accepted with it empty; an expired one and
one from another CA are refused either way; with no truststore, only the system's CAs are trusted.

One broker serves four SSL listeners, each with its own certificate: GOOD (this CA, for 127.0.0.1), WRONGNAME
(this CA, for wrong.example only), EXPIRED (this CA, expired yesterday) and OTHERCA (another CA).  The clients:
the broker's own inter-broker TLS context (``security.tls.client_context``: the replication fetcher, the
transaction markers, the controller's peers) over a raw connection, the connector's wire client
(``connector.wire``, built from Spark options as a query builds it) and its kafka-python admin client, and
the ``pylog`` tools with ``--command-config``.  A real cluster's replication is in
``tests/cluster/test_tls_identity_cluster.py``.
"""
from __future__ import annotations

import logging
import ssl

import pytest

from broker_sim.config import BrokerConfig
from broker_sim.local.certificates import CertificateAuthority
from broker_sim.protocol.client import WireConnection, WireError
from broker_sim.security.tls import client_context
from broker_sim.server.broker import Broker

LISTENERS = ("GOOD", "WRONGNAME", "EXPIRED", "OTHERCA")
# (listener, hostname verification, the truststore given) -> accepted?
CASES = [
    ("GOOD", True, True, True),
    ("GOOD", False, True, True),
    ("WRONGNAME", True, True, False),
    ("WRONGNAME", False, True, True),
    ("EXPIRED", True, True, False),
    ("EXPIRED", False, True, False),
    ("OTHERCA", True, True, False),
    ("OTHERCA", False, True, False),
    ("GOOD", False, False, False),  # no truststore: the system CAs, which do not include this test CA
    ("WRONGNAME", False, False, False),
]
IDS = [f"{listener.lower()}-{'https' if https else 'no-name-check'}{'' if trust else '-no-truststore'}"
       for listener, https, trust, _ in CASES]
# the kafka-python clients give up on a refused broker only after their bootstrap timeout: one case of each kind
SOME = [0, 2, 3, 5, 7, 8]


@pytest.fixture(scope="module")
def identities(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls-identity")
    ca, other = CertificateAuthority(directory / "ca"), CertificateAuthority(directory / "other", name="other CA")
    keystores = {"GOOD": ca.issue("broker", file_name="good").keystore,
                 "WRONGNAME": ca.issue("broker", hosts=("wrong.example",), file_name="wrong-name").keystore,
                 "EXPIRED": ca.issue("broker", expired=True, file_name="expired").keystore,
                 "OTHERCA": other.issue("broker", file_name="other-ca").keystore}
    return ca, keystores


@pytest.fixture(scope="module")
def tls_broker(identities, tmp_path_factory):
    _, keystores = identities
    config = {"listeners": ",".join(f"{name}://127.0.0.1:0" for name in LISTENERS),
              "listener.security.protocol.map": ",".join(f"{name}:SSL" for name in LISTENERS),
              "inter.broker.listener.name": "GOOD"}
    for name, keystore in keystores.items():
        config[f"listener.name.{name.lower()}.ssl.keystore.location"] = keystore
    with Broker(tmp_path_factory.mktemp("tls-identity-data"), config=config) as broker:
        yield broker


def _address(broker: Broker, listener: str) -> tuple[str, int]:
    host, port = broker.bootstrap_servers_for(listener).rsplit(":", 1)
    return host, int(port)


def _answers(host: str, port: int, context: ssl.SSLContext) -> bool:
    """True when a TLS connection with ``context`` is accepted and answers ApiVersions; False when the
    handshake refuses the certificate (any other failure fails the test)."""
    from kafka.protocol.metadata import ApiVersionsRequest
    try:
        with WireConnection.connect(host, port, timeout_s=10, ssl_context=context) as connection:
            return connection.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"),
                                   timeout_s=10).error_code == 0
    except WireError as exc:
        assert isinstance(exc.__cause__, ssl.SSLCertVerificationError), repr(exc.__cause__)
        return False


@pytest.mark.parametrize("listener,https,trust,accepted", CASES, ids=IDS)
def test_the_inter_broker_tls_client_checks_the_peers_certificate(tls_broker, identities, listener, https, trust,
                                                                   accepted):
    """The context every inter-broker connection uses (replication, markers), as a broker builds it."""
    ca, _ = identities
    settings = {"ssl.endpoint.identification.algorithm": "https" if https else ""}
    if trust:
        settings["ssl.truststore.location"] = ca.truststore
    context = client_context(BrokerConfig(settings), "GOOD")
    assert _answers(*_address(tls_broker, listener), context) is accepted


def _spark_options(broker: Broker, ca, listener: str, https: bool, trust: bool) -> dict:
    options = {"kafka.bootstrap.servers": broker.bootstrap_servers_for(listener), "subscribe": "t",
               "kafka.security.protocol": "SSL",
               "kafka.ssl.endpoint.identification.algorithm": "https" if https else "",
               "kafka.request.timeout.ms": "5000"}
    if trust:
        options["kafka.ssl.truststore.location"] = ca.truststore
    return options


@pytest.mark.parametrize("listener,https,trust,accepted", CASES, ids=IDS)
def test_the_connectors_wire_client_checks_the_brokers_certificate(tls_broker, identities, listener, https, trust,
                                                                    accepted):
    """``connector.wire``'s TLS context from the Spark options of a query (``kafka.ssl.*``)."""
    from connector.options import parse_source_options
    from connector.wire import ssl_context_for

    ca, _ = identities
    options = parse_source_options(_spark_options(tls_broker, ca, listener, https, trust))
    context = ssl_context_for(options.client_kwargs)
    assert context is not None
    assert _answers(*_address(tls_broker, listener), context) is accepted


@pytest.mark.parametrize("listener,https,trust,accepted", [CASES[i] for i in SOME], ids=[IDS[i] for i in SOME])
def test_the_connectors_admin_client_checks_the_brokers_certificate(tls_broker, identities, listener, https, trust,
                                                                     accepted, monkeypatch, caplog):
    """``connector.admin.client`` (kafka-python's KafkaAdminClient, with the options' ssl settings); a refused
    one gives up bootstrapping after 1.5 s (not kafka-python's 30) and logged the certificate's refusal."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    monkeypatch.setitem(KafkaAdminClient.DEFAULT_CONFIG, "bootstrap_timeout_ms", 30000 if accepted else 1500)

    from connector.admin import client
    from connector.options import parse_source_options

    ca, _ = identities
    options = parse_source_options(_spark_options(tls_broker, ca, listener, https, trust))
    if accepted:
        admin = client(options, "tls-identity")
        try:
            assert isinstance(admin.list_topics(), list)
        finally:
            admin.close()
    else:
        with caplog.at_level(logging.INFO, logger="kafka"), pytest.raises(KafkaError):
            admin = client(options, "tls-identity")
            admin.list_topics()
        assert "certificate verify failed" in caplog.text.lower()


@pytest.mark.parametrize("listener,https,trust,accepted", [CASES[i] for i in SOME], ids=[IDS[i] for i in SOME])
def test_the_pylog_tools_check_the_brokers_certificate(tls_broker, identities, tmp_path, listener, https, trust,
                                                       accepted, caplog):
    """``pylog --command-config`` with Kafka's client properties."""
    from tests.tools.test_cli import pylog

    ca, _ = identities
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SSL\n" + (f"ssl.truststore.location={ca.truststore}\n" if trust else "")
                          + f"ssl.endpoint.identification.algorithm={'https' if https else ''}\n")

    class Address:
        bootstrap_servers = tls_broker.bootstrap_servers_for(listener)

    caplog.set_level(logging.INFO, logger="kafka")
    result = pylog(Address, "--connect-timeout-ms", "20000" if accepted else "1500", "--command-config",
                   str(properties), "topics", "list")
    assert (result.status == 0) is accepted, (result.status, result.err[-500:])
    # refused by the tools' security check before any client (naming the problem), or by kafka-python's handshake
    assert accepted or "TLS handshake with" in result.err or "certificate verify failed" in caplog.text.lower(), \
        (result.err[-1000:], caplog.text[-2000:])
