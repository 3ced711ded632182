"""ACLs and the authorizer: Kafka's model (AclAuthorizer / StandardAuthorizer) and its ZooKeeper layout.

Model, exactly Kafka's:

* a binding is (resource type, resource name, pattern type) + (principal,
  host, operation, permission); resource types Topic, Group, Cluster
  (named ``kafka-cluster``), TransactionalId, DelegationToken, and pylog's
  Schema Registry resources (after Redpanda's schema registry ACLs, with
  codes outside Kafka's range): SUBJECT (100; a subject name, literal or
  prefixed; ZooKeeper ``/kafka-acl/Subject/<name>``) and REGISTRY (101; the
  one resource ``schema-registry``: the global config and mode,
  ``/kafka-acl/Registry/schema-registry``); pattern types
  LITERAL (a name, or ``*`` for every resource of the type) and PREFIXED;
* ``authorize(principal, host, operation, resource)``: super users
  (``super.users=User:admin;User:broker``) may do anything; otherwise the
  bindings matching the resource (literal name, literal ``*``, prefixes of the
  name) are consulted: a DENY for the principal (or ``User:*``) and host (or
  ``*``) on the operation (or ALL) refuses, whatever allows; else an ALLOW
  on the operation, or on one that implies it (READ, WRITE, DELETE and ALTER
  imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL implies every
  operation) permits; a resource without any binding at all follows
  ``allow.everyone.if.no.acl.found`` (default false);
* ``authorize_any(principal, host, operation, resource type)`` — Kafka's
  ``authorizeByResourceType`` (KIP-679): may the principal do it on at least
  one resource of that type (an idempotent producer needs IDEMPOTENT_WRITE on
  the cluster or WRITE on some topic).

Storage: a single node keeps its bindings in ``<data dir>/security/acls.json``;
a cluster in ZooKeeper where Kafka keeps them — LITERAL bindings at
``/kafka-acl/<ResourceType>/<name>``, PREFIXED ones at
``/kafka-acl-extended/prefixed/<ResourceType>/<name>``, each znode
``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}``.
Every broker watches those znodes, so a change made through one broker
applies on all of them without a restart.
"""
from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Iterable
from urllib.parse import quote, unquote

from broker_sim.config import BrokerConfig, ConfigError

log = logging.getLogger(__name__)
CLUSTER_NAME = "kafka-cluster"
REGISTRY_NAME = "schema-registry"  # the one REGISTRY resource (the registry's global config and mode)
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
ANONYMOUS = "User:ANONYMOUS"  # the principal of a connection without SASL or a client certificate
VERSION = 1


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7
    # pylog's Schema Registry resources (after Redpanda's schema registry ACLs), outside Kafka's codes
    SUBJECT = 100
    REGISTRY = 101


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# Kafka's ZooKeeper spellings (ResourceType.toString / AclOperation / AclPermissionType in JSON)
ZK_RESOURCE_TYPES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
                     ResourceType.TRANSACTIONAL_ID: "TransactionalId",
                     ResourceType.DELEGATION_TOKEN: "DelegationToken", ResourceType.SUBJECT: "Subject",
                     ResourceType.REGISTRY: "Registry"}
ZK_OPERATIONS = {Operation.ALL: "All", Operation.READ: "Read", Operation.WRITE: "Write", Operation.CREATE: "Create",
                 Operation.DELETE: "Delete", Operation.ALTER: "Alter", Operation.DESCRIBE: "Describe",
                 Operation.CLUSTER_ACTION: "ClusterAction", Operation.DESCRIBE_CONFIGS: "DescribeConfigs",
                 Operation.ALTER_CONFIGS: "AlterConfigs", Operation.IDEMPOTENT_WRITE: "IdempotentWrite",
                 Operation.CREATE_TOKENS: "CreateTokens", Operation.DESCRIBE_TOKENS: "DescribeTokens"}
