"""The import structure the packages' docstrings promise: arrows point down, no module imports itself back.

Reads every product module's imports with ``ast`` (top-level, in functions and under TYPE_CHECKING alike: a
typing-only import is still an arrow a reader has to follow) and checks the rules in README's Layout section.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("broker_sim", "connector")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str) -> set[str]:
    """The pylog modules ``path`` imports (``from a.b import c`` counts as a.b.c when that is a module)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in PACKAGES}


def _graph() -> dict[str, set[str]]:
    files = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            files[_module_name(path)] = path
    graph = {}
    for module, path in files.items():
        graph[module] = {name for name in _imports(path, module) if name in files and name != module}
    return graph


GRAPH = _graph()


def _importers_of(prefix: str) -> dict[str, set[str]]:
    return {module: {t for t in targets if t == prefix or t.startswith(prefix + ".")}
            for module, targets in GRAPH.items()
            if any(t == prefix or t.startswith(prefix + ".") for t in targets)}


def _inside(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_graph_is_read():
    assert "broker_sim.server.broker" in GRAPH
    assert "broker_sim.replication.replica_manager" in GRAPH["broker_sim.server.broker"]


def test_no_module_imports_itself_back_through_others():
    """No import cycle between pylog's modules (``__init__`` faces that only hand names on are skipped)."""
    faces = {m for m in GRAPH if (ROOT / m.replace(".", "/") / "__init__.py").exists()}
    edges = {m: {t for t in ts if t not in faces} for m, ts in GRAPH.items() if m not in faces}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []
    counter = [0]

    def visit(node):  # Tarjan's strongly connected components
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    assert cycles == []


def test_no_product_module_imports_the_harness():
    """testing/ (fixtures, Jepsen, soak) is imported by nothing outside it; bench/ only by ``pylog bench``;
    local/ only by the CLIs that start local clusters and by bench/ and testing/."""
    outside_testing = {m: t for m, t in _importers_of("broker_sim.testing").items()
                       if not _inside(m, "broker_sim.testing")}
    assert outside_testing == {}
    bench_users = {m for m in _importers_of("broker_sim.bench") if not _inside(m, "broker_sim.bench")}
    assert bench_users <= {"broker_sim.tools.cli", "broker_sim.testing.jepsen_workload"}
    local_users = {m for m in _importers_of("broker_sim.local") if not _inside(m, "broker_sim.local")}
    assert {m for m in local_users if not _inside(
        m, "broker_sim.bench", "broker_sim.testing", "broker_sim.tools", "broker_sim.cli")} == set()


def test_arrows_point_down():
    """Each layer imports only the layers below it (README, Layout)."""
    below = {
        "broker_sim.protocol": set(),
        "broker_sim.config": set(),
        "broker_sim.controller": {"broker_sim.config"},
        "broker_sim.security": {"broker_sim.config", "broker_sim.controller"},
        "broker_sim.storage": {"broker_sim.config", "broker_sim.protocol"},
        "broker_sim.replication": {"broker_sim.storage", "broker_sim.controller", "broker_sim.config",
                                   "broker_sim.errors", "broker_sim.security", "broker_sim.protocol"},
        "broker_sim.coordinator": {"broker_sim.storage", "broker_sim.replication", "broker_sim.controller",
                                   "broker_sim.config", "broker_sim.errors", "broker_sim.protocol"},
        "broker_sim.registry": {"broker_sim.storage", "broker_sim.replication", "broker_sim.controller",
                                "broker_sim.config", "broker_sim.errors", "broker_sim.protocol",
                                "broker_sim.security", "broker_sim.coordinator"},
    }
    wrong = {}
    for layer, allowed in below.items():
        for module, targets in GRAPH.items():
            if not _inside(module, layer):
                continue
            bad = {t for t in targets if not _inside(t, layer, *allowed)}
            if bad:
                wrong[module] = sorted(bad)
    assert wrong == {}


def test_server_never_imports_tools_or_harness():
    wrong = {m: sorted(t for t in ts if _inside(t, "broker_sim.tools", "broker_sim.testing", "broker_sim.bench",
                                                "broker_sim.local", "broker_sim.cli"))
             for m, ts in GRAPH.items() if _inside(m, "broker_sim.server")}
    assert {m: t for m, t in wrong.items() if t} == {}


def test_the_connector_reaches_the_broker_package_only_for_client_pieces():
    """The connector talks to brokers over the wire: from broker_sim it takes the framed-request client,
    the SASL client login, ConfigError and the registry's schema parsers (pure functions of a schema's text,
    so the connector and the registry agree on what a schema means), nothing of the broker itself."""
    allowed = ("broker_sim.protocol", "broker_sim.security.sasl", "broker_sim.config", "broker_sim.registry.types",
               "broker_sim.lazy_packages")
    wrong = {m: sorted(t for t in ts if _inside(t, "broker_sim") and not _inside(t, *allowed))
             for m, ts in GRAPH.items() if _inside(m, "connector")}
    assert {m: t for m, t in wrong.items() if t} == {}
