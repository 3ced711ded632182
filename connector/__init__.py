"""The Spark data source "pylog": Kafka-protocol topics into Spark (``connector.source``)."""
