"""The request handlers (authorize, call the one owner of the job, build the response) and their table.

Owns one ``*Apis`` class per module, each holding only the collaborators its handlers use;
``build_handlers`` is where the Broker hands them out.  Must not import tools/, testing/, bench/ or local/.
"""
from __future__ import annotations

from functools import partial

from kafka.protocol.api_key import ApiKey

from broker_sim.coordinator.txn import markers as txn_markers
from broker_sim.server.client_metrics import ClientMetricsManager
from broker_sim.server.handlers.access import Access
from broker_sim.server.handlers.cluster import ClusterApis
from broker_sim.server.handlers.election import ElectionApis
from broker_sim.server.handlers.fetch import FetchApis
from broker_sim.server.handlers.groups import GroupApis
from broker_sim.server.handlers.log_dirs import LogDirApis
from broker_sim.server.handlers.offsets import OffsetApis
from broker_sim.server.handlers.produce import ProduceApi
from broker_sim.server.handlers.reassignments import ReassignmentApis
from broker_sim.server.handlers.security import SecurityApis
from broker_sim.server.handlers.telemetry import TelemetryApis
from broker_sim.server.handlers.topics import TopicApis
from broker_sim.server.handlers.transactions import TransactionApis


def _broker_on(broker, broker_id: int, listener: str | None):
    """Broker ``broker_id``'s address on ``listener`` as the cluster metadata has it (None: not known there)."""
    endpoint = (getattr(broker.metadata, "brokers", None) or {}).get(broker_id)
    return endpoint.on(listener) if endpoint is not None and listener else endpoint


