"""A pipeline test with pylog's test kit: 1,000 Avro orders in, upper-cased items out, exactly once."""
import pytest
from pyspark.sql.functions import col, upper

from broker_sim.testing import assert_exactly_once, run_until_consumed, seed

ORDER = ('{"type": "record", "name": "Order", "fields": '
         '[{"name": "id", "type": "string"}, {"name": "item", "type": "string"}]}')


@pytest.mark.pylog_topics(orders=2, clean=2)
def test_orders_are_cleaned_exactly_once(pylog_spark, pylog_broker, pylog_topics, tmp_path):
    orders = [{"id": f"o{i}", "item": f"thing {i}"} for i in range(1000)]
    seed(pylog_broker, "orders", orders, format="avro", schema=ORDER, key="id")
    options = {"kafka.bootstrap.servers": pylog_broker.bootstrap_servers, "subscribe": "orders",
               "startingOffsets": "earliest", "valueFormat": "avro",
               "schema.registry.url": pylog_broker.schema_registry_url}
    source = pylog_spark.readStream.format("pylog").options(**options).load()
    query = (source.select("key", upper(col("value.item")).alias("value")).writeStream.format("pylog")
             .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers).option("topic", "clean")
             .option("checkpointLocation", str(tmp_path)).start())
    run_until_consumed(query, options=options)
    assert_exactly_once([(o["id"], o["item"].upper()) for o in orders], "clean", bootstrap=pylog_broker)
