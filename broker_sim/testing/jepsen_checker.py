"""The checker of the Jepsen-style cluster workload: a pure function of the history a run recorded.

Example::

    result = check(History.from_json(text))    # JSON-able dict; result["valid"] is the verdict

The workload (:mod:`broker_sim.testing.jepsen_workload`) records a :class:`History` and never decides
validity; the checker never touches the cluster (``batch_digests`` reads replica segment files the
workload hands it).

Checks (:func:`check`), each counted and with a few examples:

* ``lost``: acknowledged, but not in the final read;
* ``duplicated``: a value that occurs more than once in the final read, unless
  its copies were written under different epochs of one producer id (below);
* ``wrong_offset``: acknowledged at one (partition, offset), found at another
  (an acknowledgement without an offset -- librdkafka's implicit ack of a batch
  whose successor was acknowledged -- is only checked for presence);
* ``nonmonotonic``: final-read offsets of a partition not strictly increasing;
* ``reordered``: a producer's values in a partition out of send order;
* ``unexpected``: a value in the log that no producer sent;
* ``lost_reads``: a consumer observed (partition, offset, value) that the final
  read does not hold at that offset -- it saw data that was later lost;
* ``nonmonotonic_polls`` / ``skipped_reads``: within one run of a consumer,
  offsets went backwards or jumped over records the final read holds;
* ``divergent``: partitions whose replicas' logs differ after healing.
  Replicas are compared batch by batch from the ``.log`` segment files in each
  broker's partition directory: (base offset, last offset, partition leader
  epoch, CRC32C, size, producer id, producer epoch, base sequence) of every
  batch, the CRC32C computed here over the bytes the batch CRC covers
  (attributes to the end: every record byte). The other fields are the ones
  the broker stamps, so equal digests mean equal logs; segment boundaries
  (which may differ between brokers) do not matter.

A broker deduplicates an idempotent producer's retries by (producer id,
epoch, sequence) within one epoch; a new epoch starts at sequence 0 and
cannot be told from new records (Kafka's protocol). librdkafka bumps the epoch
to recover from some errors (KIP-360: a sequence gap, a message timeout) and
then sends again, renumbered, the messages it had not seen acknowledged, also
those that were already written -- duplicates its maintainers document for the
idempotent (non-transactional) producer (librdkafka#4953). A duplicate whose
copies the replica logs show under different epochs of one producer id is
such a *client* duplicate: counted in ``client_duplicated``, with examples,
and not an anomaly. A copy written twice within one epoch, or one whose
producer fields are unknown, is ``duplicated``.

``valid`` is true when every anomaly count is zero, something was
acknowledged, the final read reached every partition's high watermark and the
cluster healed. Indeterminate values are reported, never held against the
cluster.

A run is *inconclusive* (not valid, with the reasons in ``inconclusive``) when
it lacks the evidence the checks need, so that a quiet run cannot pass as a
good one: a partition written but never observed by its consumer, a
partition whose replicas were not all compared (fewer logs than the
replication factor), or a fault window -- from one fault to the next, the last
to the end of the workload -- in which fewer than ``min_acked_per_fault``
writes were acknowledged.
"""
from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from crc32c import crc32c

EXAMPLES = 10
ANOMALIES = ("lost", "duplicated", "wrong_offset", "nonmonotonic", "reordered", "unexpected",
             "lost_reads", "nonmonotonic_polls", "skipped_reads", "divergent")

# RecordBatch v2 header: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
# (broker_sim/storage/batch.py reads the same 61 bytes)
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_LOG_OVERHEAD = 12
_CRC_COVERS_FROM = 21  # the batch CRC32C covers attributes .. end of the batch
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


# --------------------------------------------------------------------------- the history

