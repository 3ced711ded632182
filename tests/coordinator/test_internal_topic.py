"""What both coordinators do with their internal topic: place keys (Java's String.hashCode, Kafka's
partitionFor), append a batch and answer its failure with the coordinator's error, remember the append."""
from __future__ import annotations

import kafka.errors as Errors
import pytest

from broker_sim.coordinator.group.coordinator import INVALID_COMMIT_OFFSET_SIZE, NOT_COORDINATOR
from broker_sim.coordinator.group.metadata import COORDINATOR_NOT_AVAILABLE, NONE
from broker_sim.coordinator.internal_topic import UNKNOWN_SERVER_ERROR, java_string_hash, partition_for


@pytest.mark.parametrize("text,expected", [
    ("", 0),
    ("a", 97),
    ("ab", 97 * 31 + 98),
    ("group", 98629247),
    ("polygenelubricants", -2**31),  # the famous Integer.MIN_VALUE hash
    ("\U0001F600", 0xD83D * 31 + 0xDE00),  # two UTF-16 code units
    ("é", 233),
])
def test_java_string_hash(text, expected):
    assert java_string_hash(text) == expected


def test_partition_for_is_kafkas_abs_hash_mod_partitions():
    assert partition_for("group", 50) == 98629247 % 50 == 47
    assert partition_for("", 50) == 0
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    # a negative hash: abs, not Python's floor modulo
    negative = "console-consumer-" + "x" * 8
    h = java_string_hash(negative)
    assert partition_for(negative, 7) == abs(h) % 7


def test_a_key_is_placed_by_its_coordinators_partition_count(make_coordinator, offsets_topic):
    coordinator = make_coordinator()
    assert [coordinator.partition_of(key) for key in ("tx", "spark-sink-0-17", "", "polygenelubricants")] == [
        partition_for(key, offsets_topic.count) for key in ("tx", "spark-sink-0-17", "", "polygenelubricants")]


def test_an_append_is_remembered_with_its_partitions_log_end_until_taken(make_coordinator, offsets_topic):
    coordinator = make_coordinator()
    coordinator.ensure_topic()
    partition = offsets_topic.partition(coordinator.partition_of("g"))
    assert coordinator.append("g", [(b"k", b"v"), (b"k2", None)]) == NONE
    assert coordinator.append("g", [(b"k", b"w")]) == NONE
    assert coordinator.take_appended() == {partition: 3} and partition.log_end_offset == 3
    assert coordinator.take_appended() == {}


@pytest.mark.parametrize("raised,answered", [
    (Errors.NotEnoughReplicasError, COORDINATOR_NOT_AVAILABLE),
    (Errors.NotLeaderForPartitionError, NOT_COORDINATOR),
    (Errors.MessageSizeTooLargeError, INVALID_COMMIT_OFFSET_SIZE),
    (Errors.CorruptRecordError, Errors.CorruptRecordError.errno),  # not in the table: answered as it is
    (RuntimeError, UNKNOWN_SERVER_ERROR),
])
def test_a_failed_append_answers_the_coordinators_error_and_is_not_remembered(make_coordinator, offsets_topic,
                                                                            monkeypatch, raised, answered):
    coordinator = make_coordinator()
    coordinator.ensure_topic()

    def refuse(*args, **kwargs):
        raise raised("refused")

    monkeypatch.setattr(offsets_topic.partition(coordinator.partition_of("g")), "append_records", refuse)
    assert coordinator.append("g", [(b"k", b"v")]) == answered
    assert coordinator.take_appended() == {}
