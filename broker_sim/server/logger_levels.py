"""The broker's loggers as Kafka's BROKER_LOGGER config resource (KIP-412) shows and changes them.

Theory of operation: DescribeConfigs on resource type 8 lists every logger this process has created (Python's
``logging`` registry, plus ``root``) with its effective level under Kafka's level names; IncrementalAlterConfigs
SETs a logger's level, or DELETEs it so the logger follows its parent again (Kafka resets it to the root's
level; a Python logger without its own level *is* the root's, unless a parent between has one). The rules are
Kafka's ``ConfigAdminManager.validateLogLevelConfigs``, in its order:

1. APPEND and SUBTRACT are not allowed (INVALID_REQUEST).
2. The logger must exist (INVALID_CONFIG).
3. A SET level must be one of ``LEVELS`` (INVALID_CONFIG).
4. The root logger's level cannot be removed (INVALID_REQUEST).

Kafka has TRACE and ALL below DEBUG and OFF above FATAL; Python has none of them, so they are the numbers
``LEVELS`` gives, and a level between two names is shown as the lower one (Python's NOTSET never shows: the
effective level is described).
"""
from __future__ import annotations

import logging

import kafka.errors as Errors

from broker_sim.controller.metadata import MetadataError

ROOT = "root"
SET, DELETE = 0, 1
# Kafka's log4j level names, most verbose first, with the Python level each stands for
LEVELS = {"ALL": 1, "TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 1}


def _logger(name: str) -> logging.Logger | None:
    if name == ROOT:
        return logging.getLogger()
    existing = logging.Logger.manager.loggerDict.get(name)
    return existing if isinstance(existing, logging.Logger) else None


def level_name(level: int) -> str:
    """The Kafka name of a Python level: the most severe name at or below it."""
    return max((number, name) for name, number in LEVELS.items() if number <= max(level, 1))[1]


def loggers() -> list[tuple[str, str]]:
    """(logger, level) for the root and every logger created in this process, by name."""
    names = [name for name, item in logging.Logger.manager.loggerDict.items() if isinstance(item, logging.Logger)]
    return [(ROOT, level_name(logging.getLogger().getEffectiveLevel()))] + [
        (name, level_name(logging.getLogger(name).getEffectiveLevel())) for name in sorted(names)]


def check(changes) -> None:
    """MetadataError with Kafka's code for the first change (``name``, ``config_operation``, ``value``) Kafka
    would refuse."""
    for change in changes:
        name, operation, value = change.name, change.config_operation, change.value
        if operation not in (SET, DELETE):
            raise MetadataError(Errors.InvalidRequestError,
                                f"Operation {operation} is not allowed for the broker logger config {name}")
        if _logger(name) is None:
            raise MetadataError(Errors.InvalidConfigurationError, f"Logger {name} does not exist!")
        if operation == SET and value not in LEVELS:
            raise MetadataError(Errors.InvalidConfigurationError,
                                f"Cannot set the log level of {name} to {value} as it is not a supported log level. "
                                f"Valid log levels are {', '.join(LEVELS)}")
        if operation == DELETE and name == ROOT:
            raise MetadataError(Errors.InvalidRequestError, "Removing the log level of the root logger is not allowed")


def apply(changes) -> None:
    """Set (or unset) each logger's level; ``check`` them first."""
    for change in changes:
        logger = _logger(change.name)
        logger.setLevel(LEVELS[change.value] if change.config_operation == SET else logging.NOTSET)
