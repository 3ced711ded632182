"""``Authorizer.bulk`` (one request's many names, issue 44 finding 2) decides exactly as ``authorize`` does, name by
name, for random bindings: literal, wildcard and prefixed, ALLOW and DENY, principals, hosts, implied operations,
super users and allow.everyone.if.no.acl.found."""
from __future__ import annotations

import random

from broker_sim.security.acl import (AclBinding, AclStore, Authorizer, Operation, PatternType, Permission,
                                     ResourceType)

NAMES = ["a", "ab", "abc", "b", "orders", "orders-eu", "ord", "x-y", "*"]
OPERATIONS = [Operation.READ, Operation.WRITE, Operation.DESCRIBE, Operation.ALTER, Operation.ALL, Operation.DELETE]
PRINCIPALS = ["User:alice", "User:bob", "User:*"]


class MemoryStore(AclStore):
    def add(self, bindings):
        for b in bindings:
            key = (b.resource_type, b.name, b.pattern_type)
            self._by_resource[key] = frozenset(self._by_resource.get(key, frozenset()) | {b})


def _random_bindings(rng: random.Random, count: int) -> list[AclBinding]:
    bindings = []
    for _ in range(count):
        pattern = rng.choice([PatternType.LITERAL, PatternType.PREFIXED])
        name = rng.choice(NAMES if pattern == PatternType.LITERAL else NAMES[:-1])
        bindings.append(AclBinding(rng.choice([ResourceType.TOPIC, ResourceType.GROUP]), name, pattern,
                                   rng.choice(PRINCIPALS), rng.choice(["*", "10.0.0.1"]), rng.choice(OPERATIONS),
                                   rng.choice([Permission.ALLOW, Permission.DENY])))
    return bindings


def test_bulk_decisions_equal_one_by_one_decisions():
    rng = random.Random(44)
    for trial in range(300):
        store = MemoryStore()
        store.add(_random_bindings(rng, rng.randint(0, 12)))
        authorizer = Authorizer(store, frozenset({"User:root"}), allow_if_no_acl=bool(trial % 2))
        for principal in ("User:alice", "User:bob", "User:root"):
            for host in ("10.0.0.1", "10.0.0.2"):
                for operation in (Operation.READ, Operation.WRITE, Operation.DESCRIBE, Operation.DELETE):
                    for resource_type in (ResourceType.TOPIC, ResourceType.GROUP):
                        decide = authorizer.bulk(principal, host, operation, resource_type)
                        for name in NAMES + ["orders-us", "zzz"]:
                            assert decide(name) == authorizer.authorize(principal, host, operation, resource_type,
                                                                        name), (trial, principal, host, operation,
                                                                                resource_type, name)
