"""The ``pylog`` command line against a real broker on 127.0.0.1.

Most tests call :func:`broker_sim.tools.cli.main` in-process with their own
streams (fast, and the exit status is the return value); one runs the module as
a subprocess to prove the ``python -m broker_sim.tools.cli`` entry point.
"""

import io
import json
import os
import subprocess
import sys

import pytest

from broker_sim.tools.cli import main


class Result:
    def __init__(self, status: int, out: str, err: str):
        self.status, self.out, self.err = status, out, err


def pylog(broker, *argv: str, stdin: bytes = b"") -> Result:
    """Run ``pylog --bootstrap-server <broker> argv...`` in-process."""
    out, err = io.StringIO(), io.StringIO()
    stdin_stream = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        status = main(["--bootstrap-server", broker.bootstrap_servers, *argv],
                      stdin=stdin_stream, stdout=out, stderr=err)
    except SystemExit as exc:  # argparse usage errors
        status = exc.code
    return Result(status, out.getvalue(), err.getvalue())


def test_topics_create_list_describe_delete_round_trip(pylog_broker):
    created = pylog(pylog_broker, "topics", "create", "orders", "--partitions", "3",
                    "--config", "cleanup.policy=compact")
    assert created.status == 0, created.err
    assert "orders" in created.out

    again = pylog(pylog_broker, "topics", "create", "orders", "--if-not-exists")
    assert again.status == 0, again.err

    listed = pylog(pylog_broker, "topics", "list")
    assert listed.status == 0, listed.err
    assert "orders" in listed.out.split()
    assert not any(name.startswith("__") for name in listed.out.split())

    described = pylog(pylog_broker, "topics", "describe", "orders", "--format", "json")
    assert described.status == 0, described.err
    (topic,) = json.loads(described.out)
    assert topic["topic"] == "orders"
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    assert all(p["leader"] >= 0 and p["isr"] for p in topic["partitions"])
    assert all(p["earliest_offset"] == 0 == p["latest_offset"] for p in topic["partitions"])
    assert topic["configs"].get("cleanup.policy") == "compact"

    text = pylog(pylog_broker, "topics", "describe", "orders")
    assert text.status == 0 and "PartitionCount: 3" in text.out

    deleted = pylog(pylog_broker, "topics", "delete", "orders")
    assert deleted.status == 0, deleted.err
    assert "orders" not in pylog(pylog_broker, "topics", "list").out.split()


def test_create_existing_topic_fails_naming_it(pylog_broker):
    assert pylog(pylog_broker, "topics", "create", "dup").status == 0
    again = pylog(pylog_broker, "topics", "create", "dup")
    assert again.status == 1
    assert "'dup'" in again.err and "Traceback" not in again.err


def test_produce_keys_and_headers_then_consume_json_returns_exactly_those_records(pylog_broker):
    assert pylog(pylog_broker, "topics", "create", "events", "--partitions", "1").status == 0
    lines = "user1:clicked\nuser2:left\nuser1:wörld\n".encode()
    produced = pylog(pylog_broker, "produce", "events", "--key-separator", ":",
                     "--header", "source=cli", "--header", "trace=a=b", stdin=lines)
    assert produced.status == 0, produced.err
    assert "Produced 3 records" in produced.err

    consumed = pylog(pylog_broker, "consume", "events", "--from-beginning", "--max-messages", "3",
                     "--timeout-ms", "10000", "--format", "json")
    assert consumed.status == 0, consumed.err
    records = [json.loads(line) for line in consumed.out.splitlines()]
    assert [(r["key"], r["value"]) for r in records] == [
        ("user1", "clicked"), ("user2", "left"), ("user1", "wörld")]
    assert [r["offset"] for r in records] == [0, 1, 2]
    assert all(r["topic"] == "events" and r["partition"] == 0 for r in records)
    assert all(r["headers"] == [{"key": "source", "value": "cli"}, {"key": "trace", "value": "a=b"}]
               for r in records)
    assert all(isinstance(r["timestamp"], int) for r in records)


