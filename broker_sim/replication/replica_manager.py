"""The partitions this broker hosts, by (topic, index) (Kafka's ``ReplicaManager`` + ``LogManager``).

Theory of operation: partition directories live directly in the data dir as
``<topic>-<index>``, Kafka's layout.  The manager opens every partition of
every known topic at start (recovery runs inside ``PartitionLog``), creates
directories for new topics and partitions, and deletes a topic by renaming
its directories to ``<topic>-<index>.<id>-delete`` (atomic) before removing
them, so a crash mid-delete leaves a marked directory that the next start
removes instead of a half-deleted partition.  ``enforce_retention`` and
``maybe_roll`` are called periodically by the broker.  Runs on the broker's
event loop thread; no locks.  ``clean_logs`` (compaction) is awaited by the
broker's cleaner task and does its heavy part in a worker thread.
"""
from __future__ import annotations

import logging
import shutil
import uuid
from pathlib import Path
from typing import Callable, Iterator

import kafka.errors as Errors

from broker_sim.config import BrokerConfig
from broker_sim.controller.metadata import TopicInfo
from broker_sim.replication.partition import Partition
from broker_sim.storage.log import LogConfig

log = logging.getLogger(__name__)
DELETE_SUFFIX = "-delete"


class ReplicaManager:
    def __init__(self, data_dir: Path, config: BrokerConfig, *, broker_id: int,
                 now_ms: Callable[[], int]) -> None:
        self.data_dir = data_dir
        self.config = config
        self.broker_id = broker_id
        self.now_ms = now_ms
        self.partitions: dict[tuple[str, int], Partition] = {}
        for stale in data_dir.glob("*" + DELETE_SUFFIX):
            log.info("removing %s left by an interrupted topic deletion", stale.name)
            shutil.rmtree(stale, ignore_errors=True)

    def log_config(self, topic: TopicInfo) -> LogConfig:
        return LogConfig.from_topic_configs(self.config.effective_topic_configs(topic.configs))

    def open_topic(self, topic: TopicInfo, first_partition: int = 0) -> None:
        config = self.log_config(topic)
        for index in range(first_partition, topic.partitions):
            directory = self.data_dir / f"{topic.name}-{index}"
            partition = Partition(topic.name, index, directory, config,
                                  broker_id=self.broker_id, now_ms=self.now_ms)
            if partition.log.recovered_bytes_truncated:
                log.warning("%s: recovery truncated %d bytes of a torn or corrupt tail",
                            partition, partition.log.recovered_bytes_truncated)
            self.partitions[(topic.name, index)] = partition

    def reconfigure(self, topic: TopicInfo) -> None:
        config = self.log_config(topic)
        for index in range(topic.partitions):
            self.partitions[(topic.name, index)].log.config = config

    def get(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise Errors.UnknownTopicOrPartitionError(f"this broker hosts no partition {topic}-{index}")
        return partition

    def topic_partitions(self, topic: str) -> Iterator[Partition]:
        index = 0
        while (topic, index) in self.partitions:
            yield self.partitions[(topic, index)]
            index += 1

    def delete_topic(self, topic: TopicInfo) -> None:
        for index in range(topic.partitions):
            partition = self.partitions.pop((topic.name, index), None)
            if partition is not None:
                partition.close()
            directory = self.data_dir / f"{topic.name}-{index}"
            if directory.exists():
                marked = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
                directory.rename(marked)
                shutil.rmtree(marked, ignore_errors=True)

    def enforce_retention(self) -> int:
        expiration_ms = self.config.get("producer.id.expiration.ms")
        return sum(p.enforce_retention(expiration_ms) for p in list(self.partitions.values()))

    async def clean_logs(self) -> None:
        """One log-cleaner pass over the partitions whose cleanup.policy contains compact; logs each clean."""
        for partition in list(self.partitions.values()):
            if not partition.log.config.compact or partition.log.closed:
                continue
            try:
                result = await partition.clean()
            except Exception:  # one partition's failure must not stop the others being cleaned
                log.exception("cleaning %s failed", partition)
                continue
            if result is not None:
                log.info("cleaned %s offsets %d..%d: %d -> %d bytes, %d records removed, %d -> %d segments",
                         partition, result.first_dirty_offset, result.end_offset, result.bytes_before,
                         result.bytes_after, result.records_removed, result.segments_before, result.segments_after)

    def maybe_roll(self) -> None:
        for partition in list(self.partitions.values()):
            partition.log.maybe_roll()

    def flush(self) -> None:
        for partition in list(self.partitions.values()):
            partition.log.flush()

    def close(self) -> None:
        for partition in self.partitions.values():
            try:
                partition.close()
            except Exception:  # one bad partition must not stop the others from closing cleanly
                log.exception("closing %s failed", partition)
        self.partitions.clear()
