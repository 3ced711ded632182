"""ElectLeaders (API 43) on a 3-broker cluster with auto.leader.rebalance.enable=false (leadership moves only
when asked): preferred elections through confluent-kafka and kafka-python, unclean ones through
``pylog leader-election``, with Kafka's per-partition errors."""
from __future__ import annotations

import io

import pytest
from cluster_helpers import produce, start_cluster
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka import ElectionType
from confluent_kafka.admin import AdminClient, NewTopic

from broker_sim.tools.cli import main as pylog
from tests.integration.kafka_wire import WireClient

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def election_cluster(tmp_path_factory):
    running = start_cluster(tmp_path_factory.mktemp("election"), configs={"auto.leader.rebalance.enable": "false"})
    try:
        yield running
    finally:
        running.stop_all()


@pytest.fixture
def cluster(election_cluster):
    election_cluster.heal(wait=True)
    yield election_cluster
    election_cluster.heal(wait=True)


def create_with_assignment(cluster, topic, assignment):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)
    admin.create_topics([new], request_timeout=30)[topic].result(30)
    cluster.wait_for_full_isr(topic, len(assignment), timeout_s=30)


def wait_leader(cluster, topic, partition, predicate, what):
    return cluster.wait_for(lambda md: (s := md.partitions.get((topic, partition))) is not None and predicate(s),
                            timeout_s=30, what=f"{topic}-{partition}: {what}", topics=[topic])


def confluent_elect(cluster, kind, partitions):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    # no timeouts given: confluent-kafka 2.16's elect_leaders fails on any keyword argument (SystemError)
    results = admin.elect_leaders(kind, partitions).result(90)
    return {(tp.topic, tp.partition): _code(error) for tp, error in results.items()}


def _code(error) -> int | None:
    """A result's Kafka error code: None, a KafkaError, or a KafkaException carrying one."""
    if error is None:
        return None
    return error.code() if isinstance(error, KafkaError) else error.args[0].code()


def test_preferred_election_with_confluent_kafka_and_kafka_python(cluster, topic_name):
    from kafka import KafkaAdminClient

    create_with_assignment(cluster, topic_name, [[0, 1, 2], [1, 2, 0]])
    cluster.kill(0)
    wait_leader(cluster, topic_name, 0, lambda s: s.leader == 1, "broker 1 leads after broker 0 died")
    results = confluent_elect(cluster, ElectionType.PREFERRED, [
        TopicPartition(topic_name, 0), TopicPartition(topic_name, 1), TopicPartition(topic_name, 7)])
    assert results == {(topic_name, 0): KafkaError.PREFERRED_LEADER_NOT_AVAILABLE,
                       (topic_name, 1): KafkaError.ELECTION_NOT_NEEDED,
                       (topic_name, 7): KafkaError.UNKNOWN_TOPIC_OR_PART}
    cluster.restart(0)
    state = wait_leader(cluster, topic_name, 0, lambda s: 0 in s.isr and s, "broker 0 back in the ISR")
    assert state.leader == 1, "leadership moved back without an election (auto.leader.rebalance.enable=false)"
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=30000)
    try:
        response = admin.elect_leaders(0, {topic_name: [0, 1]}, timeout_ms=20000, raise_errors=False)
    finally:
        admin.close()
    codes = {(r.topic, p.partition_id): p.error_code for r in response.replica_election_results
             for p in r.partition_result}
    assert codes == {(topic_name, 0): 0, (topic_name, 1): KafkaError.ELECTION_NOT_NEEDED}
    wait_leader(cluster, topic_name, 0, lambda s: s.leader == 0, "the preferred replica 0 leads")


def test_unclean_election_with_the_pylog_tool(cluster, topic_name):
    create_with_assignment(cluster, topic_name, [[1, 2]])
    assert all(err is None for err, _ in produce(cluster.bootstrap_servers, topic_name, [b"a", b"b"], acks="all"))
    cluster.kill(2)
    wait_leader(cluster, topic_name, 0, lambda s: list(s.isr) == [1], "the ISR shrank to [1]")
    cluster.kill(1)
    wait_leader(cluster, topic_name, 0, lambda s: s.leader == -1, "offline")
    assert confluent_elect(cluster, ElectionType.UNCLEAN, [TopicPartition(topic_name, 0)]) == {
        (topic_name, 0): KafkaError.ELIGIBLE_LEADERS_NOT_AVAILABLE}
    cluster.restart(2)
    assert cluster.leader_of(topic_name, 0) == -1, "an out-of-sync replica led without unclean election"
    args = ["leader-election", "--bootstrap-server", cluster.bootstrap_servers, "--election-type", "unclean",
            "--topic", topic_name, "--partition", "0"]
    out, err = io.StringIO(), io.StringIO()
    assert pylog(args, stdout=out, stderr=err) == 0, err.getvalue()
    assert out.getvalue() == f"Successfully completed leader election (UNCLEAN) for partitions {topic_name}-0\n"
    wait_leader(cluster, topic_name, 0, lambda s: s.leader == 2 and list(s.isr) == [2], "broker 2 leads")
    out = io.StringIO()
    assert pylog(args, stdout=out, stderr=err) == 0, err.getvalue()
    assert out.getvalue() == f"Valid replica already elected for partitions {topic_name}-0\n"


