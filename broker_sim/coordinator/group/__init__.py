"""The classic consumer group coordinator: the group state machine, ``__consumer_offsets`` records, the core
and its asyncio shell.  Imports the shared ``broker_sim.coordinator`` modules; never ``coordinator.txn``,
server/, tools/, testing/, local/ or bench/.
"""
