"""The in-process produce-path benchmark runs the real handler and log, and prints its figures as JSON."""
import json

import pytest

from broker_sim.bench import produce_path


def test_the_produce_path_benchmark_prints_one_json_document_per_run(capsys):
    assert produce_path.main(["--chunks", "3", "--chunk", "50", "--warmup", "10", "--records-per-batch", "4"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["chunks_us_per_request"]) == 3
    assert report["us_per_request"] == min(report["chunks_us_per_request"]) > 0
    assert report["records_per_s"] == pytest.approx(4 * report["requests_per_s"], rel=0.01)
    assert report["workload"]["records_per_batch"] == 4


def test_bad_options_exit_2_naming_the_option(capsys):
    with pytest.raises(SystemExit) as exit_info:
        produce_path.main(["--chunks", "0"])
    assert exit_info.value.code == 2
    assert "--chunks" in capsys.readouterr().err


def test_the_wire_variant_sends_frames_through_the_dispatcher_and_checks_each_answer(capsys):
    assert produce_path.main(["--wire", "--chunks", "2", "--chunk", "50", "--warmup", "10"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["workload"]["wire"] is True
    assert report["us_per_request"] == min(report["chunks_us_per_request"]) > 0