@dataclass
class History:
    """Everything a run observed; the checker's only input. JSON-able via :meth:`to_json`.

    * ``sends``: value -> [producer, seq, partition] for every value handed to a producer;
    * ``acks``: value -> [partition, offset] from successful delivery reports;
    * ``send_errors``: value -> error text of failed deliveries (indeterminate);
    * ``polls``: consumer observations, a list of *runs*; a run is the
      [partition, offset, value] records one consumer read without re-seeking;
    * ``final``: partition -> [[offset, value], ...] of the final read, in order;
    * ``final_complete``: the final read reached each partition's high watermark;
    * ``replica_logs``: partition -> broker -> batch digests (see the module docstring);
    * ``healed``: the cluster was back to full ISRs before the final read;
    * ``events``: nemesis and workload events (dicts with a ``t`` in seconds);
    * ``ack_times``: value -> ``t`` of its delivery report (fault windows count acknowledgements by it);
    * ``replication_factor``: replicas per partition (0: unknown, taken as the most replica logs read).
    """
    sends: dict[str, list] = field(default_factory=dict)
    acks: dict[str, list] = field(default_factory=dict)
    send_errors: dict[str, str] = field(default_factory=dict)
    polls: list[list[list]] = field(default_factory=list)
    final: dict[int, list[list]] = field(default_factory=dict)
    final_complete: bool = True
    replica_logs: dict[int, dict[int, list[list]]] = field(default_factory=dict)
    healed: bool = True
    events: list[dict] = field(default_factory=list)
    ack_times: dict[str, float] = field(default_factory=dict)
    replication_factor: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "History":
        data = json.loads(text)
        data["final"] = {int(p): v for p, v in data.get("final", {}).items()}
        data["replica_logs"] = {int(p): {int(b): d for b, d in brokers.items()}
                                for p, brokers in data.get("replica_logs", {}).items()}
        return cls(**data)


def value_of(producer: str, seq: int) -> str:
    return f"{producer}/{seq}"


def parse_value(value: str) -> tuple[str, int] | None:
    """(producer, seq) of a workload value, None if it is not one."""
    producer, sep, seq = value.rpartition("/")
    if not sep or not seq.isdigit():
        return None
    return producer, int(seq)


# --------------------------------------------------------------------------- the checker

# a fault window (one fault to the next) with fewer acknowledged writes than this proves nothing about it
MIN_ACKED_PER_FAULT = 10


def check(history: History, *, min_acked_per_fault: int = MIN_ACKED_PER_FAULT) -> dict:
    """Check *history*; return a JSON-able result (see the module docstring for each count)."""
    found: dict[str, list[tuple[int, int]]] = {}
    at: dict[int, dict[int, str]] = {}
    examples: dict[str, list] = {name: [] for name in ANOMALIES}
    counts = {name: 0 for name in ANOMALIES}

    def anomaly(name: str, example) -> None:
        counts[name] += 1
        if len(examples[name]) < EXAMPLES:
            examples[name].append(example)

    for partition, records in sorted(history.final.items()):
        by_offset = at.setdefault(partition, {})
        previous = None
        for offset, value in records:
            if previous is not None and offset <= previous:
                anomaly("nonmonotonic", {"partition": partition, "offset": offset, "after": previous})
            previous = offset
            by_offset.setdefault(offset, value)
            found.setdefault(value, []).append((partition, offset))

    client_duplicates: list[dict] = []
    for value, places in found.items():
        if len(places) > 1:
            written_as = [_written_as(history.replica_logs.get(p, {}), o) for p, o in places]
            example = {"value": value, "at": [list(p) for p in places], "written_as": written_as}
            if _epoch_bump_copies(written_as):
                client_duplicates.append(example)
            else:
                anomaly("duplicated", example)
        if value not in history.sends:
            anomaly("unexpected", {"value": value, "at": list(places[0])})

    for value, (partition, offset) in history.acks.items():
        places = found.get(value)
        if not places:
            anomaly("lost", {"value": value, "acked_at": [partition, offset]})
        elif offset is None or offset < 0:
            # librdkafka's implicit ack: a later batch of the idempotent producer was acknowledged, so
            # this one was persisted too, but its offset is unknown (delivered with an invalid offset)
            continue
        elif (partition, offset) not in places:
            anomaly("wrong_offset", {"value": value, "acked_at": [partition, offset],
                                     "found_at": [list(p) for p in places]})

    _check_order(history, examples, counts)
    _check_polls(history, at, anomaly)

    for partition, replicas in sorted(history.replica_logs.items()):
        difference = replica_difference(replicas)
        if difference is not None:
            anomaly("divergent", {"partition": partition, **difference})

    read = sum(len(records) for records in history.final.values())
    indeterminate = [v for v in history.sends if v not in history.acks]
    problems = [f"{counts[name]} {name}" for name in ANOMALIES if counts[name]]
    if not history.acks:
        problems.append("no write was acknowledged")
    if not history.final_complete:
        problems.append("the final read did not reach every partition's high watermark")
    if not history.healed:
        problems.append("the cluster did not heal (full ISRs) before the final read")
    observed = sum(len(run) for run in history.polls)
    inconclusive = _missing_evidence(history, min_acked_per_fault)
    problems += [f"inconclusive: {reason}" for reason in inconclusive]
    return {
        "valid": not problems,
        "problems": problems,
        "inconclusive": inconclusive,
        "acked_per_fault_window": _acked_per_fault_window(history),
        "sent": len(history.sends),
        "acked": len(history.acks),
        "indeterminate": len(indeterminate),
        "indeterminate_read": sum(1 for v in indeterminate if v in found),
        "acked_without_offset": sum(1 for _, offset in history.acks.values() if offset is None or offset < 0),
        "client_duplicated": len(client_duplicates),
        "client_duplicate_examples": client_duplicates[:EXAMPLES],
        "send_errors": len(history.send_errors),
        "read": read,
        "consumer_observations": observed,
        "consumer_runs": len(history.polls),
        **counts,
        "partitions": {str(p): len(records) for p, records in sorted(history.final.items())},
        "replicas_compared": {str(p): sorted(r) for p, r in sorted(history.replica_logs.items())},
        "faults": sum(1 for e in history.events if e.get("fault")),
        "examples": {name: ex for name, ex in examples.items() if ex},
        "send_error_examples": sorted(set(history.send_errors.values()))[:EXAMPLES],
    }


