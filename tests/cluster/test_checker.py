"""The Jepsen-style checker on synthetic histories: a clean history is valid, and every kind of
anomaly is detected and counted (no cluster, no sockets)."""
from __future__ import annotations

import copy
import json

import pytest

from broker_sim.testing.jepsen_checker import ANOMALIES, History, batch_digests, check, parse_value, value_of


def clean_history(partitions: int = 3, producers: int = 2, per_producer: int = 30) -> History:
    """Producers interleave round-robin over partitions; everything acked, read, replicated."""
    history = History()
    next_offset = {p: 0 for p in range(partitions)}
    final = {p: [] for p in range(partitions)}
    for seq in range(per_producer):
        for index in range(producers):
            name = f"p{index}.0"
            value = value_of(name, seq)
            partition = (seq + index) % partitions
            offset = next_offset[partition]
            next_offset[partition] += 1
            history.sends[value] = [name, seq, partition]
            history.acks[value] = [partition, offset]
            final[partition].append([offset, value])
    history.final = final
    history.polls = [[[p, o, v] for o, v in records] for p, records in final.items()]
    history.replica_logs = {p: {b: [[o, o, 0, 1000 + o, 80] for o, _ in final[p]] for b in (0, 1, 2)}
                            for p in final}
    return history


def assert_only(result: dict, anomaly: str, count: int = 1) -> None:
    assert result["valid"] is False
    assert result[anomaly] == count, result
    others = {name: result[name] for name in ANOMALIES if name != anomaly and result[name]}
    assert not others, others
    assert f"{count} {anomaly}" in result["problems"]
    assert result["examples"][anomaly]


def test_clean_history_is_valid():
    result = check(clean_history())
    assert result["valid"] is True, result
    assert result["problems"] == []
    assert result["acked"] == result["sent"] == result["read"] == 60
    assert all(result[name] == 0 for name in ANOMALIES)
    json.dumps(result)  # JSON-able


def test_indeterminate_values_may_or_may_not_appear():
    history = clean_history()
    in_log, missing = value_of("p0.0", 3), value_of("p1.0", 29)
    del history.acks[in_log]                       # delivery error, but the write happened
    history.send_errors[in_log] = "_MSG_TIMED_OUT: timed out"
    partition, offset = history.acks.pop(missing)  # never acknowledged, never written
    history.final[partition] = [r for r in history.final[partition] if r[1] != missing]
    history.polls = [[r for r in run if r[2] != missing] for run in history.polls]
    history.replica_logs[partition] = {b: d[:-1] for b, d in history.replica_logs[partition].items()}
    result = check(history)
    assert result["valid"] is True, result
    assert result["indeterminate"] == 2 and result["indeterminate_read"] == 1


def test_lost_acknowledged_write():
    history = clean_history()
    lost = value_of("p1.0", 29)
    partition, _ = history.acks[lost]
    history.final[partition] = [r for r in history.final[partition] if r[1] != lost]
    history.polls = [[r for r in run if r[2] != lost] for run in history.polls]
    result = check(history)
    assert_only(result, "lost")
    assert result["examples"]["lost"][0]["value"] == lost


def test_duplicate_in_the_log():
    history = clean_history()
    records = history.final[0]
    records.append([records[-1][0] + 1, records[3][1]])
    assert_only(check(history), "duplicated")


def _duplicate_written_as(first: list[int], again: list[int]) -> tuple[History, str]:
    """clean_history with a value of partition 0 written again at its end; the replica digests carry the
    producer fields of both copies (``first``/``again``: [producer id, producer epoch, sequence])."""
    history = clean_history()
    records = history.final[0]
    copy_offset, value = records[3]
    again_offset = records[-1][0] + 1
    records.append([again_offset, value])
    for digests in history.replica_logs[0].values():
        for digest in digests:
            digest.extend([-1, -1, -1])
            if digest[0] == copy_offset:
                digest[5:8] = first
        digests.append([again_offset, again_offset, 1, 99, 80, *again])
    return history, value


def test_a_value_written_again_under_a_bumped_producer_epoch_is_a_client_duplicate():
    """librdkafka's KIP-360 epoch bump renumbers a possibly written message (sequence 0 of the new epoch): no
    broker can tell it from a new record, so it is the client's duplicate, reported but not an anomaly.
    Mutation: _epoch_bump_copies returning False -> "1 duplicated" and not valid."""
    history, value = _duplicate_written_as([7, 0, 5], [7, 1, 0])
    result = check(history)
    assert result["valid"] is True, result
    assert result["duplicated"] == 0 and result["client_duplicated"] == 1
    assert result["client_duplicate_examples"][0]["value"] == value
    assert result["client_duplicate_examples"][0]["written_as"] == [[7, 0, 5], [7, 1, 0]]


