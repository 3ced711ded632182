"""Kafka error codes as the connector's raw clients get them back: which to retry, how to name them, and for an
authorization failure, which ACL to grant.

Theory of operation: ``connector.wire``'s requests return error codes as
values and leave retrying to the caller. Every caller, the source's executors
and the sink alike, asks one rule whether a code is worth retrying
(``retriable``): kafka-python's ``retriable`` flag on the code's error class,
which marks leadership and coordinator moves, timeouts, transient storage
errors, a topic not yet known (a new topic's metadata) and
CONCURRENT_TRANSACTIONS (a previous EndTxn still writing its markers). A
caller that must treat a retriable code otherwise says so where it does, with
the reason (the source reads UNKNOWN_TOPIC_OR_PARTITION in a Fetch as data
loss, ``connector.source.partition_reader``).

Authorization failures (TOPIC_, GROUP_, CLUSTER_ and
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) are worded by ``refused``: the
principal the broker sees (``broker_sim.protocol.client.principal_for``), the right the README's table "The
ACLs a query's principal needs" lists for that part of the query
(``query_right``: READ on a source's topics and group, WRITE on a sink's
topics and PREFIXED transactional ids, READ and WRITE on the sink log) and the
``pylog acls add`` command that grants it. The table names the rights to
grant, which imply what a request checks (READ implies DESCRIBE), so an
error never asks for less than the table.
"""
from __future__ import annotations

from dataclasses import dataclass

import kafka.errors

from broker_sim.protocol.client import principal_for

TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 29, 30
CLUSTER_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 31, 53
AUTHORIZATION_FAILURES = (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
                          TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
_ACLS_OPTION = {"TOPIC": "--topic", "GROUP": "--group", "TRANSACTIONAL_ID": "--transactional-id"}


def retriable(code: int) -> bool:
    """True when a retry (on fresh metadata, a new connection or coordinator) can clear Kafka error ``code``."""
    return kafka.errors.for_code(code).retriable


def error_name(code: int) -> str:
    """``NotLeaderForPartitionError (error code 6)``: kafka-python's name of ``code``, and the code; an
    authorization failure points to the README's ACL table (``refused`` says which ACL, given the options)."""
    if code in AUTHORIZATION_FAILURES:
        return f"{_name(code)}: the query's principal lacks an ACL (README: \"The ACLs a query's principal needs\")"
    return _name(code)


def _name(code: int) -> str:
    return f"{kafka.errors.for_code(code).__name__} (error code {code})"


@dataclass(frozen=True)
class Right:
    """An ACL to grant: ``operations`` on a resource (``resource_type`` TOPIC, GROUP, CLUSTER or
    TRANSACTIONAL_ID, ``name``, ``pattern`` LITERAL or PREFIXED)."""

    operations: tuple[str, ...]
    resource_type: str
    name: str
    pattern: str = "LITERAL"
    alternative: str = ""  # another ACL that does as well, in words

    def command(self, principal: str) -> str:
        """The ``pylog acls add`` command that grants it."""
        operations = " ".join(f"--operation {op}" for op in self.operations)
        resource = "--cluster" if self.resource_type == "CLUSTER" else f"{_ACLS_OPTION[self.resource_type]} {self.name}"
        pattern = " --resource-pattern-type prefixed" if self.pattern == "PREFIXED" else ""
        return f"pylog acls add --allow-principal {principal} {operations} {resource}{pattern}"

    def __str__(self) -> str:
        pattern = " (PREFIXED)" if self.pattern == "PREFIXED" else ""
        alternative = f" ({self.alternative})" if self.alternative else ""
        return f"{' and '.join(self.operations)} on {self.resource_type} {self.name}{pattern}{alternative}"


def query_right(code: int, options, topic: str | None = None, *, creating: bool = False) -> Right | None:
    """What the README's ACL table lists for the part of the query that got authorization failure ``code``
    (source or sink ``options``; ``topic``: the topic of the refused request; ``creating``: the sink driver
    creating its log topic); None for other codes."""
    sink = hasattr(options, "sink_log_topic")
    if creating and sink:
        return Right(("CREATE",), "TOPIC", options.sink_log_topic)
    if code == TOPIC_AUTHORIZATION_FAILED:
        if not sink:
            return Right(("READ",), "TOPIC", topic or f"<each topic of {options.subscription()}>")
        if topic == options.sink_log_topic:
            return Right(("READ", "WRITE"), "TOPIC", topic)
        return Right(("WRITE",), "TOPIC", topic or options.topic or "<each topic written>")
    if code == GROUP_AUTHORIZATION_FAILED and not sink:
        if options.group_id_set:
            return Right(("READ",), "GROUP", options.group_id)
        return Right(("READ",), "GROUP", options.group_id.rsplit("-", 1)[0] + "-", "PREFIXED")
    if code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED and sink:
        return Right(("WRITE",), "TRANSACTIONAL_ID", f"{options.sink_id}-", "PREFIXED")
    if code == CLUSTER_AUTHORIZATION_FAILED and sink:
        # KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the cluster only without WRITE on a topic
        return Right(("WRITE",), "TOPIC", topic or options.topic or "<each topic written>",
                     alternative="or IDEMPOTENT_WRITE on the CLUSTER: KIP-679")
    return None


def refused(code: int, options, topic: str | None = None, *, creating: bool = False) -> str:
    """``error_name(code)``, and for an authorization failure who may not do what and the command that allows it:
    ``TopicAuthorizationFailedError (error code 29): the broker's ACLs do not give User:spark WRITE on TOPIC
    clean; grant it with `pylog acls add ...` (README: "The ACLs a query's principal needs")``."""
    right = query_right(code, options, topic, creating=creating)
    if right is None:
        return error_name(code)
    who = principal_for(options.client_kwargs)
    return (f"{_name(code)}: the broker's ACLs do not give {who} {right}; grant it with "
            f"`{right.command(who)}` (README: \"The ACLs a query's principal needs\")")
