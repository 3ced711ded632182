"""kafka-python clients built from the options every ``pylog`` command shares.

:class:`Connection` holds ``--bootstrap-server`` and ``--connect-timeout-ms``.
The factories below turn "no broker answered" into a :class:`ToolError` naming
the address, instead of kafka-python's 30-second wait and traceback.

Example::

    conn = Connection("127.0.0.1:9092", timeout_ms=10_000)
    with closing(conn.admin()) as admin:
        print(admin.list_topics())
"""

import os
from dataclasses import dataclass, field

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ACLOperation

from broker_sim.tools.errors import BOOTSTRAP_ERRORS, connection_error

DEFAULT_BOOTSTRAP_SERVERS = "127.0.0.1:9092"
CLIENT_ID = "pylog-tools"


def default_bootstrap_servers() -> str:
    """``$PYLOG_BOOTSTRAP_SERVERS`` if set, else ``127.0.0.1:9092``."""
    return os.environ.get("PYLOG_BOOTSTRAP_SERVERS") or DEFAULT_BOOTSTRAP_SERVERS


class AdminClient(KafkaAdminClient):
    """kafka-python's admin client, tolerant of authorized-operation bits it does not know.

    kafka-python 3.0.12 turns the ``authorized_operations`` bitfield of
    DescribeGroups and Metadata into ``ACLOperation`` members and raises
    ValueError on a bit it has no member for: Kafka 4's TWO_PHASE_COMMIT (15),
    or Tansu 0.6, which sets all 32 bits. The tools never show these
    operations, so unknown bits are dropped instead of losing the response.
    """

    def _process_acl_operations(self, obj):
        operations = obj.get("authorized_operations")
        if operations is not None:
            known = {op.value for op in ACLOperation}
            obj["authorized_operations"] = sorted(
                ACLOperation(bit).name for bit in operations if bit in known and bit > ACLOperation.ALL)
        return obj


@dataclass(frozen=True)
class Connection:
    """Where the broker is and how long to wait for it."""

    bootstrap_servers: str
    timeout_ms: int = 10_000
    security: dict = field(default_factory=dict)  # kafka-python settings from --command-config (TLS, SASL)

    def _common(self) -> dict:
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "client_id": CLIENT_ID,
            "bootstrap_timeout_ms": self.timeout_ms,
            **self.security,
        }

    def _build(self, client_type, config):
        try:
            return client_type(**self._common(), **config)
        except BOOTSTRAP_ERRORS as exc:
            raise connection_error(self.bootstrap_servers, self.timeout_ms) from exc

    def admin(self) -> AdminClient:
        """A connected admin client; raises ToolError if no broker answers."""
        return self._build(AdminClient, {"request_timeout_ms": max(self.timeout_ms, 30_000)})

    def producer(self, **config) -> KafkaProducer:
        """A connected producer; metadata waits are bounded by the timeout."""
        return self._build(KafkaProducer, {"max_block_ms": self.timeout_ms, **config})

    def consumer(self, **config) -> KafkaConsumer:
        """A connected consumer with no subscription yet."""
        return self._build(KafkaConsumer, config)
