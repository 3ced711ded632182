"""argparse value types shared by the command lines (``pylog``, ``pylog-broker``, ``pylog bench``).

Each raises ``argparse.ArgumentTypeError`` naming what was expected and what was given, so argparse reports
the option and exits 2 before anything starts.
"""
from __future__ import annotations

import argparse


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (the value may contain further ``=``); both trimmed, as Kafka's ConfigDef trims values."""
    key, found, value = text.partition("=")
    if not found or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number: {text}")
    return value
