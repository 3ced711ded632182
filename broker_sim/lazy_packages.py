"""Run the ``__init__`` of kafka-python, aiokafka and crc32c only when something asks for what it defines.

Why: importing any submodule (``kafka.errors``, ``kafka.protocol.produce``, ``aiokafka.record``) first runs the
package's ``__init__``, and both pull in their whole client (admin client, consumer, producer, network stack):
~100 ms for ``kafka`` and ~30 ms for ``aiokafka`` of a broker's ~0.3 s start, for classes a broker never uses.

Theory of operation: ``defer_package_init(name)`` puts the package's module object in ``sys.modules`` without
running its ``__init__`` (its ``__path__`` is set, so submodules import as usual). The first lookup of a name the
package does not have yet (``from kafka import KafkaConsumer``, ``kafka.__version__``) runs the real ``__init__``
once, in that same module object, and answers from it; after that the module is exactly the imported package.
A package already imported, or not installed, is left alone. kafka-python's ``__init__`` also gives the ``kafka``
logger a NullHandler; that is done at once here, so its loggers behave the same before and after.

A package may also have leaves: submodules whose names its ``__init__`` re-exports unchanged. The first lookup of
a leaf's name imports that submodule alone and binds its names (the very objects the ``__init__`` would bind),
the ``__init__`` still deferred; any other name runs the ``__init__`` as above. ``crc32c``'s ``__init__``
re-exports the ``crc32c`` function of its compiled ``crc32c._crc32c`` and then reads its own ``__version__`` from
the installed distribution's metadata (``importlib.metadata`` and the ``email`` parser: ~10-15 ms of a start, for
a version string nobody reads), so ``from crc32c import crc32c`` (the storage's and kafka-python's only use) runs
no ``__init__``; ``__version__`` or ``CRC32CHash`` runs it. An older crc32c that is one compiled module, not a
package, is left alone. ``kafka.protocol.consumer`` is the same case: its ``__init__`` star-imports four
submodules whose message classes kafka-python builds from JSON at import (~18 ms of CPU with the schema codec
they share, none of it needed before a request). The first Fetch, ListOffsets or OffsetForLeaderEpoch request
(a client's, or a follower's own) loads its submodule alone, as the first group read does the consumer
protocol's; the group APIs' classes (JoinGroup to OffsetDelete, ~10 ms) load with the ``__init__`` when the first
group request asks for one.

Only for a process whose code imports nothing of these packages but leaf modules (errors, protocol messages,
record batches, the CRC function): the broker program (``broker_sim/cli.py``) defers all of them. A client module
imported directly first (say ``aiokafka.client``, which imports ``__version__`` from its package) would run the
``__init__`` while it is itself half-imported, and the ``__init__`` imports it back: a circular ImportError. The
connector's source package defers ``kafka`` alone (its readers use protocol messages and record batches; a client,
``from kafka import KafkaAdminClient``, still runs the ``__init__`` first): for kafka-python only ``kafka.cluster``
imported first in such a process fails that way. Tests and tools never call it themselves.
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import threading

# the client libraries whose __init__ imports their whole client; the broker uses only submodules of them
DEFERRED = ("kafka", "aiokafka")
# package -> ((a submodule, the names its __init__ re-exports from it unchanged; None: the submodule's __all__,
# as a star import binds), ...): bound at the first lookup of one, the rest of the __init__ deferred (see the
# module docstring)
DEFERRED_WITH_LEAVES = {
    "crc32c": (("crc32c._crc32c", ("crc32c",)),),
    "kafka.protocol.consumer": (("kafka.protocol.consumer.fetch", None), ("kafka.protocol.consumer.metadata", None),
                                ("kafka.protocol.consumer.offsets", None)),
}
Leaves = tuple[tuple[str, tuple[str, ...] | None], ...]


def defer_package_init(name: str, leaves: Leaves = ()) -> bool:
    """Register *name* with its ``__init__`` deferred; False if it is already imported or not installed.

    *leaves* = ((submodule, names), ...): those names of a submodule (None: its ``__all__``) are bound in the
    package at the first lookup of one of them, without the ``__init__``; when a submodule is missing (another
    version of the package) nothing is deferred and False returned; a name missing from one at that lookup
    runs the ``__init__`` instead.
    """
    if name in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(name)
    except ImportError:  # its parent package is not installed
        return False
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    module = importlib.util.module_from_spec(spec)
    lock = threading.RLock()
    started = []

    def bind_leaf(attribute: str) -> bool:
        # the leaf that exports *attribute*, imported alone and its names bound; False: none does (or a leaf is
        # not as expected), the __init__ must run
        for submodule, names in leaves:
            try:
                found = importlib.import_module(submodule)
                exported = {leaf: getattr(found, leaf) for leaf in (found.__all__ if names is None else names)}
            except (ImportError, AttributeError):
                return False
            if attribute in exported:
                vars(module).update(exported)
                return True
        return False

    def __getattr__(attribute: str):
        with lock:
            if not started and attribute not in module.__dict__ and not bind_leaf(attribute):
                started.append(True)
                try:
                    spec.loader.exec_module(module)
                finally:
                    if module.__dict__.get("__getattr__") is __getattr__:
                        del module.__getattr__
        try:
            return module.__dict__[attribute]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}") from None

    module.__getattr__ = __getattr__
    if name == "kafka":
        logging.getLogger("kafka").addHandler(logging.NullHandler())
    before = set(sys.modules)
    sys.modules[name] = module
    for submodule, _ in leaves:
        try:
            found = importlib.util.find_spec(submodule)
        except ImportError:  # a package between them is missing
            found = None
        if found is None:
            # forget the package and every module imported under it here: a later import starts afresh
            for registered in set(sys.modules) - before:
                if registered == name or registered.startswith(name + "."):
                    del sys.modules[registered]
            return False
    return True


def defer_client_packages() -> None:
    """Defer the ``__init__`` of every package in ``DEFERRED`` and ``DEFERRED_WITH_LEAVES`` (the broker program
    calls it first thing)."""
    for name in DEFERRED:
        defer_package_init(name)
    for name, leaves in DEFERRED_WITH_LEAVES.items():
        defer_package_init(name, leaves)
