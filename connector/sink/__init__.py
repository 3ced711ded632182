"""Writing: the stream and batch writers, the task producer, the exactly-once commit and its sink log.

Imports only ``connector.options``/``wire``/``admin``/``error_codes``: never ``connector.source``,
``connector.datasource`` (which builds the writers) nor broker_sim's broker side.
"""
