"""Per-user and per-client configs: SCRAM credentials and quotas, where Kafka keeps them.

Theory of operation: Kafka keeps a user's SCRAM credentials and quotas in one
config map per entity — ZooKeeper ``/config/users/<user>`` (and
``/config/clients/<client-id>``, ``/config/users/<user>/clients/<client-id>``
for quotas) holding ``{"version":1,"config":{"SCRAM-SHA-256":"salt=...","producer_byte_rate":"1024"}}``.
``EntityConfigs`` is that map of maps, readable on the event loop from a
cache and changed with ``alter``:

* ``FileEntityConfigs``: a single node keeps it in ``<data dir>/security/entity-configs.json``
  (written atomically: temp file, fsync, rename; schema
  ``broker_sim/schemas/entity-configs.json``).
* ``ZkEntityConfigs``: a cluster keeps it in ZooKeeper; every broker watches
  the znodes, so a credential or quota altered through one broker applies on
  all of them without a restart.  Writes are compare-and-set on the znode
  version (retried), so two brokers altering one user do not lose an update.

Entity types are ``users``, ``clients``, ``brokers`` and ``ips``; names are the user / client id / broker id / IP,
``<default>`` for the default entity, and ``<user>/clients/<client>`` for the
(user, client-id) pair, as Kafka's paths spell them.  ``groups`` (KIP-848 group configs) and ``client-metrics``
(KIP-714 subscriptions) are named by any string (a group id may hold ``/``): their znode is the URL-encoded name
(``.`` encoded too, so ``.`` and ``..`` are ordinary names), decoded when read.  Their rules are
``broker_sim/resource_configs.py``'s.  ``on_change`` callbacks
run after every change (on kazoo's thread for ZooKeeper).

``mock_secret`` is 32 random bytes kept beside the credentials (a single node:
``<data dir>/security/scram-mock-secret``, mode 0600; a cluster: ZooKeeper
``/pylog/scram_mock_secret``, created by the first broker), from which every
listener and broker derives the same fake SCRAM salt for an unknown user, across
restarts (``security/scram.py``'s ``fake_credential``).
"""
from __future__ import annotations

import json
import logging
import os
import secrets
import threading
from pathlib import Path
from typing import Callable, Mapping
from urllib.parse import quote, unquote

from broker_sim.config import ConfigError

log = logging.getLogger(__name__)
# brokers: dynamic broker configs (<id> or <default>); ips: connection-creation quotas (<ip> or <default>)
# groups: KIP-848 group configs; client-metrics: KIP-714 subscriptions (any name: encoded in znode names)
ENTITY_TYPES = ("users", "clients", "brokers", "ips", "groups", "client-metrics")
_ENCODED_TYPES = frozenset({"groups", "client-metrics"})
VERSION = 1
MOCK_SECRET_FILE = "scram-mock-secret"
MOCK_SECRET_ZNODE = "/pylog/scram_mock_secret"  # pylog addition, beside /pylog/inter_broker_secret
MOCK_SECRET_BYTES = 32


