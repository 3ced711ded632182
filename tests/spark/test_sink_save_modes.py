"""What a user meets writing a batch with each save mode, as the README's sink section says: Spark refuses the
default (ErrorIfExists) and Ignore before pylog is asked and suggests Append or Overwrite; pylog refuses
Overwrite naming ``mode("append")``; nothing reaches the topic until the write appends."""
from __future__ import annotations

import pytest

from tests.spark.sink_helpers import read_topic
from tests.spark.spark_helpers import create_topic


def test_each_refused_save_mode_leads_to_append_and_writes_nothing(spark, pylog_broker):
    bootstrap = pylog_broker.bootstrap_servers
    create_topic(bootstrap, "save-modes", partitions=1)
    df = spark.createDataFrame([("a",)], "value STRING")

    def writer():
        return df.write.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("topic", "save-modes")

    for mode, spark_name in ((None, "ErrorIfExists"), ("ignore", "Ignore"), ("error", "ErrorIfExists")):
        with pytest.raises(Exception) as raised:
            (writer() if mode is None else writer().mode(mode)).save()
        assert "UNSUPPORTED_DATA_SOURCE_SAVE_MODE" in str(raised.value) and f'"{spark_name}"' in str(raised.value)
    with pytest.raises(Exception) as raised:  # what Spark's message suggests besides Append
        writer().mode("overwrite").save()
    assert 'does not support save mode Overwrite' in str(raised.value)
    assert 'df.write.format("pylog").mode("append").save()' in str(raised.value)
    assert read_topic(bootstrap, "save-modes", isolation="read_uncommitted", timeout_s=5) == []
    writer().mode("append").save()
    assert [value for _, _, value, _ in read_topic(bootstrap, "save-modes")] == [b"a"]
