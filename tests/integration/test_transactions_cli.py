"""``pylog transactions list`` and ``describe`` against the in-process broker with a real transactional producer."""
from __future__ import annotations

import io
import json

from kafka import KafkaProducer

from broker_sim.tools.cli import main
from client_helpers import create_topic


def pylog(broker, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["--bootstrap-server", broker.bootstrap_servers, *argv], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def test_list_and_describe_an_open_and_a_committed_transaction(pylog_broker):
    create_topic(pylog_broker.bootstrap_servers, "out", 2)
    open_one = KafkaProducer(bootstrap_servers=pylog_broker.bootstrap_servers, transactional_id="open-1")
    done_one = KafkaProducer(bootstrap_servers=pylog_broker.bootstrap_servers, transactional_id="done-1")
    try:
        for producer in (open_one, done_one):
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("out", b"v", partition=1)
            producer.flush(10)
        done_one.commit_transaction()

        status, out, _ = pylog(pylog_broker, "transactions", "list", "--format", "json")
        assert status == 0
        listed = {row["transactional_id"]: row["state"] for row in json.loads(out)}
        assert listed == {"done-1": "CompleteCommit", "open-1": "Ongoing"}
        status, out, _ = pylog(pylog_broker, "transactions", "list", "--state", "Ongoing")
        assert status == 0 and "open-1" in out and "done-1" not in out
        assert out.splitlines()[0].split() == ["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR"]

        status, out, _ = pylog(pylog_broker, "transactions", "describe", "open-1", "--format", "json")
        (described,) = json.loads(out)
        assert (described["state"], described["partitions"], described["transaction_timeout_ms"]) == (
            "Ongoing", [{"topic": "out", "partition": 1}], 60000)
        assert described["duration_ms"] >= 0

        status, out, err = pylog(pylog_broker, "transactions", "describe", "done-1", "nobody")
        assert status == 1
        assert "done-1" in out and "CompleteCommit" in out
        assert "transactional id 'nobody' does not exist" in err
    finally:
        open_one.close(timeout=2)
        done_one.close(timeout=2)
