"""Cluster metadata and the ZooKeeper controller: topic metadata, znode layout (``zk_layout``), the kazoo store,
controller election and partition state changes, replica placement (``assignment``).

Imports ``broker_sim.config`` only; never storage/, replication/, coordinator/ or server/ (they read its values).
"""
