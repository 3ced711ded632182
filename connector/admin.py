"""kafka-python's ``KafkaAdminClient`` as the connector's drivers use it: built from the options, given patience.

Theory of operation: the source driver (``connector.source.offset_reader``)
and the sink driver (``connector.sink.sink_log.ensure_log_topic``) each use an
admin client. ``client`` builds one from the options' bootstrap servers and
the ``kafka.*`` settings the admin client accepts, with the TLS context the
executors use (``connector.wire.ssl_context_for``). ``with_patience`` retries
a call on kafka-python's retriable errors (its ``retriable`` flag) for the
Java clients' default.api.timeout.ms, which is how long Java clients wait out
a leader moving or a broker restarting; kafka-python's admin client fails at
once instead. Its authorization failures name the ACL to grant
(``ConnectorAdminClient``).
"""
from __future__ import annotations

import logging
import time
from typing import Callable, TypeVar

import kafka.errors
from kafka import KafkaAdminClient

from connector.error_codes import AUTHORIZATION_FAILURES, GROUP_AUTHORIZATION_FAILED, refused
from connector.errors import PylogAuthorizationError

log = logging.getLogger(__name__)
DEFAULT_API_TIMEOUT_S = 60.0  # the Java consumer's default.api.timeout.ms
RETRIABLE_BACKOFF_S = 0.25
T = TypeVar("T")

# The kafka-python client settings (``SourceOptions.client_kwargs`` / ``SinkOptions.client_kwargs``) that
# KafkaAdminClient accepts; the consumer and producer ones would make it raise.
_ADMIN_KWARGS = {
    "client_id", "request_timeout_ms", "connections_max_idle_ms", "reconnect_backoff_ms", "reconnect_backoff_max_ms",
    "receive_buffer_bytes", "send_buffer_bytes", "retry_backoff_ms", "metadata_max_age_ms", "security_protocol",
    "ssl_check_hostname", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_crlfile",
    "sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "sasl_kerberos_service_name",
    "sasl_kerberos_domain_name",
}


class ConnectorAdminClient(KafkaAdminClient):
    """kafka-python's admin client, whose authorization failures name the ACL the query needs.

    kafka-python raises a bare ``TopicAuthorizationFailedError`` (or only marks a topic of DescribeTopics,
    which a reader would skip as absent): these raise ``PylogAuthorizationError`` with the principal, the
    right the README's ACL table lists and the command that grants it (``connector.error_codes.refused``).
    """

    def __init__(self, options, **kwargs) -> None:
        super().__init__(**kwargs)
        self._options = options

    def describe_topics(self, topics=None):
        described = super().describe_topics(topics)
        for topic in described if topics else ():  # without names, the broker lists only what may be described
            if topic.get("error_code", 0) in AUTHORIZATION_FAILURES:
                raise PylogAuthorizationError(f"Metadata for topic {topic['name']} failed: "
                                              f"{refused(topic['error_code'], self._options, topic['name'])}")
        return described

    def list_partition_offsets(self, partitions, *args, **kwargs):
        try:
            return super().list_partition_offsets(partitions, *args, **kwargs)
        except kafka.errors.AuthorizationError as exc:
            topics = sorted({tp.topic for tp in partitions})
            only = topics[0] if len(topics) == 1 else None
            raise PylogAuthorizationError(f"ListOffsets of {', '.join(topics)} failed: "
                                          f"{refused(exc.errno, self._options, only)}") from None

    def list_group_offsets(self, *args, **kwargs):
        try:
            return super().list_group_offsets(*args, **kwargs)
        except kafka.errors.AuthorizationError as exc:
            raise PylogAuthorizationError(f"OffsetFetch failed: {refused(exc.errno, self._options)}") from None

    def alter_group_offsets(self, group_id, offsets, *args, **kwargs):
        try:
            answer = super().alter_group_offsets(group_id, offsets, *args, **kwargs)
        except kafka.errors.AuthorizationError as exc:
            answer = {None: type(exc)}
        codes = {getattr(error, "errno", 0) for error in answer.values()} & set(AUTHORIZATION_FAILURES)
        if codes:
            code = GROUP_AUTHORIZATION_FAILED if GROUP_AUTHORIZATION_FAILED in codes else min(codes)
            topics = sorted({tp.topic for tp in offsets})
            only = topics[0] if len(topics) == 1 else None
            raise PylogAuthorizationError(f"OffsetCommit to group {group_id} failed: "
                                          f"{refused(code, self._options, only)}")
        return answer

    def create_topics(self, new_topics, *args, **kwargs):
        try:
            return super().create_topics(new_topics, *args, **kwargs)
        except kafka.errors.AuthorizationError as exc:
            names = ", ".join(t.name for t in new_topics)
            raise PylogAuthorizationError(f"CreateTopics {names} failed: "
                                          f"{refused(exc.errno, self._options, creating=True)}") from None


def client(options, client_id: str) -> ConnectorAdminClient:
    """A ``ConnectorAdminClient`` for ``options`` (source or sink options); ``client_id`` unless kafka.client.id."""
    from connector.wire import ssl_context_for

    config = options.client_kwargs
    kwargs = {k: v for k, v in config.items() if k in _ADMIN_KWARGS}
    kwargs.setdefault("client_id", client_id)
    context = ssl_context_for(config)
    if context is not None:  # the executors' TLS settings exactly, JKS / PKCS12 truststores included
        kwargs = {k: v for k, v in kwargs.items() if not k.startswith("ssl_")}
        kwargs["ssl_context"] = context
    return ConnectorAdminClient(options, bootstrap_servers=options.bootstrap_servers.split(","), **kwargs)


def with_patience(call: Callable[[], T], what: str, *, on_retry: Callable[[], None] | None = None) -> T:
    """``call()``, retried on retriable kafka-python errors (``.retriable``) for default.api.timeout.ms.

    ``on_retry`` runs before each retry (e.g. drop a client for fresh metadata).
    """
    deadline = time.monotonic() + DEFAULT_API_TIMEOUT_S
    while True:
        try:
            return call()
        except Exception as exc:  # only retriable errors are retried, the rest propagate
            if not getattr(exc, "retriable", False) or time.monotonic() >= deadline:
                raise
            log.info("retrying %s after a retriable error: %r", what, exc)
            if on_retry is not None:
                on_retry()
            time.sleep(RETRIABLE_BACKOFF_S)
