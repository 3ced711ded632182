"""``pylog bench --workload spark-vs-kafka``: both formats' figures in one JSON document, the rows checked alike."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from broker_sim.bench.spark_vs_kafka import FORMATS, WRITERS, identical

READS = ("batch_read", "stream_available_now", "stream_plain_trigger")
WRITES = ("batch_write", "stream_write")


def _identity(records: int = 10) -> dict:
    same = {"count": records, "hash": "123"}
    written = {"count": records, "hash": "456"}
    return {"read": {f: dict(same) for f in FORMATS}, "stream": {f: dict(same) for f in FORMATS},
            "written": {f"{figure}/{writer}": dict(written) for figure in WRITES for writer in WRITERS}}


def test_rows_are_identical_only_when_every_read_and_every_sink_agree_on_count_and_hash():
    assert identical(_identity(), 10)
    assert not identical(_identity(), 11)   # a row lost everywhere is still a lost row
    for kind, name, key in (("read", "pylog", "hash"), ("stream", "kafka", "count"),
                            ("written", "stream_write/pylog_exactly_once", "hash"),
                            ("written", "batch_write/kafka", "count")):
        broken = _identity()
        broken[kind][name][key] = "other" if key == "hash" else 9
        assert not identical(broken, 10), (kind, name, key)
    missing = _identity()
    del missing["written"]["batch_write/pylog_at_least_once"]
    assert not identical(missing, 10)


def test_an_unknown_broker_is_refused_naming_the_option():
    done = subprocess.run([sys.executable, "-m", "broker_sim.tools.cli", "bench", "--workload", "spark-vs-kafka",
                           "--spark-brokers", "tansu"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--spark-brokers" in done.stderr and "tansu" in done.stderr


def test_a_quick_run_prints_every_figure_of_both_formats_with_identical_rows(tmp_path):
    from broker_sim.testing.requirements import require_spark_kafka

    require_spark_kafka()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-m", "broker_sim.tools.cli", "bench", "--workload", "spark-vs-kafka",
                           "--quick", "--spark-brokers", "pylog"], capture_output=True, text=True, timeout=240,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["workload"]["spark_kafka_connector"] and report["workload"]["rounds"] == 1
    assert "skipped" in report["latency"]   # --with-latency is spark_latency's run, not a smoke test's
    (cell,) = report["brokers"]["pylog"]["cells"].values()
    assert cell["headline"] and cell["records"] == 5_000
    for figure in READS:
        assert set(FORMATS) <= set(cell[figure]) and cell[figure]["ratio"] > 0, figure
        for fmt in FORMATS:
            assert cell[figure][fmt]["rows_per_s"] > 0 and cell[figure][fmt]["mb_per_s"] >= 0
    for fmt in FORMATS:
        assert cell["stream_available_now"][fmt]["time_went"]["batches_with_rows"] >= 1
    for figure in WRITES:
        assert set(WRITERS) <= set(cell[figure]), figure
        assert cell[figure]["ratio_exactly_once"] > 0 and cell[figure]["ratio_at_least_once"] > 0
    assert len(cell["identity"]["written"]) == len(WRITES) * len(WRITERS)
    assert cell["identical"] is True and report["identical"] is True
