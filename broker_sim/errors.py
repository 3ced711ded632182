"""Turning exceptions into Kafka error codes: the one mapping, for handlers and ReplicaManager alike.

Errors travel as kafka-python exceptions (they carry Kafka's error codes) up to
where a request's answer is built; ``error_of`` turns one into the
(code, message) a response carries for a partition or topic.
"""
from __future__ import annotations

import logging

import kafka.errors as Errors

from broker_sim.controller.metadata import MetadataError

log = logging.getLogger(__name__)


def error_of(exc: BaseException) -> tuple[int, str]:
    """(error code, message) for an exception raised while serving one partition or topic."""
    if isinstance(exc, MetadataError):
        return exc.error.errno, exc.message
    if isinstance(exc, Errors.KafkaError) and getattr(exc, "errno", None) is not None:
        return exc.errno, str(exc) or exc.description
    log.exception("unexpected error while serving a request")
    return Errors.KafkaStorageError.errno if isinstance(exc, OSError) else Errors.UnknownError.errno, repr(exc)