def _fault_windows(history: History) -> list[tuple[float, float, str]]:
    """(start, end, fault) from each fault to the next one (the last to the end of the workload)."""
    # the last window runs to the end of the workload (producers keep writing through the final heal): a
    # fault that starts a moment before the nemesis stops has no time of its own to show acknowledged writes
    faults = [e for e in history.events if e.get("fault")]
    return [(f["t"], faults[i + 1]["t"] if i + 1 < len(faults) else float("inf"), str(f["fault"]))
            for i, f in enumerate(faults)]


def _acked_per_fault_window(history: History) -> list[int]:
    times = sorted(history.ack_times.values())
    return [sum(1 for t in times if start <= t < end) for start, end, _ in _fault_windows(history)]


def _missing_evidence(history: History, min_acked_per_fault: int) -> list[str]:
    """Why the history cannot support a verdict (empty: it can)."""
    reasons = []
    written = sorted({int(send[2]) for send in history.sends.values() if len(send) > 2})
    observed: dict[int, int] = {}
    for run in history.polls:
        for partition, _offset, _value in run:
            observed[partition] = observed.get(partition, 0) + 1
    unobserved = [p for p in written if not observed.get(p)]
    if unobserved:
        reasons.append(f"no consumer observation of partitions {unobserved} that were written")
    expected = history.replication_factor or max((len(r) for r in history.replica_logs.values()), default=0)
    if expected < 2:
        reasons.append(f"replica logs compared: at most {expected} per partition, so nothing was compared")
    else:
        short = {p: sorted(history.replica_logs.get(p, {})) for p in written
                 if len(history.replica_logs.get(p, {})) < expected}
        if short:
            reasons.append(f"not every replica's log was compared (replication factor {expected}): "
                           + ", ".join(f"partition {p} had {r}" for p, r in short.items()))
    windows = _fault_windows(history)
    if windows and history.acks and not history.ack_times:
        reasons.append("faults were injected but no acknowledgement times were recorded")
    elif windows:
        thin = [(round(start, 2), fault, acked) for (start, _end, fault), acked
                in zip(windows, _acked_per_fault_window(history)) if acked < min_acked_per_fault]
        if thin:
            reasons.append(f"fault windows with fewer than {min_acked_per_fault} acknowledged writes "
                           f"(t, fault, acked): {thin[:EXAMPLES]}")
    return reasons


def _check_order(history: History, examples: dict, counts: dict) -> None:
    """Each producer's values in each partition must appear in send (seq) order."""
    for partition, records in sorted(history.final.items()):
        last: dict[str, tuple[int, int, str]] = {}
        seen: set[str] = set()
        for offset, value in sorted(records, key=lambda r: r[0]):
            parsed = parse_value(value)
            if parsed is None or value in seen:  # a second copy is counted as duplicated, not reordered
                continue
            seen.add(value)
            producer, seq = parsed
            previous = last.get(producer)
            if previous is not None and seq <= previous[0]:
                counts["reordered"] += 1
                if len(examples["reordered"]) < EXAMPLES:
                    examples["reordered"].append({"partition": partition, "value": value, "offset": offset,
                                                  "after": previous[2], "after_offset": previous[1]})
            if previous is None or seq > previous[0]:
                last[producer] = (seq, offset, value)


