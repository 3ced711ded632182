"""DENY in every shape (issue 24, item 2): for ``User:*``, for one host, with a PREFIXED pattern, on the cluster,
and beating ALLOW in every combination of pattern (literal, prefixed, the ``*`` wildcard) and principal (the
user, ``User:*``); an ALLOW or a DENY for another host does not apply.

Each case first shows its ALLOW applies (the probe passes), then adds the DENY and sees the exact refusal
(Produce: TOPIC_AUTHORIZATION_FAILED; CreateAcls: CLUSTER_AUTHORIZATION_FAILED), then deletes its bindings
(a wildcard DENY for ``User:*`` would otherwise refuse every later case).  Requests are sent raw over SASL
PLAIN (the broker of ``test_acl_per_api``); the client's host is 127.0.0.1.
"""
from __future__ import annotations

import itertools

import pytest
from kafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from broker_sim.security.acl import Operation, ResourceType
from tests.broker.test_acl_per_api import create_topic, grant, login, plain_broker
from tests.integration.kafka_wire import produce_request, record_batch

ALLOW, DENY = 3, 2
LITERAL, PREFIXED = 3, 4
TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
PATTERNS = ("literal", "prefixed", "wildcard")
PRINCIPALS = ("user", "everyone")
COMBINATIONS = list(itertools.product(PATTERNS, PRINCIPALS, PATTERNS, PRINCIPALS))
USERS = {f"d{i}": "pw" for i in range(len(COMBINATIONS) + 20)}
_next_user = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with plain_broker(tmp_path_factory.mktemp("acl-deny"), USERS) as started:
        yield started


@pytest.fixture(scope="module")
def admin(broker):
    with login(broker, "admin", "admin") as client:
        yield client


@pytest.fixture
def user(broker, admin):
    """A fresh user (its own bindings), and its topic; every binding made during the test is deleted after."""
    name = f"d{next(_next_user)}"
    create_topic(admin, f"deny-{name}-topic")
    yield name
    admin.call(DeleteAclsRequest[3](filters=[DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1)]))
    assert not admin.call(DescribeAclsRequest[3](
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1)).resources


def _binding(admin, user: str, permission: int, pattern: str, principal: str, operation=Operation.WRITE,
             host: str = "*") -> None:
    topic = f"deny-{user}-topic"
    name, kind = {"literal": (topic, LITERAL), "prefixed": (f"deny-{user}-", PREFIXED), "wildcard": ("*", LITERAL)}[
        pattern]
    grant(admin, f"User:{user}" if principal == "user" else "User:*", [(TOPIC, name, operation)],
          permission=permission, pattern=kind, host=host)


def _produce(broker, user: str) -> int:
    with login(broker, user, "pw") as client:
        response = client.call(produce_request(f"deny-{user}-topic", 0, record_batch([b"x"])))
    return response.responses[0].partition_responses[0].error_code


@pytest.mark.parametrize("allow_pattern,allow_principal,deny_pattern,deny_principal", COMBINATIONS,
                         ids=["allow-{}-{}-deny-{}-{}".format(*c) for c in COMBINATIONS])
def test_deny_beats_allow_in_every_combination(broker, admin, user, allow_pattern, allow_principal, deny_pattern,
                                               deny_principal):
    _binding(admin, user, ALLOW, allow_pattern, allow_principal)
    assert _produce(broker, user) == 0, "the ALLOW alone must let the producer write"
    _binding(admin, user, DENY, deny_pattern, deny_principal)
    assert _produce(broker, user) == 29  # TOPIC_AUTHORIZATION_FAILED


@pytest.mark.parametrize("allowed,denied", [(Operation.WRITE, Operation.ALL), (Operation.ALL, Operation.WRITE)],
                         ids=["deny-all-beats-allow-write", "deny-write-beats-allow-all"])
def test_deny_of_all_or_of_the_operation_beats_allow_of_the_other(broker, admin, user, allowed, denied):
    _binding(admin, user, ALLOW, "literal", "user", operation=allowed)
    assert _produce(broker, user) == 0
    _binding(admin, user, DENY, "literal", "user", operation=denied)
    assert _produce(broker, user) == 29


