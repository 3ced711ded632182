"""pylog in containers for integration tests: ``PylogContainer`` (one broker, KafkaContainer's interface) and
``PylogClusterContainers`` (ZooKeeper + N brokers on a network of their own, with process and network faults).

>>> with PylogContainer() as broker:                                            # doctest: +SKIP
...     KafkaProducer(bootstrap_servers=broker.get_bootstrap_server()).send("events", b"hi").get()

>>> with PylogClusterContainers(brokers=3) as cluster:                          # doctest: +SKIP
...     cluster.partition([[cluster.leader_of("events", 0)], [...the others..., "zookeeper"]])
...     cluster.heal()

Images come from ``bash ci/build_image.sh`` (``pylog:latest``, ``pylog-zookeeper:latest``).

Listeners (the host-mapped-port problem).  A broker tells clients where to connect, so a broker in a container
must advertise ``127.0.0.1:<published port>`` to the test process and ``<network alias>:9093`` to containers on
its network.  Each broker has two listeners — PLAINTEXT on 9092 for the host and BROKER on 9093 for the network
(``inter.broker.listener.name=BROKER``, so replication stays on the network) — and, like KafkaContainer, its
command waits for a start script that is copied in once the published port is known.  Ports are published on
127.0.0.1 only.  Each broker also serves its Schema Registry on 8081 (``get_schema_registry_url()``: the
published port), registered as ``http://<network alias>:8081`` for the other brokers to forward writes to.
Both published ports are ephemeral unless pinned: ``host_port=`` / ``schema_registry_port=`` (or
``with_schema_registry(port=...)``, or testcontainers' ``with_bind_ports(9092 or 8081, port)``); a pinned port is
known before the start, an ephemeral one is asked of Docker after it.

Network faults.  ``partition(groups)`` installs iptables rules inside the broker containers (``docker exec -u
root``, the containers have CAP_NET_ADMIN) that drop packets to and from the members of the other groups'
addresses on the cluster network.  Disconnecting a container from the network would cut the test process off
it too (published ports go through that network); with iptables the test can still reach an isolated leader —
what a zombie-leader test needs (it must take acks=1 writes and refuse acks=all ones).  Rules on the broker
side cover ZooKeeper too, so the ZooKeeper image needs no iptables.  ``slow_link(i, delay_ms, loss_pct)`` adds
``tc netem`` on a broker's interface, ``thin_link(i, rate_kbit)`` a ``tc tbf`` rate limit (kernels without netem
have it); ``heal()`` removes every rule and qdisc.

Ryuk (testcontainers' reaper) is an image this project cannot pull: it is disabled, and the classes remove
their containers and network themselves (``stop()``, context managers, the pytest fixtures).
"""
from __future__ import annotations

import io
import os
import shlex
import socket
import tarfile
import time
import uuid
from typing import Iterable, Sequence

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

from testcontainers.core.container import DockerContainer  # noqa: E402
from testcontainers.core.network import Network  # noqa: E402

from broker_sim.tools.healthcheck import api_versions_ok  # noqa: E402

IMAGE = "pylog:latest"
ZOOKEEPER_IMAGE = "pylog-zookeeper:latest"
CLIENT_PORT = 9092  # PLAINTEXT: the test process, through the published port
INTERNAL_PORT = 9093  # BROKER: other containers on the network
REGISTRY_PORT = 8081  # the broker's Schema Registry (schema.registry.listeners), published on an ephemeral port
START_SCRIPT = "/tmp/pylog-start.sh"
ZOOKEEPER_ALIAS = "zookeeper"
# failover settings for tests, as LocalCluster's (a dead broker is noticed in seconds, not 18 s)
CLUSTER_CONFIGS = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",
    "leader.imbalance.check.interval.seconds": "10",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
    "controlled.shutdown.timeout.ms": "10000",
}


def docker_unavailable() -> str | None:
    """Why no Docker engine can be used here (None: one answers)."""
    try:
        import docker
    except ImportError:
        return "the docker package is missing (pip install 'pylog[containers]')"
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"
        return f"no Docker engine answers ({type(exc).__name__}: {exc}); ci/setup.sh installs and starts one"
    try:
        client.images.get(IMAGE)
    except Exception:  # noqa: BLE001
        return f"the image {IMAGE} is missing: bash ci/build_image.sh"
    finally:
        client.close()
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _host_port_number(option: str, value) -> int | None:
    """A host port to publish on: None (ephemeral) or 1-65535; anything else raises naming ``option``."""
    if value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if not 1 <= number <= 65535 or isinstance(value, bool):
        raise ValueError(f"{option}={value!r}: expected a port number 1-65535, or None for an ephemeral port")
    return number


