"""Only the C extension lives here; every other piece of metadata is in pyproject.toml.

``connector.typed._avro_arrow`` decodes Avro payloads straight into Arrow buffers (see
connector/typed/avro_arrow.py). It is optional: without a compiler the build skips it and the connector
uses the per-record fastavro decoder.

``connector.source._records_arrow`` decodes uncompressed Kafka record batches straight into the source's Arrow
buffers (see connector/source/arrow_records.py); also optional: without it aiokafka's reader is used."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("connector.typed._avro_arrow", ["connector/typed/_avro_arrow.c"], optional=True,
                             extra_compile_args=["-O2"]),
                   Extension("connector.source._records_arrow", ["connector/source/_records_arrow.c"], optional=True,
                             extra_compile_args=["-O2"])])
