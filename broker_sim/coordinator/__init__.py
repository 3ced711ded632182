"""The group and transaction coordinators (``group/``, ``txn/``: I/O-free cores, asyncio shells, broker wiring),
what both share (internal topic, records, state-machine check, ISR wait) and producer-id allocation.
Imports storage/, replication/ and controller/ only; never server/, tools/, testing/, local/ or bench/.
"""
