"""Expected failures of the tools, and how client exceptions are worded.

An expected failure (unknown topic, broker not reachable, malformed input) is a
:class:`ToolError`: :func:`broker_sim.tools.cli.main` prints its message as one
line on stderr and exits with status 1, without a traceback. Anything else is a
bug and keeps its traceback.
"""

from kafka import errors as kafka_errors


class ToolError(Exception):
    """An expected failure; ``str(error)`` is the complete one-line message."""


BOOTSTRAP_ERRORS = (
    kafka_errors.KafkaConnectionError,
    kafka_errors.KafkaTimeoutError,
)


def connection_error(bootstrap_servers: str, timeout_ms: int) -> ToolError:
    """The error for "no broker answered at *bootstrap_servers* in time"."""
    return ToolError(
        f"cannot connect to a broker at {bootstrap_servers} "
        f"(no answer within {timeout_ms / 1000:g} s; check --bootstrap-server "
        f"or PYLOG_BOOTSTRAP_SERVERS)"
    )


def describe_error_code(code: int, message: str | None = None) -> str:
    """Return ``"NAME: description"`` for a Kafka error code, e.g. from a response."""
    error_type = kafka_errors.for_code(code)
    text = message or getattr(error_type, "description", "") or ""
    return f"{error_type.__name__}: {text}".rstrip(": ")
