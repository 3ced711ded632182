"""Handlers built from their collaborators alone: no Broker, no sockets.

Each handler module's ``*Apis`` class takes only what its handlers use (``build_handlers`` hands the parts
out), so a handler runs against a stand-in owner and a real ``Access`` over a real ``Authorizer``.
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import kafka.errors as Errors

from broker_sim.security.acl import CLUSTER_NAME, AclBinding, Authorizer, FileAclStore, Operation, PatternType
from broker_sim.security.acl import Permission, ResourceType
from broker_sim.server.handlers.access import CLUSTER, DESCRIBE, READ, TOPIC, Access
from broker_sim.server.handlers.offsets import OffsetApis

ALICE = "User:alice"


def _ctx(principal: str = ALICE, inter_broker: bool = False, version: int = 0):
    connection = SimpleNamespace(principal=principal, ip="10.0.0.1", inter_broker=inter_broker)
    return SimpleNamespace(version=version, connection=connection)


def _authorizer(tmp_path, *denied: tuple[ResourceType, str, Operation]) -> Authorizer:
    """Everything allowed (allow.everyone.if.no.acl.found) but ``denied`` to alice."""
    store = FileAclStore(tmp_path)
    store.add([AclBinding(rtype, name, PatternType.LITERAL, ALICE, "*", operation, Permission.DENY)
               for rtype, name, operation in denied])
    return Authorizer(store, frozenset(), allow_if_no_acl=True)


class _Partition:
    def __init__(self) -> None:
        self.deleted_before = None

    def delete_records_before(self, offset: int) -> int:
        self.deleted_before = offset
        return offset


class _Replicas:
    """Partition 0 of every topic is led here; partition 1 is not."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []
        self.led = _Partition()

    def get_leader(self, topic: str, index: int) -> _Partition:
        self.asked.append((topic, index))
        if index == 1:
            raise Errors.NotLeaderForPartitionError(f"{topic}-1 is led elsewhere")
        return self.led


def _delete_records(topic: str, *indexes: int):
    return SimpleNamespace(topics=[SimpleNamespace(
        name=topic, partitions=[SimpleNamespace(partition_index=i, offset=7) for i in indexes])])


def test_delete_records_answers_each_partition_from_its_leader_and_refuses_a_denied_topic_whole(tmp_path):
    replicas = _Replicas()
    apis = OffsetApis(Access(_authorizer(tmp_path, (TOPIC, "secret", Operation.DELETE))), replicas)

    response = asyncio.run(apis.delete_records(_ctx(), _delete_records("events", 0, 1)))
    answers = [(p.partition_index, p.error_code, p.low_watermark) for p in response.topics[0].partitions]
    assert answers == [(0, 0, 7), (1, Errors.NotLeaderForPartitionError.errno, -1)]
    assert replicas.led.deleted_before == 7

    replicas.asked.clear()
    response = asyncio.run(apis.delete_records(_ctx(), _delete_records("secret", 0, 1)))
    assert [(p.error_code, p.low_watermark) for p in response.topics[0].partitions] == \
        [(Errors.TopicAuthorizationFailedError.errno, -1)] * 2
    assert replicas.asked == []  # refused before the owner is asked


def test_without_an_authorizer_everything_is_allowed_but_the_inter_broker_apis(tmp_path):
    access = Access(None)
    assert not access.enabled
    assert access.allowed(_ctx(), READ, TOPIC, "events")
    assert access.authorized_operations(_ctx(), TOPIC, "events")  # every operation a topic supports
    assert not access.cluster_action(_ctx())
    assert access.cluster_action(_ctx(inter_broker=True))


def test_a_broker_connection_passes_every_check_and_others_are_asked_of_the_authorizer(tmp_path):
    access = Access(_authorizer(tmp_path, (TOPIC, "events", READ), (CLUSTER, CLUSTER_NAME, DESCRIBE)))
    assert access.enabled
    assert not access.allowed(_ctx(), READ, TOPIC, "events")
    assert access.allowed(_ctx(), READ, TOPIC, "other")  # no ACL names it: allow.everyone.if.no.acl.found
    assert access.allowed(_ctx(inter_broker=True), READ, TOPIC, "events")
    assert access.cluster_operations(_ctx()) == set()  # no DESCRIBE on the cluster: its operations untold
    assert access.cluster_operations(_ctx(inter_broker=True))
    assert not access.cluster_action(_ctx())
