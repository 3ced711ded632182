"""LocalCluster's process management and the ``pylog-broker cluster`` / ``pylog cluster up`` commands."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys

import pytest
from cluster_helpers import start_cluster, zookeeper_missing

from broker_sim import cli as broker_cli
from broker_sim.local.cluster import HOST, ClusterError, LocalCluster, build_parser, fetch_metadata
from broker_sim.tools import cli as tools_cli


def test_pylog_cluster_up_options():
    args = tools_cli.build_parser().parse_args(
        ["cluster", "up", "--brokers", "2", "--data-dir", "/tmp/x", "--base-port", "9100",
         "--config", "min.insync.replicas=2", "--config", "zookeeper.session.timeout.ms=4000"])
    assert (args.command, args.cluster_command, args.brokers, args.data_dir, args.base_port) == (
        "cluster", "up", 2, "/tmp/x", 9100)
    assert dict(args.config) == {"min.insync.replicas": "2", "zookeeper.session.timeout.ms": "4000"}


def test_pylog_broker_cluster_options():
    args = build_parser().parse_args(["--data-dir", "d"])
    assert (args.brokers, args.base_port, args.zookeeper_port, args.config, args.schema_registry_port) == (
        3, None, 0, [], 0)


def test_both_cluster_commands_take_the_single_brokers_schema_registry_port_option():
    """``--schema-registry-port N``, as ``pylog-broker`` spells it: broker i's registry on N + i."""
    assert build_parser().parse_args(["--data-dir", "d", "--schema-registry-port", "8081"]).schema_registry_port == 8081
    args = tools_cli.build_parser().parse_args(["cluster", "up", "--data-dir", "d", "--schema-registry-port", "18081"])
    assert args.schema_registry_port == 18081


