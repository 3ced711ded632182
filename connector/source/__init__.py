"""Reading: the stream and batch readers (driver), offset planning, and the executors' Fetch into Arrow.

Imports only ``connector.options``/``wire``/``admin``/``error_codes``: never ``connector.sink``,
``connector.datasource`` (which builds the readers) nor broker_sim's broker side.
"""