def test_consume_stops_at_timeout_when_no_more_records(pylog_broker):
    assert pylog(pylog_broker, "topics", "create", "few", "--partitions", "1").status == 0
    assert pylog(pylog_broker, "produce", "few", "--value", "v", "--count", "2").status == 0
    consumed = pylog(pylog_broker, "consume", "few", "--from-beginning", "--timeout-ms", "1500",
                     "--print-offset")
    assert consumed.status == 0, consumed.err
    assert consumed.out.splitlines() == ["offset:0\tv", "offset:1\tv"]
    assert "Processed a total of 2 messages" in consumed.err


def test_consume_with_group_resumes_after_committed_offsets(pylog_broker):
    assert pylog(pylog_broker, "topics", "create", "jobs", "--partitions", "1").status == 0
    assert pylog(pylog_broker, "produce", "jobs", stdin=b"a\nb\nc\n").status == 0
    first = pylog(pylog_broker, "consume", "jobs", "--group", "workers", "--from-beginning",
                  "--max-messages", "2", "--timeout-ms", "15000")
    assert first.status == 0, first.err
    assert first.out.splitlines() == ["a", "b"]
    second = pylog(pylog_broker, "consume", "jobs", "--group", "workers", "--from-beginning",
                   "--max-messages", "1", "--timeout-ms", "15000")
    assert second.status == 0, second.err
    assert second.out.splitlines() == ["c"]


def test_binary_values_are_base64_in_json(pylog_broker):
    assert pylog(pylog_broker, "topics", "create", "bin", "--partitions", "1").status == 0
    assert pylog(pylog_broker, "produce", "bin", stdin=b"\xff\xfe\n").status == 0
    consumed = pylog(pylog_broker, "consume", "bin", "--from-beginning", "--max-messages", "1",
                     "--timeout-ms", "10000", "--format", "json")
    assert json.loads(consumed.out)["value"] == {"base64": "//4="}


def test_describe_unknown_topic_fails_naming_it(pylog_broker):
    result = pylog(pylog_broker, "topics", "describe", "no-such-topic")
    assert result.status == 1
    assert "no-such-topic" in result.err and "does not exist" in result.err
    assert "Traceback" not in result.err


def test_delete_unknown_topic_fails_unless_if_exists(pylog_broker):
    assert pylog(pylog_broker, "topics", "delete", "ghost").status == 1
    assert pylog(pylog_broker, "topics", "delete", "ghost", "--if-exists").status == 0


def test_consume_unknown_topic_fails_naming_it(pylog_broker):
    result = pylog(pylog_broker, "consume", "ghost", "--timeout-ms", "500")
    assert result.status == 1
    assert "'ghost'" in result.err


def test_bad_config_syntax_is_a_usage_error_naming_the_option(pylog_broker, capsys):
    result = pylog(pylog_broker, "topics", "create", "t", "--config", "retention.ms")
    assert result.status == 2
    assert "--config" in capsys.readouterr().err


def test_unreachable_broker_is_one_line_naming_the_address():
    out, err = io.StringIO(), io.StringIO()
    status = main(["--bootstrap-server", "127.0.0.1:1", "--connect-timeout-ms", "500", "topics", "list"],
                  stdout=out, stderr=err)
    assert status == 1
    assert err.getvalue().strip().count("\n") == 0
    assert "127.0.0.1:1" in err.getvalue()


