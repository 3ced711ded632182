"""``pylog-broker`` / ``python -m broker_sim``: run a broker in the foreground.

Examples::

    pylog-broker --data-dir /tmp/pylog --port 9092
    pylog-broker --data-dir /tmp/pylog --port 9092 --schema-registry-port 8081
    pylog-broker --data-dir /tmp/pylog --port 9092 --config num.partitions=3 \\
        --config log.retention.ms=3600000
    # one broker of a ZooKeeper cluster (each broker: its own id, port and data dir)
    pylog-broker --zookeeper 127.0.0.1:2181/pylog --broker-id 1 --data-dir /tmp/pylog-1 --port 9093
    # a local ZooKeeper plus 3 brokers in the foreground: broker_sim.cli hands this to broker_sim.local.cluster;
    # every broker serves a Schema Registry, broker i's on 8081 + i (without the option: a free port each)
    pylog-broker cluster --brokers 3 --data-dir /tmp/pylog-cluster --schema-registry-port 8081

SIGTERM or Ctrl-C stop it cleanly.  Settings use Kafka's broker config names
(``server.properties``); ``--config`` may repeat.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import Callable

from broker_sim.config import BROKER_CONFIGS, ConfigError
from broker_sim.security.scram import CredentialError


def _parse_config(items: list[str]) -> dict[str, str]:
    configs = {}
    for number, item in enumerate(items, 1):
        if "=" not in item:  # its text is not shown: it may hold a secret
            raise ConfigError(f"--config number {number} is not key=value")
        key, value = item.split("=", 1)
        configs[key.strip()] = value.strip()
    return configs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pylog-broker", description="Run a pylog Kafka-protocol broker in the foreground.",
        epilog="Also: `pylog-broker cluster --brokers N --data-dir DIR` starts a local ZooKeeper and N brokers "
               "(see `pylog-broker cluster --help`). A broker logs to stderr (--log-level); its data and metadata "
               "live in --data-dir. Broker configs: " + ", ".join(sorted(BROKER_CONFIGS)))
    parser.add_argument("--data-dir", required=True, help="directory for segments and metadata (log.dirs)")
    parser.add_argument("--port", type=int, default=9092, help="TCP port (0 = any free port); default 9092")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind; default 127.0.0.1")
    parser.add_argument("--advertised-host", default=None, help="host clients are told to connect to")
    parser.add_argument("--broker-id", type=int, default=None, help="broker.id; default 0")
    parser.add_argument("--zookeeper", default=None, metavar="HOST:PORT[/chroot]",
                        help="join the cluster kept in this ZooKeeper (zookeeper.connect); "
                             "without it the broker is a single node")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a Kafka broker config, e.g. num.partitions=3 (repeatable)")
    parser.add_argument("--metrics-port", type=int, default=None, metavar="N",
                        help="serve Prometheus metrics at http://<metrics.host>:N/metrics (metrics.port; "
                             "0 = any free port; metrics.host defaults to 127.0.0.1)")
    parser.add_argument("--schema-registry-port", type=int, default=None, metavar="N",
                        help="serve the Schema Registry at http://HOST:N (schema.registry.listeners; 0 = any free "
                             "port)")
    parser.add_argument("--add-scram", action="append", default=[], metavar="'MECHANISM=[name=USER,password=PW]'",
                        help="store a SCRAM credential before serving (Kafka's kafka-storage --add-scram syntax, "
                             "e.g. 'SCRAM-SHA-256=[name=admin,password=admin-secret]'; repeatable): in the data "
                             "dir on a single node, in ZooKeeper /config/users in a cluster")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser


# glibc's malloc gives a freed buffer of 128 KiB or more back to the kernel (munmap, or trimming the heap's top),
# adjusting the thresholds by what was freed before. A broker allocates such buffers for every request and answer (a
# producer's 1 MiB request, its log append, a Fetch answer): when they go back to the kernel, the next one costs a
# page fault per 4 KiB. Whether they did depended on the order of allocations at start (the log level changed it),
# and it doubled the broker's CPU per produced record: 440 vs 230 ms per million 100-byte records (rdkafka acks=1).
# Fixed thresholds keep buffers up to MMAP_THRESHOLD in the heap and up to TRIM_THRESHOLD free at its top.
MALLOC_MMAP_THRESHOLD = 4 << 20
MALLOC_TRIM_THRESHOLD = 32 << 20
_MALLOC_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")


def tune_malloc() -> bool:
    """Fix glibc's mmap and trim thresholds for this process (the standalone broker's, never an embedding
    application's); False where it is not glibc, ``PYLOG_MALLOC_TUNING=0`` or the environment already tunes malloc
    (``MALLOC_*_``, ``GLIBC_TUNABLES``: the operator's values win)."""
    if (not sys.platform.startswith("linux") or os.environ.get("PYLOG_MALLOC_TUNING") == "0"
            or any(name in os.environ for name in _MALLOC_ENV)):
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # musl and other C libraries: their own allocator, left alone
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    return bool(mallopt(m_mmap_threshold, MALLOC_MMAP_THRESHOLD)) and bool(
        mallopt(m_trim_threshold, MALLOC_TRIM_THRESHOLD))


def main(argv: list[str] | None = None, *, when_serving: Callable[[], object] | None = None) -> int:
    """Run one broker until SIGTERM/SIGINT; ``when_serving`` is called once it accepts connections."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from broker_sim.server.broker import Broker

    try:
        configs = _parse_config(args.config)
        if args.zookeeper:
            configs["zookeeper.connect"] = args.zookeeper
        if args.metrics_port is not None:
            configs["metrics.port"] = args.metrics_port
        if args.schema_registry_port is not None:
            host = f"[{args.host}]" if ":" in args.host else args.host
            configs["schema.registry.listeners"] = f"http://{host}:{args.schema_registry_port}"
        broker = Broker(args.data_dir, host=args.host, port=args.port, broker_id=args.broker_id,
                        config=configs, advertised_host=args.advertised_host, add_scram=args.add_scram)
        asyncio.run(broker.serve(handle_signals=True, when_serving=when_serving))
    except (ConfigError, CredentialError) as exc:
        print(f"pylog-broker: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        # the error names the address: the Kafka port, or the metrics or Schema Registry one that failed
        print(f"pylog-broker: cannot listen: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        print(f"pylog-broker: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
