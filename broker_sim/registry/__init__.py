"""The Schema Registry: Confluent's REST API v1 over the compacted ``_schemas`` topic, and the record checks
of broker-side schema validation.  A layer beside the coordinators: it may import storage, replication,
controller, security, coordinator, config, errors and protocol; never server, tools, testing, bench or local.
"""
