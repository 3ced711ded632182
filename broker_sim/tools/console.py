"""``pylog produce`` and ``pylog consume``: records between a topic and a terminal.

Produce
-------
Each line of stdin becomes one record (the newline is not part of it)::

    $ printf 'a\\nb\\n' | pylog produce events
    $ printf 'user1:clicked\\nuser2:left\\n' | pylog produce events --key-separator :
    $ pylog produce events --value ping --count 1000 --key k --header source=cli
    $ pylog produce events --partition 2 --acks all --compression zstd < lines.txt

With ``--key-separator SEP`` the text before the first SEP is the key; a line
without SEP is an error naming the line number. ``--key`` sets one key for all
records; ``--header k=v`` (repeatable) adds headers to every record. A summary
goes to stderr: ``Produced 2 records to 'events': partition 0 last offset 41``.

Consume
-------
::

    $ pylog consume events --from-beginning --max-messages 10
    $ pylog consume events --partition 0 --offset 100 --print-offset --print-key
    $ pylog consume events --group reporting --timeout-ms 5000   # commits its offsets
    $ pylog consume events --from-beginning --format json --timeout-ms 1000

Without ``--from-beginning`` or ``--offset`` only new records are printed.
``--offset N`` starts every selected partition at N. With ``--group`` the
group's committed offsets win and ``--from-beginning`` applies only where the
group has none (as in Kafka's console consumer); consumed offsets are committed.
The consumer stops after ``--max-messages`` records, after ``--timeout-ms``
without a new record, or on Ctrl-C; it then prints ``Processed a total of N
messages`` on stderr.

Text output is ``[offset<TAB>][headers<TAB>][key<TAB>]value``, with invalid
UTF-8 shown as backslash escapes. ``--format json`` prints one object per line,
lossless::

    {"topic": "events", "partition": 0, "offset": 7, "timestamp": 1700000000000,
     "key": "user1", "value": "clicked", "headers": [{"key": "source", "value": "cli"}]}

where a key, value or header value that is not UTF-8 is ``{"base64": "..."}``.
"""

import base64
import json
import time
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from typing import TextIO

from kafka import TopicPartition
from kafka.errors import KafkaTimeoutError

from broker_sim.progress import Progress
from broker_sim.tools.clients import Connection
from broker_sim.tools.errors import ToolError

ACKS = {"0": 0, "1": 1, "all": "all"}
POLL_INTERVAL_MS = 500


@dataclass
class ProduceOptions:
    """What ``pylog produce`` sends; see the module docstring for examples."""

    topic: str
    key: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    partition: int | None = None
    acks: str = "1"
    compression: str = "none"
    key_separator: str | None = None


@dataclass
class ConsumeOptions:
    """What ``pylog consume`` reads and how it prints it."""

    topic: str
    from_beginning: bool = False
    offset: int | None = None
    partition: int | None = None
    max_messages: int | None = None
    timeout_ms: int | None = None
    group: str | None = None
    print_key: bool = False
    print_headers: bool = False
    print_offset: bool = False
    output_format: str = "text"
    isolation_level: str = "read_uncommitted"


def stdin_values(stream) -> Iterator[bytes]:
    """Lines of a binary *stream* without their line ending."""
    for line in stream:
        yield line.rstrip(b"\r\n")


def produce(conn: Connection, opts: ProduceOptions, values: Iterable[bytes],
            progress: Progress, err: TextIO) -> int:
    """Send one record per item of *values*; return the number of records sent.

    Raises ToolError for an unknown topic or partition, a line without the key
    separator, or records the broker did not acknowledge.
    """
    producer = conn.producer(
        acks=ACKS[opts.acks],
        compression_type=None if opts.compression == "none" else opts.compression,
    )
    last_offsets: dict[int, int] = {}
    failures: list[Exception] = []

    def acknowledged(metadata):
        last_offsets[metadata.partition] = max(metadata.offset, last_offsets.get(metadata.partition, -1))

    sent = 0
    with closing(producer):
        _check_partition(producer, opts)
        headers = [(k, v.encode()) for k, v in opts.headers]
        fixed_key = opts.key.encode() if opts.key is not None else None
        separator = opts.key_separator.encode() if opts.key_separator is not None else None
        for line_number, value in enumerate(values, start=1):
            key = fixed_key
            if separator is not None:
                key, found, value = value.partition(separator)
                if not found:
                    raise ToolError(f"line {line_number}: no key separator {opts.key_separator!r} found "
                                    f"(--key-separator); {sent} records were sent before it")
            future = producer.send(opts.topic, value=value, key=key, headers=headers or None,
                                   partition=opts.partition)
            future.add_callback(acknowledged).add_errback(failures.append)
            sent += 1
            progress.update(sent)
        producer.flush(timeout=max(conn.timeout_ms / 1000, 30))
    progress.finish(sent)
    if failures:
        raise ToolError(f"{len(failures)} of {sent} records to topic '{opts.topic}' failed: {failures[0]}")
    print(_produce_summary(opts, sent, last_offsets), file=err)
    return sent


