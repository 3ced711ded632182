"""ACLs: Kafka's authorizer model over SASL principals, per API family, with real clients.

One broker with ``authorizer.class.name`` set, a SASL_PLAINTEXT listener (SCRAM users admin — a super
user — alice and bob) and a PLAINTEXT one (User:ANONYMOUS).  ACLs are created through the admin API by
admin and apply to the next request, without a restart.  Each test uses its own topic / group names.
"""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern
from kafka.admin import ResourcePatternFilter, ResourceType
from kafka.errors import (
    GroupAuthorizationFailedError, TopicAuthorizationFailedError, TransactionalIdAuthorizationFailedError,
)
from kafka.protocol.admin import CreateAclsRequest, DescribeClusterRequest
from kafka.protocol.metadata import MetadataRequest

from broker_sim.security.acl import (
    AclBinding, Authorizer, FileAclStore, Operation, PatternType, Permission, ResourceType as RT,
)
from broker_sim.server.broker import Broker
from tests.integration.kafka_wire import WireClient

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
LITERAL, PREFIXED = ACLResourcePatternType.LITERAL, ACLResourcePatternType.PREFIXED
ALLOW, DENY = ACLPermissionType.ALLOW, ACLPermissionType.DENY


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
              "authorizer.class.name": AUTHORIZER, "super.users": "User:admin",
              "group.initial.rebalance.delay.ms": "0", "sasl.enabled.mechanisms": "SCRAM-SHA-256"}
    scram = [f"SCRAM-SHA-256=[name={u},password={p}]" for u, p in USERS.items()]
    with Broker(tmp_path_factory.mktemp("acl-data"), config=config, add_scram=scram) as broker:
        yield broker


def _login(user: str) -> dict:
    return dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=user,
                sasl_plain_password=USERS[user])


@pytest.fixture(scope="module")
def admin(acl_broker):
    client = KafkaAdminClient(bootstrap_servers=acl_broker.bootstrap_servers_for("SASL_PLAINTEXT"),
                              **_login("admin"))
    yield client
    client.close()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _allow(admin, user, operation, resource_type, name, pattern=LITERAL, permission=ALLOW, host="*"):
    result = admin.create_acls([ACL(f"User:{user}", host, operation, permission,
                                    ResourcePattern(resource_type, name, pattern))])
    assert not result["failed"], result


def _producer(broker, user, **extra):
    return KafkaProducer(bootstrap_servers=broker.bootstrap_servers_for("SASL_PLAINTEXT"), max_block_ms=5000,
                         **_login(user), **extra)


def _create_topic(admin, topic):
    from kafka.admin import NewTopic
    admin.create_topics([NewTopic(topic, 1, 1)])


def test_a_producer_needs_write_on_the_topic_and_an_acl_applies_at_once(acl_broker, admin):
    """bob cannot write to a topic until an ALLOW WRITE binding exists; then he can, without a restart.
    Mutation: produce() not checking WRITE -> the first send succeeds."""
    topic = _name("orders")
    _create_topic(admin, topic)
    _allow(admin, "bob", ACLOperation.DESCRIBE, ResourceType.TOPIC, topic)
    producer = _producer(acl_broker, "bob", enable_idempotence=False, retries=0)
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send(topic, b"x").get(10)
    _allow(admin, "bob", ACLOperation.WRITE, ResourceType.TOPIC, topic)
    assert producer.send(topic, b"y").get(10).offset == 0
    producer.close()


def test_deny_wins_over_allow_and_wildcards_and_prefixes_match(acl_broker, admin):
    prefix = _name("team")
    allowed, denied = f"{prefix}-a", f"{prefix}-secret"
    for topic in (allowed, denied):
        _create_topic(admin, topic)
    _allow(admin, "alice", ACLOperation.WRITE, ResourceType.TOPIC, prefix + "-", pattern=PREFIXED)
    _allow(admin, "alice", ACLOperation.ALL, ResourceType.TOPIC, denied, permission=DENY)
    producer = _producer(acl_broker, "alice", enable_idempotence=False, retries=0)
    assert producer.send(allowed, b"ok").get(10).offset == 0
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send(denied, b"no").get(10)
    producer.close()