def _check_polls(history: History, at: dict[int, dict[int, str]], anomaly: Callable) -> None:
    """Consumer observations against the final read: no lost reads, no going back, no skips."""
    for run_index, run in enumerate(history.polls):
        previous: dict[int, int] = {}
        for partition, offset, value in run:
            final_value = at.get(partition, {}).get(offset)
            if final_value != value:
                anomaly("lost_reads", {"run": run_index, "partition": partition, "offset": offset,
                                       "read": value, "final": final_value})
            before = previous.get(partition)
            if before is not None:
                if offset <= before:
                    anomaly("nonmonotonic_polls", {"run": run_index, "partition": partition,
                                                   "offset": offset, "after": before})
                else:
                    skipped = [o for o in range(before + 1, offset) if o in at.get(partition, {})]
                    if skipped:
                        anomaly("skipped_reads", {"run": run_index, "partition": partition, "from": before,
                                                  "to": offset, "skipped_offsets": skipped[:5]})
            previous[partition] = offset


def replica_difference(replicas: dict[int, list]) -> dict | None:
    """None when every replica's batch digests are equal, else where the first differs."""
    if len(replicas) < 2:
        return None
    items = sorted(replicas.items())
    reference_id, reference = items[0]
    for broker_id, digests in items[1:]:
        if [list(d) for d in digests] == [list(d) for d in reference]:
            continue
        index = next((i for i, (a, b) in enumerate(zip(reference, digests)) if list(a) != list(b)),
                     min(len(reference), len(digests)))
        return {"brokers": [reference_id, broker_id], "batches": [len(reference), len(digests)],
                "first_difference": index,
                "batch": [list(reference[index]) if index < len(reference) else None,
                          list(digests[index]) if index < len(digests) else None],
                "end_offsets": [end_offset(reference), end_offset(digests)]}
    return None


def _written_as(replicas: dict[int, list], offset: int) -> list[int] | None:
    """[producer id, producer epoch, sequence] of the record at ``offset`` in the first replica's digests that
    carry producer fields, None when unknown (no digest covers it, or digests from before those fields)."""
    for _, digests in sorted(replicas.items()):
        for digest in digests:
            if len(digest) >= 8 and digest[0] <= offset <= digest[1]:
                producer_id, producer_epoch, base_sequence = digest[5:8]
                return [producer_id, producer_epoch, base_sequence + offset - digest[0] if base_sequence >= 0 else -1]
    return None


def _epoch_bump_copies(written_as: list) -> bool:
    """The copies of one value were written by one idempotent producer id, each under a different epoch."""
    if any(w is None or w[0] < 0 for w in written_as):
        return False
    return len({w[0] for w in written_as}) == 1 and len({w[1] for w in written_as}) == len(written_as)


def end_offset(digests: list) -> int:
    """The offset after a replica's last batch (0 for an empty log)."""
    return digests[-1][1] + 1 if digests else 0


# --------------------------------------------------------------------------- reading replica logs

def batch_digests(partition_dir: str | os.PathLike) -> list[list[int]]:
    """[base offset, last offset, partition leader epoch, CRC32C, size, producer id, producer epoch, base
    sequence] of each batch in the partition's ``.log`` segments, in offset order. A torn batch at the end of
    the last segment (a write in progress) ends the list."""
    directory = Path(partition_dir)
    segments = sorted((int(m.group(1)), p) for p in directory.iterdir() if (m := _SEGMENT_NAME.match(p.name)))
    digests: list[list[int]] = []
    for _, path in segments:
        data = path.read_bytes()
        position = 0
        while position + _BATCH_HEADER.size <= len(data):
            (base, length, epoch, _magic, _crc, _attributes, last_delta, _first_ts, _max_ts, producer_id,
             producer_epoch, base_sequence, _count) = _BATCH_HEADER.unpack_from(data, position)
            size = length + _LOG_OVERHEAD
            if length <= 0 or position + size > len(data):
                break
            crc = crc32c(memoryview(data)[position + _CRC_COVERS_FROM:position + size])
            digests.append([base, base + last_delta, epoch, crc, size, producer_id, producer_epoch, base_sequence])
            position += size
    return digests


def replica_logs(partition_dirs: dict[int, Path]) -> dict[int, list[list[int]]]:
    """{broker id: batch digests} for the given partition directories."""
    return {broker_id: batch_digests(path) for broker_id, path in partition_dirs.items()}