def test_a_deny_of_another_operation_does_not_refuse(broker, admin, user):
    _binding(admin, user, ALLOW, "literal", "user")
    _binding(admin, user, DENY, "wildcard", "everyone", operation=Operation.READ)
    assert _produce(broker, user) == 0


@pytest.mark.parametrize("principal", PRINCIPALS)
def test_deny_for_the_clients_host_refuses_and_for_another_host_does_not(broker, admin, user, principal):
    _binding(admin, user, ALLOW, "literal", "user")
    _binding(admin, user, DENY, "literal", principal, host="10.11.12.13")
    assert _produce(broker, user) == 0, "a DENY for another host applied"
    _binding(admin, user, DENY, "literal", principal, host="127.0.0.1")
    assert _produce(broker, user) == 29


def test_allow_for_another_host_does_not_apply(broker, admin, user):
    _binding(admin, user, ALLOW, "literal", "user", host="10.11.12.13")
    _binding(admin, user, ALLOW, "wildcard", "everyone", host="10.11.12.14")
    assert _produce(broker, user) == 29
    _binding(admin, user, ALLOW, "literal", "user", host="127.0.0.1")
    assert _produce(broker, user) == 0


def test_a_prefixed_deny_that_does_not_prefix_the_name_does_not_refuse(broker, admin, user):
    _binding(admin, user, ALLOW, "literal", "user")
    for near in (f"deny-{user}-topicx", f"deny-{user}-topic-", f"eny-{user}"):  # longer, or not at the start
        grant(admin, f"User:{user}", [(TOPIC, near, Operation.WRITE)], permission=DENY, pattern=PREFIXED)
    grant(admin, f"User:{user}", [(TOPIC, f"deny-{user}-top", Operation.WRITE)], permission=DENY)  # literal
    assert _produce(broker, user) == 0
    grant(admin, f"User:{user}", [(TOPIC, f"deny-{user}-topic", Operation.WRITE)], permission=DENY,
          pattern=PREFIXED)  # the whole name is a prefix of itself
    assert _produce(broker, user) == 29


def _create_acl(broker, user: str) -> int:
    with login(broker, user, "pw") as client:
        response = client.call(CreateAclsRequest[3](creations=[CreateAclsRequest.AclCreation(
            resource_type=2, resource_name=f"deny-{user}-other", resource_pattern_type=3, principal="User:x",
            host="*", operation=3, permission_type=3)]))
    return response.results[0].error_code


def _describe_acls(broker, user: str) -> int:
    with login(broker, user, "pw") as client:
        return client.call(DescribeAclsRequest[3](
            resource_type_filter=2, resource_name_filter=f"deny-{user}-other", pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1)).error_code


@pytest.mark.parametrize("principal", PRINCIPALS)
def test_deny_on_the_cluster_resource(broker, admin, user, principal):
    """ALLOW ALL on the cluster, then DENY ALTER on it: CreateAcls (ALTER) is refused with
    CLUSTER_AUTHORIZATION_FAILED and creates nothing; DescribeAcls (DESCRIBE) still answers."""
    grant(admin, f"User:{user}", [(CLUSTER, "kafka-cluster", Operation.ALL)])
    assert _create_acl(broker, user) == 0
    grant(admin, "User:*" if principal == "everyone" else f"User:{user}", [(CLUSTER, "kafka-cluster", Operation.ALTER)],
          permission=DENY)
    admin.call(DeleteAclsRequest[3](filters=[DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=2, resource_name_filter=f"deny-{user}-other", pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1)]))
    assert _create_acl(broker, user) == 31
    assert _describe_acls(broker, user) == 0
    described = admin.call(DescribeAclsRequest[3](
        resource_type_filter=2, resource_name_filter=f"deny-{user}-other", pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1))
    assert described.resources == [], "a refused CreateAcls created a binding"