def test_metadata_hides_topics_the_principal_may_not_describe(acl_broker, admin):
    """A request for all topics lists only describable ones; a named one answers TOPIC_AUTHORIZATION_FAILED;
    include_topic_authorized_operations answers the allowed set (READ implies DESCRIBE)."""
    visible, hidden = _name("visible"), _name("hidden")
    for topic in (visible, hidden):
        _create_topic(admin, topic)
    _allow(admin, "alice", ACLOperation.READ, ResourceType.TOPIC, visible)
    from tests.broker.test_sasl import _authenticate  # the wire SASL exchange
    from broker_sim.security.sasl import SaslLogin
    with WireClient(acl_broker.bootstrap_servers_for("SASL_PLAINTEXT")) as client:
        assert _authenticate(client, "SCRAM-SHA-256",
                             SaslLogin("SCRAM-SHA-256", "alice", USERS["alice"]).exchange()).error_code == 0
        everything = client.call(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                     include_topic_authorized_operations=True))
        names = {t.name for t in everything.topics}
        assert visible in names and hidden not in names
        [topic] = [t for t in everything.topics if t.name == visible]
        assert topic.authorized_operations == {int(Operation.READ), int(Operation.DESCRIBE)}
        named = client.call(MetadataRequest[12](
            topics=[MetadataRequest.MetadataRequestTopic(name=hidden, topic_id=None)],
            allow_auto_topic_creation=True, include_topic_authorized_operations=False))
        assert named.topics[0].error_code == TopicAuthorizationFailedError.errno
        assert hidden not in {t.name for t in named.topics if not t.error_code}
        assert acl_broker.metadata.get(hidden) is not None  # nothing was auto-created or changed


def test_describe_topic_partitions_hides_topics_the_principal_may_not_describe(acl_broker, admin):
    """Kafka's DescribeTopicPartitionsRequestHandler: all topics lists only describable ones; a named hidden
    topic comes last, TOPIC_AUTHORIZATION_FAILED with a zero id and no partitions, whether it exists or not;
    the others carry their authorized operations as a bitfield (READ implies DESCRIBE)."""
    from kafka.protocol.admin import DescribeTopicPartitionsRequest
    visible, hidden = _name("dtp-visible"), _name("dtp-hidden")
    for topic in (visible, hidden):
        _create_topic(admin, topic)
    _allow(admin, "alice", ACLOperation.READ, ResourceType.TOPIC, visible)
    from tests.broker.test_sasl import _authenticate  # the wire SASL exchange
    from broker_sim.security.sasl import SaslLogin
    request = DescribeTopicPartitionsRequest[0]
    with WireClient(acl_broker.bootstrap_servers_for("SASL_PLAINTEXT")) as client:
        assert _authenticate(client, "SCRAM-SHA-256",
                             SaslLogin("SCRAM-SHA-256", "alice", USERS["alice"]).exchange()).error_code == 0
        everything = client.call(request(topics=[], response_partition_limit=2000, cursor=None))
        assert visible in {t.name for t in everything.topics} and hidden not in {t.name for t in everything.topics}
        named = client.call(request(topics=[DescribeTopicPartitionsRequest.TopicRequest(name=n)
                                            for n in (hidden, visible, hidden + "-missing")],
                                    response_partition_limit=2000, cursor=None))
        answered = [(t.name, t.error_code) for t in named.topics]
        assert answered[0] == (visible, 0)   # the refused ones after it, in no set order (a HashSet in Kafka)
        assert sorted(answered[1:]) == [(hidden, TopicAuthorizationFailedError.errno),
                                        (hidden + "-missing", TopicAuthorizationFailedError.errno)]
        refused = named.topics[1:]
        assert all(t.partitions == [] and (t.topic_id is None or t.topic_id.int == 0) for t in refused)
        assert named.topics[0].topic_authorized_operations == (1 << int(Operation.READ)) | \
            (1 << int(Operation.DESCRIBE))