@pytest.mark.parametrize("first, again", [
    ([7, 0, 5], [7, 0, 9]),    # one epoch: the broker's dedup must have caught a retry
    ([7, 0, 5], [7, 0, 5]),    # the same batch written twice
    ([7, 0, 5], [8, 0, 0]),    # two producer ids: not an epoch bump
    ([-1, -1, -1], [-1, -1, -1]),  # not idempotent: nothing proves whose duplicate it is
])
def test_a_duplicate_within_one_epoch_or_of_unknown_origin_is_the_brokers(first, again):
    history, _ = _duplicate_written_as(first, again)
    assert_only(check(history), "duplicated")


def test_acknowledged_at_another_offset():
    history = clean_history()
    value = history.final[1][5][1]
    history.acks[value] = [1, 6]
    assert_only(check(history), "wrong_offset")


def test_reordered_producer_values():
    history = clean_history(producers=1)
    records = history.final[0]
    (o1, v1), (o2, v2) = records[2], records[3]
    records[2], records[3] = [o1, v2], [o2, v1]
    history.acks[v1], history.acks[v2] = [0, o2], [0, o1]
    history.polls = [[[p, o, v] for o, v in rs] for p, rs in history.final.items()]
    assert_only(check(history), "reordered")


def test_final_read_offsets_going_backwards():
    history = clean_history()
    records = history.final[2]
    records[4], records[5] = records[5], records[4]
    assert_only(check(history), "nonmonotonic")


def test_value_nobody_sent():
    history = clean_history()
    records = history.final[0]
    records.append([records[-1][0] + 1, "ghost/1"])
    assert_only(check(history), "unexpected")


def test_consumer_saw_data_that_was_later_lost():
    history = clean_history()
    last_offset = history.final[0][-1][0]
    history.polls[0].append([0, last_offset + 1, value_of("p0.1", 0)])  # read, then truncated away
    history.sends[value_of("p0.1", 0)] = ["p0.1", 0, 0]
    result = check(history)
    assert_only(result, "lost_reads")
    assert result["examples"]["lost_reads"][0]["final"] is None


def test_consumer_saw_a_different_value_at_an_offset():
    history = clean_history()
    partition, offset, value = history.polls[1][2]
    history.polls[1][2] = [partition, offset, history.polls[1][3][2]]
    history.polls[1][3] = [partition, history.polls[1][3][1], value]
    result = check(history)
    assert result["valid"] is False and result["lost_reads"] == 2


def test_consumer_offsets_going_backwards_in_one_run():
    history = clean_history()
    history.polls[0].append(list(history.polls[0][1]))
    assert_only(check(history), "nonmonotonic_polls")


def test_a_new_run_after_a_reseek_may_reread():
    history = clean_history()
    history.polls.append([list(r) for r in history.polls[0][5:]])
    assert check(history)["valid"] is True


def test_consumer_skipped_committed_records():
    history = clean_history()
    del history.polls[2][4:6]
    assert_only(check(history), "skipped_reads")


def test_divergent_replicas():
    history = clean_history()
    digests = history.replica_logs[1][2]
    digests[7] = [digests[7][0], digests[7][1], 1, 4242, 80]
    result = check(history)
    assert_only(result, "divergent")
    example = result["examples"]["divergent"][0]
    assert example["partition"] == 1 and example["brokers"] == [0, 2] and example["first_difference"] == 7


def test_replica_missing_the_tail_is_divergent():
    history = clean_history()
    history.replica_logs[0][1] = history.replica_logs[0][1][:-2]
    result = check(history)
    assert_only(result, "divergent")
    assert result["examples"]["divergent"][0]["batches"] == [20, 18]


@pytest.mark.parametrize("change, problem", [
    (lambda h: (h.acks.clear(), setattr(h, "final", {}), setattr(h, "polls", []), h.replica_logs.clear()),
     "no write was acknowledged"),
    (lambda h: setattr(h, "final_complete", False), "the final read did not reach every partition's high watermark"),
    (lambda h: setattr(h, "healed", False), "the cluster did not heal (full ISRs) before the final read"),
])
def test_inconclusive_runs_are_not_valid(change, problem):
    history = clean_history()
    change(history)
    result = check(history)
    assert result["valid"] is False and problem in result["problems"]


def faulted_history(acked_in_windows=(20, 20)) -> History:
    """The clean history with two fault windows (t 0-10, 10-20; the nemesis stops at 20) and ack times
    putting ``acked_in_windows[i]`` acknowledgements in window i (the rest after the nemesis stopped)."""
    history = clean_history()
    history.replication_factor = 3
    history.events += [{"t": 0.0, "fault": "kill", "broker": 1}, {"t": 10.0, "fault": "pause", "broker": 2},
                       {"t": 20.0, "nemesis_stopped": True}]
    values = list(history.acks)
    times = [1.0] * acked_in_windows[0] + [11.0] * acked_in_windows[1]
    times += [25.0] * (len(values) - len(times))
    history.ack_times = dict(zip(values, times))
    return history


