"""The test kit's documented example runs as a test in the suite's session, and the README and docs/testing.md
show it exactly as the file that runs (examples/testing/test_avro_pipeline.py)."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "testing" / "test_avro_pipeline.py"


def _load():
    spec = importlib.util.spec_from_file_location("pylog_kit_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# collected here, with its pylog_topics marker: the example's own test function
test_orders_are_cleaned_exactly_once = _load().test_orders_are_cleaned_exactly_once


def test_the_example_is_at_most_30_lines_and_shown_as_it_runs():
    text = EXAMPLE.read_text().rstrip("\n")
    assert len(text.splitlines()) <= 30
    for page in ("README.md", "docs/testing.md"):
        blocks = re.findall(r"```python\n(.*?)\n```", (ROOT / page).read_text(), re.S)
        assert text in blocks, f"{page} does not show {EXAMPLE.relative_to(ROOT)} as it is"
