"""Partition logs on disk: segments, indexes, checkpoints, recovery, record validation, retention, compaction,
the broker-wide LRU of open segment files, and log directories (JBOD: placement, moves).

Imports broker_sim.config and nothing else of the broker: never replication/, coordinator/, controller/, server/.
"""

from broker_sim.storage.batch import BatchHeader, parse_batches, stamp_batches
from broker_sim.storage.leader_epoch import LeaderEpochCache
from broker_sim.storage.log import AppendInfo, FileRegion, LogConfig, PartitionLog
from broker_sim.storage.producer_state import DuplicateBatch, ProducerEntry, ProducerStateManager

__all__ = [
    "AppendInfo",
    "BatchHeader",
    "DuplicateBatch",
    "FileRegion",
    "LeaderEpochCache",
    "LogConfig",
    "PartitionLog",
    "ProducerEntry",
    "ProducerStateManager",
    "parse_batches",
    "stamp_batches",
]