def _tar(name: str, text: str) -> bytes:
    data = text.encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), 0o755
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class PylogContainer(DockerContainer):
    """One pylog broker in a container, with KafkaContainer's interface.

    ``configs`` are broker configs (Kafka's names); keyword arguments spell them with underscores
    (``num_partitions=3`` is ``num.partitions=3``).  ``with_config(key, value)`` adds one.
    ``host_port`` pins the 127.0.0.1 port the broker is published on (and advertises),
    ``schema_registry_port`` the one its Schema Registry is published on; None: an ephemeral port each.
    """

    def __init__(self, image: str = IMAGE, *, broker_id: int = 0, host_port: int | None = None,
                 schema_registry_port: int | None = None, configs: dict[str, str] | None = None,
                 startup_timeout_s: float = 60.0, **kwargs) -> None:
        super().__init__(image)
        self.broker_id = broker_id
        self.configs = {k.replace("_", "."): str(v) for k, v in kwargs.items()}
        self.configs.update({k: str(v) for k, v in (configs or {}).items()})
        self.startup_timeout_s = startup_timeout_s
        self.alias = f"pylog-{broker_id}-{uuid.uuid4().hex[:6]}"
        self._host_port = host_port
        self.host = "127.0.0.1"
        self.ports[CLIENT_PORT] = ("127.0.0.1", host_port)  # published on loopback only
        self.with_schema_registry(port=schema_registry_port)
        # KafkaContainer's trick: wait for a start script, copied in once the published port is known
        self._kwargs["entrypoint"] = ["sh", "-c", f"while [ ! -f {START_SCRIPT} ]; do sleep 0.1; done; "
                                                  f"exec sh {START_SCRIPT}"]

    def with_net_admin(self) -> "PylogContainer":
        """CAP_NET_ADMIN, for iptables and tc netem inside (network faults)."""
        self._kwargs["cap_add"] = ["NET_ADMIN"]
        return self

    def with_config(self, key: str, value) -> "PylogContainer":
        self.configs[key] = str(value)
        return self

    def with_schema_registry(self, port: int | None = None) -> "PylogContainer":
        """Publish the Schema Registry on 127.0.0.1:``port`` (None: an ephemeral port, the default)."""
        self._registry_port = _host_port_number("schema_registry_port", port)
        self.ports[REGISTRY_PORT] = ("127.0.0.1", self._registry_port)
        return self

    def with_bind_ports(self, container, host=None) -> "PylogContainer":
        """testcontainers' call; for the broker's port (9092) and the registry's (8081) it pins the
        published port on 127.0.0.1, as ``host_port`` and ``with_schema_registry(port=...)`` do."""
        number = str(container).split("/")[0]
        if number == str(CLIENT_PORT):
            self._host_port = _host_port_number("host_port", host)
            self.ports[CLIENT_PORT] = ("127.0.0.1", self._host_port)
            return self
        if number == str(REGISTRY_PORT):
            return self.with_schema_registry(port=host)
        super().with_bind_ports(container, host)
        return self

    def with_network(self, network: Network) -> "PylogContainer":
        super().with_network(network)
        return self.with_network_aliases(self.alias)

    # --- KafkaContainer's interface -------------------------------------------------------------------
    def get_bootstrap_server(self) -> str:
        """For the test process: 127.0.0.1:<published port>."""
        return f"{self.host}:{self.port}"

    def get_internal_bootstrap_server(self) -> str:
        """For containers on the same network: <alias>:9093."""
        return f"{self.alias}:{INTERNAL_PORT}"

    def get_schema_registry_url(self) -> str:
        """The broker's Schema Registry for the test process: http://127.0.0.1:<published port>."""
        return f"http://{self.host}:{self.get_schema_registry_port()}"

    def get_schema_registry_port(self) -> int:
        """The 127.0.0.1 port the Schema Registry is published on: the pinned one, else Docker's (asked each
        time: a restarted container may get another)."""
        if self._registry_port is not None:
            return self._registry_port
        return int(self.get_exposed_port(REGISTRY_PORT))

    @property
    def port(self) -> int:
        if self._host_port is None:
            self._host_port = int(self.get_exposed_port(CLIENT_PORT))
        return self._host_port

    # --- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> "PylogContainer":
        super().start()
        script = self.start_script()
        self.get_wrapped_container().put_archive(os.path.dirname(START_SCRIPT),
                                                 _tar(os.path.basename(START_SCRIPT), script))
        self.wait_ready()
        return self

    def start_script(self) -> str:
        configs = {
            "listeners": f"PLAINTEXT://0.0.0.0:{CLIENT_PORT},BROKER://0.0.0.0:{INTERNAL_PORT}",
            "advertised.listeners": f"PLAINTEXT://{self.get_bootstrap_server()},"
                                    f"BROKER://{self.alias}:{INTERNAL_PORT}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT",
            "inter.broker.listener.name": "BROKER",
            # published in the broker's registration as http://<alias>:8081, where peers forward writes
            "schema.registry.listeners": f"http://0.0.0.0:{REGISTRY_PORT}",
            **self.configs,
        }
        args = ["pylog-broker", "--data-dir", "/var/lib/pylog", "--broker-id", str(self.broker_id)]
        for key, value in configs.items():
            args += ["--config", f"{key}={value}"]
        return "exec " + " ".join(shlex.quote(a) for a in args) + "\n"

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Until the broker answers ApiVersions on its published port (not a log line)."""
        deadline = time.monotonic() + (timeout_s or self.startup_timeout_s)
        while not api_versions_ok(self.host, self.port, timeout_s=2.0):
            container = self.get_wrapped_container()
            container.reload()
            if container.status in ("exited", "dead"):
                raise RuntimeError(f"broker container {self.alias} exited ({container.attrs['State']}):\n"
                                   f"{self.logs_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker container {self.alias} did not answer ApiVersions on "
                                   f"{self.get_bootstrap_server()} within {timeout_s or self.startup_timeout_s} s:"
                                   f"\n{self.logs_tail()}")
            time.sleep(0.2)

    def logs_tail(self, lines: int = 40) -> str:
        try:
            return self.get_wrapped_container().logs(tail=lines).decode(errors="replace")
        except Exception as exc:  # noqa: BLE001
            return f"(no logs: {exc})"

    def exec_root(self, command: Sequence[str]) -> tuple[int, str]:
        result = self.get_wrapped_container().exec_run(list(command), user="root")
        return result.exit_code, result.output.decode(errors="replace")

    def ip(self, network: Network) -> str:
        container = self.get_wrapped_container()
        container.reload()
        return container.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]


class NetemUnavailable(RuntimeError):
    """slow_link() on a Docker host whose kernel lacks sch_netem."""


class ZooKeeperContainer(DockerContainer):
    """Debian's ZooKeeper (pylog-zookeeper image) at ``zookeeper:2181`` on the cluster network."""

    def __init__(self, image: str = ZOOKEEPER_IMAGE) -> None:
        super().__init__(image)
        self.with_network_aliases(ZOOKEEPER_ALIAS)

    def start(self, timeout_s: float = 60.0) -> "ZooKeeperContainer":
        super().start()
        deadline = time.monotonic() + timeout_s
        while True:
            # bounded: a connection ZooKeeper accepted but never answered held `cat` (and this start) for good
            code, output = self.get_wrapped_container().exec_run(
                ["timeout", "5", "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/2181 && printf ruok >&3 && cat <&3"])[:2]
            if code == 0 and b"imok" in output:
                return self
            if time.monotonic() > deadline:
                raise TimeoutError(f"ZooKeeper did not answer ruok within {timeout_s} s:\n"
                                   f"{self.get_wrapped_container().logs(tail=40).decode(errors='replace')}")
            time.sleep(0.3)

    def ip(self, network: Network) -> str:
        container = self.get_wrapped_container()
        container.reload()
        return container.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]


