"""A secured broker for users' tests: TLS from a throwaway CA, SASL SCRAM users, ACLs enforced.

>>> with SecuredBroker(tmp_path) as secured:                                     # doctest: +SKIP
...     secured.add_user("spark", "spark-secret")
...     secured.allow("User:spark", "READ", "TOPIC", "events")
...     producer = KafkaProducer(**secured.kafka_python())                      # the admin, a super user
...     df = spark.read.format("pylog").options(**secured.spark_options("spark", "spark-secret"))

The broker has one SASL_SSL listener (SCRAM-SHA-256 and SCRAM-SHA-512), an authorizer with ``User:admin``
as its super user, and its certificate from ``ca`` (``ca_file`` is what clients trust).  Its Schema Registry
is on too, secured the same way: https with the broker's certificate, HTTP Basic against the same SCRAM users,
the same authorizer (``schema_registry()`` gives SchemaRegistryClient's settings; ``allow(..., "SUBJECT",
name)`` and ``allow(..., "REGISTRY", "schema-registry")`` grant the registry's rights).  Users and ACLs are
created through the admin API, exactly as against a real cluster.  The pytest plugin's
``pylog_secured_broker`` fixture is one of these.
"""
from __future__ import annotations

from pathlib import Path

ADMIN_USER, ADMIN_PASSWORD = "admin", "admin-secret"
MECHANISM = "SCRAM-SHA-512"
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";'


class SecuredBroker:
    def __init__(self, directory: str | Path, *, config: dict | None = None) -> None:
        from broker_sim.server.broker import Broker
        from broker_sim.local.certificates import CertificateAuthority

        directory = Path(directory)
        self.ca = CertificateAuthority(directory / "ca")
        self.ca_file = self.ca.truststore
        settings = {"listeners": "SASL_SSL://127.0.0.1:0", "ssl.keystore.location": self.ca.issue("broker").keystore,
                    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
                    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                    "super.users": f"User:{ADMIN_USER}", "group.initial.rebalance.delay.ms": "0",
                    "schema.registry.listeners": "https://127.0.0.1:0", **(config or {})}
        admin = [f"{m}=[name={ADMIN_USER},password={ADMIN_PASSWORD}]" for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")]
        self.broker = Broker(directory / "data", config=settings, add_scram=admin)

    def start(self) -> "SecuredBroker":
        self.broker.start()
        return self

    def stop(self) -> None:
        self.broker.stop()

    def __enter__(self) -> "SecuredBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def bootstrap_servers(self) -> str:
        return self.broker.bootstrap_servers

    @property
    def schema_registry_url(self) -> str | None:
        return self.broker.schema_registry_url

    # --- client settings ---------------------------------------------------------------------------
    def schema_registry(self, user: str = ADMIN_USER, password: str = ADMIN_PASSWORD) -> dict:
        """confluent-kafka's SchemaRegistryClient settings (also ``pylog schemas --command-config`` names)."""
        return {"url": self.schema_registry_url, "ssl.ca.location": self.ca_file,
                "basic.auth.user.info": f"{user}:{password}"}

    def kafka_python(self, user: str = ADMIN_USER, password: str = ADMIN_PASSWORD) -> dict:
        """kafka-python / aiokafka-style keyword arguments (bootstrap_servers included)."""
        return dict(bootstrap_servers=self.bootstrap_servers, security_protocol="SASL_SSL", ssl_cafile=self.ca_file,
                    sasl_mechanism=MECHANISM, sasl_plain_username=user, sasl_plain_password=password)

    def confluent(self, user: str = ADMIN_USER, password: str = ADMIN_PASSWORD) -> dict:
        """confluent-kafka (librdkafka) settings."""
        return {"bootstrap.servers": self.bootstrap_servers, "security.protocol": "SASL_SSL",
                "ssl.ca.location": self.ca_file, "sasl.mechanism": MECHANISM, "sasl.username": user,
                "sasl.password": password}

    def spark_options(self, user: str = ADMIN_USER, password: str = ADMIN_PASSWORD) -> dict:
        """``.options(**...)`` of a pylog source or sink, with Kafka's JAAS string as Spark users write it."""
        return {"kafka.bootstrap.servers": self.bootstrap_servers, "kafka.security.protocol": "SASL_SSL",
                "kafka.sasl.mechanism": MECHANISM, "kafka.ssl.truststore.location": self.ca_file,
                "kafka.sasl.jaas.config": JAAS.format(user, password)}

    # --- users and ACLs, through the admin API ---------------------------------------------------------
    def _admin(self):
        from kafka import KafkaAdminClient

        return KafkaAdminClient(**self.kafka_python())

    def add_user(self, user: str, password: str) -> None:
        """A SCRAM-SHA-256 and SCRAM-SHA-512 user (AlterUserScramCredentials)."""
        from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

        admin = self._admin()
        try:
            errors = admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion(user, mechanism, password)
                for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)])
        finally:
            admin.close()
        if errors.get(user):
            raise RuntimeError(f"creating user {user!r} failed: {errors[user]}")

    def allow(self, principal: str, operation: str, resource_type: str, name: str, *, pattern: str = "LITERAL",
              host: str = "*") -> None:
        """An ALLOW binding, e.g. ``allow("User:spark", "READ", "TOPIC", "events")`` or
        ``allow("User:spark", "WRITE", "TRANSACTIONAL_ID", "pylog-sink-", pattern="PREFIXED")``."""
        if resource_type.upper() in ("SUBJECT", "REGISTRY"):  # pylog's own resource types: through pylog acls
            self._allow_registry(principal, operation, resource_type.upper(), name, pattern, host)
            return
        from kafka.admin import ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern
        from kafka.admin import ResourceType

        acl = ACL(principal, host, ACLOperation[operation.upper()], ACLPermissionType.ALLOW,
                  ResourcePattern(ResourceType[resource_type.upper()], name, ACLResourcePatternType[pattern.upper()]))
        admin = self._admin()
        try:
            result = admin.create_acls([acl])
        finally:
            admin.close()
        if result["failed"]:
            raise RuntimeError(f"creating ACL {acl} failed: {result['failed']}")

    def _allow_registry(self, principal: str, operation: str, resource_type: str, name: str, pattern: str,
                        host: str) -> None:
        import io
        import tempfile

        from broker_sim.tools.cli import main

        with tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False) as properties:
            properties.write(f"security.protocol=SASL_SSL\nsasl.mechanism={MECHANISM}\nsasl.username={ADMIN_USER}\n"
                             f"sasl.password={ADMIN_PASSWORD}\nssl.ca.location={self.ca_file}\n")
        resource = ["--subject", name] if resource_type == "SUBJECT" else ["--registry"]
        out = io.StringIO()
        try:
            code = main(["--bootstrap-server", self.bootstrap_servers, "--command-config", properties.name, "acls",
                         "add", "--allow-principal", principal, "--operation", operation.upper(), "--allow-host",
                         host, *resource, "--resource-pattern-type", pattern.lower()], stdout=out, stderr=out)
        finally:
            Path(properties.name).unlink()
        if code != 0:
            raise RuntimeError(f"creating the {resource_type} ACL for {principal} failed: {out.getvalue()}")
