"""The benchmark workloads behind ``pylog bench`` (JSON out, never pass/fail), as Kafka ships its perf tools.

Owns benchmark broker processes, the timed client workloads and their reports (``runner`` is ``pylog bench``).
May use ``broker_sim.local`` and ``broker_sim.progress``; must not import ``broker_sim.tools`` (which dispatches
to it) nor ``broker_sim.testing``.
"""