class PylogClusterContainers:
    """ZooKeeper and ``brokers`` pylog brokers on a bridge network of their own; faults by container.

    Brokers are numbered 0..N-1 (their broker ids).  Each publishes its client port on a fixed 127.0.0.1 port
    chosen at creation, so a restarted broker comes back at the address it advertised.
    """

    def __init__(self, brokers: int = 3, image: str = IMAGE, *, zookeeper_image: str = ZOOKEEPER_IMAGE,
                 configs: dict[str, str] | None = None, data_root: str | os.PathLike | None = None) -> None:
        """``data_root``: keep each broker's data in ``<data_root>/broker-<i>`` on the host (bind-mounted), so
        a test can read the replicas' segment files (``partition_dirs``); default: a Docker volume each."""
        self.size = brokers
        self.data_root = data_root
        self.image = image
        self.zookeeper_image = zookeeper_image
        self.configs = {**CLUSTER_CONFIGS, **(configs or {})}
        self.network: Network | None = None
        self.zookeeper: ZooKeeperContainer | None = None
        self.brokers: list[PylogContainer] = []
        self.partitioned = False

    # --- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> "PylogClusterContainers":
        try:
            self.network = Network().create()
            self.zookeeper = ZooKeeperContainer(self.zookeeper_image)
            self.zookeeper.with_network(self.network)
            self.zookeeper.start()
            for broker_id in range(self.size):
                broker = PylogContainer(self.image, broker_id=broker_id, host_port=_free_port(),
                                        configs={**self.configs, "zookeeper.connect": f"{ZOOKEEPER_ALIAS}:2181"})
                broker.with_network(self.network).with_net_admin()
                if self.data_root is not None:
                    directory = os.path.join(os.fspath(self.data_root), f"broker-{broker_id}")
                    os.makedirs(directory, exist_ok=True)
                    os.chmod(directory, 0o777)  # the image's non-root user writes there
                    broker.with_volume_mapping(directory, "/var/lib/pylog", "rw")
                self.brokers.append(broker)
                broker.start()
            self.wait_for_brokers(self.size)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for container in [*self.brokers, self.zookeeper]:
            if container is not None and container._container is not None:
                try:
                    container.get_wrapped_container().remove(force=True, v=True)
                except Exception:  # noqa: BLE001 - already gone
                    pass
        self.brokers = []
        self.zookeeper = None
        if self.network is not None:
            try:
                self.network.remove()
            except Exception:  # noqa: BLE001
                pass
            self.network = None

    def __enter__(self) -> "PylogClusterContainers":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.get_bootstrap_server() for b in self.brokers)

    # --- process faults -------------------------------------------------------------------------------
    def kill(self, i: int) -> None:
        """SIGKILL broker i's process (the container stops; its data volume stays)."""
        self.brokers[i].get_wrapped_container().kill(signal="SIGKILL")

    def restart(self, i: int, *, wait: bool = True) -> None:
        """Start broker i's container again (after kill, or a clean restart if it runs)."""
        container = self.brokers[i].get_wrapped_container()
        container.reload()
        if container.status == "running":
            container.restart(timeout=30)
        else:
            # a killed broker's ZooKeeper session outlives it for zookeeper.session.timeout.ms, and a broker
            # does not start while its id is registered by another session (as Kafka): wait for it to go
            self._wait_unregistered(i)
            container.start()
        if wait:
            self.brokers[i].wait_ready()

    def _running(self) -> list[int]:
        running = []
        for index, broker in enumerate(self.brokers):
            container = broker.get_wrapped_container()
            container.reload()
            if container.status == "running":
                running.append(index)
        return running

    def _wait_unregistered(self, i: int) -> None:
        others = [b for b in self._running() if b != i]
        if not others:
            return
        timeout_s = int(self.configs.get("zookeeper.session.timeout.ms", "18000")) / 1000.0 * 2 + 30
        self.wait_for(lambda: i not in {b["broker_id"] for b in self.describe(others)["brokers"]},
                      timeout_s=timeout_s, what=f"broker {i}'s old ZooKeeper session to expire")

    def pause(self, i: int) -> None:
        """SIGSTOP-like: freeze broker i's processes (the cgroup freezer)."""
        self.brokers[i].get_wrapped_container().pause()

    def unpause(self, i: int) -> None:
        self.brokers[i].get_wrapped_container().unpause()

    resume = unpause  # LocalCluster's name

    def available_brokers(self) -> list[int]:
        """Brokers running and not paused (LocalCluster's interface)."""
        return self._running()

    # --- network faults -------------------------------------------------------------------------------
    def _members(self, group: Iterable) -> set:
        members = set()
        for member in group:
            if member == ZOOKEEPER_ALIAS:
                members.add(ZOOKEEPER_ALIAS)
            elif isinstance(member, int) and 0 <= member < self.size:
                members.add(member)
            else:
                raise ValueError(f"partition member {member!r}: a broker index 0..{self.size - 1} or 'zookeeper'")
        return members

    def _ip(self, member) -> str:
        target = self.zookeeper if member == ZOOKEEPER_ALIAS else self.brokers[member]
        return target.ip(self.network)

    def partition(self, groups: Sequence[Sequence]) -> None:
        """Cut the network between groups, e.g. ``[[0], [1, 2, "zookeeper"]]``; members not named keep
        talking to everyone.  Adds to earlier partitions until ``heal()``."""
        sets = [self._members(g) for g in groups]
        ips = {m: self._ip(m) for s in sets for m in s}
        for index, group in enumerate(sets):
            others = set().union(*(s for j, s in enumerate(sets) if j != index))
            for member in group:
                if member == ZOOKEEPER_ALIAS:
                    continue  # the brokers' rules cover their side of each ZooKeeper link
                for other in others:
                    self._iptables(member, ["-A", "INPUT", "-s", ips[other], "-j", "DROP"])
                    self._iptables(member, ["-A", "OUTPUT", "-d", ips[other], "-j", "DROP"])
        self.partitioned = True

    def isolate(self, i: int) -> None:
        """Broker i alone on one side; every other broker and ZooKeeper on the other."""
        self.partition([[i], [*[b for b in range(self.size) if b != i], ZOOKEEPER_ALIAS]])

    def slow_link(self, i: int, delay_ms: int = 100, loss_pct: float = 0.0) -> None:
        """tc netem on broker i's network interface: every packet it sends is delayed (and maybe dropped)."""
        spec = ["delay", f"{delay_ms}ms"] + (["loss", f"{loss_pct}%"] if loss_pct else [])
        code, output = self.brokers[i].exec_root(["tc", "qdisc", "replace", "dev", "eth0", "root", "netem", *spec])
        if code != 0 and "unknown" in output.lower():
            raise NetemUnavailable("this Docker host's kernel has no netem queueing discipline (module sch_netem): "
                                   f"tc said {output.strip()!r}; partitions (iptables) still work")
        if code != 0:
            raise RuntimeError(f"tc netem in broker {i} exited {code}: {output.strip()}")

    def thin_link(self, i: int, rate_kbit: int = 1024) -> None:
        """tc tbf on broker i's network interface: everything it sends leaves at ``rate_kbit`` at most (a thin
        link; no packet dropped for queueing under 10 s).  Needs only sch_tbf, which kernels without netem
        (these CI machines' microVMs) have."""
        burst = max(1600, rate_kbit * 1000 // 8 // 100)   # ~10 ms of rate, at least one full-size frame
        code, output = self.brokers[i].exec_root(
            ["tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", f"{rate_kbit}kbit",
             "burst", str(burst), "latency", "10s"])
        if code != 0:
            raise RuntimeError(f"tc tbf in broker {i} exited {code}: {output.strip()}")

    def heal_network(self) -> None:
        """Remove every partition rule and netem/tbf qdisc."""
        for i, broker in enumerate(self.brokers):
            container = broker.get_wrapped_container()
            container.reload()
            if container.status != "running":
                continue
            self._run_root(i, ["iptables", "-F", "INPUT"])
            self._run_root(i, ["iptables", "-F", "OUTPUT"])
            broker.exec_root(["tc", "qdisc", "del", "dev", "eth0", "root"])  # fails when none: fine
        self.partitioned = False

    def heal(self, *, wait: bool = True, timeout_s: float | None = None) -> None:
        """Undo every fault: network rules and netem removed, paused brokers resumed, killed ones restarted;
        with ``wait``, until every broker answers and is registered."""
        for i, broker in enumerate(self.brokers):
            container = broker.get_wrapped_container()
            container.reload()
            if container.status == "paused":
                container.unpause()
        self.heal_network()
        for i, broker in enumerate(self.brokers):
            container = broker.get_wrapped_container()
            container.reload()
            if container.status != "running":
                self.restart(i, wait=wait)
        if wait:
            self.wait_for_brokers(self.size, timeout_s=timeout_s or 120.0)

    def _iptables(self, i: int, rule: list[str]) -> None:
        self._run_root(i, ["iptables", *rule])

    def _run_root(self, i: int, command: list[str]) -> None:
        code, output = self.brokers[i].exec_root(command)
        if code != 0:
            raise RuntimeError(f"{' '.join(command)} in broker {i} exited {code}: {output.strip()}")

    def partition_dirs(self, topic: str, partition: int) -> dict[int, str]:
        """{broker: its directory of topic-partition on the host} (needs ``data_root``)."""
        if self.data_root is None:
            raise RuntimeError("partition_dirs needs PylogClusterContainers(data_root=...)")
        found = {}
        for i in range(self.size):
            path = os.path.join(os.fspath(self.data_root), f"broker-{i}", f"{topic}-{partition}")
            if os.path.isdir(path):
                found[i] = path
        return found

    # --- cluster state, through the Kafka protocol -----------------------------------------------------
    def _ask(self, via: Sequence[int] | None, topics: Sequence[str] | None = ()):
        """Metadata from the first of ``via`` (default: running brokers) that answers — only those: a client
        library would also ask a zombie leader, whose view is stale."""
        from broker_sim.local.cluster import ClusterError, fetch_metadata

        last = None
        for i in (via if via is not None else self._running()):
            try:
                return fetch_metadata("127.0.0.1", self.brokers[i].port, topics, broker_id=i, timeout_s=5.0)
            except OSError as exc:
                last = exc
        raise ClusterError(f"no broker of {via} answered Metadata ({last})")

    def describe(self, via: Sequence[int] | None = None) -> dict:
        """{'controller_id': id, 'brokers': [{'broker_id': id, 'host': h, 'port': p}]} as a broker sees it."""
        md = self._ask(via)
        return {"controller_id": md.controller_id,
                "brokers": [{"broker_id": b, "host": h, "port": p} for b, (h, p) in sorted(md.brokers.items())]}

    def wait_for_brokers(self, count: int, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if len(self.describe(self._running())["brokers"]) >= count:
                    return
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"fewer than {count} brokers registered within {timeout_s} s")
            time.sleep(0.5)

    def metadata(self, topics: Sequence[str] | None = (), *, prefer: Iterable[int] = (), timeout_s: float = 10.0):
        """A Metadata answer (broker_sim.local.cluster.ClusterMetadata) from a running broker, as LocalCluster's."""
        from broker_sim.local.cluster import ClusterError, fetch_metadata

        deadline = time.monotonic() + timeout_s
        last = "no broker is running"
        while True:
            running = self._running()
            for i in [b for b in prefer if b in running] + [b for b in running if b not in set(prefer)]:
                try:
                    return fetch_metadata("127.0.0.1", self.brokers[i].port, topics, broker_id=i,
                                          timeout_s=min(5.0, max(0.5, deadline - time.monotonic())))
                except OSError as exc:
                    last = f"broker {i}: {exc}"
            if time.monotonic() > deadline:
                raise ClusterError(f"no broker answered Metadata within {timeout_s} s ({last})")
            time.sleep(0.2)

    def wait_for_full_isr(self, topic: str, partitions: int, *, timeout_s: float = 60.0) -> dict:
        """Until every partition of ``topic`` has a leader and ISR == replicas (LocalCluster's interface)."""
        from broker_sim.local.cluster import ClusterError

        def complete():
            md = self.metadata([topic])
            states = {p: md.partitions.get((topic, p)) for p in range(partitions)}
            if all(st is not None and st.error_code == 0 and st.leader >= 0 and st.replicas
                   and set(st.isr) == set(st.replicas) for st in states.values()):
                return states
            return None
        try:
            return self.wait_for(complete, timeout_s=timeout_s, what=f"{topic}: leaders and full ISRs")
        except TimeoutError as exc:
            raise ClusterError(str(exc)) from None

    def partition_state(self, topic: str, partition: int, via: Sequence[int] | None = None) -> dict:
        """{'leader': id, 'replicas': [...], 'isr': [...]} as a broker's Metadata answers it."""
        state = self._ask(via, [topic]).partitions.get((topic, partition))
        if state is None:
            raise KeyError(f"{topic}-{partition} is not known to brokers {via}")
        return {"leader": state.leader, "replicas": list(state.replicas), "isr": list(state.isr)}

    def leader_of(self, topic: str, partition: int, via: Sequence[int] | None = None, *,
                  timeout_s: float = 10.0) -> int:
        if via is not None:
            return self.partition_state(topic, partition, via)["leader"]
        state = self.metadata([topic], timeout_s=timeout_s).partitions.get((topic, partition))
        return state.leader if state is not None else -1

    def controller_id(self, via: Sequence[int] | None = None, *, timeout_s: float = 10.0) -> int:
        if via is not None:
            return self.describe(via)["controller_id"]
        return self.metadata(timeout_s=timeout_s).controller_id

    def wait_for(self, predicate, *, timeout_s: float, what: str, interval_s: float = 0.5):
        """Poll ``predicate()`` until it returns something other than None or False, which is returned — a
        broker id 0 counts, as in LocalCluster.wait_for (with a truthiness test, a leadership that moved to
        broker 0 was "never" seen).  An exception means "ask again" (a broker in transition).

        Raises TimeoutError naming *what*, the last value and the last error after *timeout_s*.
        """
        deadline = time.monotonic() + timeout_s
        last, value = None, None
        while True:
            try:
                value = predicate()
                if value is not None and value is not False:
                    return value
            except Exception as exc:  # noqa: BLE001 - a broker in transition: ask again
                last = exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout_s} s (last value: {value!r}"
                                   + (f", last error: {last})" if last else ")"))
            time.sleep(interval_s)


