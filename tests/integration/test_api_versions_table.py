"""The README's protocol table is what the broker advertises on the wire, API by API, both ways.

An ApiVersions v3 request over a real socket to a running broker; its answer is compared with the README's
"Protocol" table (parsed from the file users read): every API the README lists is advertised with exactly
that version range, and every advertised API is in the README.
Mutation: DescribeTransactions advertised as 0-1 in broker_sim/protocol/apis.py -> "version ranges differ:
{'DescribeTransactions': {'README': (0, 0), 'wire': (0, 1)}}". It found a real mismatch on its first run: the
README said Produce 3-9 while the wire says 0-9 (v0-2 advertised but refused); the README row now says both.
"""
from __future__ import annotations

import re
from pathlib import Path

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest

from kafka_wire import WireClient

README = Path(__file__).resolve().parents[2] / "README.md"
_ROW = re.compile(r"^\| (?P<api>[A-Za-z]+) \| (?P<low>\d+)(?:[–-](?P<high>\d+))?\b")


def readme_table() -> dict[str, tuple[int, int]]:
    """API name -> (min, max) from the README's 'ApiVersions advertises exactly what is implemented' table."""
    text = README.read_text(encoding="utf-8")
    start = text.index("ApiVersions advertises exactly what is implemented")
    table = {}
    for line in text[start:].splitlines()[1:]:
        if table and not line.startswith("|"):
            break
        match = _ROW.match(line)
        if match and match["api"] != "API":
            table[match["api"]] = (int(match["low"]), int(match["high"] or match["low"]))
    return table


def test_the_readme_table_is_what_the_broker_advertises(pylog_broker):
    documented = readme_table()
    assert len(documented) > 30, f"the README table did not parse: {documented}"
    with WireClient(pylog_broker.bootstrap_servers) as client:
        response = client.call(ApiVersionsRequest[3](client_software_name="pylog-tests",
                                                     client_software_version="1"))
    assert response.error_code == 0
    advertised = {ApiKey(entry.api_key).name: (entry.min_version, entry.max_version)
                  for entry in response.api_keys}
    missing = sorted(set(documented) - set(advertised))
    undocumented = sorted(set(advertised) - set(documented))
    assert not missing, f"in the README but not advertised: {missing}"
    assert not undocumented, f"advertised but missing from the README: {undocumented}"
    differ = {api: {"README": documented[api], "wire": advertised[api]} for api in documented
              if documented[api] != advertised[api]}
    assert not differ, f"version ranges differ: {differ}"
