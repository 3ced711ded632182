"""The old import path of the local cluster launcher: ``LocalCluster`` now lives in :mod:`broker_sim.local.cluster`.

Kept so that ``from broker_sim.tools.cluster import LocalCluster`` in users' test suites goes on working;
new code imports :mod:`broker_sim.local.cluster`.
"""
from broker_sim.local.cluster import HOST, ClusterError, LocalCluster, build_parser, fetch_metadata, free_port

__all__ = ["HOST", "ClusterError", "LocalCluster", "build_parser", "fetch_metadata", "free_port"]
