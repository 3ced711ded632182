"""Processes on one host for development and tests: LocalCluster, the ZooKeeper launcher, a throwaway CA.

Owns starting and stopping real ZooKeeper and broker processes (``pylog-broker cluster``, ``pylog cluster up``)
and the certificates a local TLS setup needs. Talks to brokers only over the wire and through ZooKeeper's
layout; must not import ``broker_sim.server``, ``broker_sim.testing``, ``broker_sim.bench`` or ``broker_sim.tools``.
"""
