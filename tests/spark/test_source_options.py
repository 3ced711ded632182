"""Every bad source option fails before any data is read, with a message naming the option and its values."""
from __future__ import annotations

import pytest
from spark_helpers import batch, stream

pytestmark = pytest.mark.spark

NOWHERE = "127.0.0.1:1"  # never contacted: validation fails first

AT_LOAD = [
    ({"subscribe": "t", "kafka.bootstrap.servers": None}, "Option 'kafka.bootstrap.servers' must be specified"),
    ({}, "One of the following options must be specified for Kafka source: assign, subscribe, subscribePattern"),
    ({"subscribe": "t", "subscribePattern": "t.*"}, "Only one of the following options can be specified"),
    ({"assign": "t:0"}, "No topicpartitions to assign as specified value for option 'assign' is 't:0'"),
    ({"assign": '{"t": 0}'}, "Option 'assign': expected e.g. {\"topicA\":[0,1]"),
    ({"subscribe": " , "}, "No topics to subscribe to as specified value for option 'subscribe'"),
    ({"subscribePattern": "("}, "Option 'subscribePattern' must be a regular expression"),
    ({"subscribe": "t", "startingOffsets": "middle"},
     "Option 'startingOffsets' must be one of earliest, latest, group"),
    ({"subscribe": "t", "startingOffsets": '{"t": [0]}'}, "Option 'startingOffsets': expected e.g."),
    ({"subscribe": "t", "startingOffsets": '{"t": {"0": -7}}'}, "offset -7 of t-0 is invalid"),
    ({"subscribe": "t", "endingOffsets": "group"}, "Option 'endingOffsets' accepts earliest, latest or a JSON"),
    ({"subscribe": "t", "startingTimestamp": "yesterday"}, "Option 'startingTimestamp': expected a single long value"),
    ({"subscribe": "t", "startingOffsetsByTimestamp": "{}x"}, "Option 'startingOffsetsByTimestamp': expected e.g."),
    ({"subscribe": "t", "startingOffsetsByTimestampStrategy": "closest"},
     "Option 'startingOffsetsByTimestampStrategy' must be one of error, latest"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "many"}, "Option 'maxOffsetsPerTrigger' must be a positive integer"),
    ({"subscribe": "t", "minOffsetsPerTrigger": "0"}, "Option 'minOffsetsPerTrigger' must be a positive integer"),
    ({"subscribe": "t", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
     "The value of minOffsetPerTrigger(10) is higher than the maxOffsetsPerTrigger(5)."),
    ({"subscribe": "t", "maxTriggerDelay": "soon"}, "Option 'maxTriggerDelay' must be a duration such as"),
    ({"subscribe": "t", "minPartitions": "0"}, "minPartitions must be positive"),
    ({"subscribe": "t", "maxRecordsPerPartition": "-1"}, "maxRecordsPerPartition must be positive"),
    ({"subscribe": "t", "failOnDataLoss": "maybe"}, "Option 'failOnDataLoss' must be true or false"),
    ({"subscribe": "t", "includeHeaders": "yes"}, "Option 'includeHeaders' must be true or false"),
    ({"subscribe": "t", "commitOffsetsToGroup": "no"}, "Option 'commitOffsetsToGroup' must be true or false"),
    ({"subscribe": "t", "groupFallback": "none"}, "Option 'groupFallback' must be one of earliest, latest, error"),
    ({"subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not supported."),
    ({"subscribe": "t", "kafka.key.deserializer": "x"}, "Kafka option 'key.deserializer' is not supported as keys"),
    ({"subscribe": "t", "kafka.value.deserializer": "x"}, "Kafka option 'value.deserializer' is not supported as"),
    ({"subscribe": "t", "kafka.enable.auto.commit": "true"}, "Kafka option 'enable.auto.commit' is not supported"),
    ({"subscribe": "t", "kafka.interceptor.classes": "x"}, "Kafka option 'interceptor.classes' is not supported"),
    ({"subscribe": "t", "kafka.isolation.level": "dirty"},
     "Option 'kafka.isolation.level' must be one of read_committed, read_uncommitted"),
    ({"subscribe": "t", "kafka.security.protocol": "SASL"},
     "Option 'kafka.security.protocol' must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({"subscribe": "t", "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-256"},
     "kafka.security.protocol=SASL_SSL needs credentials"),
    ({"subscribe": "t", "kafka.request.timeout.ms": "soon"}, "Option 'kafka.request.timeout.ms' must be an integer"),
]

IN_BATCH = [
    ({"subscribe": "t", "startingOffsets": "latest"}, "starting offset can't be latest for batch queries on Kafka"),
    ({"subscribe": "t", "startingOffsets": '{"t": {"0": -1}}'}, "startingOffsets for t-0 can't be latest"),
    ({"subscribe": "t", "startingOffsets": "group"}, "startingOffsets=group is only valid in streaming queries"),
    ({"subscribe": "t", "endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries on Kafka"),
    ({"subscribe": "t", "endingOffsets": '{"t": {"0": -2}}'}, "ending offset for t-0 can't be earliest"),
    ({"subscribe": "t", "startingOffsets": '{"t": {"0": 5}}', "endingOffsets": '{"t": {"1": 9}}'},
     "Different topic partitions in starting offsets and ending offsets"),
    ({"subscribe": "t", "startingOffsets": '{"t": {"0": 9}}', "endingOffsets": '{"t": {"0": 5}}'},
     "The start offset (9) for t-0 is greater than the end offset (5)"),
]

IN_STREAM = [
    ({"subscribe": "t", "endingOffsets": "latest"}, "ending offset not valid in streaming queries"),
    ({"subscribe": "t", "endingTimestamp": "1000"}, "ending timestamp not valid in streaming queries"),
]


def _with_bootstrap(options):
    options = dict(options)
    bootstrap = options.pop("kafka.bootstrap.servers", NOWHERE)
    return bootstrap, {k: v for k, v in options.items() if v is not None}


@pytest.mark.parametrize("options, message", AT_LOAD, ids=[m[:40] for _, m in AT_LOAD])
def test_bad_option_fails_at_load(spark, options, message):
    bootstrap, options = _with_bootstrap(options)
    reader = spark.read.format("pylog")
    if bootstrap:
        reader = reader.option("kafka.bootstrap.servers", bootstrap)
    with pytest.raises(Exception) as failure:
        reader.options(**options).load()
    assert message in str(failure.value)


@pytest.mark.parametrize("options, message", IN_BATCH, ids=[m[:40] for _, m in IN_BATCH])
def test_bad_batch_option_fails_before_reading(spark, options, message):
    with pytest.raises(Exception) as failure:
        batch(spark, NOWHERE, **options).collect()
    assert message in str(failure.value)


@pytest.mark.parametrize("options, message", IN_STREAM, ids=[m[:40] for _, m in IN_STREAM])
def test_bad_stream_option_fails_the_query_before_any_batch(spark, options, message):
    query = stream(spark, NOWHERE, **options).writeStream.format("noop").start()
    try:
        with pytest.raises(Exception) as failure:
            query.awaitTermination(60)
        assert message in str(failure.value)
        assert query.recentProgress == []
    finally:
        query.stop()