class EntityConfigs:
    """The common read side: ``get``, ``entities``, change callbacks."""

    def __init__(self) -> None:
        self._configs: dict[str, dict[str, dict[str, str]]] = {t: {} for t in ENTITY_TYPES}
        self._callbacks: list[Callable[[], None]] = []
        self._iterations: dict[str, tuple] = {}  # SCRAM mechanism -> iteration_shares of its credentials
        self._mock_secret: bytes | None = None  # see mock_secret

    @property
    def mock_secret(self) -> bytes:
        """The SCRAM mock secret (see the module docstring), settled by the store at its first use."""
        if self._mock_secret is None:
            self._mock_secret = self._settle_mock_secret()
        return self._mock_secret

    def _settle_mock_secret(self) -> bytes:
        raise NotImplementedError

    def scram_iterations(self, mechanism: str) -> tuple[tuple[int, int], ...]:
        """How many users' ``mechanism`` credentials have each iteration count (an unknown user's fake one draws
        from them: ``scram.iteration_shares``)."""
        from broker_sim.security.scram import iteration_shares

        found = self._iterations.get(mechanism)
        if found is None:
            users = self._configs["users"].values()
            found = self._iterations[mechanism] = iteration_shares(c[mechanism] for c in users if mechanism in c)
        return found

    def get(self, entity_type: str, name: str) -> dict[str, str]:
        return dict(self._configs[entity_type].get(name, {}))

    def entities(self, entity_type: str) -> dict[str, dict[str, str]]:
        return {name: dict(config) for name, config in self._configs[entity_type].items()}

    def on_change(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def _changed(self) -> None:
        self._iterations = {}
        for callback in self._callbacks:
            try:
                callback()
            except Exception:  # a listener's bug must not stop the store
                log.exception("entity config listener failed")

    def alter(self, entity_type: str, name: str, set_: Mapping[str, str], delete: tuple | list = ()) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _check_name(entity_type: str, name: str) -> None:
    if entity_type not in ENTITY_TYPES:
        raise ValueError(f"entity type {entity_type!r} is not one of {ENTITY_TYPES}")
    if entity_type in _ENCODED_TYPES:
        if not name:
            raise ValueError(f"{entity_type} name {name!r} is not valid")
        return
    if not name or "\x00" in name or name in (".", ".."):
        raise ValueError(f"{entity_type} name {name!r} is not valid")


class FileEntityConfigs(EntityConfigs):
    """A single node's entity configs in ``<data dir>/security/entity-configs.json``."""

    def __init__(self, data_dir: str | os.PathLike) -> None:
        super().__init__()
        self.path = Path(data_dir) / "security" / "entity-configs.json"
        if self.path.exists():
            try:
                stored = json.loads(self.path.read_text(encoding="utf-8"))
                if not isinstance(stored, dict) or stored.get("version") != VERSION:
                    found = stored.get("version") if isinstance(stored, dict) else stored
                    raise ValueError(f"unsupported version {found!r}")
                for entity_type in ENTITY_TYPES:
                    for name, config in (stored.get(entity_type) or {}).items():
                        self._configs[entity_type][str(name)] = {str(k): str(v) for k, v in config.items()}
            except (OSError, ValueError, AttributeError) as exc:
                raise ConfigError(f"{self.path} (SCRAM credentials and quotas) cannot be read: {exc}; restore it "
                                  f"from a backup or remove it to start without users") from None

    def _settle_mock_secret(self) -> bytes:
        """The secret in ``security/scram-mock-secret``, written there (0600, fsynced) the first time: at the
        first SCRAM login, or at start on a broker with SCRAM listeners (``Broker._open``), not on every start
        of a fresh data dir."""
        path = self.path.with_name(MOCK_SECRET_FILE)
        try:
            secret = path.read_bytes()
            if len(secret) == MOCK_SECRET_BYTES:
                return secret
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ConfigError(f"{path} (the SCRAM mock secret) cannot be read: {exc}") from None
        path.parent.mkdir(parents=True, exist_ok=True)
        secret = secrets.token_bytes(MOCK_SECRET_BYTES)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, secret)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        return secret

    def alter(self, entity_type: str, name: str, set_: Mapping[str, str], delete: tuple | list = ()) -> None:
        _check_name(entity_type, name)
        configs = {t: {n: dict(c) for n, c in v.items()} for t, v in self._configs.items()}
        config = configs[entity_type].setdefault(name, {})
        config.update(set_)
        for key in delete:
            config.pop(key, None)
        if not config:
            del configs[entity_type][name]
        self._write(configs)
        self._configs = configs
        self._changed()

    def _write(self, configs: dict) -> None:
        """Temp file created 0600 (salted credentials: the broker's user only), fsync, rename, fsync the dir."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = json.dumps({"version": VERSION, **configs}, indent=1, sort_keys=True).encode()
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # an older temp file may have other bits
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def config_path(entity_type: str, name: str) -> str:
    return f"/config/{entity_type}/{_znode_name(entity_type, name)}"


def _znode_name(entity_type: str, name: str) -> str:
    if entity_type not in _ENCODED_TYPES:
        return name
    return quote(name, safe="").replace(".", "%2E")


def _entity_name(entity_type: str, child: str) -> str:
    """The entity name of a child znode of ``/config/<entity_type>`` (``_znode_name`` undone)."""
    return unquote(child) if entity_type in _ENCODED_TYPES else child


class ZkEntityConfigs(EntityConfigs):
    """A cluster's entity configs in ZooKeeper ``/config/users`` and ``/config/clients`` (watched)."""

    def __init__(self, zk) -> None:
        super().__init__()
        from kazoo.recipe.watchers import ChildrenWatch

        self.zk = zk
        self._lock = threading.RLock()
        self._watched: set[tuple[str, str]] = set()
        self._mock_secret = self._settle_mock_secret()  # now: not from the event loop at a login
        for entity_type in ENTITY_TYPES:
            zk.ensure_path(f"/config/{entity_type}")
            ChildrenWatch(zk, f"/config/{entity_type}", self._children_watcher(entity_type))

    def _settle_mock_secret(self) -> bytes:
        """The cluster's SCRAM mock secret: the first broker creates it, every broker reads the same."""
        from kazoo.exceptions import NodeExistsError

        try:
            self.zk.create(MOCK_SECRET_ZNODE, json.dumps({"version": VERSION, "secret": secrets.token_hex(
                MOCK_SECRET_BYTES)}).encode(), makepath=True)
        except NodeExistsError:
            pass
        data, _ = self.zk.get(MOCK_SECRET_ZNODE)
        try:
            secret = bytes.fromhex(json.loads(data)["secret"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"ZooKeeper {MOCK_SECRET_ZNODE} is not {{\"version\":1,\"secret\":<hex>}}: "
                              f"{exc}") from None
        if len(secret) != MOCK_SECRET_BYTES:
            raise ConfigError(f"ZooKeeper {MOCK_SECRET_ZNODE}: the secret must be {MOCK_SECRET_BYTES} bytes")
        return secret

    def _children_watcher(self, entity_type: str):
        def on_children(children: list[str]):
            for child in children:
                self._watch(entity_type, _entity_name(entity_type, child))
                if entity_type == "users":  # (user, client-id) pairs: /config/users/<user>/clients/<client>
                    self._watch_pairs(child)
        return on_children

    def _watch_pairs(self, user: str) -> None:
        from kazoo.recipe.watchers import ChildrenWatch

        key = ("users-clients", user)
        with self._lock:
            if key in self._watched:
                return
            self._watched.add(key)

        def on_clients(children):
            for client in children or ():
                self._watch("users", f"{user}/clients/{client}")
        ChildrenWatch(self.zk, f"/config/users/{user}/clients", on_clients, allow_session_lost=True)

    def _watch(self, entity_type: str, name: str) -> None:
        from kazoo.recipe.watchers import DataWatch

        with self._lock:
            if (entity_type, name) in self._watched:
                return
            self._watched.add((entity_type, name))

        def on_data(data, stat):
            config = _decode(data, config_path(entity_type, name)) if stat is not None else {}
            with self._lock:
                current = dict(self._configs[entity_type])
                if config:
                    current[name] = config
                else:
                    current.pop(name, None)
                self._configs = {**self._configs, entity_type: current}
            self._changed()
        DataWatch(self.zk, config_path(entity_type, name), on_data)

    def alter(self, entity_type: str, name: str, set_: Mapping[str, str], delete: tuple | list = ()) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        _check_name(entity_type, name)
        path = config_path(entity_type, name)
        for _ in range(20):
            try:
                data, stat = self.zk.get(path)
                config, version = _decode(data, path), stat.version
            except NoNodeError:
                config, version = {}, None
            config.update(set_)
            for key in delete:
                config.pop(key, None)
            payload = json.dumps({"version": VERSION, "config": config}, separators=(",", ":")).encode()
            try:
                if version is None:
                    self.zk.create(path, payload, makepath=True)
                else:
                    self.zk.set(path, payload, version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker changed it meanwhile: read again
            # this broker sees its own write at once (the watch confirms it a moment later)
            with self._lock:
                current = dict(self._configs[entity_type])
                if config:
                    current[name] = dict(config)
                else:
                    current.pop(name, None)
                self._configs = {**self._configs, entity_type: current}
            self._watch(entity_type, name)
            self._changed()
            return
        raise RuntimeError(f"{path}: changed concurrently 20 times in a row; try again")


def _decode(data: bytes | None, path: str) -> dict[str, str]:
    if not data:
        return {}
    try:
        obj = json.loads(data)
        config = obj.get("config") or {}
        return {str(k): str(v) for k, v in config.items()}
    except (ValueError, AttributeError) as exc:
        log.error("%s: payload is not Kafka's {\"version\":1,\"config\":{...}} (%s); ignored", path, exc)
        return {}
