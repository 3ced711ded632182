"""The Kafka wire protocol: request framing and memory (``framing``), the API version table, the one blocking
framed-request client (``client``), zero-copy splicing and request validation.

Imports nothing of pylog: the connector, the tools and the broker all stand on it.
"""
