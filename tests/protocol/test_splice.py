"""Zero-copy Fetch responses are byte-identical to inline encoding."""
import os

import pytest
from kafka.protocol.consumer import FetchResponse

from broker_sim.protocol.splice import new_placeholder, splice

PartitionData = FetchResponse.FetchableTopicResponse.PartitionData


class Region:
    def __init__(self, data):
        self.data, self.size = data, len(data)


def _response(records_by_partition, version):
    partitions = [PartitionData(partition_index=i, error_code=0, high_watermark=10, last_stable_offset=10,
                                log_start_offset=0, aborted_transactions=[], preferred_read_replica=-1,
                                records=records)
                  for i, records in enumerate(records_by_partition)]
    response = FetchResponse(version=version, throttle_time_ms=0, error_code=0, session_id=0,
                             responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=partitions)])
    response.with_header(correlation_id=42)
    return response


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_spliced_response_equals_inline_encoding(version):
    payloads = [os.urandom(300), b"", os.urandom(70000)]
    inline = bytes(_response(payloads, version).encode(header=True, framed=True))
    placeholders = [new_placeholder(), b"", new_placeholder()]
    encoded = _response(placeholders, version).encode(header=True, framed=True)
    regions = [(placeholders[0], [Region(payloads[0][:100]), Region(payloads[0][100:])], 300),
               (placeholders[2], [Region(payloads[2])], 70000)]
    parts = splice(encoded, regions, flexible=FetchResponse.flexible_version_q(version))
    joined = b"".join(p if isinstance(p, bytes) else p.data for p in parts)
    assert joined == inline
    decoded = FetchResponse.decode(joined, version=version, header=True, framed=True)
    assert [p.records for p in decoded.responses[0].partitions] == payloads


def test_missing_placeholder_is_an_error():
    encoded = _response([b"x" * 16], 12).encode(header=True, framed=True)
    with pytest.raises(ValueError):
        splice(encoded, [(new_placeholder(), [], 5)], flexible=True)
