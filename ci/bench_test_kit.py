"""Time the test kit's example pipeline test against the same test written with only the broker fixtures.

Each run is a fresh ``python -m pytest`` process on one file (so the time includes the interpreter, pytest, the
Spark driver's start and the whole test), alternating kit / without kit, ``--rounds`` pairs (default 3). Prints
one JSON object: each run's wall time, the medians, their ratio, and each file's line count.

    python ci/bench_test_kit.py [--rounds 3]

The kit's session maps the class-data-sharing archive of Spark's classes (built on a machine's first session,
or by ``python -m broker_sim.testing.spark_cds``); the other file's own SparkSession does not, as before the kit.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "examples" / "testing" / "test_avro_pipeline.py"
WITHOUT = ROOT / "examples" / "testing" / "test_avro_pipeline_without_kit.py"


def _run(path: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS",)}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull,
                           "--rootdir", str(path.parent), str(path)], cwd=path.parent, env=env,
                          capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - started
    if done.returncode != 0 or "1 passed" not in done.stdout:
        raise SystemExit(f"{path.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return round(elapsed, 2)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    kit, without = [], []
    for _ in range(args.rounds):
        kit.append(_run(KIT))
        without.append(_run(WITHOUT))
    report = {
        "workload": "1,000 Avro rows seeded through the registry, a pylog -> pylog exactly-once query, checked",
        "kit_s": kit, "without_kit_s": without,
        "kit_median_s": statistics.median(kit), "without_kit_median_s": statistics.median(without),
        "ratio_without_over_kit": round(statistics.median(without) / statistics.median(kit), 2),
        "kit_lines": len(KIT.read_text().splitlines()), "without_kit_lines": len(WITHOUT.read_text().splitlines()),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
