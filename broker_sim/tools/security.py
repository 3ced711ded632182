"""``pylog acls`` and ``pylog users``, and ``--command-config`` (Kafka's client properties file).

Examples::

    $ pylog --command-config admin.properties acls add --allow-principal User:alice --operation READ \\
          --operation DESCRIBE --topic events
    $ pylog acls add --allow-principal User:spark --operation WRITE --transactional-id pylog-sink- \\
          --resource-pattern-type prefixed
    $ pylog acls list [--topic events] [--principal User:alice] [--format json]
    $ pylog acls remove --allow-principal User:alice --operation READ --topic events
    $ pylog acls add --allow-principal User:etl --operation WRITE --subject orders- --resource-pattern-type prefixed
    $ pylog acls add --allow-principal User:ops --operation ALTER_CONFIGS --registry
    $ pylog users add alice --password alice-secret [--mechanism SCRAM-SHA-512] [--iterations 8192]
    $ pylog users list [--format json]
    $ pylog users remove alice [--mechanism SCRAM-SHA-256]

``acls`` is ``kafka-acls.sh`` (CreateAcls / DescribeAcls / DeleteAcls); ``users`` is
``kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[password=...]'``
(AlterUserScramCredentials / DescribeUserScramCredentials, KIP-554).

``--command-config FILE`` reads a Kafka client properties file, as every Kafka tool does::

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="admin" password="admin-secret";
    ssl.truststore.location=/etc/pylog/ca.crt

(``sasl.username``/``sasl.password`` and librdkafka's ``ssl.ca.location`` work too.)
"""
from __future__ import annotations

import json
import functools
from contextlib import closing
from enum import IntEnum
from pathlib import Path
from typing import TextIO

from kafka.admin import (
    ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern, ResourcePatternFilter,
    ResourceType, ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion,
)
from kafka.admin import _acls
from kafka.errors import KafkaError

from broker_sim.tools.clients import Connection
from broker_sim.tools.errors import ToolError
from broker_sim.tools.groups import _print_table

# Kafka client property -> kafka-python keyword
_PROPERTIES = {
    "security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password",
    "ssl.truststore.location": "ssl_cafile", "ssl.ca.location": "ssl_cafile",
    "ssl.keystore.location": "ssl_certfile", "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile", "ssl.key.password": "ssl_password",
}
_IGNORED = {"ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password", "ssl.keystore.password",
            "client.id", "request.timeout.ms"}


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file: ``key=value`` / ``key: value`` lines, ``#``/``!`` comments, ``\\`` continuations."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"--command-config {path}: cannot read it: {exc.strerror or exc}") from None
    properties: dict[str, str] = {}
    pending = ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = pending + raw.strip() if pending else raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if not line or line[0] in "#!":
            continue
        separator = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if separator < 0:
            raise ToolError(f"--command-config {path}: line {number} is not key=value (its text is not shown: "
                            f"it may hold a secret)")
        properties[line[:separator].strip()] = line[separator + 1:].strip()
    return properties


def client_settings(path: str | None) -> dict:
    """kafka-python keyword arguments from a ``--command-config`` file (empty without one)."""
    if not path:
        return {}
    from broker_sim.config import ConfigError
    from broker_sim.security.sasl import jaas_credentials

    settings: dict = {}
    for key, value in read_properties(path).items():
        if key == "sasl.jaas.config":
            try:
                _, settings["sasl_plain_username"], settings["sasl_plain_password"] = jaas_credentials(
                    value, f"--command-config {path}: sasl.jaas.config")
            except ConfigError as exc:
                raise ToolError(str(exc)) from None
        elif key == "ssl.endpoint.identification.algorithm":
            settings["ssl_check_hostname"] = value.lower() == "https"
        elif key in _PROPERTIES:
            settings[_PROPERTIES[key]] = value
        elif key not in _IGNORED:
            raise ToolError(f"--command-config {path}: {key} is not a client setting pylog's tools use "
                            f"(known: {', '.join(sorted(_PROPERTIES))}, sasl.jaas.config, "
                            f"ssl.endpoint.identification.algorithm)")
    if "security_protocol" in settings:
        settings["security_protocol"] = settings["security_protocol"].upper()
    return settings


# --- acls ------------------------------------------------------------------------------------------

# kafka-python knows Kafka's resource types only; pylog's Schema Registry ones (security/acl.py: SUBJECT 100,
# REGISTRY 101) are added while an acls command runs (_registry_resource_types)
_ResourceTypes = IntEnum("ResourceType", {**{t.name: t.value for t in ResourceType}, "SUBJECT": 100,
                                          "REGISTRY": 101})


