"""kafka-python clients built from the options every ``pylog`` command shares.

:class:`Connection` holds ``--bootstrap-server`` and ``--connect-timeout-ms``.
The factories below turn "no broker answered" into a :class:`ToolError` naming
the address, instead of kafka-python's 30-second wait and traceback.  Before
the first client, one connection with the ``--command-config`` security
settings (:func:`broker_sim.protocol.client.probe_security`) turns a security
mistake — TLS or SASL on one side only, an untrusted certificate, a mechanism
the broker does not enable, refused credentials — into a :class:`ToolError`
naming the cause and the property to change, where kafka-python would only
time out.

Example::

    conn = Connection("127.0.0.1:9092", timeout_ms=10_000)
    with closing(conn.admin()) as admin:
        print(admin.list_topics())
"""

import os
from dataclasses import dataclass, field

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ACLOperation

from broker_sim.protocol.client import SecurityMismatch, client_ssl_context, probe_security
from broker_sim.tools.errors import BOOTSTRAP_ERRORS, ToolError, connection_error

DEFAULT_BOOTSTRAP_SERVERS = "127.0.0.1:9092"
CLIENT_ID = "pylog-tools"
# The --command-config properties a security mistake is fixed with (probe_security's names).
SETTING_NAMES = {
    "protocol": "security.protocol", "truststore": "ssl.truststore.location",
    "hostname": "ssl.endpoint.identification.algorithm= (empty)",
    "keystore": "ssl.keystore.location and ssl.key.location", "mechanism": "sasl.mechanism",
    "credentials": "sasl.jaas.config (or sasl.username and sasl.password)",
}


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

    def describe_consumer_protocol_groups(self, group_ids: list[str]) -> dict[str, dict]:
        """ConsumerGroupDescribe (KIP-848) of each group, at its coordinator: ``{group id: {...}}`` with
        ``error_code``, ``group_state``, ``group_epoch``, ``assignment_epoch``, ``assignor_name`` and ``members``
        (each with ``member_epoch`` and its ``assignment`` as ``{topic: [partitions]}``)."""
        return self._manager.run(self._describe_consumer_protocol_groups, list(dict.fromkeys(group_ids)))

    async def _describe_consumer_protocol_groups(self, group_ids: list[str]) -> dict[str, dict]:
        from broker_sim.protocol.messages import ConsumerGroupDescribeRequest

        by_coordinator: dict[int, list[str]] = {}
        for group_id, node_id in (await self._find_coordinator_ids(group_ids)).items():
            by_coordinator.setdefault(node_id, []).append(group_id)
        found: dict[str, dict] = {}
        for node_id, ids in by_coordinator.items():
            response = await self._manager.send(
                ConsumerGroupDescribeRequest(group_ids=ids, include_authorized_operations=False), node_id=node_id)
            for group in response.groups:
                def partitions(assignment) -> dict[str, list[int]]:
                    return {t.topic_name: sorted(t.partitions) for t in assignment.topic_partitions}

                found[group.group_id] = {
                    "error_code": group.error_code, "error_message": group.error_message,
                    "group_state": group.group_state, "group_epoch": group.group_epoch,
                    "assignment_epoch": group.assignment_epoch, "assignor_name": group.assignor_name,
                    "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                                 "client_id": m.client_id, "client_host": m.client_host,
                                 "member_epoch": m.member_epoch, "assignment": partitions(m.assignment),
                                 "target_assignment": partitions(m.target_assignment)}
                                for m in group.members]}
        return found

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

    def check_security(self) -> None:
        """One connection to the first bootstrap server that accepts one, with the security settings; raises
        ToolError naming a security mistake.  Does nothing when no server accepts a connection (the clients
        then say so)."""
        settings = self.security
        protocol = str(settings.get("security_protocol", "PLAINTEXT")).upper()
        login = None
        for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            if protocol in ("SSL", "SASL_SSL") and settings.get(key) and not os.path.isfile(settings[key]):
                raise ToolError(f"--command-config: {settings[key]} ({key.replace('_', '.', 1)}) is not a file")
        try:
            context = None
            if protocol in ("SSL", "SASL_SSL"):
                context = client_ssl_context(cafile=settings.get("ssl_cafile"),
                                             check_hostname=bool(settings.get("ssl_check_hostname", True)),
                                             certfile=settings.get("ssl_certfile"), keyfile=settings.get("ssl_keyfile"),
                                             password=settings.get("ssl_password"))
        except (OSError, ValueError) as exc:
            raise ToolError(f"the TLS settings of --command-config cannot be used: {exc}") from None
        if protocol.startswith("SASL_"):
            from broker_sim.security.sasl import SaslLogin
            login = SaslLogin(str(settings.get("sasl_mechanism", "PLAIN")).upper(),
                              str(settings.get("sasl_plain_username")), str(settings.get("sasl_plain_password")))
        for address in (a.strip() for a in self.bootstrap_servers.split(",") if a.strip()):
            try:
                probe_security(address, protocol=protocol, ssl_context=context, login=login,
                               timeout_s=self.timeout_ms / 1000, names=SETTING_NAMES)
                return
            except SecurityMismatch as exc:
                raise ToolError(f"{exc} (properties of the --command-config file)") from None
            except (OSError, ValueError):
                continue

    def _build(self, client_type, config):
        self.check_security()
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
