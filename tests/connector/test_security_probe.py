"""``connector.wire.check_login`` against TLS listeners whose certificate or demands do not fit the client: the
query's first connection names the certificate problem and the ``kafka.*`` option to change."""
from __future__ import annotations

import pytest

from broker_sim.local.certificates import CertificateAuthority
from broker_sim.server.broker import Broker
from connector.wire import SecurityMisconfigured, check_login


def _tls_broker(tmp_path, **issue) -> tuple[Broker, CertificateAuthority]:
    ca = CertificateAuthority(tmp_path / "ca")
    config = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": ca.issue("broker", **issue).keystore}
    return Broker(tmp_path / "data", config=config), ca


def _fails(address: str, ca: CertificateAuthority, **settings) -> str:
    with pytest.raises(SecurityMisconfigured) as raised:
        check_login(address, {"security_protocol": "SSL", "ssl_cafile": ca.truststore, **settings}, timeout_s=10)
    return str(raised.value)


def test_a_certificate_for_another_host_names_the_host_check_option(tmp_path):
    broker, ca = _tls_broker(tmp_path, hosts=("elsewhere.example",))
    with broker:
        message = _fails(broker.bootstrap_servers, ca)
        check_login(broker.bootstrap_servers, {"security_protocol": "SSL", "ssl_cafile": ca.truststore,
                                               "ssl_check_hostname": False}, timeout_s=10)
    assert "not valid for the host name" in message and "127.0.0.1" in message
    assert "kafka.ssl.endpoint.identification.algorithm" in message


def test_an_expired_certificate_is_called_expired(tmp_path):
    broker, ca = _tls_broker(tmp_path, expired=True)
    with broker:
        message = _fails(broker.bootstrap_servers, ca)
    assert "the broker's certificate has expired or is not valid yet" in message


def test_a_broker_that_requires_a_client_certificate_names_the_keystore_option(tmp_path):
    ca = CertificateAuthority(tmp_path / "ca")
    config = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": ca.issue("broker").keystore,
              "ssl.truststore.location": ca.truststore, "ssl.client.auth": "required"}
    with Broker(tmp_path / "data", config=config) as broker:
        message = _fails(broker.bootstrap_servers, ca)
        client = ca.issue("spark")
        check_login(broker.bootstrap_servers, {"security_protocol": "SSL", "ssl_cafile": ca.truststore,
                                               "ssl_certfile": client.keystore}, timeout_s=10)
    assert "requires a client certificate" in message and "kafka.ssl.keystore.location" in message


def test_a_plaintext_client_on_an_ssl_listener_is_told_to_use_ssl(tmp_path):
    broker, ca = _tls_broker(tmp_path)
    with broker:
        with pytest.raises(SecurityMisconfigured) as raised:
            check_login(broker.bootstrap_servers, {}, timeout_s=10)
    assert "is an SSL listener" in str(raised.value) and "set kafka.security.protocol=SSL" in str(raised.value)


def test_a_missing_truststore_file_is_named(tmp_path):
    with pytest.raises(SecurityMisconfigured) as raised:
        check_login("127.0.0.1:1", {"security_protocol": "SSL", "ssl_cafile": str(tmp_path / "ca.pem")})
    assert "kafka.ssl.truststore.location" in str(raised.value) and "ca.pem" in str(raised.value)


def test_a_plaintext_request_answered_with_a_tls_alert_is_called_a_tls_listener():
    """A JVM broker's TLS listener answers a plaintext request with a TLS alert record (SSLEngine's
    unexpected_message) before it hangs up, where pylog's broker only hangs up: these are its bytes."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    alert = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x0A])  # TLS 1.2 record: fatal unexpected_message

    def answer_with_alerts():
        for _ in range(3):  # the probe, then its two questions to the listener
            try:
                peer, _ = server.accept()
            except OSError:
                return
            with peer:
                peer.recv(4096)
                peer.sendall(alert)

    threading.Thread(target=answer_with_alerts, daemon=True).start()
    try:
        with pytest.raises(SecurityMisconfigured) as raised:
            check_login(f"127.0.0.1:{server.getsockname()[1]}", {}, timeout_s=10)
    finally:
        server.close()
    assert "answered in TLS: it is a TLS listener" in str(raised.value)
    assert "check kafka.security.protocol=PLAINTEXT" in str(raised.value)