def _registry_resource_types(command):
    """Run an acls command with kafka-python's ResourceType extended by pylog's (its checks and decoding use
    the module's name)."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        original = _acls.ResourceType
        _acls.ResourceType = _ResourceTypes
        try:
            return command(*args, **kwargs)
        finally:
            _acls.ResourceType = original
    return run


def _resource(args) -> tuple[ResourceType, str] | None:
    chosen = [(_ResourceTypes.TOPIC, args.topic), (_ResourceTypes.GROUP, args.group),
              (_ResourceTypes.TRANSACTIONAL_ID, args.transactional_id),
              (_ResourceTypes.CLUSTER, "kafka-cluster" if args.cluster else None),
              (_ResourceTypes.SUBJECT, getattr(args, "subject", None)),
              (_ResourceTypes.REGISTRY, "schema-registry" if getattr(args, "registry", False) else None)]
    given = [(t, n) for t, n in chosen if n is not None]
    if len(given) > 1:
        raise ToolError("give one resource: --topic, --group, --transactional-id, --cluster, --subject or "
                        "--registry")
    return given[0] if given else None


def _bindings(args) -> list[ACL]:
    resource = _resource(args)
    if resource is None:
        raise ToolError("name the resource: --topic T, --group G, --transactional-id ID, --cluster, "
                        "--subject S or --registry")
    principals = ([(p, ACLPermissionType.ALLOW) for p in args.allow_principal or []]
                  + [(p, ACLPermissionType.DENY) for p in args.deny_principal or []])
    if not principals:
        raise ToolError("give --allow-principal User:NAME or --deny-principal User:NAME")
    if not args.operation:
        raise ToolError("give --operation (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, "
                        "DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE or ALL), repeatable")
    pattern = ACLResourcePatternType[args.resource_pattern_type.upper()]
    acls = []
    for principal, permission in principals:
        hosts = (args.allow_host if permission == ACLPermissionType.ALLOW else args.deny_host) or ["*"]
        for host in hosts:
            for operation in args.operation:
                acls.append(ACL(principal, host, ACLOperation[operation.upper()], permission,
                                ResourcePattern(resource[0], resource[1], pattern)))
    return acls


def _row(acl) -> dict:
    pattern = acl.resource_pattern
    return {"resource_type": pattern.resource_type.name, "name": pattern.resource_name,
            "pattern_type": pattern.pattern_type.name, "principal": acl.principal, "host": acl.host,
            "operation": acl.operation.name, "permission": acl.permission_type.name}


@_registry_resource_types
def add_acls(conn: Connection, args, out: TextIO) -> None:
    acls = _bindings(args)
    with closing(conn.admin()) as admin:
        try:
            result = admin.create_acls(acls)
        except KafkaError as exc:
            raise ToolError(f"CreateAcls failed: {exc}") from None
    if result["failed"]:
        raise ToolError("the broker refused: " + "; ".join(f"{_row(a)}: {e}" for a, e in result["failed"]))
    for acl in acls:
        print(f"added {json.dumps(_row(acl))}", file=out)


@_registry_resource_types
def list_acls(conn: Connection, args, out: TextIO) -> list[dict]:
    resource = _resource(args)
    pattern = ResourcePatternFilter(resource[0] if resource else _ResourceTypes.ANY, resource[1] if resource else None,
                                    ACLResourcePatternType.ANY)
    with closing(conn.admin()) as admin:
        try:
            acls, error = admin.describe_acls(ACLFilter(args.principal, None, ACLOperation.ANY,
                                                        ACLPermissionType.ANY, pattern))
        except KafkaError as exc:
            raise ToolError(f"DescribeAcls failed: {exc}") from None
    rows = sorted((_row(a) for a in acls), key=lambda r: tuple(r.values()))
    if args.format == "json":
        print(json.dumps(rows, indent=2), file=out)
    else:
        _print_table(["RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"],
                     [list(r.values()) for r in rows], out)
    return rows


@_registry_resource_types
def remove_acls(conn: Connection, args, out: TextIO) -> None:
    filters = [ACLFilter(a.principal, a.host, a.operation, a.permission_type,
                         ResourcePatternFilter(a.resource_pattern.resource_type, a.resource_pattern.resource_name,
                                               a.resource_pattern.pattern_type)) for a in _bindings(args)]
    with closing(conn.admin()) as admin:
        try:
            results = admin.delete_acls(filters)
        except KafkaError as exc:
            raise ToolError(f"DeleteAcls failed: {exc}") from None
    removed = [acl for _, matched, _ in results for acl in matched]
    for acl in removed:
        print(f"removed {json.dumps(_row(acl))}", file=out)
    if not removed:
        raise ToolError("no ACL matched")


# --- users ------------------------------------------------------------------------------------------

_MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}


def add_user(conn: Connection, name: str, password: str, mechanisms: list[str], iterations: int, out: TextIO) -> None:
    changes = [UserScramCredentialUpsertion(name, _MECHANISMS[m], password, iterations=iterations)
               for m in mechanisms]
    _alter(conn, name, changes)
    print(f"user {name}: {', '.join(mechanisms)} credentials set ({iterations} iterations)", file=out)


def remove_user(conn: Connection, name: str, mechanisms: list[str], out: TextIO) -> None:
    _alter(conn, name, [UserScramCredentialDeletion(name, _MECHANISMS[m]) for m in mechanisms])
    print(f"user {name}: {', '.join(mechanisms)} credentials removed", file=out)


def _alter(conn: Connection, name: str, changes) -> None:
    with closing(conn.admin()) as admin:
        try:
            errors = admin.alter_user_scram_credentials(changes)
        except KafkaError as exc:
            raise ToolError(f"AlterUserScramCredentials failed: {exc}") from None
    if errors.get(name):
        raise ToolError(f"the broker refused: {errors[name]}")


def list_users(conn: Connection, output_format: str, out: TextIO) -> list[dict]:
    with closing(conn.admin()) as admin:
        try:
            described = admin.describe_user_scram_credentials()
        except KafkaError as exc:
            raise ToolError(f"DescribeUserScramCredentials failed: {exc}") from None
    rows = [{"user": user, "mechanism": info["mechanism"].name.replace("_", "-"), "iterations": info["iterations"]}
            for user, entry in sorted(described.items()) for info in entry.get("credential_infos") or ()]
    if output_format == "json":
        print(json.dumps(rows, indent=2), file=out)
    else:
        _print_table(["USER", "MECHANISM", "ITERATIONS"], [list(r.values()) for r in rows], out)
    return rows


# --- quotas -----------------------------------------------------------------------------------------

QUOTA_OPTIONS = (("producer_byte_rate", "--producer-byte-rate"), ("consumer_byte_rate", "--consumer-byte-rate"),
                 ("request_percentage", "--request-percentage"))


def _send(admin, request):
    """One request through the admin client's connections (kafka-python has no client-quota calls)."""
    async def call():
        return await admin._manager.send(request)
    return admin._manager.run(call)