def test_module_entry_point_runs_as_subprocess(pylog_broker):
    run = subprocess.run(
        [sys.executable, "-m", "broker_sim.tools.cli", "--bootstrap-server", pylog_broker.bootstrap_servers,
         "topics", "create", "via-subprocess", "--partitions", "1"],
        capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "broker_sim.tools.cli", "topics", "list"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYLOG_BOOTSTRAP_SERVERS": pylog_broker.bootstrap_servers})
    assert listed.returncode == 0, listed.stderr
    assert "via-subprocess" in listed.stdout.split()


def test_bench_prints_json_with_expected_keys():
    run = subprocess.run(
        [sys.executable, "-m", "broker_sim.tools.cli", "bench", "--records", "2000", "--rounds", "1",
         "--starts", "1", "--brokers", "pylog", "--skip-kafka-python", "--timeout-s", "60"],
        capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert set(report) == {"workload", "results", "ratios", "ratios_to_librdkafka_mock", "paired_ratios",
                           "broker_cpu_ratios", "runs"}
    assert report["workload"]["records"] == 2000
    assert report["workload"]["kafka_python_records"] is None
    mock_run, pylog_run = report["runs"]
    assert pylog_run["broker"] == "pylog" and pylog_run["round"] == 1
    assert set(pylog_run["workloads"]) == {
        "confluent_produce_acks1", "confluent_produce_acksall", "confluent_produce_batch_acks1",
        "confluent_produce_batch_acksall", "confluent_consume"}
    # produce_batch hands records over 10,000 at a time: every one of them is delivered and counted
    assert all(pylog_run["workloads"][name]["records"] == 2000 and "error" not in pylog_run["workloads"][name]
               for name in ("confluent_produce_batch_acks1", "confluent_produce_batch_acksall"))
    assert "start_ms" in report["results"]["pylog"]
    assert report["ratios"] == {}
    # the client's ceiling against librdkafka's in-process mock broker, measured in the same round
    assert mock_run["broker"] == "librdkafka_mock" and mock_run["round"] == 1
    assert all(result["records"] == 2000 and "error" not in result for result in mock_run["workloads"].values())
    assert set(report["ratios_to_librdkafka_mock"]["pylog"]) == {
        "confluent_produce_acks1_records_per_s", "confluent_produce_acksall_records_per_s",
        "confluent_produce_batch_acks1_records_per_s", "confluent_produce_batch_acksall_records_per_s"}
    # one round: the paired ratio is that round's pylog figure over the mock's
    paired = report["paired_ratios"]["librdkafka_mock"]["confluent_produce_acks1"]
    assert paired["rounds"] == [paired["median"]] and paired["median"] == pytest.approx(
        pylog_run["workloads"]["confluent_produce_acks1"]["records_per_s"]
        / mock_run["workloads"]["confluent_produce_acks1"]["records_per_s"], rel=1e-3)


def test_bench_baseline_runs_another_checkouts_broker_beside_pylog():
    """--baseline DIR: each round also runs DIR's broker, and ratios_to_baseline compares pylog to it."""
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    run = subprocess.run(
        [sys.executable, "-m", "broker_sim.tools.cli", "bench", "--records", "2000", "--rounds", "1",
         "--starts", "1", "--brokers", "pylog", "--skip-kafka-python", "--timeout-s", "60",
         "--baseline", checkout],
        capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert [r["broker"] for r in report["runs"]] == ["librdkafka_mock", "pylog", "baseline"]
    assert checkout in report["workload"]["brokers"]["baseline"]
    assert "error" not in report["runs"][2] and "errors" not in report["results"]["baseline"]
    assert report["ratios_to_baseline"]["confluent_produce_acks1_records_per_s"] > 0
    assert "start_ms" in report["ratios_to_baseline"]
    # the broker processes' own CPU over each workload (in clock ticks: a 2,000-record workload may take none),
    # per record, and paired by round (baseline / pylog)
    pylog, baseline = report["runs"][1]["workloads"], report["runs"][2]["workloads"]
    for workloads in (pylog, baseline):
        assert all(r["broker_cpu_ms"] >= 0 and r["broker_cpu_ns_per_record"] == pytest.approx(
            r["broker_cpu_ms"] * 1e6 / r["records"], abs=0.1) for r in workloads.values()), workloads
        assert sum(r["broker_cpu_ms"] for r in workloads.values()) > 0, workloads
    assert set(report["broker_cpu_ratios"]) == {"baseline"}
    for name, paired in report["broker_cpu_ratios"]["baseline"].items():
        assert paired["median"] == pytest.approx(baseline[name]["broker_cpu_ns_per_record"]
                                                 / pylog[name]["broker_cpu_ns_per_record"], rel=1e-3)


def test_bench_baseline_that_is_not_a_checkout_is_reported_skipped(tmp_path):
    from broker_sim.bench.runner import broker_kinds

    kinds, skipped = broker_kinds(["pylog"], None, io.StringIO(), str(tmp_path))
    assert set(kinds) == {"pylog"}
    assert "broker_sim/__main__.py" in skipped["baseline"]["skipped"]
