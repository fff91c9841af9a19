"""The core reads and validates without knowing adapters, engines or protocols (issue 29).

ARCHITECTURE §2: the core (schema, io and the private modules they stand on) imports no adapter,
no engine and no protocol, and its modules import each other in one direction only. Checked
from the source with :mod:`ast`, function-level imports included (nothing is imported here).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "recoverylab"
CORE = ("_contracts", "_diagnose", "_errors", "_formats", "_outputs", "_resolve", "io", "schema")
OUTSIDE = ("adapters", "engines", "distributed", "paired", "router", "goal", "takeover", "cli")


def _imports(module: str) -> set[str]:
    """The recoverylab modules ``module`` imports anywhere in its source."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found.update(n for n in names if n.startswith("recoverylab."))
    return found


def test_the_core_imports_no_adapter_engine_or_protocol() -> None:
    bad = {
        (module, name)
        for module in CORE
        for name in _imports(module)
        if name.split(".")[1] in OUTSIDE
    }
    assert bad == set()


def test_the_core_modules_import_each_other_without_a_circle() -> None:
    graph = {
        module: {n.split(".")[1] for n in _imports(module) if n.split(".")[1] in CORE} - {module}
        for module in CORE
    }
    order: list[str] = []
    while graph:
        ready = sorted(m for m, needs in graph.items() if needs <= set(order))
        assert ready, f"import circle among {sorted(graph)}"
        order.extend(ready)
        for module in ready:
            del graph[module]
    assert order.index("io") < order.index("schema")
    assert order.index("_resolve") < order.index("_diagnose") < order.index("io")
