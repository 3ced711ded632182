"""Offset JSON, Spark's rateLimit and range splitting: pure functions, no sockets."""
from __future__ import annotations

import json

import pytest

from connector.source.offsets import (
    OffsetRange,
    from_json_dict,
    group_of,
    plan_ranges,
    rate_limit,
    split_ranges,
    to_json_dict,
    with_group,
    without_group,
)


def test_offset_json_is_sorted_so_equal_positions_serialise_equally():
    offsets = {("b", 10): 5, ("a", 2): 1, ("b", 9): 4}
    assert json.dumps(to_json_dict(offsets)) == '{"a": {"2": 1}, "b": {"9": 4, "10": 5}}'
    assert from_json_dict(to_json_dict(offsets)) == offsets


def test_the_group_an_offset_carries_is_a_topic_without_partitions_and_the_old_string_form_is_still_read():
    offsets = {("events", 0): 7, ("events", 1): 3}
    carried = with_group(to_json_dict(offsets), "pylog-1f2e-9f8e")
    # Spark's connector reads {topic: {partition: offset}}: the group's key holds no partition, so no offset
    assert carried == {"events": {"0": 7, "1": 3}, "pylog:group=pylog-1f2e-9f8e": {}}
    assert group_of(carried) == "pylog-1f2e-9f8e"
    assert from_json_dict(carried) == offsets
    assert without_group(carried) == to_json_dict(offsets)
    assert with_group(carried, "other") == {"events": {"0": 7, "1": 3}, "pylog:group=other": {}}
    legacy = {"events": {"0": 7, "1": 3}, "pylog:group": "pylog-old"}
    assert group_of(legacy) == "pylog-old" and from_json_dict(legacy) == offsets
    assert with_group(legacy, "pylog-old") == {"events": {"0": 7, "1": 3}, "pylog:group=pylog-old": {}}
    assert group_of(to_json_dict(offsets)) is None and group_of(None) is None


def test_both_group_forms_match_the_published_offset_schema():
    jsonschema = pytest.importorskip("jsonschema")
    from pathlib import Path
    schema = json.loads((Path(__file__).parents[2] / "connector" / "schemas" / "source-offsets.json").read_text())
    jsonschema.validate({"events": {"0": 7}, "pylog:group=pylog-1f2e-9f8e": {}}, schema)
    jsonschema.validate({"events": {"0": 7}, "pylog:group": "pylog-old"}, schema)
    for example in schema["examples"]:
        jsonschema.validate(example, schema)
    with pytest.raises(jsonschema.ValidationError):   # the group's key never holds partitions
        jsonschema.validate({"events": {"0": 7}, "pylog:group=g": {"0": 1}}, schema)


def test_rate_limit_shares_the_limit_in_proportion_to_backlog():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 10}
    latest = {("t", 0): 70, ("t", 1): 30, ("t", 2): 10}
    assert rate_limit(25, start, latest, {}) == {("t", 0): 17, ("t", 1): 7, ("t", 2): 10}


def test_rate_limit_never_starves_a_small_partition_and_uses_earliest_of_new_ones():
    start = {("t", 0): 0}
    latest = {("t", 0): 1000, ("t", 1): 1}
    assert rate_limit(10, start, latest, {("t", 1): 0}) == {("t", 0): 9, ("t", 1): 1}


def test_plan_ranges_starts_new_partitions_at_earliest_and_skips_empty_ones():
    ranges = plan_ranges({("t", 0): 5}, {("t", 0): 5, ("t", 1): 3}, {("t", 1): 0}, pytest.fail)
    assert ranges == [OffsetRange("t", 1, 0, 3)]


@pytest.mark.parametrize("start, end, earliest, message", [
    ({("t", 0): 5}, {}, {}, "['t-0'] are gone"),
    ({}, {("t", 1): 3}, {}, "Cannot find earliest offsets of ['t-1']"),
    ({}, {("t", 1): 3}, {("t", 1): 2}, "Added partition t-1 starts from 2 instead of 0"),
    ({("t", 0): 9}, {("t", 0): 4}, {}, "Partition t-0's offset was changed from 9 to 4"),
])
def test_plan_ranges_reports_data_loss(start, end, earliest, message):
    reported = []
    plan_ranges(start, end, earliest, reported.append)
    assert any(message in m for m in reported), reported


def test_split_ranges_min_partitions_splits_the_big_range_only():
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 0, 10)]
    split = split_ranges(ranges, 4, None)
    assert [r for r in split if r.partition == 1] == [OffsetRange("t", 1, 0, 10)]
    big = [r for r in split if r.partition == 0]
    assert len(big) == 3 and big[0].from_offset == 0 and big[-1].until_offset == 1000
    assert all(a.until_offset == b.from_offset for a, b in zip(big, big[1:]))


def test_split_ranges_max_records_per_partition_caps_every_task():
    split = split_ranges([OffsetRange("t", 0, 100, 350)], None, 100)
    assert split == [OffsetRange("t", 0, 100, 183), OffsetRange("t", 0, 183, 266), OffsetRange("t", 0, 266, 350)]


def test_split_ranges_without_options_keeps_one_task_per_partition():
    ranges = [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 4, 4)]
    assert split_ranges(ranges, None, None) == [OffsetRange("t", 0, 0, 10)]
