"""The transaction coordinator: the transaction state machine, ``__transaction_state`` records, the core,
its asyncio shell and marker writers.  Imports the shared ``broker_sim.coordinator`` modules and
``group.records`` (offsets join transactions); never server/, tools/, testing/, local/ or bench/.
"""
