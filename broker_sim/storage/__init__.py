"""On-disk storage of partition logs: Kafka's segment, index and checkpoint formats.

The broker calls :class:`PartitionLog` (one per partition directory),
:class:`LeaderEpochCache` and :class:`ProducerStateManager`; the other modules
are the layers underneath (batch headers, segments, indexes, checkpoint files).
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
