"""Where a record without an explicit partition goes: the Java client's default partitioner, vectorised.

Theory of operation: Kafka's ``BuiltInPartitioner`` sends a keyed record to
``toPositive(murmur2(key)) % numPartitions`` (``toPositive`` is ``& 0x7fffffff``),
so the same key lands in the same partition whichever client wrote it.
``murmur2`` here is Kafka's ``Utils.murmur2`` over a whole Arrow binary column
at once: keys are grouped by length and each group is hashed as an
``(n, length)`` uint8 matrix with numpy's wrapping uint32 arithmetic, 4 bytes per
step for every key of the group; ``DefaultPartitioner`` hands a string/binary key
column to the C extension ``_arrow_batches.partitions`` instead when it is built
(one pass, no copy). ``kafka.partitioner.default.murmur2`` (kafka-python,
pure Python) is the per-key reference the tests compare against, next to
vectors from Kafka's ``UtilsTest``.

Records with a null key use the sticky partitioner's idea (KIP-480): all
null-keyed records of one Arrow batch go to one partition, and the next batch
moves on to the next partition, starting from a random one per task, so a
task fills few, large record batches and tasks spread over partitions.
"""
from __future__ import annotations

import random

import numpy as np

_SEED = 0x9747B28C
_M = np.uint32(0x5BD1E995)


def murmur2(keys) -> np.ndarray:
    """Kafka's murmur2 of every key of an Arrow binary/string array (nulls hash as empty), as uint32."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(keys)
    out = np.zeros(n, dtype=np.uint32)
    if n == 0:
        return out
    if pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
        keys = keys.cast(pa.binary())
    keys = keys.fill_null(b"") if keys.null_count else keys
    lengths = pc.binary_length(keys).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.asarray(keys.buffers()[1]).view(np.int32 if keys.type == pa.binary() else np.int64)
    offsets = offsets[keys.offset:keys.offset + n].astype(np.int64)
    data = np.frombuffer(keys.buffers()[2], dtype=np.uint8) if keys.buffers()[2] is not None \
        else np.zeros(0, dtype=np.uint8)
    for length in np.unique(lengths):
        rows = np.nonzero(lengths == length)[0]
        out[rows] = _murmur2_same_length(data, offsets[rows], int(length))
    return out


def _murmur2_same_length(data: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    if length:
        matrix = data[starts[:, None] + np.arange(length)[None, :]].astype(np.uint32)
    else:
        matrix = np.zeros((len(starts), 0), dtype=np.uint32)
    h = np.full(len(starts), (_SEED ^ length) & 0xFFFFFFFF, dtype=np.uint32)
    whole = length // 4
    for i in range(whole):
        k = (matrix[:, 4 * i] | (matrix[:, 4 * i + 1] << 8) | (matrix[:, 4 * i + 2] << 16)
             | (matrix[:, 4 * i + 3] << 24))
        k *= _M
        k ^= k >> np.uint32(24)
        k *= _M
        h *= _M
        h ^= k
    tail = length & 3
    base = whole * 4
    if tail == 3:
        h ^= matrix[:, base + 2] << 16
    if tail >= 2:
        h ^= matrix[:, base + 1] << 8
    if tail >= 1:
        h ^= matrix[:, base]
        h *= _M
    h ^= h >> np.uint32(13)
    h *= _M
    h ^= h >> np.uint32(15)
    return h


class DefaultPartitioner:
    """Partitions for one task's records: explicit ones, murmur2 of the key, or a sticky choice for null keys."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}

    def partitions(self, topic: str, num_partitions: int, n: int, keys=None, explicit=None) -> np.ndarray:
        """int32 partition of each of ``n`` rows. ``keys``: Arrow binary/string array or None; ``explicit``: Arrow
        int array (nulls: no explicit partition) or None."""
        sticky = self._next_sticky(topic, num_partitions)
        result = np.full(n, sticky, dtype=np.int64)
        if keys is not None and keys.null_count < n:
            compiled = _compiled_partitions(keys, num_partitions)
            if compiled is not None:
                result = np.where(compiled < 0, sticky, compiled).astype(np.int64) if keys.null_count else compiled
                keys = None
        if keys is not None and keys.null_count < n:
            hashed = (murmur2(keys) & np.uint32(0x7FFFFFFF)).astype(np.int64) % num_partitions
            if keys.null_count:
                valid = np.asarray(keys.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
                result[valid] = hashed[valid]
            else:
                result = hashed
        if explicit is not None and explicit.null_count < n:
            given = explicit.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            valid = np.asarray(explicit.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            result = np.where(valid, given, result)
        return result.astype(np.int32)

    def _next_sticky(self, topic: str, num_partitions: int) -> int:
        previous = self._sticky.get(topic)
        chosen = self._rng.randrange(num_partitions) if previous is None else (previous + 1) % num_partitions
        self._sticky[topic] = chosen
        return chosen


def _compiled_partitions(keys, num_partitions: int):
    """int32 partition of every key from ``_arrow_batches.partitions`` (-1 for a null key), or None when the
    extension is not built or the column is not a string/binary one with 32-bit offsets."""
    import pyarrow as pa
    try:
        from connector.sink import _arrow_batches
    except ImportError:
        return None
    if not (pa.types.is_string(keys.type) or pa.types.is_binary(keys.type)):
        return None
    validity, offsets, data = keys.buffers()
    if data is None:
        data = pa.py_buffer(b"")
    spec = (validity if keys.null_count else None), offsets, data, keys.offset, len(keys)
    return np.frombuffer(_arrow_batches.partitions(spec, num_partitions), dtype=np.int32)
