"""Turning exceptions into Kafka error codes: the one mapping, for handlers and ReplicaManager alike.

Errors travel as kafka-python exceptions (they carry Kafka's error codes) up to
where a request's answer is built; ``error_of`` turns one into the
(code, message) a response carries for a partition or topic.

A cluster member's metadata store is ZooKeeper: a write that meets kazoo's connection or session loss (the
controller's session expired while the broker was frozen or starved) is NOT_CONTROLLER, as Kafka answers
when its controller is gone, so clients find the controller again and retry instead of failing on
UNKNOWN_SERVER_ERROR.
"""
from __future__ import annotations

import logging
import sys

import kafka.errors as Errors

from broker_sim.controller.metadata import MetadataError

log = logging.getLogger(__name__)


def error_of(exc: BaseException) -> tuple[int, str]:
    """(error code, message) for an exception raised while serving one partition or topic."""
    if isinstance(exc, MetadataError):
        return exc.error.errno, exc.message
    if isinstance(exc, Errors.KafkaError) and getattr(exc, "errno", None) is not None:
        return exc.errno, str(exc) or exc.description
    if _metadata_store_lost(exc):
        log.warning("the metadata store could not be reached: %r", exc)
        return Errors.NotControllerError.errno, f"the metadata store (ZooKeeper) could not be reached: {exc!r}"
    log.exception("unexpected error while serving a request")
    return Errors.KafkaStorageError.errno if isinstance(exc, OSError) else Errors.UnknownError.errno, repr(exc)


def _metadata_store_lost(exc: BaseException) -> bool:
    """kazoo's connection or session loss (only a process that imported kazoo can have raised one)."""
    kazoo = sys.modules.get("kazoo.exceptions")
    return kazoo is not None and isinstance(exc, (kazoo.ConnectionLoss, kazoo.SessionExpiredError,
                                                  kazoo.ConnectionClosedError))