def test_a_consumer_group_needs_read_on_the_group_and_the_topic(acl_broker, admin):
    """Each missing binding fails with its own error; with both the group consumes."""
    topic, group = _name("events"), _name("readers")
    _create_topic(admin, topic)
    producer = _producer(acl_broker, "admin")
    producer.send(topic, b"e1").get(10)
    producer.close()

    def consume():
        consumer = KafkaConsumer(topic, bootstrap_servers=acl_broker.bootstrap_servers_for("SASL_PLAINTEXT"),
                                 group_id=group, auto_offset_reset="earliest", consumer_timeout_ms=8000,
                                 **_login("alice"))
        try:
            for message in consumer:
                consumer.commit()
                return message.value
            return None
        finally:
            consumer.close()

    _allow(admin, "alice", ACLOperation.READ, ResourceType.TOPIC, topic)
    with pytest.raises(GroupAuthorizationFailedError):
        consume()
    _allow(admin, "alice", ACLOperation.READ, ResourceType.GROUP, group)
    assert consume() == b"e1"
    _allow(admin, "alice", ACLOperation.READ, ResourceType.TOPIC, topic, permission=DENY)
    with pytest.raises(TopicAuthorizationFailedError):
        consume()


def test_a_transactional_producer_needs_write_on_its_transactional_id(acl_broker, admin):
    """librdkafka reports TRANSACTIONAL_ID_AUTHORIZATION_FAILED at init_transactions until the binding exists,
    then commits; its records need WRITE on the topic too."""
    topic, txn = _name("ledger"), _name("txn")
    _create_topic(admin, topic)
    conf = {"bootstrap.servers": acl_broker.bootstrap_servers_for("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bob",
            "sasl.password": USERS["bob"], "transactional.id": txn}
    producer = ConfluentProducer(conf)
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(15)
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in str(raised.value) or "authoriz" in str(raised.value).lower()
    _allow(admin, "bob", ACLOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn)
    _allow(admin, "bob", ACLOperation.WRITE, ResourceType.TOPIC, topic)
    producer = ConfluentProducer(conf)
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, b"t1")
    producer.commit_transaction(15)
    producer.flush(10)


def test_kafka_python_transactional_producer_without_the_binding_is_refused(acl_broker):
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        producer = _producer(acl_broker, "alice", transactional_id=_name("nope"))
        producer.init_transactions()


def test_super_users_need_no_acl_and_anonymous_needs_one(acl_broker, admin):
    topic = _name("open")
    _create_topic(admin, topic)
    anonymous = KafkaProducer(bootstrap_servers=acl_broker.bootstrap_servers_for("PLAINTEXT"), max_block_ms=5000,
                              enable_idempotence=False, retries=0)
    with pytest.raises(TopicAuthorizationFailedError):
        anonymous.send(topic, b"x").get(10)
    anonymous.close()
    producer = _producer(acl_broker, "admin")
    assert producer.send(topic, b"y").get(10).offset == 0
    producer.close()


def test_acls_for_another_host_do_not_apply(acl_broker, admin):
    topic = _name("hosts")
    _create_topic(admin, topic)
    _allow(admin, "bob", ACLOperation.WRITE, ResourceType.TOPIC, topic, host="10.9.8.7")
    producer = _producer(acl_broker, "bob", enable_idempotence=False, retries=0)
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send(topic, b"x").get(10)
    _allow(admin, "bob", ACLOperation.WRITE, ResourceType.TOPIC, topic, host="127.0.0.1")
    assert producer.send(topic, b"y").get(10).offset == 0
    producer.close()


