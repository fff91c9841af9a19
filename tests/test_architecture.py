"""The import graph keeps ARCHITECTURE §2's directions (issue 14).

Walks every module of the package with :mod:`ast` (nothing is imported) and fails on:

* a protocol module importing an engine module (protocols hand plans to engines through
  :mod:`recoverylab.plan`);
* ``from recoverylab.<pkg>._<mod> import _<name>`` across packages (a private name is
  private to its package);
* protocols importing each other, except the router using paired's public API.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "recoverylab"
PROTOCOLS = ("paired", "router", "goal", "takeover")
ENGINES = ("engines", "distributed")
#: (importer, imported) protocol pairs that are allowed: the router uses paired's public API.
ALLOWED = {("router", "paired")}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> Iterator[tuple[str, tuple[str, ...], int]]:
    """Yield (module imported, names imported from it, line) for every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, (), node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *filter(None, [base])])
            names = tuple(a.name for a in node.names)
            yield base, names, node.lineno
            for name in names:  # `from recoverylab import paired` imports a module too
                yield f"{base}.{name}", (), node.lineno


def _top(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "recoverylab" else None


def _edges() -> list[tuple[str, str, tuple[str, ...], str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = _module_name(path)
        for imported, names, line in _imports(path):
            if imported.startswith("recoverylab"):
                found.append((importer, imported, names, f"{path.name}:{line}"))
    return found


def _protocol(module: str) -> str | None:
    top = _top(module)
    return top if top in PROTOCOLS else None


def test_the_walk_sees_the_imports() -> None:
    edges = _edges()
    assert any(
        i.startswith("recoverylab.paired") and m == "recoverylab.plan" for i, m, _, _ in edges
    )
    assert len(edges) > 100


def test_no_protocol_imports_an_engine() -> None:
    bad = [(i, m, where) for i, m, _, where in _edges() if _protocol(i) and _top(m) in ENGINES]
    assert bad == []


def test_no_private_name_crosses_a_package() -> None:
    bad = []
    for importer, imported, names, where in _edges():
        private_module = any(p.startswith("_") for p in imported.split(".")[1:])
        crosses = _top(importer) != _top(imported)
        private_names = [n for n in names if n.startswith("_")]
        if crosses and private_module and private_names:
            bad.append((importer, imported, private_names, where))
    assert bad == []


def test_protocols_do_not_import_each_other() -> None:
    bad = []
    for importer, imported, _, where in _edges():
        a, b = _protocol(importer), _protocol(imported)
        if a and b and a != b and (a, b) not in ALLOWED:
            bad.append((importer, imported, where))
    assert bad == []


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_import_no_protocol(engine: str) -> None:
    bad = [(i, m, where) for i, m, _, where in _edges() if _top(i) == engine and _protocol(m)]
    assert bad == []
