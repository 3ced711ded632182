"""Typed records the Spark typed-column tests share: an Avro event in two versions with every logical type,
the same event as Protobuf and JSON Schema, and confluent-kafka serializers against the broker's registry."""
from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid

from confluent_kafka import Producer
from confluent_kafka.serialization import MessageField, SerializationContext

UTC = dt.timezone.utc


def _avro(fields: list[dict]) -> str:
    return json.dumps({"type": "record", "name": "Event", "namespace": "com.acme", "fields": fields})


AVRO_FIELDS_V1 = [
    {"name": "id", "type": "long"},
    {"name": "count", "type": "int"},
    {"name": "name", "type": "string"},
    {"name": "score", "type": "double"},
    {"name": "ratio", "type": "float"},
    {"name": "active", "type": "boolean"},
    {"name": "nick", "type": ["null", "string"], "default": None},
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "int"}},
    {"name": "raw", "type": "bytes"},
    {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "choice", "type": ["int", "string"]},
]
AVRO_V1 = _avro(AVRO_FIELDS_V1)
AVRO_V2 = _avro(AVRO_FIELDS_V1 + [{"name": "source", "type": "string", "default": "web"}])

AVRO_SPARK_TYPE = (
    "struct<id:bigint,count:int,name:string,score:double,ratio:float,active:boolean,nick:string,color:string,"
    "at:timestamp,at_us:timestamp,local:timestamp_ntz,day:date,price:decimal(10,2),tags:array<string>,"
    "attrs:map<string,int>,raw:binary,digest:binary,ref:string,choice:struct<member0:int,member1:string>,"
    "source:string>")


def avro_event(i: int, *, v2: bool) -> dict:
    event = {
        "id": i, "count": i * 2, "name": f"n{i}", "score": i / 4, "ratio": 0.5, "active": i % 2 == 0,
        "nick": None if i % 3 == 0 else f"nick{i}", "color": "GREEN" if i % 2 else "RED",
        "at": dt.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=UTC) + dt.timedelta(seconds=i),
        "at_us": dt.datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
        "local": dt.datetime(2026, 5, 6, 7, 8, 9, 10000),
        "day": dt.date(2026, 11, 25) + dt.timedelta(days=i),
        "price": decimal.Decimal(f"{i}.25"), "tags": [f"t{i}", "x"], "attrs": {"a": i},
        "raw": bytes([i, 0, 255]), "digest": b"\x01\x02\x03" + bytes([i]),
        "ref": str(uuid.UUID(int=i)), "choice": i if i % 2 else f"s{i}",
    }
    if v2:
        event["source"] = f"src{i}"
    return event


def expected_avro_row(i: int, *, v2: bool) -> dict:
    """What the reader (V2) gives for ``avro_event(i)``: V1 records get the default ``source``."""
    event = avro_event(i, v2=v2)
    row = dict(event)
    row["at"] = int(event["at"].timestamp() * 1_000_000)
    row["at_us"] = int(event["at_us"].timestamp() * 1_000_000)
    row["choice"] = {"member0": i, "member1": None} if i % 2 else {"member0": None, "member1": f"s{i}"}
    row["source"] = event["source"] if v2 else "web"
    return row


def produce_serialized(bootstrap: str, topic: str, items: list[tuple], *, key_serializer=None,
                       config: dict | None = None) -> None:
    """``items``: (serializer, value) pairs produced in order with confluent-kafka."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **(config or {})})
    context = SerializationContext(topic, MessageField.VALUE)
    for serializer, value in items:
        producer.produce(topic, value=serializer(value, context) if serializer else value)
    assert producer.flush(30) == 0


def produce_raw(bootstrap: str, topic: str, values: list[bytes]) -> None:
    produce_serialized(bootstrap, topic, [(None, v) for v in values])


def typed_rows(df, timestamp_fields=("at", "at_us")) -> list[dict]:
    """The ``value`` struct of each row as a dict, timestamps as UTC microseconds (independent of the
    session time zone), maps as dicts; ordered by offset."""
    from pyspark.sql import functions as F
    value = F.col("value")
    fields = [f.name for f in df.schema["value"].dataType.fields]
    columns = [(F.unix_micros(value[name]) if name in timestamp_fields else value[name]).alias(name)
               for name in fields]
    out = []
    for row in df.orderBy("partition", "offset").select(F.col("value").isNull().alias("_null"), *columns).collect():
        if row["_null"]:
            out.append(None)
            continue
        record = row.asDict(recursive=True)
        record.pop("_null")
        out.append(record)
    return out


def stream_and_batch(spark, bootstrap: str, select, **options) -> tuple[list, list]:
    """``select(df)`` rows of the same read as a stream (Trigger.AvailableNow into foreachBatch, from earliest)
    and as a batch, each ordered by offset: the tests assert both."""
    import tempfile
    from spark_helpers import batch, stream
    streamed = []

    def collect(batch_df, _batch_id):
        streamed.extend(select(batch_df.orderBy("offset")))

    query = (stream(spark, bootstrap, startingOffsets="earliest", **options).writeStream.foreachBatch(collect)
             .trigger(availableNow=True).option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-ckpt-")).start())
    assert query.awaitTermination(120), "the AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    return streamed, select(batch(spark, bootstrap, **options).orderBy("offset"))