def test_admin_apis_check_kafkas_acls(acl_broker, admin):
    """CreateTopics needs CREATE (cluster or topic), DeleteTopics DELETE, DescribeConfigs DESCRIBE_CONFIGS,
    ListGroups lists only describable groups, DescribeGroups answers GROUP_AUTHORIZATION_FAILED."""
    from kafka.admin import NewTopic
    from kafka.errors import GroupAuthorizationFailedError as GroupDenied

    mine, theirs = _name("carol-topic"), _name("other-topic")
    _create_topic(admin, theirs)
    bob = KafkaAdminClient(bootstrap_servers=acl_broker.bootstrap_servers_for("SASL_PLAINTEXT"), **_login("bob"))
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            bob.create_topics([NewTopic(mine, 1, 1)])
        _allow(admin, "bob", ACLOperation.CREATE, ResourceType.TOPIC, mine)
        bob.create_topics([NewTopic(mine, 1, 1)])
        with pytest.raises(TopicAuthorizationFailedError):
            bob.delete_topics([theirs])
        assert acl_broker.metadata.get(theirs) is not None
        from kafka.protocol.admin import DescribeConfigsRequest
        with WireClient(acl_broker.bootstrap_servers_for("PLAINTEXT")) as anonymous:
            resource = DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name=theirs,
                                                                      configuration_keys=None)
            described = anonymous.call(DescribeConfigsRequest[4](resources=[resource], include_synonyms=False,
                                                                 include_documentation=False))
        assert described.results[0].error_code == TopicAuthorizationFailedError.errno
        group = _name("bobs-group")
        _allow(admin, "bob", ACLOperation.DESCRIBE, ResourceType.GROUP, group)
        # a group bob may describe and one he may not both exist
        _commit_offset(admin, group)
        _commit_offset(admin, _name("admins-other"))
        listed = bob.list_groups()
        names = {g["group_id"] if isinstance(g, dict) else g[0] for g in listed}
        assert names == {group}, listed
        with pytest.raises(GroupDenied):
            bob.describe_groups([_name("not-bobs")])
    finally:
        bob.close()


def _commit_offset(admin, group: str) -> None:
    """Make ``group`` exist (an offset committed for it)."""
    from kafka.structs import OffsetAndMetadata, TopicPartition
    topic = _name("offsets")
    _create_topic(admin, topic)
    admin.alter_group_offsets(group, {TopicPartition(topic, 0): OffsetAndMetadata(0, "", -1)})