def build_handlers(broker) -> dict:
    """API key -> ``async handler(ctx, request)``, each bound to the parts of ``broker`` it needs."""
    access = Access(broker.authorizer)
    clustered = broker.cluster is not None
    cluster = ClusterApis(access, broker.metadata, broker.replicas, broker.config, broker.broker_id,
                          clustered=clustered, endpoint_on=broker.endpoint_on,
                          auto_create_topic=broker.auto_create_topic)
    txns = TransactionApis(
        access, broker.transactions, broker.groups, broker.producer_ids, replicas=broker.replicas,
        metadata=broker.metadata,
        write_markers=partial(txn_markers.write_txn_markers, broker),
        write_markers_replicated=partial(txn_markers.write_txn_markers_replicated, broker) if clustered else None)
    fetch = FetchApis(access, broker.replicas, broker.config, now_ms=broker.now_ms, quotas=broker.quotas,
                      stop_future=broker.stop_future, metadata=broker.metadata,
                      endpoint_on=partial(_broker_on, broker), broker_id=broker.broker_id)
    offsets = OffsetApis(access, broker.replicas)
    topics = TopicApis(access, broker.metadata, broker.config, broker.entity_configs, broker.broker_id,
                       clustered=clustered, internal_topics=broker.internal_topics,
                       create_topic_async=broker.create_topic_async, delete_topic=broker.delete_topic,
                       add_partitions=broker.add_partitions, set_topic_configs=broker.set_topic_configs,
                       check_partition_budget=broker.check_partition_budget)
    groups = GroupApis(access, broker.groups, broker.transactions, broker.metadata, broker.broker_id,
                       clustered=clustered, endpoint_on=broker.endpoint_on)
    security = SecurityApis(access, broker.acls, broker.entity_configs, broker.metrics)
    reassignments = ReassignmentApis(access, broker.metadata, broker.broker_id, broker.cluster)
    election = ElectionApis(access, broker.metadata, broker.broker_id,
                            controller=lambda: broker.cluster.controller if broker.cluster is not None else None)
    log_dirs = LogDirApis(access, broker.replicas)
    telemetry = TelemetryApis(ClientMetricsManager(
        broker.entity_configs, broker.config.get("telemetry.max.bytes"), now_ms=broker.now_ms,
        max_decompressed=broker.config.get("message.max.decompressed.bytes")))
    table = {
        ApiKey.ApiVersions: cluster.api_versions,
        ApiKey.Metadata: cluster.metadata,
        ApiKey.DescribeCluster: cluster.describe_cluster,
        ApiKey.UpdateFeatures: cluster.update_features,
        ApiKey.DescribeTopicPartitions: cluster.describe_topic_partitions,
        ApiKey.Produce: ProduceApi(access, broker.replicas, broker.quotas).produce,
        ApiKey.InitProducerId: txns.init_producer_id,
        ApiKey.AddPartitionsToTxn: txns.add_partitions_to_txn,
        ApiKey.AddOffsetsToTxn: txns.add_offsets_to_txn,
        ApiKey.EndTxn: txns.end_txn,
        ApiKey.TxnOffsetCommit: txns.txn_offset_commit,
        ApiKey.WriteTxnMarkers: txns.write_txn_markers,
        ApiKey.ListTransactions: txns.list_transactions,
        ApiKey.DescribeTransactions: txns.describe_transactions,
        ApiKey.DescribeProducers: txns.describe_producers,
        ApiKey.Fetch: fetch.fetch,
        ApiKey.ListOffsets: offsets.list_offsets,
        ApiKey.OffsetForLeaderEpoch: offsets.offset_for_leader_epoch,
        ApiKey.DeleteRecords: offsets.delete_records,
        ApiKey.CreateTopics: topics.create_topics,
        ApiKey.DeleteTopics: topics.delete_topics,
        ApiKey.CreatePartitions: topics.create_partitions,
        ApiKey.DescribeConfigs: topics.describe_configs,
        ApiKey.IncrementalAlterConfigs: topics.incremental_alter_configs,
        ApiKey.AlterConfigs: topics.alter_configs,
        ApiKey.ListConfigResources: topics.list_config_resources,
        ApiKey.FindCoordinator: groups.find_coordinator,
        ApiKey.JoinGroup: groups.join_group,
        ApiKey.SyncGroup: groups.sync_group,
        ApiKey.Heartbeat: groups.heartbeat,
        ApiKey.LeaveGroup: groups.leave_group,
        ApiKey.OffsetCommit: groups.offset_commit,
        ApiKey.OffsetFetch: groups.offset_fetch,
        ApiKey.DescribeGroups: groups.describe_groups,
        ApiKey.ListGroups: groups.list_groups,
        ApiKey.DeleteGroups: groups.delete_groups,
        ApiKey.OffsetDelete: groups.offset_delete,
        ApiKey.ConsumerGroupHeartbeat: groups.consumer_group_heartbeat,
        ApiKey.ConsumerGroupDescribe: groups.consumer_group_describe,
        ApiKey.SaslHandshake: security.sasl_handshake,
        ApiKey.SaslAuthenticate: security.sasl_authenticate,
        ApiKey.DescribeUserScramCredentials: security.describe_user_scram_credentials,
        ApiKey.AlterUserScramCredentials: security.alter_user_scram_credentials,
        ApiKey.DescribeAcls: security.describe_acls,
        ApiKey.CreateAcls: security.create_acls,
        ApiKey.DeleteAcls: security.delete_acls,
        ApiKey.DescribeClientQuotas: security.describe_client_quotas,
        ApiKey.AlterClientQuotas: security.alter_client_quotas,
        ApiKey.AlterPartitionReassignments: reassignments.alter_partition_reassignments,
        ApiKey.ListPartitionReassignments: reassignments.list_partition_reassignments,
        ApiKey.ElectLeaders: election.elect_leaders,
        ApiKey.DescribeLogDirs: log_dirs.describe_log_dirs,
        ApiKey.AlterReplicaLogDirs: log_dirs.alter_replica_log_dirs,
        ApiKey.GetTelemetrySubscriptions: telemetry.get_telemetry_subscriptions,
        ApiKey.PushTelemetry: telemetry.push_telemetry,
    }
    return {int(key): handler for key, handler in table.items()}
