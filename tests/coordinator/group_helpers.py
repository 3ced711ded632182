"""Coordinator test helpers: internal topics as partitions in a directory, join requests.

No sockets and no sleeps: time moves only when a test advances the clock (the kit's ``ManualClock``).
"""
from __future__ import annotations

from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from broker_sim.coordinator.group.metadata import JoinRequest
from broker_sim.replication.partition import Partition
from broker_sim.storage.log import LogConfig
from broker_sim.testing.clock import ManualClock

START_MS = 1_700_000_000_000
SESSION_MS = 10_000
REBALANCE_MS = 30_000


class DirInternalTopic:
    """A coordinator's internal topic as real partitions in a directory; ``reopen`` simulates a broker restart."""

    def __init__(self, name: str, directory, partitions: int, clock: ManualClock) -> None:
        self.name = name
        self.directory = directory
        self.count = partitions
        self.clock = clock
        self.partitions: dict[int, Partition] | None = None
        self.led: set[int] | None = None  # partitions this broker leads (None: all)

    def exists(self) -> bool:
        return self.partitions is not None

    def partition_count(self) -> int:
        return self.count

    def create(self) -> None:
        self.partitions = {i: self._open(i) for i in range(self.count)}

    def partition(self, index: int) -> Partition:
        return self.partitions[index]

    def led_partitions(self) -> list[int]:
        return [i for i in self.partitions if self.led is None or i in self.led]

    def reopen(self) -> None:
        self.close()
        self.create()

    def close(self) -> None:
        for partition in (self.partitions or {}).values():
            partition.close()

    def _open(self, index: int) -> Partition:
        return Partition(self.name, index, self.directory / f"{self.name}-{index}",
                         LogConfig.from_topic_configs({"cleanup.policy": "compact"}), broker_id=0, now_ms=self.clock)


def subscription(*topics: str) -> bytes:
    return bytes(ConsumerProtocolSubscription(version=0, topics=list(topics), user_data=None).encode())


def join_request(member_id: str = "", *, instance_id: str | None = None, protocols=None, session_ms: int = SESSION_MS,
                 rebalance_ms: int = REBALANCE_MS, client_id: str = "client", v4: bool = True) -> JoinRequest:
    return JoinRequest(member_id=member_id, group_instance_id=instance_id, client_id=client_id,
                       client_host="/127.0.0.1", session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
                       protocol_type="consumer",
                       protocols=tuple(protocols or (("range", subscription("events")),)),
                       require_known_member_id=v4)
