"""Listeners: where the broker accepts connections and what it tells clients to connect to.

Kafka's model and config names (KafkaConfig, EndPoint.scala):

* ``listeners=PLAINTEXT://127.0.0.1:9092,BROKER://0.0.0.0:9093`` — the sockets to
  bind, one per listener name (port 0: any free port).
* ``advertised.listeners`` — the address each listener is published under (in
  ZooKeeper and in Metadata / FindCoordinator / DescribeCluster answers to a
  client that came in on that listener); defaults to ``listeners``.  A listener
  left out of it is bound but not published.  Port 0 advertises the bound port.
* ``listener.security.protocol.map=BROKER:PLAINTEXT,...`` — each name's
  security protocol (Kafka's default maps the four protocol names to
  themselves).
* ``inter.broker.listener.name`` — the listener other brokers use to reach this
  one (follower fetches, transaction markers).

A client is answered with the addresses *of the listener it came in on*, so
a broker in a container can publish ``127.0.0.1:<mapped port>`` to the host and
``pylog-1:9093`` to its peers at the same time.  Without ``listeners`` the
broker has one PLAINTEXT listener at ``--host``/``--port`` (advertised at
``--advertised-host``), as before.
"""
from __future__ import annotations

import re
import socket
from dataclasses import dataclass, replace

from broker_sim.config import BrokerConfig, ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_PROTOCOLS = PROTOCOLS
DEFAULT_LISTENER = "PLAINTEXT"
# Kafka's listener name rule (EndPoint.scala: uri parsing), and host:port with IPv6 in brackets
_ENDPOINT = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)://(?P<host>\[[0-9A-Fa-f:.]*\]|[^:\[\]/]*):(?P<port>-?\d+)$")


@dataclass(frozen=True)
class Listener:
    """One listener: its name, protocol, bind address and advertised address (None: not published)."""
    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str | None
    advertised_port: int | None

    @property
    def bind_host(self) -> str | None:
        """The address to bind: None (every interface) for an empty host, as Kafka does."""
        return self.host or None

    def bound(self, port: int) -> "Listener":
        """This listener once bound: port 0 becomes the real port, here and where it is advertised."""
        return replace(self, port=port, advertised_port=(port if self.advertised_port == 0
                                                         else self.advertised_port))

    @property
    def advertised(self) -> tuple[str, int] | None:
        if self.advertised_host is None or self.advertised_port is None:
            return None
        return self.advertised_host, self.advertised_port


def parse_endpoints(value: str, config: str) -> list[tuple[str, str, int]]:
    """``NAME://host:port,...`` -> [(NAME, host, port)]; a bad entry or a repeated name raises ConfigError."""
    endpoints: list[tuple[str, str, int]] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        match = _ENDPOINT.match(item)
        if match is None:
            raise ConfigError(f"{config}: {item!r} is not NAME://host:port (e.g. PLAINTEXT://127.0.0.1:9092)")
        name, host, port = match["name"].upper(), match["host"].strip("[]"), int(match["port"])
        if not 0 <= port <= 65535:
            raise ConfigError(f"{config}: port {port} of {name} is not in 0..65535")
        if any(name == seen for seen, _, _ in endpoints):
            raise ConfigError(f"{config}: listener name {name} appears more than once")
        endpoints.append((name, host, port))
    return endpoints


def parse_protocol_map(value: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...``."""
    mapping: dict[str, str] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL with a protocol "
                              f"among {', '.join(PROTOCOLS)}")
        mapping[name] = protocol
    return mapping


def configure(config: BrokerConfig, *, host: str, port: int, advertised_host: str | None) -> list[Listener]:
    """The broker's listeners from its configs (or from host/port when ``listeners`` is not set).

    Raises ConfigError naming the config and value for anything Kafka would
    refuse at start: unknown protocol names, an advertised listener that is not
    a listener, two listeners on one port, the unroutable 0.0.0.0 advertised,
    an inter-broker listener that is not advertised.
    """
    protocol_map = parse_protocol_map(config.raw("listener.security.protocol.map"))
    if config.raw("listeners").strip():
        bind = parse_endpoints(config.raw("listeners"), "listeners")
    else:
        bind = [(DEFAULT_LISTENER, host, port)]
    if not bind:
        raise ConfigError("listeners: no listener given")
    if config.raw("advertised.listeners").strip():
        advertised = {name: (h, p) for name, h, p in parse_endpoints(config.raw("advertised.listeners"),
                                                                      "advertised.listeners")}
    else:
        default_host = advertised_host if not config.raw("listeners").strip() else None
        advertised = {name: (default_host or h, p) for name, h, p in bind}
    names = {name for name, _, _ in bind}
    for name in advertised:
        if name not in names:
            raise ConfigError(f"advertised.listeners: {name} is not one of the listeners ({', '.join(sorted(names))})")
    ports = [p for _, _, p in bind if p]
    if len(ports) != len(set(ports)):
        raise ConfigError(f"listeners: two listeners on one port ({config.raw('listeners')})")
    listeners = []
    for name, bind_host, bind_port in bind:
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigError(f"listener.security.protocol.map: no security protocol for listener {name} "
                              f"(e.g. {name}:PLAINTEXT)")
        if protocol not in SUPPORTED_PROTOCOLS:
            raise ConfigError(f"listeners: {name} uses {protocol}, which pylog does not serve yet "
                              f"(supported: {', '.join(SUPPORTED_PROTOCOLS)})")
        ad_host, ad_port = advertised.get(name, (None, None))
        if ad_host is not None:
            if ad_host in ("0.0.0.0", "::"):
                raise ConfigError(f"advertised.listeners: {name} advertises the unroutable address {ad_host!r}; "
                                  f"set advertised.listeners={name}://<reachable host>:<port>")
            if not ad_host:
                ad_host = socket.getfqdn()  # Kafka advertises the canonical host name for an empty host
        listeners.append(Listener(name, protocol, bind_host, bind_port, ad_host, ad_port))
    inter = inter_broker_listener_name(config, listeners)
    if config.raw("zookeeper.connect") and not any(l.name == inter and l.advertised for l in listeners):
        raise ConfigError(f"inter.broker.listener.name: {inter} must be an advertised listener "
                          f"(advertised: {', '.join(l.name for l in listeners if l.advertised) or 'none'})")
    return listeners


def inter_broker_listener_name(config: BrokerConfig, listeners: list[Listener]) -> str:
    """``inter.broker.listener.name``, else the only listener, else the one named PLAINTEXT (Kafka's default)."""
    named = config.raw("inter.broker.listener.name").strip().upper()
    if named:
        if not any(l.name == named for l in listeners):
            raise ConfigError(f"inter.broker.listener.name: {named} is not one of the listeners "
                              f"({', '.join(l.name for l in listeners)})")
        return named
    if len(listeners) == 1:
        return listeners[0].name
    if any(l.name == DEFAULT_LISTENER for l in listeners):
        return DEFAULT_LISTENER
    raise ConfigError("inter.broker.listener.name: not set, and no listener is named PLAINTEXT "
                      f"(listeners: {', '.join(l.name for l in listeners)})")


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
