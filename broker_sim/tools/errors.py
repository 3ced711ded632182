"""Expected failures of the tools, and how client exceptions are worded.

An expected failure (unknown topic, broker not reachable, malformed input) is a
:class:`ToolError`: :func:`broker_sim.tools.cli.main` prints its message as one
line on stderr and exits with status 1, without a traceback. Anything else is a
bug and keeps its traceback. An authorization failure gets what the command's
principal needs and the ``pylog acls add`` command that grants it
(:func:`authorization_hint`).
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


# What a command needs where an authorizer refuses it (README "ACLs (authorizer)"): (command, action) ->
# (operation, resource type, the parsed argument naming the resource; None: the cluster).
_COMMAND_RIGHTS = {
    ("produce", None): ("WRITE", "TOPIC", "topic"),
    ("consume", None): ("READ", "TOPIC", "topic"),
    ("topics", "create"): ("CREATE", "TOPIC", "name"),
    ("topics", "describe"): ("DESCRIBE", "TOPIC", "names"),
    ("topics", "delete"): ("DELETE", "TOPIC", "names"),
    ("groups", "describe"): ("DESCRIBE", "GROUP", "groups"),
    ("groups", "reset-offsets"): ("READ", "GROUP", "group"),
    ("groups", "delete"): ("DELETE", "GROUP", "groups"),
    ("acls", "list"): ("DESCRIBE", "CLUSTER", None),
    ("acls", "add"): ("ALTER", "CLUSTER", None),
    ("acls", "remove"): ("ALTER", "CLUSTER", None),
    ("users", "list"): ("DESCRIBE", "CLUSTER", None),
    ("users", "add"): ("ALTER", "CLUSTER", None),
    ("users", "remove"): ("ALTER", "CLUSTER", None),
    ("quotas", "describe"): ("DESCRIBE_CONFIGS", "CLUSTER", None),
    ("quotas", "set"): ("ALTER_CONFIGS", "CLUSTER", None),
}
_RESOURCE_OPTION = {"TOPIC": "--topic", "GROUP": "--group"}


def authorization_hint(text: str, args, principal: str) -> str:
    """For an error ``text`` of an authorization failure, what the command's ``principal`` needs and the
    ``pylog acls add`` command (run by an admin) that grants it; '' otherwise.

    The broker refuses with TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED, which kafka-python reports as a bare
    ``TopicAuthorizationFailedError``; the command knows what it asked for.
    """
    if "AuthorizationFailed" not in text:
        return ""
    command = getattr(args, "command", None)
    right = _COMMAND_RIGHTS.get((command, getattr(args, f"{command}_command", None)))
    if right is None:
        return f" ({principal} lacks an ACL for this: see `pylog acls list --principal {principal}`)"
    operation, resource_type, argument = right
    if resource_type == "CLUSTER":
        what, option = "the CLUSTER", "--cluster"
    else:
        names = getattr(args, argument, None)
        name = names if isinstance(names, str) else (names[0] if names and len(names) == 1 else "<name>")
        what, option = f"{resource_type} {name}", f"{_RESOURCE_OPTION[resource_type]} {name}"
    extra = ""
    if command == "consume" and getattr(args, "group", None):
        extra = f" (and READ on GROUP {args.group}: --group {args.group})"
    return (f"; {principal} needs {operation} on {what}{extra}: an admin grants it with `pylog acls add "
            f"--allow-principal {principal} --operation {operation} {option}`")