def test_the_tool_reports_partitions_that_could_not_be_elected(cluster, topic_name, tmp_path):
    create_with_assignment(cluster, topic_name, [[0, 1], [1, 0]])
    path = tmp_path / "partitions.json"
    path.write_text(f'{{"partitions": [{{"topic": "{topic_name}", "partition": 1}}, '
                    f'{{"topic": "{topic_name}", "partition": 5}}]}}')
    out, err = io.StringIO(), io.StringIO()
    status = pylog(["leader-election", "--bootstrap-server", cluster.bootstrap_servers, "--election-type",
                    "PREFERRED", "--path-to-json-file", str(path)], stdout=out, stderr=err)
    assert status == 1
    assert f"Valid replica already elected for partitions {topic_name}-1\n" in out.getvalue()
    assert (f"Error completing leader election (PREFERRED) for partition: {topic_name}-5: "
            f"UnknownTopicOrPartitionError: The partition does not exist.") in out.getvalue()
    assert "1 replica(s) could not be elected" in err.getvalue()
    bad = pylog(["leader-election", "--bootstrap-server", cluster.bootstrap_servers, "--election-type",
                 "PREFERRED", "--topic", topic_name], stdout=io.StringIO(), stderr=(err := io.StringIO()))
    assert bad == 1 and "--topic needs --partition" in err.getvalue()


def test_a_broker_that_is_not_the_controller_answers_not_controller(cluster, topic_name):
    from kafka.protocol.admin import ElectLeadersRequest

    create_with_assignment(cluster, topic_name, [[0, 1, 2]])
    controller = cluster.controller_id()
    other = next(b for b in cluster.broker_ids if b != controller)
    Topic = ElectLeadersRequest.TopicPartitions
    request = ElectLeadersRequest[2](election_type=0, timeout_ms=10000,
                                     topic_partitions=[Topic(topic=topic_name, partitions=[0])])
    with WireClient(cluster.address(other)) as client:
        refused = client.call(request)
    assert codes_of(refused) == {(topic_name, 0): KafkaError.NOT_CONTROLLER}
    with WireClient(cluster.address(controller)) as client:
        answered = client.call(request)
    assert codes_of(answered) == {(topic_name, 0): KafkaError.ELECTION_NOT_NEEDED}


def codes_of(response) -> dict:
    return {(r.topic, p.partition_id): p.error_code for r in response.replica_election_results
            for p in r.partition_result}


def test_describe_topic_partitions_answers_the_cluster_state_of_every_broker(cluster, topic_name):
    """DescribeTopicPartitions on any broker answers ZooKeeper's leaders, epochs, replicas and ISR, as Metadata
    does; an offline partition has leader -1, its replicas offline, and (Kafka's) no partition error where
    Metadata says LEADER_NOT_AVAILABLE."""
    from kafka.protocol.admin import DescribeTopicPartitionsRequest
    from kafka.protocol.metadata import MetadataRequest

    def both(broker_id):
        with WireClient(cluster.address(broker_id)) as client:
            described = client.call(DescribeTopicPartitionsRequest[0](
                topics=[DescribeTopicPartitionsRequest.TopicRequest(name=topic_name)], response_partition_limit=10,
                cursor=None)).topics[0]
            metadata = client.call(MetadataRequest[12](
                topics=[MetadataRequest.MetadataRequestTopic(name=topic_name, topic_id=None)],
                allow_auto_topic_creation=False, include_topic_authorized_operations=False)).topics[0]
        rows = [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.offline_replicas)
                for p in described.partitions]
        assert described.error_code == 0 and described.topic_id == metadata.topic_id
        assert rows == [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes,
                         p.offline_replicas) for p in sorted(metadata.partitions, key=lambda p: p.partition_index)]
        return described, metadata

    create_with_assignment(cluster, topic_name, [[0, 1], [1, 2], [2, 0]])
    for broker_id in (0, 1, 2):
        described, _ = both(broker_id)
        assert [(p.leader_id, p.replica_nodes) for p in described.partitions] == [(0, [0, 1]), (1, [1, 2]),
                                                                                  (2, [2, 0])]
    cluster.kill(0)
    wait_leader(cluster, topic_name, 0, lambda s: s.leader == 1, "broker 1 leads")
    cluster.kill(1)
    wait_leader(cluster, topic_name, 0, lambda s: s.leader == -1, "offline")
    described, metadata = both(2)
    offline = described.partitions[0]
    assert (offline.leader_id, offline.offline_replicas, offline.error_code) == (-1, [0, 1], 0)
    [leaderless] = [p for p in metadata.partitions if p.partition_index == 0]
    assert leaderless.error_code == 5   # LEADER_NOT_AVAILABLE
