"""Thin request handlers: decode is done, call the owner of the concept, build the response.

Each handler is ``async def handler(broker, ctx, request) -> response``; the
table below binds them to API keys for the dispatcher.
"""
from __future__ import annotations

from functools import partial

from kafka.protocol.api_key import ApiKey

from broker_sim.server.handlers import cluster, fetch, groups, offsets, produce, security, topics, transactions


def build_handlers(broker) -> dict:
    table = {
        ApiKey.ApiVersions: cluster.api_versions,
        ApiKey.Metadata: cluster.metadata,
        ApiKey.DescribeCluster: cluster.describe_cluster,
        ApiKey.Produce: produce.produce,
        ApiKey.InitProducerId: transactions.init_producer_id,
        ApiKey.AddPartitionsToTxn: transactions.add_partitions_to_txn,
        ApiKey.AddOffsetsToTxn: transactions.add_offsets_to_txn,
        ApiKey.EndTxn: transactions.end_txn,
        ApiKey.TxnOffsetCommit: transactions.txn_offset_commit,
        ApiKey.WriteTxnMarkers: transactions.write_txn_markers,
        ApiKey.ListTransactions: transactions.list_transactions,
        ApiKey.DescribeTransactions: transactions.describe_transactions,
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
        ApiKey.SaslHandshake: security.sasl_handshake,
        ApiKey.SaslAuthenticate: security.sasl_authenticate,
        ApiKey.DescribeUserScramCredentials: security.describe_user_scram_credentials,
        ApiKey.AlterUserScramCredentials: security.alter_user_scram_credentials,
        ApiKey.DescribeAcls: security.describe_acls,
        ApiKey.CreateAcls: security.create_acls,
        ApiKey.DeleteAcls: security.delete_acls,
        ApiKey.DescribeClientQuotas: security.describe_client_quotas,
        ApiKey.AlterClientQuotas: security.alter_client_quotas,
    }
    return {int(key): partial(handler, broker) for key, handler in table.items()}

