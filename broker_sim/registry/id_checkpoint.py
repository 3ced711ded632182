"""``IdCheckpoint``: the highest schema id a broker has ever seen, kept beside ``_schemas`` in its data dir.

Theory of operation.  Ids must never be reused: a record framed with id 7 must never resolve to a schema
registered after schema 7 was lost.  The ``_schemas`` log keeps the high-water mark as long as the log
itself is intact (``state``: every SCHEMA record, and pylog's ID_HIGH_WATER record written with each
permanent delete).  What the log cannot keep is a mark that outlives the log: a topic deleted and created
again, a log truncated by recovery, or records removed under the registry all leave a replay that starts
from a lower id.  So every broker that replays ``_schemas`` also writes the highest id it has applied to
``<data dir>/schema-registry-id-checkpoint`` (a Kafka-style checkpoint: version 0, one entry, replaced
atomically and fsynced, ``storage/checkpoint.py``), and the service never assigns an id at or below it.

1. ``value``: the mark read at start (0 when there is no file; an unreadable file is logged and read as 0,
   as Kafka's log manager resets a checkpoint it cannot read);
2. ``raise_to(n)``: writes ``n`` when it is above the mark.  It is called after the records are applied,
   before the registration that assigned the id is answered, so an answered id is on disk twice (in the
   log, and here).  A failed write is logged and keeps the mark in memory: the log still holds the id.

Confluent keeps ids monotonic through the log alone (``IncrementalIdGenerator``, or its ZooKeeper and
Kafka id batches); this file is pylog's guard for the cases above.
"""
from __future__ import annotations

import logging
from pathlib import Path

from broker_sim.storage.checkpoint import read_checkpoint, write_checkpoint

log = logging.getLogger(__name__)

FILE_NAME = "schema-registry-id-checkpoint"
VERSION = 0


class IdCheckpoint:
    """The id high-water mark of one broker's registry, in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / FILE_NAME
        self.value = self._read()

    def _read(self) -> int:
        try:
            entries = read_checkpoint(self.path, VERSION)
            if entries is None:
                return 0
            if len(entries) != 1 or not entries[0].isdigit():
                raise ValueError(f"{self.path}: expected one id, found {entries[:3]!r}")
            return int(entries[0])
        except ValueError as exc:
            log.warning("schema registry: %s; the id high-water mark starts from the log alone", exc)
            return 0

    def raise_to(self, value: int) -> None:
        """Keep ``value`` as the mark when it is higher (written before this returns)."""
        if value <= self.value:
            return
        self.value = value
        try:
            write_checkpoint(self.path, VERSION, [str(value)])
        except OSError as exc:
            log.error("schema registry: writing %s failed (%r); the mark %d is kept in memory", self.path,
                      exc, value)
