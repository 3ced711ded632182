"""The suite's Spark drivers start from the class archive ci/setup.sh writes (tests/spark_cds.py)."""
from __future__ import annotations

import os
import shlex

import pytest
from spark_cds import archive_path, java_options


@pytest.mark.skipif(os.environ.get("PYLOG_SETUP_SPARK_CDS") != "1", reason="only ci/test.sh writes the archive")
def test_ci_setup_wrote_the_archive_and_every_test_driver_is_given_it():
    path = archive_path()
    assert path is not None and path.is_file(), f"ci/setup.sh wrote no Spark class archive at {path}"
    assert path.stat().st_size > 50 * 2**20, "an archive of Spark's classes is well over 50 MiB"
    options = shlex.split(os.environ["PYSPARK_SUBMIT_ARGS"])
    assert options[:2] == ["--driver-java-options", f"-XX:TieredStopAtLevel=1 {java_options()}"], options
