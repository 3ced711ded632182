"""ApiVersions, compared with Apache Kafka: what a client learns first about a broker."""
from __future__ import annotations

from kafka.protocol.metadata import ApiVersionsRequest

from differential import Scenario


def _ranges(peer):
    answer = peer.call(ApiVersionsRequest[3](client_software_name="pylog-conformance", client_software_version="1"))
    return {"error_code": answer.error_code,
            "apis": {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}}


def test_api_versions_answers_without_error(pair):
    """Both answer ApiVersions v3 with error 0 and list ApiVersions (18) itself from v0."""
    for peer in pair.peers:
        answer = _ranges(peer)
        assert answer["error_code"] == 0
        assert answer["apis"][18][0] == 0
