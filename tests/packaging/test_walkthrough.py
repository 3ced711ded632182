"""ci/walkthrough.py, the new-user walkthrough: a ported Kafka job in update mode, crashed, restarted, proved exact."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]


def test_the_walkthrough_proves_its_output_exact_after_a_crash_and_a_restart():
    done = subprocess.run([sys.executable, str(ROOT / "ci" / "walkthrough.py")], cwd=ROOT, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-6000:]
    assert "[walkthrough] OK: every window update is committed exactly once" in done.stdout
