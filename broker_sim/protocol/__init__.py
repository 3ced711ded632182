"""The Kafka wire protocol: request framing and memory (``framing``), the API version table, the one blocking
framed-request client (``client``), zero-copy splicing, request validation and the Produce fast path
(``produce_codec``: v3-v9 read and answered without kafka-python's schema objects).

Imports nothing of pylog: the connector, the tools and the broker all stand on it.
"""
