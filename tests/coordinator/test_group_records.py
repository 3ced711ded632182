"""__consumer_offsets record formats (Kafka's)."""
from __future__ import annotations

import struct

import pytest

from broker_sim.coordinator.group.records import (
    CommittedOffset, GroupKey, GroupMetadataValue, MemberMetadataRecord, OffsetKey, StoredGroup, StoredMember,
    _encode, decode_group, decode_key, decode_offset, encode_group, encode_key, encode_offset, record_to_json,
)


def test_offset_commit_key_is_version_1_group_topic_partition():
    encoded = encode_key(OffsetKey("g", "events", 3))
    assert encoded == struct.pack(">hh1sh6si", 1, 1, b"g", 6, b"events", 3)
    assert decode_key(encoded) == OffsetKey("g", "events", 3)


def test_version_0_offset_keys_written_by_old_kafkas_decode():
    assert decode_key(struct.pack(">hh1sh1si", 0, 1, b"g", 1, b"t", 0)) == OffsetKey("g", "t", 0)


def test_group_metadata_key_is_version_2():
    assert encode_key(GroupKey("g")) == b"\x00\x02\x00\x01g"
    assert decode_key(b"\x00\x02\x00\x01g") == GroupKey("g")


def test_unknown_key_version_is_refused():
    with pytest.raises(ValueError, match="key version 30"):
        decode_key(b"\x00\x1e")
    with pytest.raises(ValueError, match="share or streams group"):   # Kafka's record types pylog does not write
        decode_key(b"\x00\x09")


def test_offset_value_v3_layout_and_round_trip():
    value = CommittedOffset(offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000)
    encoded = encode_offset(value)
    assert encoded == struct.pack(">hqih1sq", 3, 42, 5, 1, b"m", 1000)
    assert decode_offset(encoded) == value


def test_offset_value_v1_with_expire_timestamp_decodes():
    v1 = struct.pack(">hqh0sqq", 1, 7, 0, b"", 1000, 2000)
    assert decode_offset(v1) == CommittedOffset(7, -1, "", 1000, 2000)


def test_group_value_round_trip():
    group = StoredGroup("consumer", 4, "range", "m-1", 123, (
        StoredMember("m-1", None, "client", "/127.0.0.1", 30000, 10000, b"sub", b"assign"),
        StoredMember("m-2", "instance-2", "client", "/127.0.0.2", 30000, 10000, b"sub2", b""),
    ))
    encoded = encode_group(group)
    assert encoded[:2] == b"\x00\x03"
    assert decode_group(encoded) == group


def test_empty_group_value_round_trip():
    group = StoredGroup("consumer", 2, None, None, 99)
    assert decode_group(encode_group(group)) == group


def test_version_0_group_values_take_the_session_timeout_as_rebalance_timeout():
    member = MemberMetadataRecord(member_id="m", client_id="c", client_host="/h", session_timeout=10000,
                                  subscription=b"s", assignment=b"a")
    v0 = _encode(GroupMetadataValue(protocol_type="consumer", generation=7, protocol="range", leader="m",
                                    members=[member]), 0)
    decoded = decode_group(v0)
    assert (decoded.generation, decoded.current_state_timestamp) == (7, -1)
    assert decoded.members[0].rebalance_timeout_ms == decoded.members[0].session_timeout_ms == 10000


def test_record_json_view():
    key = encode_key(OffsetKey("g", "t", 1))
    assert record_to_json(key, encode_offset(CommittedOffset(5, 1, "m", 9))) == {
        "key": {"type": "offset_commit", "version": 1, "group": "g", "topic": "t", "partition": 1},
        "value": {"version": 3, "offset": 5, "leader_epoch": 1, "metadata": "m", "commit_timestamp": 9,
                  "expire_timestamp": -1}}
    assert record_to_json(encode_key(GroupKey("g")), None)["value"] is None
