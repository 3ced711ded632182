"""ElectLeaders on a single broker with an authorizer: ALTER on the cluster is required (Kafka's
CLUSTER_AUTHORIZATION_FAILED for every named partition and at the top), and a single node, which leads every
partition it has, answers ELECTION_NOT_NEEDED for them and UNKNOWN_TOPIC_OR_PARTITION for the others."""
from __future__ import annotations

import kafka.errors as Errors
from kafka import KafkaAdminClient
from kafka.admin import ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, NewTopic, ResourcePattern
from kafka.admin import ResourceType

from broker_sim.server.broker import Broker

USERS = {"admin": "admin-secret"}


def codes(response) -> dict:
    return {(r.topic, p.partition_id): p.error_code for r in response.replica_election_results
            for p in r.partition_result}


def test_elect_leaders_needs_alter_on_the_cluster_and_a_single_node_needs_no_election(tmp_path):
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
              "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
              "sasl.enabled.mechanisms": "SCRAM-SHA-256"}
    with Broker(tmp_path, config=config, add_scram=["SCRAM-SHA-256=[name=admin,password=admin-secret]"]) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers_for("SASL_PLAINTEXT"),
                                 security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                                 sasl_plain_username="admin", sasl_plain_password="admin-secret")
        anonymous = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers_for("PLAINTEXT"))
        try:
            admin.create_topics([NewTopic("elected", 2, 1)])
            refused = anonymous.elect_leaders(0, {"elected": [0]}, raise_errors=False)
            assert refused.error_code == Errors.ClusterAuthorizationFailedError.errno
            assert codes(refused) == {("elected", 0): Errors.ClusterAuthorizationFailedError.errno}
            admin.create_acls([ACL("User:ANONYMOUS", "*", ACLOperation.ALTER, ACLPermissionType.ALLOW,
                                   ResourcePattern(ResourceType.CLUSTER, "kafka-cluster",
                                                   ACLResourcePatternType.LITERAL))])
            allowed = anonymous.elect_leaders(1, {"elected": [0, 1, 5]}, raise_errors=False)
            assert allowed.error_code == 0
            assert codes(allowed) == {("elected", 0): Errors.ElectionNotNeededError.errno,
                                      ("elected", 1): Errors.ElectionNotNeededError.errno,
                                      ("elected", 5): Errors.UnknownTopicOrPartitionError.errno}
        finally:
            admin.close()
            anonymous.close()
