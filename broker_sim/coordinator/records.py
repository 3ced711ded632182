"""What the coordinators' records have in common: versioned messages and the batches that carry them.

Theory of operation: every key and value in ``__consumer_offsets`` and
``__transaction_state`` is one of Kafka's coordinator messages (apache/kafka's
group- and transaction-coordinator message JSONs) preceded by its int16
version.  ``message`` turns such a JSON definition into a class encoded by
kafka-python's schema codec (``StructField``), the machinery that encodes the
protocol messages; ``record_version`` and ``decode_body`` read one back and
turn whatever the codec raises for bytes that are not the message into
ValueError, so a loader can skip the record and go on.  ``build_batch`` puts
``(key, value)`` records into one uncompressed batch for an append (a
transactional one on a producer's behalf); ``iter_batches`` and
``iter_records`` read batches back, their records by the one definition of a
record (``broker_sim.protocol.records``), as Kafka reads them.

kafka-python's schema codec and record builders load at the first use (``LazyMessages`` builds a module's
message classes then): the codec and the classes are ~3 ms of CPU, the record builders ~9 ms, of a plain
broker's start, which reads and writes no coordinator record until a group or a transaction shows up.
"""
from __future__ import annotations

import io
import struct
import threading
from typing import Callable

VERSION = struct.Struct(">h")  # the int16 every key and value starts with

# what kafka-python's schema codec raises for bytes that are not the message (truncated, lying lengths,
# invalid UTF-8, a null where a value must be)
_MALFORMED = (struct.error, EOFError, IndexError, TypeError, ValueError, OverflowError)


def message(name: str, valid: str, flexible: str, fields: list[dict]) -> type:
    """The class of a message defined as in Kafka's JSON (``validVersions``, ``flexibleVersions``, ``fields``)."""
    from kafka.protocol.data_container import DataContainer
    from kafka.protocol.schemas.fields import StructField

    struct_field = StructField({"name": name, "type": "data", "validVersions": valid,
                                "flexibleVersions": flexible, "fields": fields})
    cls = type(name, (DataContainer,), {"_struct": struct_field})
    struct_field.set_data_class(cls)
    return cls


class LazyMessages:
    """A module's message classes, built by *define* (-> {name: class}, every name of *names*) at the first
    lookup of one of them, once (a lock: threads may ask together). The module's ``__getattr__`` answers with
    ``lookup``, so that ``from module import Name`` works as when the classes were built at import."""

    def __init__(self, names: tuple[str, ...], define: Callable[[], dict[str, type]]):
        self._names = frozenset(names)
        self._define = define
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> type:  # only while the classes are not built: then they are attributes
        if name not in self._names:
            raise AttributeError(name)
        with self._lock:
            if name not in vars(self):
                classes = self._define()
                assert set(classes) == self._names, sorted(set(classes) ^ self._names)
                vars(self).update(classes)
        return vars(self)[name]

    def lookup(self, module: str, name: str) -> type:
        """The class *name* for *module*'s ``__getattr__``; AttributeError for a name that is not one."""
        if name not in self._names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return getattr(self, name)


def record_version(data: bytes | None, what: str) -> int:
    """The int16 version a key or value starts with; raises ValueError for a null or too short one."""
    if data is None or len(data) < VERSION.size:
        raise ValueError(f"{what} is {'null' if data is None else f'{len(data)} bytes'}, not a versioned record")
    (version,) = VERSION.unpack_from(data)
    if version < 0:
        raise ValueError(f"{what} has negative version {version}")
    return version


def decode_body(cls, data: bytes, version: int, flexible: bool):
    """``cls`` read from ``data`` after its version; raises ValueError for bytes that are not one."""
    try:
        return cls._struct.decode(io.BytesIO(data[VERSION.size:]), version=version, compact=flexible,
                                  tagged=flexible)
    except _MALFORMED as exc:
        raise ValueError(f"malformed {cls.__name__} v{version}: {exc!r}") from exc


def build_batch(records: list[tuple[bytes, bytes | None]], timestamp_ms: int, *,
                producer: tuple[int, int] | None = None) -> bytes:
    """One uncompressed magic-2 batch of ``(key, value)`` records (value None: tombstone).

    ``producer`` (id, epoch): the batch is part of that producer's transaction
    (TxnOffsetCommit): transactional, without a sequence.
    """
    from kafka.record.default_records import DefaultRecordBatchBuilder

    producer_id, producer_epoch = producer if producer is not None else (-1, -1)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=producer is not None,
                                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                                        batch_size=2**31 - 1)
    for offset, (key, value) in enumerate(records):
        builder.append(offset, timestamp=timestamp_ms, key=key, value=value, headers=[])
    return bytes(builder.build())


def iter_batches(data: bytes):
    """The record batches in ``data`` (whole batches): kafka-python ``DefaultRecordBatch`` objects for their
    header fields, whose data records are read by the one definition of a record (:class:`DefinedBatch`)."""
    from kafka.record.memory_records import MemoryRecords

    batches = MemoryRecords(data)
    position = 0
    while batches.has_next():
        batch = batches.next_batch()
        if batch is None:
            return
        size = 12 + struct.unpack_from(">i", data, position + 8)[0]
        # control batches (markers the broker writes, never a client: Partition refuses them) keep kafka-python's
        # ControlRecord reader, whose records answer ``commit``
        defined = data[position + 16] == 2 and not batch.is_control_batch
        yield DefinedBatch(batch, memoryview(data)[position:position + size]) if defined else batch
        position += size


class DefinedBatch:
    """A v2 batch: kafka-python's ``DefaultRecordBatch`` answers for its header, its records are read as Kafka
    reads them (``validator.read_batch``, the one definition of a record: kafka-python reads the attributes byte
    as a varint, so a record a client wrote to ``_schemas`` could mean one thing to the registry and another to
    every Kafka reader). Iterating raises a KafkaError for a batch Kafka refuses."""

    def __init__(self, batch, data: memoryview):
        self._batch, self._data = batch, data

    def __getattr__(self, name: str):
        return getattr(self._batch, name)

    def __iter__(self):
        from broker_sim.storage.validator import read_batch

        return iter(read_batch(self._data))


def iter_records(data: bytes):
    """``(offset, key, value)`` of every data record in ``data`` (whole batches); control batches are skipped."""
    for batch in iter_batches(data):
        if batch.is_control_batch:
            continue
        for record in batch:
            yield record.offset, record.key, record.value
