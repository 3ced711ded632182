"""Only the C extensions live here; every other piece of metadata is in pyproject.toml.

``connector.typed._avro_arrow`` decodes Avro payloads straight into Arrow buffers (see
connector/typed/avro_arrow.py). It is optional: without a compiler the build skips it and the connector
uses the per-record fastavro decoder.

``broker_sim.storage._records`` walks a record batch's records without a Python object per record (see
broker_sim/storage/_records.c); optional too: without it the validator walks them with aiokafka's reader.

``connector.source._records_arrow`` decodes uncompressed Kafka record batches straight into the source's Arrow
buffers (see connector/source/arrow_records.py), ``connector.sink._arrow_batches`` encodes the sink's Arrow
columns into record batches (connector/sink/producer.py); both optional: without them aiokafka's reader and
builder are used."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("connector.typed._avro_arrow", ["connector/typed/_avro_arrow.c"], optional=True,
                             extra_compile_args=["-O2"]),
                   Extension("broker_sim.storage._records", ["broker_sim/storage/_records.c"], optional=True,
                             extra_compile_args=["-O2"]),
                   Extension("connector.source._records_arrow", ["connector/source/_records_arrow.c"], optional=True,
                             extra_compile_args=["-O2"]),
                   Extension("connector.sink._arrow_batches", ["connector/sink/_arrow_batches.c"], optional=True,
                             extra_compile_args=["-O2"])])