def test_a_faulted_run_with_evidence_everywhere_is_valid():
    result = check(faulted_history())
    assert result["valid"] is True, result
    # the last window runs to the end of the workload: its 20 plus the 20 acknowledged after the nemesis
    assert result["inconclusive"] == [] and result["acked_per_fault_window"] == [20, 40]


def test_a_fault_just_before_the_nemesis_stops_counts_the_writes_after_it():
    """Seen in the 5x runs: the last pause began 1 s before the nemesis stopped; counting only to the stop
    made a clean run inconclusive."""
    history = faulted_history((20, 0))
    history.events[-2]["t"] = 19.9  # the second fault starts just before the stop at 20
    assert check(history)["valid"] is True


@pytest.mark.parametrize("change, reason", [
    # a consumer that observed nothing of a partition (here: of any partition)
    (lambda h: setattr(h, "polls", []), "no consumer observation of partitions [0, 1, 2]"),
    (lambda h: setattr(h, "polls", [r for r in h.polls if r[0][0] != 1]), "no consumer observation of partitions [1]"),
    # one replica's log, or none, for a partition of a replication-factor-3 topic
    (lambda h: h.replica_logs.__setitem__(0, {0: h.replica_logs[0][0]}), "not every replica's log was compared"),
    (lambda h: h.replica_logs.pop(2), "partition 2 had []"),
    (lambda h: (setattr(h, "replication_factor", 0), h.replica_logs.clear()), "nothing was compared"),
    (lambda h: [h.replica_logs.__setitem__(p, {0: r[0]}) for p, r in list(h.replica_logs.items())]
     and setattr(h, "replication_factor", 0), "nothing was compared"),
    # one write acknowledged in a fault window (1 of 60 overall is the example)
    (lambda h: setattr(h, "ack_times", dict(list(faulted_history((1, 20)).ack_times.items()))),
     "fewer than 10 acknowledged writes"),
    (lambda h: setattr(h, "ack_times", {}), "no acknowledgement times were recorded"),
])
def test_a_run_without_the_evidence_is_inconclusive_not_valid(change, reason):
    """Each vacuous history (no observations, unread replicas, a fault window without acknowledged writes)
    was valid before; now it is inconclusive, naming why.
    Mutation: _missing_evidence returning [] -> every case here was valid."""
    history = faulted_history()
    change(history)
    result = check(history)
    assert result["valid"] is False, result
    assert any(reason in r for r in result["inconclusive"]), result["inconclusive"]
    assert all(result[name] == 0 for name in ANOMALIES), "inconclusive, not an anomaly"


def test_history_json_round_trip():
    history = clean_history()
    history.events.append({"t": 1.5, "fault": "kill", "broker": 1})
    again = History.from_json(history.to_json())
    assert again == history
    assert check(again) == check(copy.deepcopy(history))


def test_value_format():
    assert parse_value(value_of("p2.1", 17)) == ("p2.1", 17)
    assert parse_value("not-a-workload-value") is None


def test_batch_digests_read_segment_files(pylog_broker_factory, tmp_path):
    """Digests of a real partition directory: one per produced batch, a torn tail ignored,
    a flipped record byte changes the CRC."""
    from kafka import KafkaProducer

    broker = pylog_broker_factory(data_dir=tmp_path / "data")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=50)
    for batch in range(3):
        for i in range(5):
            producer.send("digests", f"v{batch}-{i}".encode(), partition=0)
        producer.flush()
    producer.close()
    broker.stop()
    directory = tmp_path / "data" / "digests-0"
    digests = batch_digests(directory)
    assert [(d[0], d[1]) for d in digests] == [(0, 4), (5, 9), (10, 14)]
    # kafka-python is idempotent by default: one producer id, epoch 0, sequences 0, 5, 10
    assert len({d[5] for d in digests}) == 1 and digests[0][5] >= 0
    assert [(d[6], d[7]) for d in digests] == [(0, 0), (0, 5), (0, 10)]
    segment = next(directory.glob("*.log"))
    data = bytearray(segment.read_bytes())
    segment.write_bytes(bytes(data) + bytes(data[:30]))           # a torn batch at the tail
    assert batch_digests(directory) == digests
    data[-3] ^= 0xFF                                               # a record byte of the last batch
    segment.write_bytes(bytes(data))
    changed = batch_digests(directory)
    assert changed[:2] == digests[:2] and changed[2][3] != digests[2][3]


def test_acknowledged_without_an_offset_is_checked_for_presence_only():
    """librdkafka acknowledges a batch implicitly (offset unknown) when a later one was acknowledged."""
    history = clean_history()
    present, missing = history.final[1][3][1], history.final[1][4][1]
    history.acks[present] = [1, None]
    history.acks[missing] = [1, -1001]
    history.final[1] = [r for r in history.final[1] if r[1] != missing]
    history.polls = [[r for r in run if r[2] != missing] for run in history.polls]
    result = check(history)
    assert_only(result, "lost")
    assert result["examples"]["lost"][0]["value"] == missing and result["acked_without_offset"] == 2
