"""``python -m broker_sim.tools.healthcheck HOST:PORT``: exit 0 when a broker there answers ApiVersions.

A real request, not a port probe (a broker that accepts connections but cannot answer is unhealthy): the
container image's HEALTHCHECK, and the readiness check of ``broker_sim.testing.containers``.  ApiVersions v0
goes through the one wire client with a 1 MiB bound on the answer (a real one is a few hundred bytes).
"""
from __future__ import annotations

import sys

from kafka.protocol.metadata import ApiVersionsRequest

from broker_sim.protocol.client import WireConnection, split_address

MAX_RESPONSE_BYTES = 1 << 20


def api_versions_ok(host: str, port: int, timeout_s: float = 3.0) -> bool:
    """True when the broker at host:port answers an ApiVersions v0 request with error code 0; never raises."""
    try:
        with WireConnection.connect(host, port, timeout_s=timeout_s, client_id="pylog-healthcheck",
                                    max_response_bytes=MAX_RESPONSE_BYTES) as connection:
            response = connection.call(ApiVersionsRequest[0](), timeout_s=timeout_s)
    except Exception:  # noqa: BLE001 - refused, closed, slow, too large or undecodable: each is "unhealthy"
        return False
    return response.error_code == 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    address = args[0] if args else "127.0.0.1:9092"
    host, port = split_address(address)
    ok = api_versions_ok(host, port)
    print("ok" if ok else f"no ApiVersions answer from {address}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
