"""The feature versions (KIP-584) ApiVersions v3+ advertises: what this broker implements, by Kafka's names.

Theory of operation: a Kafka 4 broker tells clients, in ApiVersions' tagged fields, the range of each feature it
supports and the level the cluster finalized; clients switch protocols on the finalized levels (the Java producer
uses transactions v2 only at ``transaction.version`` >= 2, KIP-890; KIP-848 consumers need ``group.version`` 1).
``FEATURES`` is that table for broker_sim, each level chosen for what is implemented, not copied from Kafka:

1. ``group.version`` 0-1, finalized 1: the KIP-848 consumer group protocol (ConsumerGroupHeartbeat) is served.
2. ``transaction.version`` 0-0, not finalized: transactions are Kafka 3.x's (no KIP-890 part 2 epoch bump per
   transaction, no implicit AddPartitionsToTxn), so clients keep the classic protocol.  Kafka 4.1 finalizes 2.
3. ``metadata.version`` 7-22, finalized 22 (4.0-IV0): what a KRaft broker reports; 22 is the lowest level at
   which Kafka allows ``group.version`` 1, and below the 4.0-IV1+ levels that bring ELR (KIP-966) and
   transactions v2, which broker_sim lacks.  7 (3.3-IV3) is Kafka 4's lowest.

Features Kafka 4.1 also lists (``kraft.version``, ``share.version``, ``eligible.leader.replicas.version``) are
left out: no KRaft quorum, no share groups, no ELR here.  As Kafka does, v0-3 answers omit supported features
whose minimum is 0 (KAFKA-17011: v3 clients reject them), and a feature at level 0 is not listed as finalized.
The finalized epoch is fixed: the levels never change.  UpdateFeatures (``update_error``) answers as Kafka's
controller for a level outside the supported range or a feature it does not know, succeeds for the level already
finalized, and refuses any other level (INVALID_UPDATE_VERSION): broker_sim cannot switch its protocols off.
"""
from __future__ import annotations

from dataclasses import dataclass

FINALIZED_EPOCH = 0


@dataclass(frozen=True)
class Feature:
    name: str
    min_version: int
    max_version: int
    level: int  # the finalized level; 0: not finalized


FEATURES = (
    Feature("group.version", 0, 1, 1),
    Feature("metadata.version", 7, 22, 22),
    Feature("transaction.version", 0, 0, 0),
)


def supported(api_version: int) -> list[Feature]:
    """The SupportedFeatures of an ApiVersions answer at ``api_version`` (3+)."""
    return [f for f in FEATURES if api_version >= 4 or f.min_version > 0]


def finalized() -> list[Feature]:
    return [f for f in FEATURES if f.level > 0]


def finalized_level(name: str) -> int:
    """The finalized level of ``name`` (0 for a feature this broker does not finalize)."""
    return next((f.level for f in FEATURES if f.name == name), 0)


def update_error(name: str, level: int, node_id: int) -> str | None:
    """Why an UpdateFeatures of ``name`` to ``level`` fails (Kafka's message where Kafka refuses it), or None."""
    found = next((f for f in FEATURES if f.name == name), None)
    if found is None:
        return f"Invalid update version {level} for feature {name}. Local controller {node_id} does not support " \
               f"this feature."
    if level > 0 and not found.min_version <= level <= found.max_version:
        return f"Invalid update version {level} for feature {name}. Local controller {node_id} only supports " \
               f"versions {found.min_version}-{found.max_version}"
    if max(level, 0) != found.level:
        return f"Invalid update version {level} for feature {name}. broker_sim's feature levels are fixed: {name} " \
               f"stays at {found.level}"
    return None