ZK_PERMISSIONS = {Permission.ALLOW: "Allow", Permission.DENY: "Deny"}
_FROM_ZK_TYPES = {v: k for k, v in ZK_RESOURCE_TYPES.items()}
_FROM_ZK_OPERATIONS = {v: k for k, v in ZK_OPERATIONS.items()}
_FROM_ZK_PERMISSIONS = {v: k for k, v in ZK_PERMISSIONS.items()}

# what an ALLOW on the key also grants (Kafka's AclEntry.supportedOperations implications)
_IMPLIED_BY = {Operation.DESCRIBE: (Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE,
                                    Operation.ALTER),
               Operation.DESCRIBE_CONFIGS: (Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS)}
# the operations each resource type supports (Kafka's AclEntry.supportedOperations), for authorized_operations
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
                         Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    # Kafka 4's: DESCRIBE_CONFIGS / ALTER_CONFIGS for group configs (KIP-848), as its DescribeGroups answers
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.DESCRIBE_CONFIGS,
                         Operation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
    ResourceType.DELEGATION_TOKEN: (Operation.DESCRIBE,),
    ResourceType.SUBJECT: (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.DESCRIBE,
                           Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.REGISTRY: (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.DESCRIBE,
                            Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
}


def operations_bitfield(operations: Iterable[Operation]) -> int:
    """Kafka's authorized_operations: bit i set for operation code i."""
    bits = 0
    for operation in operations:
        bits |= 1 << int(operation)
    return bits


class AclError(ValueError):
    """A binding that cannot be created (INVALID_REQUEST with this message)."""


@dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def check(self) -> None:
        """Kafka's validation of a binding to create."""
        if self.resource_type not in ZK_RESOURCE_TYPES:  # UNKNOWN, ANY and USER are not stored
            raise AclError(f"Invalid resource type {self.resource_type}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError(f"Invalid pattern type {self.pattern_type.name}: only LITERAL and PREFIXED can be stored")
        if not self.name:
            raise AclError("Resource name must not be empty")
        if self.resource_type == ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if self.resource_type == ResourceType.REGISTRY and self.name != REGISTRY_NAME:
            raise AclError(f"The only valid name for the REGISTRY resource is {REGISTRY_NAME}")
        if self.operation not in ZK_OPERATIONS:
            raise AclError(f"Invalid operation {self.operation.name}")
        if self.operation != Operation.ALL and self.operation not in SUPPORTED_OPERATIONS[self.resource_type]:
            raise AclError(f"Operation {self.operation.name} is not valid for resource type "
                           f"{self.resource_type.name}")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise AclError(f"Invalid permission type {self.permission.name}")
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            raise AclError(f"Could not parse principal from `{self.principal}` (no colon is present separating "
                           f"the principal type from the principal name)")
        if not self.host:
            raise AclError("Host must not be empty (use * for any host)")

    def to_json(self) -> dict:
        return {"principal": self.principal, "permissionType": ZK_PERMISSIONS[self.permission],
                "operation": ZK_OPERATIONS[self.operation], "host": self.host}


@dataclass(frozen=True)
class AclFilter:
    """DescribeAcls / DeleteAcls filters (ANY matches every value; None strings match every value;
    pattern MATCH matches the literal name, the wildcard and every prefix of the name)."""
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and binding.resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is not None and not _resource_matches(binding, self.name):
                return False
        else:
            if self.pattern_type != PatternType.ANY and binding.pattern_type != self.pattern_type:
                return False
            if self.name is not None and binding.name != self.name:
                return False
        if self.principal is not None and binding.principal != self.principal:
            return False
        if self.host is not None and binding.host != self.host:
            return False
        if self.operation != Operation.ANY and binding.operation != self.operation:
            return False
        return self.permission == Permission.ANY or binding.permission == self.permission


def _resource_matches(binding: AclBinding, name: str) -> bool:
    if binding.pattern_type == PatternType.LITERAL:
        return binding.name == name or binding.name == WILDCARD
    return name.startswith(binding.name)


def parse_super_users(value: str) -> frozenset[str]:
    users = frozenset(u.strip() for u in value.split(";") if u.strip())
    for user in users:
        if ":" not in user:
            raise ConfigError(f"super.users={value}: {user!r} is not a principal such as User:admin "
                              f"(separate principals with ';')")
    return users


class Authorizer:
    """Answers ``authorize`` from the bindings its store keeps (see the module docstring)."""

    def __init__(self, store: "AclStore", super_users: frozenset[str], allow_if_no_acl: bool) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl

    @classmethod
    def from_config(cls, config: BrokerConfig, store: "AclStore") -> "Authorizer | None":
        if not config.raw("authorizer.class.name").strip():
            return None
        return cls(store, parse_super_users(config.raw("super.users")),
                   config.get("allow.everyone.if.no.acl.found"))

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        return self._decide(self.store.matching(resource_type, name), principal, host, operation)

    def bulk(self, principal: str, host: str, operation: Operation, resource_type: ResourceType):
        """``authorize`` as a function of the resource name, for the many names of one request: the bindings
        that do not depend on the name (the literal wildcard, the type's prefixes) are gathered once, so each
        name costs a dictionary lookup and a prefix test per PREFIXED binding, not a scan of every binding."""
        if principal in self.super_users:
            return lambda name: True
        literal, wildcard, prefixed = self.store.for_type(resource_type)

        def decide(name: str) -> bool:
            bindings = list(literal.get(name, ()))
            bindings.extend(wildcard)
            for prefix, group in prefixed:
                if name.startswith(prefix):
                    bindings.extend(group)
            return self._decide(bindings, principal, host, operation)
        return decide

    def _decide(self, bindings, principal: str, host: str, operation: Operation) -> bool:
        if not bindings:
            return self.allow_if_no_acl
        principals = (principal, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD)
        for binding in bindings:
            if (binding.permission == Permission.DENY and binding.principal in principals and binding.host in hosts
                    and binding.operation in (operation, Operation.ALL)):
                return False
        allowing = _IMPLIED_BY.get(operation, (operation,))
        for binding in bindings:
            if (binding.permission == Permission.ALLOW and binding.principal in principals and binding.host in hosts
                    and (binding.operation in allowing or binding.operation == Operation.ALL)):
                return True
        return False

    def authorize_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """KIP-679's authorizeByResourceType: allowed on at least one resource of the type (a DENY on the
        wildcard or on a prefix covering everything refuses; a literal DENY refuses only its name)."""
        if principal in self.super_users:
            return True
        # Kafka's Authorizer.authorizeByResourceType asks first about a resource named "hardcode": what
        # allow.everyone.if.no.acl.found (no binding matches it) and wildcard ALLOWs grant
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        principals, hosts = (principal, WILDCARD_PRINCIPAL), (host, WILDCARD)
        relevant = [b for b in self.store.bindings() if b.resource_type == resource_type
                    and b.principal in principals and b.host in hosts
                    and b.operation in (operation, Operation.ALL)]
        denied_all = any(b.permission == Permission.DENY and b.name == WILDCARD
                         and b.pattern_type == PatternType.LITERAL for b in relevant)
        if denied_all:
            return False
        denied_literal = {b.name for b in relevant if b.permission == Permission.DENY
                          and b.pattern_type == PatternType.LITERAL}
        denied_prefixes = [b.name for b in relevant if b.permission == Permission.DENY
                           and b.pattern_type == PatternType.PREFIXED]
        for binding in relevant:
            if binding.permission != Permission.ALLOW:
                continue
            if binding.pattern_type == PatternType.LITERAL:
                if binding.name == WILDCARD or binding.name not in denied_literal and not any(
                        binding.name.startswith(p) for p in denied_prefixes):
                    return True
            elif not any(binding.name.startswith(p) for p in denied_prefixes):
                return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        return operations_bitfield(op for op in SUPPORTED_OPERATIONS[resource_type]
                                   if self.authorize(principal, host, op, resource_type, name))


def all_operations(resource_type: ResourceType) -> int:
    """authorized_operations without an authorizer: every operation the resource type supports."""
    return operations_bitfield(SUPPORTED_OPERATIONS[resource_type])


# --- storage ----------------------------------------------------------------------------------------

def _binding_from_json(resource_type: ResourceType, name: str, pattern: PatternType, entry: dict) -> AclBinding:
    return AclBinding(resource_type, name, pattern, str(entry["principal"]), str(entry["host"]),
                      _FROM_ZK_OPERATIONS[entry["operation"]], _FROM_ZK_PERMISSIONS[entry["permissionType"]])


class AclStore:
    """The bindings, indexed by (resource type, name, pattern type); ``add``/``remove`` persist."""

    def __init__(self) -> None:
        self._by_resource: dict[tuple[ResourceType, str, PatternType], frozenset[AclBinding]] = {}
        self._lock = threading.RLock()

    def bindings(self) -> list[AclBinding]:
        return [b for group in list(self._by_resource.values()) for b in group]

    def matching(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Bindings that apply to the resource: its literal name, the literal wildcard, prefixes of its name."""
        index = self._by_resource
        found = list(index.get((resource_type, name, PatternType.LITERAL), ()))
        found.extend(index.get((resource_type, WILDCARD, PatternType.LITERAL), ()))
        for (rtype, prefix, pattern), group in list(index.items()):
            if rtype == resource_type and pattern == PatternType.PREFIXED and name.startswith(prefix):
                found.extend(group)
        return found

    def for_type(self, resource_type: ResourceType) -> tuple[dict, tuple, list]:
        """One resource type's bindings as ``Authorizer.bulk`` reads them: (literal name -> bindings, the literal
        wildcard's bindings, [(prefix, bindings)] of the PREFIXED ones), a snapshot of now."""
        literal, prefixed = {}, []
        for (rtype, name, pattern), group in list(self._by_resource.items()):
            if rtype != resource_type:
                continue
            if pattern == PatternType.LITERAL:
                literal[name] = group
            elif pattern == PatternType.PREFIXED:
                prefixed.append((name, group))
        return literal, tuple(literal.get(WILDCARD, ())), prefixed

    def add(self, bindings: list[AclBinding]) -> None:
        raise NotImplementedError

    def remove(self, bindings: list[AclBinding]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class FileAclStore(AclStore):
    """A single node's bindings in ``<data dir>/security/acls.json`` (atomic rewrite per change)."""

    def __init__(self, data_dir: str | os.PathLike) -> None:
        super().__init__()
        self.path = Path(data_dir) / "security" / "acls.json"
        if self.path.exists():
            try:
                stored = json.loads(self.path.read_text(encoding="utf-8"))
                if stored.get("version") != VERSION:
                    raise ValueError(f"unsupported version {stored.get('version')!r}")
                index: dict = {}
                for resource in stored["resources"]:
                    key = (_FROM_ZK_TYPES[resource["resourceType"]], str(resource["name"]),
                           PatternType[resource["patternType"]])
                    index[key] = frozenset(_binding_from_json(*key, entry) for entry in resource["acls"])
                self._by_resource = index
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ConfigError(f"{self.path} (ACLs) cannot be read: {exc!r}; restore it from a backup") from None

    def _write(self, index: dict) -> None:
        from broker_sim.controller.metadata import write_atomically

        resources = [{"resourceType": ZK_RESOURCE_TYPES[rtype], "name": name, "patternType": pattern.name,
                      "acls": sorted((b.to_json() for b in group), key=lambda e: json.dumps(e, sort_keys=True))}
                     for (rtype, name, pattern), group in sorted(index.items()) if group]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, json.dumps({"version": VERSION, "resources": resources}, indent=1).encode())

    def _change(self, bindings: list[AclBinding], adding: bool) -> None:
        with self._lock:
            index = dict(self._by_resource)
            for binding in bindings:
                key = (binding.resource_type, binding.name, binding.pattern_type)
                group = set(index.get(key, ()))
                group.add(binding) if adding else group.discard(binding)
                if group:
                    index[key] = frozenset(group)
                else:
                    index.pop(key, None)
            self._write(index)
            self._by_resource = index

    def add(self, bindings: list[AclBinding]) -> None:
        self._change(bindings, True)

    def remove(self, bindings: list[AclBinding]) -> None:
        self._change(bindings, False)


LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"


def zk_name(name: str) -> str:
    """A resource name as one znode: Kafka's names as they are (``*`` included), with ``/`` and ``%`` escaped
    (group and transactional ids may contain them) and ``.``/``..`` (not znode names) spelled out."""
    if name in (".", ".."):
        return name.replace(".", "%2E")
    return quote(name, safe="*~!$&'()+,;=:@ ")


def acl_path(resource_type: ResourceType, name: str, pattern: PatternType) -> str:
    root = LITERAL_ROOT if pattern == PatternType.LITERAL else PREFIXED_ROOT
    return f"{root}/{ZK_RESOURCE_TYPES[resource_type]}/{zk_name(name)}"


class ZkAclStore(AclStore):
    """A cluster's bindings in ZooKeeper (Kafka's layout), cached from watches on every broker."""

    def __init__(self, zk) -> None:
        super().__init__()
        from kazoo.recipe.watchers import ChildrenWatch

        self.zk = zk
        self._watched: set[str] = set()
        for pattern, root in ((PatternType.LITERAL, LITERAL_ROOT), (PatternType.PREFIXED, PREFIXED_ROOT)):
            for rtype, type_name in ZK_RESOURCE_TYPES.items():
                parent = f"{root}/{type_name}"
                zk.ensure_path(parent)
                ChildrenWatch(zk, parent, self._children_watcher(rtype, pattern))

    def _children_watcher(self, rtype: ResourceType, pattern: PatternType):
        def on_children(children):
            for child in children:
                self._watch(rtype, unquote(child), pattern)
        return on_children

    def _watch(self, rtype: ResourceType, name: str, pattern: PatternType) -> None:
        from kazoo.recipe.watchers import DataWatch

        path = acl_path(rtype, name, pattern)
        with self._lock:
            if path in self._watched:
                return
            self._watched.add(path)

        def on_data(data, stat):
            self._set((rtype, name, pattern), self._decode(rtype, name, pattern, data) if stat else frozenset())
        DataWatch(self.zk, path, on_data)

    def _decode(self, rtype, name, pattern, data) -> frozenset[AclBinding]:
        try:
            obj = json.loads(data or b"{}")
            return frozenset(_binding_from_json(rtype, name, pattern, entry) for entry in obj.get("acls") or ())
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("%s: not Kafka's ACL JSON (%r); its bindings are ignored", acl_path(rtype, name, pattern), exc)
            return frozenset()

    def _set(self, key, group: frozenset) -> None:
        with self._lock:
            index = dict(self._by_resource)
            if group:
                index[key] = group
            else:
                index.pop(key, None)
            self._by_resource = index

    def _change(self, bindings: list[AclBinding], adding: bool) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        by_key: dict = {}
        for binding in bindings:
            by_key.setdefault((binding.resource_type, binding.name, binding.pattern_type), []).append(binding)
        for key, changed in by_key.items():
            path = acl_path(*key)
            for _ in range(20):
                try:
                    data, stat = self.zk.get(path)
                    current, version = set(self._decode(*key, data)), stat.version
                except NoNodeError:
                    current, version = set(), None
                current = current | set(changed) if adding else current - set(changed)
                payload = json.dumps({"version": VERSION, "acls": [b.to_json() for b in current]},
                                     separators=(",", ":")).encode()
                try:
                    if version is None:
                        if not current:
                            break
                        self.zk.create(path, payload, makepath=True)
                    else:
                        self.zk.set(path, payload, version=version)
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue
                self._set(key, frozenset(current))
                self._watch(*key)
                break
            else:
                raise RuntimeError(f"{path}: changed concurrently 20 times in a row; try again")

    def add(self, bindings: list[AclBinding]) -> None:
        self._change(bindings, True)

    def remove(self, bindings: list[AclBinding]) -> None:
        self._change(bindings, False)