def _quota_entity(args) -> list[tuple[str, str | None]]:
    entity = []
    if args.user is not None or args.user_default:
        entity.append(("user", None if args.user_default else args.user))
    if args.client_id is not None or args.client_default:
        entity.append(("client-id", None if args.client_default else args.client_id))
    if not entity:
        raise ToolError("name the entity: --user NAME / --user-default and/or --client-id ID / --client-default")
    return entity


def set_quotas(conn: Connection, args, out: TextIO) -> None:
    from kafka.protocol.admin import AlterClientQuotasRequest

    entry = AlterClientQuotasRequest.EntryData
    ops = [entry.OpData(key=key, value=float(getattr(args, key)), remove=False)
           for key, _ in QUOTA_OPTIONS if getattr(args, key) is not None]
    ops += [entry.OpData(key=key, value=0.0, remove=True) for key in args.remove or []]
    if not ops:
        raise ToolError("give a quota: " + ", ".join(option for _, option in QUOTA_OPTIONS) + " or --remove KEY")
    entity = _quota_entity(args)
    request = AlterClientQuotasRequest[1](entries=[entry(
        entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in entity], ops=ops)], validate_only=False)
    with closing(conn.admin()) as admin:
        response = _send(admin, request)
    result = response.entries[0]
    if result.error_code:
        raise ToolError(f"the broker refused: {result.error_message} (error {result.error_code})")
    shown = ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)
    print(f"quotas of {shown}: " + ", ".join(f"{op.key} removed" if op.remove else f"{op.key}={_number(op.value)}"
                                             for op in ops), file=out)


def describe_quotas(conn: Connection, args, out: TextIO) -> list[dict]:
    from kafka.protocol.admin import DescribeClientQuotasRequest

    component = DescribeClientQuotasRequest.ComponentData
    components = []
    if args.user is not None:
        components.append(component(entity_type="user", match_type=0, match=args.user))
    if args.client_id is not None:
        components.append(component(entity_type="client-id", match_type=0, match=args.client_id))
    with closing(conn.admin()) as admin:
        response = _send(admin, DescribeClientQuotasRequest[1](components=components, strict=False))
    if response.error_code:
        raise ToolError(f"the broker refused: {response.error_message} (error {response.error_code})")
    rows = []
    for entry in response.entries or []:
        entity = {e.entity_type: ("<default>" if e.entity_name is None else e.entity_name) for e in entry.entity}
        rows.append({"user": entity.get("user", ""), "client_id": entity.get("client-id", ""),
                     **{v.key: v.value for v in entry.values}})
    rows.sort(key=lambda r: (r["user"], r["client_id"]))
    if args.format == "json":
        print(json.dumps(rows, indent=2), file=out)
    else:
        _print_table(["USER", "CLIENT-ID", *(k.upper().replace("_", "-") for k, _ in QUOTA_OPTIONS)],
                     [[r["user"], r["client_id"], *(_number(r.get(k)) for k, _ in QUOTA_OPTIONS)] for r in rows], out)
    return rows


def _number(value) -> str:
    if value is None:
        return ""
    return str(int(value)) if value == int(value) else f"{value:g}"
