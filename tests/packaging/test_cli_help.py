"""pylog-broker --help names what the README says it runs."""
from __future__ import annotations

from broker_sim.server.cli import build_parser


def test_broker_help_lists_the_cluster_command_and_where_the_broker_logs():
    text = " ".join(build_parser().format_help().split())
    assert "pylog-broker cluster --brokers N --data-dir DIR" in text
    assert "A broker logs to stderr (--log-level)" in text
