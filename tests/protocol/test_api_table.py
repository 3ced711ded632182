"""The dispatch table names kafka-python's classes by package and API (``broker_sim/protocol/apis.py``), loaded on
first use: each row must still resolve to that API's request and response classes, speaking its whole version
range, and ``messages`` must serve exactly the table's classes.

The advertised ranges themselves are checked on the wire against the README's table
(``tests/integration/test_api_versions_table.py``).
"""
from __future__ import annotations

import pytest
from kafka.protocol.api_key import ApiKey

from broker_sim.protocol.apis import APIS, messages


def test_every_row_resolves_to_its_apis_request_and_response_classes_covering_its_versions():
    wrong = {}
    for key, spec in APIS.items():
        request, response = spec.request, spec.response
        found = (request.__name__, request.API_KEY, request.is_request(), response.__name__, response.API_KEY,
                 response.is_request())
        expected = (f"{spec.key.name}Request", key, True, f"{spec.key.name}Response", key, False)
        if found != expected:
            wrong[spec.key.name] = found
        elif not (request.min_version <= spec.advertised_min and spec.max_version <= request.max_version
                  and response.min_version <= spec.advertised_min and spec.max_version <= response.max_version):
            wrong[spec.key.name] = ("versions", spec.advertised_min, spec.max_version, request.max_version)
    assert wrong == {}
    assert {int(spec.key) for spec in APIS.values()} == set(APIS)


def test_messages_serves_the_tables_classes_by_name_and_nothing_else():
    assert messages.FetchResponse is APIS[int(ApiKey.Fetch)].response
    assert messages.CreateTopicsRequest is APIS[int(ApiKey.CreateTopics)].request
    assert vars(messages)["FetchResponse"] is APIS[int(ApiKey.Fetch)].response  # kept: a plain attribute now
    for name in ("Fetch", "FetchReply", "NoSuchApiResponse", "ConsumerProtocolSubscription"):
        with pytest.raises(AttributeError, match=f"'{name}' is not the Request or Response class of an API"):
            getattr(messages, name)
