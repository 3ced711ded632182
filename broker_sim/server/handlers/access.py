"""What handlers ask the authorizer: may this request's principal do an operation on a resource?

Kafka's KafkaApis checks, per API, in its words (the table is in the README's Security section):
a handler asks its ``Access`` (``allowed`` / ``allowed_cluster`` / ``allowed_any``) and answers the Kafka
error of the refusal (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED) for what was refused.  Without
``authorizer.class.name`` everything is allowed and ``authorized_operations`` answers every supported
operation, as Kafka does.  A connection that proved it is another broker of this cluster
(``KafkaConnection.inter_broker``) is allowed everything.
"""
from __future__ import annotations

from typing import Callable

from broker_sim.security.acl import CLUSTER_NAME, Authorizer, Operation, ResourceType, all_operations

TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE,
                                                Operation.ALTER, Operation.DESCRIBE)
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE)


def _always(name: str) -> bool:
    return True


def _who(ctx) -> tuple[str, str]:
    connection = ctx.connection
    return getattr(connection, "principal", "User:ANONYMOUS"), getattr(connection, "ip", "")


class Access:
    """The authorizer's answers for one request's connection (``ctx``); ``authorizer`` None: no ACLs."""

    def __init__(self, authorizer: Authorizer | None) -> None:
        self.authorizer = authorizer

    @property
    def enabled(self) -> bool:
        """True when ``authorizer.class.name`` is set (the ACL APIs answer SECURITY_DISABLED otherwise)."""
        return self.authorizer is not None

    def _unchecked(self, ctx) -> bool:
        return self.authorizer is None or getattr(ctx.connection, "inter_broker", False)

    def allowed(self, ctx, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        if self._unchecked(ctx):
            return True
        principal, host = _who(ctx)
        return self.authorizer.authorize(principal, host, operation, resource_type, name)

    def topic_check(self, ctx, operation: Operation, resource_type: ResourceType = TOPIC) -> Callable[[str], bool]:
        """``allowed`` for one request's names, decided once per distinct name (Kafka's ``filterByAuthorized``
        authorizes the request's distinct topics in bulk): a request naming one topic 50,000 times, or
        50,000 topics, costs one authorizer lookup per name, never one per partition."""
        if self._unchecked(ctx):
            return _always
        principal, host = _who(ctx)
        decide = self.authorizer.bulk(principal, host, operation, resource_type)
        decided: dict[str, bool] = {}

        def allowed(name: str) -> bool:
            answer = decided.get(name)
            if answer is None:
                answer = decided[name] = decide(name)
            return answer
        return allowed

    def allowed_cluster(self, ctx, operation: Operation) -> bool:
        return self.allowed(ctx, operation, CLUSTER, CLUSTER_NAME)

    def allowed_any(self, ctx, operation: Operation, resource_type: ResourceType) -> bool:
        """At least one resource of the type (Kafka's authorizeByResourceType, KIP-679)."""
        if self._unchecked(ctx):
            return True
        principal, host = _who(ctx)
        return self.authorizer.authorize_any(principal, host, operation, resource_type)

    def authorized_operations(self, ctx, resource_type: ResourceType, name: str) -> set[int]:
        """The operations allowed on the resource, as the set of operation codes kafka-python encodes as Kafka's
        32-bit ``authorized_operations`` field (None there means "not requested")."""
        if self._unchecked(ctx):
            bits = all_operations(resource_type)
        else:
            principal, host = _who(ctx)
            bits = self.authorizer.authorized_operations(principal, host, resource_type, name)
        return {code for code in range(31) if bits >> code & 1}

    def cluster_operations(self, ctx) -> set[int]:
        """The cluster's ``authorized_operations`` (Metadata v8-10, DescribeCluster): Kafka tells them only to a
        principal that may DESCRIBE the cluster, and answers nothing (0) to others."""
        if not self.allowed_cluster(ctx, DESCRIBE):
            return set()
        return self.authorized_operations(ctx, CLUSTER, CLUSTER_NAME)

    def cluster_action(self, ctx) -> bool:
        """The inter-broker APIs (follower Fetch, WriteTxnMarkers, ...): a broker of this cluster, or with an
        authorizer a principal allowed CLUSTER_ACTION (Kafka's inter-broker principal: a super user)."""
        if getattr(ctx.connection, "inter_broker", False):
            return True
        if self.authorizer is None:
            return False
        principal, host = _who(ctx)
        return self.authorizer.authorize(principal, host, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)