def test_acl_admin_apis_describe_delete_and_need_cluster_alter(acl_broker, admin):
    topic = _name("managed")
    _allow(admin, "alice", ACLOperation.READ, ResourceType.TOPIC, topic)
    acls, error = admin.describe_acls(ACLFilter(None, "*", ACLOperation.ANY, ACLPermissionType.ANY,
                                                ResourcePatternFilter(ResourceType.TOPIC, topic, LITERAL)))
    assert [(a.principal, a.operation) for a in acls] == [("User:alice", ACLOperation.READ)]
    deleted = admin.delete_acls([ACLFilter("User:alice", None, ACLOperation.ANY, ACLPermissionType.ANY,
                                           ResourcePatternFilter(ResourceType.TOPIC, topic, LITERAL))])
    assert len(deleted[0][1]) == 1
    alice = KafkaAdminClient(bootstrap_servers=acl_broker.bootstrap_servers_for("SASL_PLAINTEXT"),
                             **_login("alice"))
    try:
        result = alice.create_acls([ACL("User:alice", "*", ACLOperation.ALL, ALLOW,
                                        ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", LITERAL))])
        assert result["failed"] and not result["succeeded"]
    finally:
        alice.close()


def test_invalid_bindings_are_refused_naming_the_problem(acl_broker, admin):
    with WireClient(acl_broker.bootstrap_servers_for("PLAINTEXT")) as client:
        response = client.call(CreateAclsRequest[3](creations=[CreateAclsRequest.AclCreation(
            resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:x", host="*",
            operation=3, permission_type=3)]))
        assert response.results[0].error_code == 31  # CLUSTER_AUTHORIZATION_FAILED: ANONYMOUS may not ALTER


def test_bindings_persist_across_a_restart(tmp_path):
    config = {"listeners": "PLAINTEXT://127.0.0.1:0", "authorizer.class.name": AUTHORIZER,
              "super.users": "User:ANONYMOUS"}
    with Broker(tmp_path, config=config) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        admin.create_acls([ACL("User:carol", "*", ACLOperation.READ, ALLOW,
                               ResourcePattern(ResourceType.GROUP, "g-", PREFIXED))])
        admin.close()
    store = FileAclStore(tmp_path)
    assert [(b.principal, b.name, b.pattern_type) for b in store.bindings()] == [
        ("User:carol", "g-", PatternType.PREFIXED)]


def test_without_an_authorizer_acl_apis_answer_security_disabled_and_operations_are_all(tmp_path):
    with Broker(tmp_path, config={"listeners": "PLAINTEXT://127.0.0.1:0"}) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            result = admin.create_acls([ACL("User:x", "*", ACLOperation.READ, ALLOW,
                                            ResourcePattern(ResourceType.TOPIC, "t", LITERAL))])
            assert result["failed"] and "SecurityDisabled" in repr(result["failed"])
        finally:
            admin.close()
        with WireClient(broker.bootstrap_servers) as client:
            cluster = client.call(DescribeClusterRequest[1](include_cluster_authorized_operations=True,
                                                            endpoint_type=1))
            assert cluster.authorized_operations == {5, 7, 8, 9, 10, 11, 12}  # Kafka: every cluster operation


# --- the model, without a broker ---------------------------------------------------------------------

class _Store(FileAclStore):
    def __init__(self, bindings):
        import threading
        self._lock = threading.RLock()
        self._by_resource = {}
        for b in bindings:
            key = (b.resource_type, b.name, b.pattern_type)
            self._by_resource[key] = self._by_resource.get(key, frozenset()) | {b}


def _binding(op, name="t", pattern=PatternType.LITERAL, permission=Permission.ALLOW, principal="User:u",
             rtype=RT.TOPIC, host="*"):
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


@pytest.mark.parametrize("granted,asked,allowed", [
    (Operation.READ, Operation.DESCRIBE, True), (Operation.WRITE, Operation.DESCRIBE, True),
    (Operation.DELETE, Operation.DESCRIBE, True), (Operation.ALTER, Operation.DESCRIBE, True),
    (Operation.ALTER_CONFIGS, Operation.DESCRIBE_CONFIGS, True), (Operation.DESCRIBE, Operation.READ, False),
    (Operation.ALL, Operation.ALTER_CONFIGS, True), (Operation.READ, Operation.WRITE, False),
])
def test_operation_implications(granted, asked, allowed):
    authorizer = Authorizer(_Store([_binding(granted)]), frozenset(), False)
    assert authorizer.authorize("User:u", "1.2.3.4", asked, RT.TOPIC, "t") is allowed


def test_no_binding_follows_allow_everyone_if_no_acl_found():
    assert not Authorizer(_Store([]), frozenset(), False).authorize("User:u", "h", Operation.READ, RT.TOPIC, "t")
    assert Authorizer(_Store([]), frozenset(), True).authorize("User:u", "h", Operation.READ, RT.TOPIC, "t")
    # a binding for someone else on the resource: no longer "no ACL found"
    other = Authorizer(_Store([_binding(Operation.READ, principal="User:v")]), frozenset(), True)
    assert not other.authorize("User:u", "h", Operation.READ, RT.TOPIC, "t")


def test_idempotent_write_by_resource_type():
    """KIP-679: WRITE on some topic is enough; a wildcard DENY refuses."""
    some = Authorizer(_Store([_binding(Operation.WRITE, name="a")]), frozenset(), False)
    assert some.authorize_any("User:u", "h", Operation.WRITE, RT.TOPIC)
    denied = Authorizer(_Store([_binding(Operation.WRITE, name="a"),
                                _binding(Operation.WRITE, name="*", permission=Permission.DENY)]), frozenset(), False)
    assert not denied.authorize_any("User:u", "h", Operation.WRITE, RT.TOPIC)
    assert not Authorizer(_Store([]), frozenset(), False).authorize_any("User:u", "h", Operation.WRITE, RT.TOPIC)


def _as_alice(acl_broker):
    """A raw wire client logged in as alice (SCRAM over the SASL listener)."""
    from broker_sim.security.sasl import SaslLogin
    from tests.broker.test_sasl import _authenticate

    client = WireClient(acl_broker.bootstrap_servers_for("SASL_PLAINTEXT"))
    assert _authenticate(client, "SCRAM-SHA-256",
                         SaslLogin("SCRAM-SHA-256", "alice", USERS["alice"]).exchange()).error_code == 0
    return client


def test_transactional_records_need_a_transactional_id_and_write_on_it(acl_broker, admin):
    """Kafka's Produce check: a transactional batch sent without a transactional id is refused
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, though the principal may WRITE the topic (else any writer could open
    transactions that hold back the topic's last stable offset).  Mutation: the check removed -> appended."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from tests.integration.kafka_wire import produce_request, record_batch

    topic = _name("txn-less")
    _create_topic(admin, topic)
    _allow(admin, "alice", ACLOperation.WRITE, ResourceType.TOPIC, topic)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=4242,
                                        producer_epoch=0, base_sequence=0, batch_size=1 << 20)
    builder.append(0, timestamp=None, key=b"k", value=b"v", headers=[])
    with _as_alice(acl_broker) as client:
        plain = client.call(produce_request(topic, 0, record_batch([b"ok"])))
        assert plain.responses[0].partition_responses[0].error_code == 0
        refused = client.call(produce_request(topic, 0, bytes(builder.build())))
        assert refused.responses[0].partition_responses[0].error_code == TransactionalIdAuthorizationFailedError.errno
    assert acl_broker.replicas.get(topic, 0).log_end_offset == 1


def test_internal_topics_cannot_join_a_transaction_even_with_write_on_them(acl_broker, admin):
    from kafka.protocol.producer import AddPartitionsToTxnRequest

    txn = _name("alice-txn")
    _allow(admin, "alice", ACLOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn)
    _allow(admin, "alice", ACLOperation.WRITE, ResourceType.TOPIC, "__consumer_offsets")
    Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    with _as_alice(acl_broker) as client:
        response = client.call(AddPartitionsToTxnRequest[3](
            v3_and_below_transactional_id=txn, v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
            v3_and_below_topics=[Topic(name="__consumer_offsets", partitions=[0])]))
    [result] = response.results_by_topic_v3_and_below
    assert result.results_by_partition[0].partition_error_code == TopicAuthorizationFailedError.errno


def test_what_a_principal_may_not_describe_is_not_told(acl_broker, admin):
    """Kafka withholds: a hidden topic's name behind its id (Metadata, DeleteTopics v6 answer
    TOPIC_AUTHORIZATION_FAILED without the name), a created topic's configs without DESCRIBE_CONFIGS, and the
    cluster's authorized operations without DESCRIBE on the cluster."""
    from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest

    hidden, mine = _name("secret"), _name("alices")
    _create_topic(admin, hidden)
    topic_id = acl_broker.metadata.get(hidden).topic_id
    _allow(admin, "alice", ACLOperation.CREATE, ResourceType.TOPIC, mine)
    # a cluster operation alice has, which does not imply DESCRIBE on the cluster
    _allow(admin, "alice", ACLOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, "kafka-cluster")
    with _as_alice(acl_broker) as client:
        by_id = client.call(MetadataRequest[12](
            topics=[MetadataRequest.MetadataRequestTopic(name=None, topic_id=topic_id)],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert (by_id.topics[0].error_code, by_id.topics[0].name, by_id.topics[0].topic_id) == (
            TopicAuthorizationFailedError.errno, None, topic_id)
        deleted = client.call(DeleteTopicsRequest[6](
            topics=[DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=topic_id)], timeout_ms=5000))
        assert (deleted.responses[0].error_code, deleted.responses[0].name) == (
            TopicAuthorizationFailedError.errno, None)
        created = client.call(CreateTopicsRequest[7](topics=[CreateTopicsRequest.CreatableTopic(
            name=mine, num_partitions=2, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=5000, validate_only=False))
        [topic] = created.topics
        assert (topic.error_code, topic.num_partitions, topic.configs, topic.topic_config_error_code) == (
            0, -1, [], TopicAuthorizationFailedError.errno)
        cluster = client.call(DescribeClusterRequest[0](include_cluster_authorized_operations=True))
        assert not cluster.authorized_operations
    assert acl_broker.metadata.get(hidden) is not None and acl_broker.metadata.get(mine).partitions == 2


def test_allow_everyone_if_no_acl_found_counts_for_by_resource_type_checks():
    """Kafka's authorizeByResourceType asks about a resource no binding names first: with
    allow.everyone.if.no.acl.found an idempotent producer needs no ACL, as any other request."""
    assert Authorizer(_Store([]), frozenset(), True).authorize_any("User:u", "h", Operation.WRITE, RT.TOPIC)
