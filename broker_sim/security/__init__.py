"""Security: TLS contexts, SASL mechanisms (PLAIN, SCRAM) with their client-side login, the ACL authorizer,
client quotas and entity configs (users, clients, dynamic broker configs).

Imports ``broker_sim.config`` and controller metadata values only; never storage/, replication/, coordinator/
or server/.
"""