# --------------------------------------------------------------------------- the partition nemesis

PARTITION_FAULTS = ("isolate_leader", "isolate_follower", "split_zookeeper", "bridge")


def partition_nemesis(faults: Sequence[str] = PARTITION_FAULTS, *, recovery_timeout_s: float = 90.0):
    """A ``nemesis_factory`` for ``broker_sim.testing.jepsen_workload.run_workload`` on PylogClusterContainers: network
    partitions instead of kills, the kinds taken in turn (so a short run sees each):

    * ``isolate_leader``: a partition's leader cut off from ZooKeeper and the other brokers (a zombie: clients
      still reach it; its acks=1 writes are lost at heal, acks=all ones are never acknowledged);
    * ``isolate_follower``: one of its followers cut off the same way;
    * ``split_zookeeper``: ZooKeeper cut off from every broker;
    * ``bridge``: Jepsen's bridge — the leader and one follower each see only the third broker (and
      ZooKeeper sees that third broker too).

    After each fault the network heals and the nemesis waits for full ISRs, recording ``recovered_s`` (heal to
    full ISR) in the ``healed`` event.
    """
    from broker_sim.testing.jepsen_workload import Nemesis

    class PartitionNemesis(Nemesis):
        turn = 0

        def _one_fault(self) -> None:
            kind = faults[self.turn % len(faults)]  # the turn moves on only once the kind's fault is injected
            cluster, topic = self.cluster, self.options.topic
            partition = self.rng.randrange(self.options.partitions)
            try:
                state = cluster.metadata([topic]).partitions.get((topic, partition))
            except Exception as exc:  # noqa: BLE001 - reported, the next turn tries again
                self._log({"skipped": f"metadata: {exc}"})
                return
            if state is None or state.leader < 0:
                self._log({"skipped": f"{topic}-{partition} has no leader"})
                return
            leader = state.leader
            followers = [b for b in state.replicas if b != leader]
            if kind == "isolate_leader":
                groups = [[leader], [*followers, ZOOKEEPER_ALIAS]]
            elif kind == "isolate_follower":
                groups = [[followers[0]], [leader, *followers[1:], ZOOKEEPER_ALIAS]]
            elif kind == "split_zookeeper":
                groups = [[ZOOKEEPER_ALIAS], list(range(cluster.size))]
            elif kind == "bridge":
                # leader | first follower + ZooKeeper; the other follower, named in neither group, sees both
                groups = [[leader], [followers[0], ZOOKEEPER_ALIAS]]
            else:
                raise ValueError(f"unknown partition fault {kind!r}; choose from {', '.join(PARTITION_FAULTS)}")
            duration = round(self.rng.uniform(*self.options.fault_s), 2)
            self.turn += 1
            self._log({"fault": kind, "partition": partition, "leader": leader, "groups": groups, "for_s": duration})
            cluster.partition(groups)
            self.stop_event.wait(duration)
            healed_at = time.monotonic()
            cluster.heal_network()
            try:
                cluster.wait_for_full_isr(topic, self.options.partitions, timeout_s=recovery_timeout_s)
                self._log({"healed": kind, "recovered_s": round(time.monotonic() - healed_at, 2)})
            except Exception as exc:  # noqa: BLE001 - the workload's final heal reports it
                self._log({"heal_failed": kind, "error": str(exc)[:2000]})

    return PartitionNemesis