@pytest.mark.parametrize("argv, message", [
    (["--schema-registry-port", "65534", "--brokers", "3"],
     "--schema-registry-port 65534 with --brokers 3 puts broker 2's registry on port 65536: give a port of at "
     "most 65533"),
    (["--schema-registry-port", "19093", "--base-port", "19092", "--brokers", "2"],
     "--schema-registry-port 19093 and --base-port 19092 overlap"),
    (["--schema-registry-port", "18081", "--config", "schema.registry.listeners=http://127.0.0.1:0"],
     "give one of them"),
])
def test_registry_ports_that_cannot_be_given_exit_2_naming_the_options(argv, message, tmp_path, capsys):
    assert broker_cli.main(["cluster", "--data-dir", str(tmp_path / "d"), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "d").exists(), "nothing starts"


@pytest.mark.parametrize("argv, message", [
    (["--brokers", "0", "--data-dir", "d"], "must be > 0"),
    (["--brokers", "3"], "--data-dir"),
    (["--data-dir", "d", "--config", "novalue"], "expected KEY=VALUE"),
    (["--data-dir", "d", "--base-port", "70000"], "not a port number"),
])
def test_bad_cluster_options_exit_2_naming_the_option(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        broker_cli.main(["cluster", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_pylog_broker_dispatches_the_cluster_mode(capsys):
    with pytest.raises(SystemExit) as exit_info:
        broker_cli.main(["cluster", "--help"])
    assert exit_info.value.code == 0
    assert "usage: pylog-broker cluster" in capsys.readouterr().out


def test_the_old_import_path_names_the_same_launcher():
    from broker_sim.local import cluster
    from broker_sim.tools import cluster as old_path

    assert [getattr(old_path, name) for name in old_path.__all__] == [getattr(cluster, name)
                                                                      for name in old_path.__all__]
    assert old_path.LocalCluster is LocalCluster


def test_the_broker_server_cli_knows_no_cluster_command(capsys):
    """``cluster`` is dispatched above the server (broker_sim.cli), so the server never imports the launcher."""
    from broker_sim.server import cli as server_cli

    with pytest.raises(SystemExit):
        server_cli.main(["cluster", "--help"])
    out = capsys.readouterr().out
    assert "usage: pylog-broker [-h] --data-dir" in out and "pylog-broker cluster [-h]" not in out


def test_ports_are_chosen_up_front(tmp_path):
    fixed = LocalCluster(tmp_path / "a", brokers=3, base_port=19092)
    assert [fixed.port(i) for i in fixed.broker_ids] == [19092, 19093, 19094]
    assert fixed.bootstrap_servers == "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094"
    pinned = LocalCluster(tmp_path / "p", brokers=3, registry_base_port=18081)
    assert pinned.schema_registry_urls == ["http://127.0.0.1:18081", "http://127.0.0.1:18082",
                                           "http://127.0.0.1:18083"]
    free = LocalCluster(tmp_path / "b", brokers=3)
    assert len({free.port(i) for i in free.broker_ids}) == 3
    with pytest.raises(ClusterError, match="no broker 7"):
        free.kill(7)
    with pytest.raises(ValueError):
        LocalCluster(tmp_path / "c", brokers=0)


@pytest.fixture(scope="module")
def small_cluster(tmp_path_factory):
    running = start_cluster(tmp_path_factory.mktemp("small-cluster"), brokers=2)
    try:
        yield running
    finally:
        running.stop_all()


def _answers(cluster, broker_id) -> bool:
    try:
        fetch_metadata(HOST, cluster.port(broker_id), (), timeout_s=1.0)
        return True
    except OSError:
        return False


@pytest.mark.cluster
def test_kill_restart_pause_resume_stop(small_cluster):
    cluster = small_cluster
    cluster.heal()
    assert (cluster.data_dir / "zookeeper" / "zoo.cfg").exists()
    assert all((cluster.data_dir / f"broker-{i}" / "data" / "meta.properties").exists() for i in cluster.broker_ids)
    port, pid = cluster.port(1), cluster.pid(1)

    cluster.kill(1)
    assert not cluster.is_running(1) and cluster.nodes[1].process.returncode == -signal.SIGKILL
    cluster.restart(1)
    assert cluster.pid(1) != pid and cluster.port(1) == port and _answers(cluster, 1)
    assert "starting broker 1" in cluster.log_path(1).read_text()

    cluster.pause(1)
    assert cluster.is_paused(1) and cluster.available_brokers() == [0]
    assert not _answers(cluster, 1), "a SIGSTOPped broker must not answer"
    cluster.resume(1)
    assert _answers(cluster, 1)

    assert cluster.stop(1) == 0, "SIGTERM must stop a broker cleanly"
    assert not cluster.is_running(1)
    cluster.restart(1)
    assert set(cluster.metadata().brokers) == {0, 1}


@pytest.mark.cluster
def test_stop_all_stops_everything(tmp_path):
    cluster = start_cluster(tmp_path / "c", brokers=1)
    pids = [cluster.pid(0), cluster.zookeeper.process.pid]
    cluster.pause(0)  # even a paused broker is stopped (SIGCONT, then SIGTERM)
    statuses = cluster.stop_all(timeout_s=20)
    assert statuses == {0: 0}
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.cluster
def test_a_broker_whose_picked_ports_another_process_took_starts_on_new_ones(tmp_path):
    """Ports are picked before the brokers bind them: a process that takes one meanwhile (another test's
    server, an outgoing connection's ephemeral port) must not fail the start (CI once lost a module's cluster
    to "broker 0 exited (status 1) before it was ready"). Both the Kafka and the metrics port are covered.
    Mutation: start() without the retry -> ClusterError "... address already in use"."""
    import socket

    reason = zookeeper_missing()
    if reason:
        pytest.skip(f"no ZooKeeper for cluster tests: {reason}")
    cluster = LocalCluster(tmp_path / "c", brokers=2, metrics=True, configs={"zookeeper.session.timeout.ms": "6000"})
    taken = [cluster.nodes[0].port, cluster.nodes[1].metrics_port]
    squatters = []
    for port in taken:
        squatter = socket.socket()
        squatter.bind((HOST, port))
        squatter.listen()
        squatters.append(squatter)
    try:
        cluster.start()
        try:
            assert cluster.nodes[0].port != taken[0] and cluster.nodes[1].metrics_port != taken[1]
            assert set(cluster.metadata().brokers) == {0, 1}
            assert "address already in use" in cluster.log_path(0).read_text()
            assert "address already in use" in cluster.log_path(1).read_text()
        finally:
            cluster.stop_all()
    finally:
        for squatter in squatters:
            squatter.close()


def test_a_broker_that_fails_for_another_reason_is_not_restarted(tmp_path):
    """Only a lost port race is retried: a fixed port (base_port) taken is the caller's error, reported."""
    from broker_sim.local.cluster import BrokerNode, _lost_a_port_race

    node = BrokerNode(0, 1, tmp_path)
    node.log_path.write_text("pylog-broker: cannot listen: [Errno 98] ... address already in use\n")
    assert _lost_a_port_race(node)
    node.log_path.write_text("pylog-broker: unknown config 'x'\n")
    assert not _lost_a_port_race(node)
    fixed = LocalCluster(tmp_path / "f", brokers=1, base_port=19092)
    assert not fixed._pick_ports_again([fixed.nodes[0]]) and fixed.nodes[0].port == 19092


@pytest.mark.cluster
def test_foreground_command_prints_bootstrap_servers_and_stops_on_sigterm(tmp_path):
    reason = zookeeper_missing()
    if reason:
        pytest.skip(reason)
    process = subprocess.Popen([sys.executable, "-m", "broker_sim", "cluster", "--brokers", "2",
                                "--data-dir", str(tmp_path / "fg")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("PYLOG_BOOTSTRAP_SERVERS="), process.stderr.read() if not line else line
        servers = line.strip().split("=", 1)[1].split(",")
        assert len(servers) == 2
        for server in servers:
            host, port = server.rsplit(":", 1)
            assert set(fetch_metadata(host, int(port), ()).brokers) == {0, 1}
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        err = process.stderr.read()
        assert "broker 0: status 0" in err and "broker 1: status 0" in err, err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def test_run_from_args_reports_a_failed_start(tmp_path, monkeypatch):
    """No ZooKeeper jar: the command says so and exits 1 instead of a traceback."""
    from broker_sim.local import zookeeper

    monkeypatch.setattr(zookeeper, "ZOOKEEPER_JAR", tmp_path / "missing.jar")
    out, err = io.StringIO(), io.StringIO()
    args = tools_cli.build_parser().parse_args(["cluster", "up", "--data-dir", str(tmp_path / "d"), "--brokers", "1"])
    assert tools_cli._run(args, None, None, out, err) == 1
    assert "missing.jar is missing" in err.getvalue() and out.getvalue() == ""
