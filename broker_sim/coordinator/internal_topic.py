"""What the group and transaction coordinators share: owning partitions of an internal topic.

A coordinator keeps its state in a compacted internal topic (``__consumer_offsets``,
``__transaction_state``); a key (group id, transactional id) belongs to partition
``abs(java hashCode(key)) % partitions``, and this broker coordinates the keys of
the partitions it leads and has loaded.  ``InternalTopicOwner`` holds that logic
once; a coordinator supplies ``topic`` (exists / create / partition_count /
led_partitions / partition), ``loaded``, ``default_partitions`` and
``load_partition(partition)``.
"""
from __future__ import annotations

from broker_sim.coordinator.group_records import partition_for


class InternalTopicOwner:
    topic: object
    loaded: set[int]

    @property
    def default_partitions(self) -> int:
        raise NotImplementedError

    def load_partition(self, partition) -> int:
        raise NotImplementedError

    def partition_of(self, key: str) -> int:
        count = self.topic.partition_count() if self.topic.exists() else self.default_partitions
        return partition_for(key, count)

    def is_coordinator(self, key: str) -> bool:
        if not self.topic.exists():
            # a single node coordinates every key and creates the topic on first use; in a cluster the
            # leaders of the topic's partitions coordinate, so no broker does before it exists
            return not getattr(self.topic, "replicated", False)
        return self.partition_of(key) in self.loaded

    def startup(self) -> None:
        """Load the partitions of an existing internal topic that this broker leads."""
        if self.topic.exists():
            self._load_led_partitions()

    def ensure_topic(self) -> None:
        """Create the internal topic on first use; load led partitions not loaded yet.

        The second part covers a topic that appeared without the coordinator (an auto-created topic).
        """
        if not self.topic.exists():
            self.topic.create()
            self.loaded.update(self.topic.led_partitions())  # new partitions are empty
        self._load_led_partitions()

    def _load_led_partitions(self) -> None:
        for index in self.topic.led_partitions():
            if index not in self.loaded:
                self.load_partition(self.topic.partition(index))
