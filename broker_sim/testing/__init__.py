"""The test harness pylog ships: the pytest plugin and fixtures, containers, the Jepsen workload and checker,
the hostile-client soak, missing-dependency skips.

May import any other part of ``broker_sim``; nothing outside ``testing`` (and the test suite) may import it.
"""
