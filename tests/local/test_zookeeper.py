"""The ZooKeeper server wrapper: starts a real server, answers kazoo, stops by pid."""
from __future__ import annotations

import os

import pytest
from kazoo.client import KazooClient

from broker_sim.local.zookeeper import ZooKeeperServer, four_letter_word
from broker_sim.testing.requirements import require_zookeeper


def test_server_answers_ruok_and_kazoo(tmp_path):
    require_zookeeper()
    with ZooKeeperServer(tmp_path / "zk").start(timeout=60) as zookeeper:
        assert four_letter_word(zookeeper.host, zookeeper.port, "ruok") == "imok"
        client = KazooClient(hosts=zookeeper.connect_string, timeout=10)
        client.start(timeout=10)
        try:
            client.ensure_path("/probe")
            client.set("/probe", b"x")
            assert client.get("/probe")[0] == b"x"
        finally:
            client.stop()
            client.close()


def test_stop_ends_the_process_and_is_idempotent(tmp_path):
    require_zookeeper()
    with ZooKeeperServer(tmp_path / "zk") as server:
        pid = server.process.pid
        assert server.port != 0
        assert (tmp_path / "zk" / "zoo.cfg").read_text().count(f"clientPort={server.port}") == 1
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    server.stop()
    with pytest.raises(OSError):
        four_letter_word(server.host, server.port, "ruok", 0.5)


def test_context_manager_accepts_an_already_started_server(tmp_path):
    require_zookeeper()
    with ZooKeeperServer(tmp_path / "zk").start(timeout=60) as server:
        assert four_letter_word(server.host, server.port, "ruok") == "imok"
    assert server.process is None
