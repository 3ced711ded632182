"""Producer id allocation for InitProducerId.

Theory of operation: producer ids must never repeat across restarts, or an
idempotent producer's sequence state could be confused with another's.  Like
Kafka (which reserves blocks of 1000 ids in ZooKeeper), the manager reserves
a block by persisting its end in ``pylog-producer-ids`` before handing out any
id from it; after a crash the next start skips the rest of the block.  One
fsync per 1000 producers.
"""
from __future__ import annotations

from pathlib import Path

from broker_sim.controller.metadata import write_atomically

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / "pylog-producer-ids"
        reserved = int(self._path.read_text().strip()) if self._path.exists() else 0
        self._next = reserved
        self._block_end = reserved

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            write_atomically(self._path, f"{self._block_end}\n".encode())
        producer_id = self._next
        self._next += 1
        return producer_id