def _check_partition(producer, opts: ProduceOptions) -> None:
    try:
        partitions = producer.partitions_for(opts.topic)
    except KafkaTimeoutError as exc:
        raise ToolError(f"topic '{opts.topic}' does not exist (no metadata within "
                        f"{producer.config['max_block_ms'] / 1000:g} s)") from exc
    if opts.partition is not None and opts.partition not in partitions:
        raise ToolError(f"topic '{opts.topic}' has no partition {opts.partition} "
                        f"(partitions: {', '.join(map(str, sorted(partitions)))})")


def _produce_summary(opts: ProduceOptions, sent: int, last_offsets: dict[int, int]) -> str:
    if opts.acks == "0":
        return f"Produced {sent} records to '{opts.topic}' (acks=0: offsets unknown)"
    where = ", ".join(f"partition {p} last offset {o}" for p, o in sorted(last_offsets.items()))
    return f"Produced {sent} records to '{opts.topic}'" + (f": {where}" if where else "")


def consume(conn: Connection, opts: ConsumeOptions, progress: Progress, out: TextIO, err: TextIO) -> int:
    """Print records of *opts.topic* to *out* until a stop condition; return the count."""
    consumer = conn.consumer(
        group_id=opts.group,
        enable_auto_commit=opts.group is not None,
        auto_offset_reset="earliest" if opts.from_beginning else "latest",
        isolation_level=opts.isolation_level,
    )
    count = 0
    with closing(consumer):
        _position(consumer, opts)
        idle_since = time.monotonic()
        try:
            while opts.max_messages is None or count < opts.max_messages:
                # max_records keeps the position (and so the committed offset)
                # at the last printed record when --max-messages stops early.
                wanted = None if opts.max_messages is None else opts.max_messages - count
                batches = consumer.poll(timeout_ms=POLL_INTERVAL_MS, max_records=wanted)
                records = [r for batch in batches.values() for r in batch]
                if not records:
                    if opts.timeout_ms is not None and (time.monotonic() - idle_since) * 1000 >= opts.timeout_ms:
                        break
                    continue
                idle_since = time.monotonic()
                for record in records:
                    out.write(format_record(record, opts) + "\n")
                count += len(records)
                out.flush()
                progress.update(count)
        except KeyboardInterrupt:
            pass
    progress.finish(count)
    print(f"Processed a total of {count} messages", file=err)
    return count


def _position(consumer, opts: ConsumeOptions) -> None:
    partitions = consumer.partitions_for_topic(opts.topic)
    if not partitions:
        raise ToolError(f"topic '{opts.topic}' does not exist")
    if opts.partition is not None and opts.partition not in partitions:
        raise ToolError(f"topic '{opts.topic}' has no partition {opts.partition} "
                        f"(partitions: {', '.join(map(str, sorted(partitions)))})")
    if opts.group is not None and opts.partition is None and opts.offset is None:
        consumer.subscribe([opts.topic])
        return
    chosen = [opts.partition] if opts.partition is not None else sorted(partitions)
    tps = [TopicPartition(opts.topic, p) for p in chosen]
    consumer.assign(tps)
    if opts.offset is not None:
        for tp in tps:
            consumer.seek(tp, opts.offset)
    elif opts.from_beginning and opts.group is None:
        consumer.seek_to_beginning(*tps)


def format_record(record, opts: ConsumeOptions) -> str:
    """One output line for a kafka-python ConsumerRecord (see module docstring)."""
    if opts.output_format == "json":
        return json.dumps({
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": _json_bytes(record.key),
            "value": _json_bytes(record.value),
            "headers": [{"key": k, "value": _json_bytes(v)} for k, v in record.headers or []],
        }, ensure_ascii=False)
    fields = []
    if opts.print_offset:
        fields.append(f"offset:{record.offset}")
    if opts.print_headers:
        fields.append(",".join(f"{k}:{_text(v)}" for k, v in record.headers or []) or "NO_HEADERS")
    if opts.print_key:
        fields.append(_text(record.key))
    fields.append(_text(record.value))
    return "\t".join(fields)


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="backslashreplace")


def _json_bytes(data: bytes | None):
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}

