"""Reading: the stream and batch readers (driver), offset planning, and the executors' Fetch into Arrow.

Imports only ``connector.options``/``wire``/``error_codes``, ``broker_sim.lazy_packages`` (below) and
``broker_sim.protocol.records`` (the one definition of a record, by which the source reads records): never
``connector.sink``, ``connector.datasource`` (which builds the readers) nor broker_sim's broker side.
"""
from broker_sim.lazy_packages import defer_package_init

# Spark's Python workers import this package before anything of kafka-python (the data source's classes live
# here and in connector.datasource, which imports it): the driver's offset reader and the executors' readers use
# only kafka's protocol messages, error codes and record batches (connector.wire), so kafka's __init__, which
# imports its admin client, consumer, producer and network stack (~0.2 s), runs only if a client is asked for
# (connector.admin, the sink's log topic). Nothing in the connector imports kafka.cluster directly, the one
# module that cannot be imported first under the deferral (broker_sim.lazy_packages).
defer_package_init("kafka")
# kafka.protocol.consumer's __init__ builds the classes of Fetch, the group APIs, ListOffsets and the consumer
# protocol (~40 ms). Here each submodule loads alone, at the first lookup of a name of it, trying them in this
# order (a lookup imports the leaves before its own): a driver (ListOffsets, OffsetFetch/OffsetCommit) never
# builds Fetch's classes, which only executors need (connector.wire imports them in ``fetch``).
defer_package_init("kafka.protocol.consumer", tuple((f"kafka.protocol.consumer.{leaf}", None)
                                                    for leaf in ("offsets", "group", "metadata", "fetch")))
