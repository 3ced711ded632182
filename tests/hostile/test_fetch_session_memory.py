"""Fetch sessions keep nothing no one may read (issue 44, finding 3): a full fetch asking for a session of 50,000
partitions that do not exist, or of a topic the client may not READ, gets no session.

On main each such session kept ~24.5 MB after its connection closed (1,000 slots by default: ~24 GB), and a
forbidden topic's session was made before the READ check.  A session now keeps only partitions that exist and the
client may read (``server/handlers/fetch.py``); the answers still name every partition with its error, the
client goes on with full fetches, and a session of a real topic is made as before.
"""
from __future__ import annotations

import socket

from hostile import assert_serving, rss_bytes
from kafka.admin import ACL, ACLOperation, ACLPermissionType, KafkaAdminClient, ResourcePattern, ResourceType
from kafka_wire import WireClient, create_topics
from test_request_cost import _answer, _latency_during, _read_frame

from broker_sim.testing.hostile_requests import session_fetch
from broker_sim.testing.hostile_wire import _encode

MB = 1 << 20
SESSIONS = 12
PARTITIONS = 50_000
UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED = 3, 29


def _ask_for_sessions(port: int, topic: str, count: int) -> list:
    """``count`` full fetches, each on a connection of its own (closed after its answer), each asking for a
    session of PARTITIONS partitions of ``topic``; their decoded answers."""
    frame = _encode(session_fetch(PARTITIONS, topic))
    answers = []
    for _ in range(count):
        with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
            sock.sendall(frame)
            answers.append(_answer("Fetch", 12, _read_frame(sock)))
    return answers


def _check_no_session(answers, error: int) -> None:
    for answer in answers:
        codes = {p.error_code for t in answer.responses for p in t.partitions}
        assert answer.error_code == 0 and answer.session_id == 0, (answer.error_code, answer.session_id)
        assert codes == {error} and sum(len(t.partitions) for t in answer.responses) == PARTITIONS


def _a_real_session_is_still_made(bootstrap: str) -> None:
    with WireClient(bootstrap) as client:
        assert create_topics(client, {"real-session": 2})["real-session"][0] == 0
        answer = client.call(session_fetch(2, "real-session"))
        assert answer.error_code == 0 and answer.session_id != 0


def test_sessions_of_unknown_partitions_are_not_kept(hostile_broker):
    broker = hostile_broker()
    _ask_for_sessions(broker.port, "no-such-topic", 1)  # the first one's transient memory is not what is measured
    before = rss_bytes(broker.process.pid)
    control, during, answers = _latency_during(
        broker.port, lambda: _ask_for_sessions(broker.port, "no-such-topic", SESSIONS))
    grown = rss_bytes(broker.process.pid) - before
    print(f"\n{SESSIONS} sessions of {PARTITIONS} unknown partitions: RSS grew {grown / MB:.0f} MB; other client's "
          f"worst round trip {during * 1000:.0f} ms (control {control * 1000:.0f} ms)")
    _check_no_session(answers, UNKNOWN_TOPIC_OR_PARTITION)
    assert grown < 50 * MB, f"RSS grew {grown / MB:.0f} MB (main: ~24.5 MB per session, bound 50 MB)"
    assert during < 0.5 + control, f"{during * 1000:.0f} ms (control {control * 1000:.0f} ms)"
    _a_real_session_is_still_made(broker.bootstrap_servers)
    assert_serving(broker)
    broker = hostile_broker.restart(broker)
    assert_serving(broker)


def test_sessions_of_a_forbidden_topic_are_not_kept(hostile_broker):
    broker = hostile_broker(config={"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                    "allow.everyone.if.no.acl.found": "true"})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        denied = ACL(principal="User:ANONYMOUS", host="*", operation=ACLOperation.READ,
                     permission_type=ACLPermissionType.DENY,
                     resource_pattern=ResourcePattern(ResourceType.TOPIC, "forbidden"))
        result = admin.create_acls([denied])
        assert not result["failed"], result
    finally:
        admin.close()
    with WireClient(broker.bootstrap_servers) as client:
        assert create_topics(client, {"forbidden": 1})["forbidden"][0] == 0
    _ask_for_sessions(broker.port, "forbidden", 1)
    before = rss_bytes(broker.process.pid)
    control, during, answers = _latency_during(
        broker.port, lambda: _ask_for_sessions(broker.port, "forbidden", SESSIONS))
    grown = rss_bytes(broker.process.pid) - before
    print(f"\n{SESSIONS} sessions of a forbidden topic's {PARTITIONS} partitions: RSS grew {grown / MB:.0f} MB; "
          f"other client's worst round trip {during * 1000:.0f} ms (control {control * 1000:.0f} ms)")
    _check_no_session(answers, TOPIC_AUTHORIZATION_FAILED)
    assert grown < 50 * MB, f"RSS grew {grown / MB:.0f} MB (main: ~24 MB per session, bound 50 MB)"
    assert during < 0.5 + control, f"refusing READ held another client {during * 1000:.0f} ms"
    _a_real_session_is_still_made(broker.bootstrap_servers)
    assert_serving(broker)
