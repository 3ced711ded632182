"""The sink's default partitioner: Kafka's murmur2 (Java vectors, kafka-python) and sticky null keys."""
from __future__ import annotations

import random

import pyarrow as pa
import pytest
from kafka.partitioner.default import murmur2 as reference

from connector.sink.partitioner import DefaultPartitioner, murmur2

# Utils.murmur2 in Kafka's UtilsTest (signed Java ints).
JAVA_VECTORS = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
                b"a-little-bit-longer-string": -1486304829,
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, b"abc": 479470107}


def test_murmur2_matches_kafkas_java_vectors():
    keys = list(JAVA_VECTORS)
    hashed = murmur2(pa.array(keys, pa.binary()))
    assert [int(h) - (1 << 32) if h >= 1 << 31 else int(h) for h in hashed] == list(JAVA_VECTORS.values())


@pytest.mark.parametrize("seed", range(3))
def test_murmur2_matches_kafka_python_for_every_length_and_slices(seed):
    rng = random.Random(seed)
    keys = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 70))) for _ in range(2000)]
    array = pa.array(keys, pa.binary())
    assert murmur2(array).tolist() == [reference(k) for k in keys]
    assert murmur2(array.slice(123, 400)).tolist() == [reference(k) for k in keys[123:523]]
    strings = pa.array([k.hex() for k in keys], pa.string())
    assert murmur2(strings).tolist() == [reference(k.hex().encode()) for k in keys]


def test_keyed_rows_go_to_positive_murmur2_modulo_partitions():
    keys = [f"user-{i}".encode() for i in range(500)]
    got = DefaultPartitioner().partitions("t", 7, len(keys), pa.array(keys, pa.binary()))
    assert got.tolist() == [(reference(k) & 0x7FFFFFFF) % 7 for k in keys]


def test_explicit_partition_wins_and_null_partition_falls_back():
    keys = pa.array([b"a", b"b", None, b"c"], pa.binary())
    explicit = pa.array([5, None, None, 0], pa.int32())
    got = DefaultPartitioner(random.Random(1)).partitions("t", 6, 4, keys, explicit).tolist()
    assert got[0] == 5 and got[3] == 0
    assert got[1] == (reference(b"b") & 0x7FFFFFFF) % 6


def test_null_keys_stick_to_one_partition_per_batch_and_move_on():
    partitioner = DefaultPartitioner(random.Random(7))
    first = partitioner.partitions("t", 4, 50).tolist()
    second = partitioner.partitions("t", 4, 50).tolist()
    assert len(set(first)) == 1 and len(set(second)) == 1
    assert second[0] == (first[0] + 1) % 4


@pytest.mark.parametrize("seed", range(2))
def test_the_compiled_keyed_step_matches_kafka_python_with_nulls_slices_and_every_tail(seed):
    from connector.sink import _arrow_batches
    from connector.sink.partitioner import _compiled_partitions

    rng = random.Random(seed)
    keys = [None if rng.random() < 0.1 else bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40)))
            for _ in range(3000)]
    array = pa.array(keys, pa.binary())

    def expected(subset, partitions):
        return [-1 if k is None else (reference(k) & 0x7FFFFFFF) % partitions for k in subset]

    for partitions in (1, 7, 50):
        assert _compiled_partitions(array, partitions).tolist() == expected(keys, partitions)
        sliced = _compiled_partitions(array.slice(1001, 777), partitions)
        assert sliced.tolist() == expected(keys[1001:1778], partitions)
    strings = pa.array([None if k is None else k.hex() for k in keys], pa.string())
    assert _compiled_partitions(strings, 13).tolist() == expected(
        [None if k is None else k.hex().encode() for k in keys], 13)
    # the partitioner uses it: a null key takes the batch's sticky partition, the others their hash
    got = DefaultPartitioner(random.Random(5)).partitions("t", 7, len(keys), array)
    sticky = random.Random(5).randrange(7)
    assert got.tolist() == [sticky if e < 0 else e for e in expected(keys, 7)]
    with pytest.raises(ValueError, match="shorter than its length"):
        _arrow_batches.partitions((None, b"\0" * 8, b"", 0, 5), 3)
