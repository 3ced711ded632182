"""Producer id allocation shared by the brokers of a cluster, through ZooKeeper.

Theory of operation: Kafka's ZooKeeper-era ``ZkProducerIdManager``.  Producer
ids must be unique across the whole cluster, since any broker may become a
producer's transaction coordinator.  ``/latest_producer_id_block`` holds the
last block handed out (``{"version":1,"broker":id,"block_start":"0",
"block_end":"999"}``, end inclusive).  A broker that needs ids reads it, writes
the next 1000 (start = previous end + 1) conditional on the znode version it
read, and retries from the read when another broker won the race: a block is
owned by exactly one broker.  Ids of a block a broker did not use before it
stopped are skipped, never reused.
"""
from __future__ import annotations

import threading

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker_sim.controller import zk_layout as layout
from broker_sim.coordinator.producer_ids import BLOCK_SIZE, ProducerIdManager

LONG_MAX = 2**63 - 1
MAX_CLAIM_ATTEMPTS = 100


class ProducerIdsExhaustedError(RuntimeError):
    """Kafka's "Have exhausted all producerIds."."""


class ZkProducerIdManager(ProducerIdManager):
    """``next_id()`` from blocks claimed in ZooKeeper.  Thread-safe; blocks (one ZooKeeper round trip or a
    few) once per BLOCK_SIZE ids."""

    def __init__(self, zk: KazooClient, broker_id: int, block_size: int = BLOCK_SIZE) -> None:
        # ProducerIdManager.__init__ is not called: the block lives in ZooKeeper, not in the data dir.
        self.zk = zk
        self.broker_id = broker_id
        self.block_size = block_size
        self._next = 0
        self._block_end = 0  # exclusive
        self._lock = threading.Lock()

    def next_id(self) -> int:
        with self._lock:
            if self._next >= self._block_end:
                block = self._claim_block()
                self._next, self._block_end = block.block_start, block.block_end + 1
            producer_id = self._next
            self._next += 1
            return producer_id

    def _claim_block(self) -> layout.ProducerIdBlock:
        for _ in range(MAX_CLAIM_ATTEMPTS):
            try:
                data, stat = self.zk.get(layout.PRODUCER_ID_BLOCK)
            except NoNodeError:
                data, stat = None, None
            start = layout.decode_producer_id_block(data).block_end + 1 if data else 0
            if start > LONG_MAX - self.block_size:
                raise ProducerIdsExhaustedError("Have exhausted all producerIds.")
            block = layout.ProducerIdBlock(self.broker_id, start, start + self.block_size - 1)
            encoded = layout.encode_producer_id_block(block)
            try:
                if stat is None:
                    self.zk.create(layout.PRODUCER_ID_BLOCK, encoded, makepath=True)
                else:
                    self.zk.set(layout.PRODUCER_ID_BLOCK, encoded, version=stat.version)
                return block
            except (BadVersionError, NodeExistsError):
                continue  # another broker claimed this block first: read again
        raise RuntimeError(f"broker {self.broker_id} could not claim a producer id block in "
                           f"{MAX_CLAIM_ATTEMPTS} attempts: {layout.PRODUCER_ID_BLOCK} kept changing")
