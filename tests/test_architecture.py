"""The import graph keeps ARCHITECTURE §2's directions (issues 14 and 29).

Walks every module of the package with :mod:`ast` (nothing is imported; ``importlib.import_module``
and ``__import__`` with a literal name count as imports) and fails on:

* a protocol module importing an engine module (a protocol hands its plan, with the caller's
  ``engine=``, to the engines package's public ``run``/``rows``; it never names an engine);
* ``from recoverylab.<pkg>._<mod> import _<name>`` across packages (a private name is
  private to its package), and any import of another package's private module;
* protocols importing each other, except the router using paired's public API;
* an import cycle, between modules or between packages (a root-level module is a package of
  its own here);
* the core (schema, io, stats, plan) importing an adapter or an engine, and plan importing
  the engines (the caller, not the plan, chooses the engine).
"""

from __future__ import annotations

import ast
import functools
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
        elif _is_dynamic_import(node):
            # an import hidden behind importlib is still an import
            yield node.args[0].value, (), node.lineno  # type: ignore[attr-defined]


def _is_dynamic_import(node: ast.AST) -> bool:
    """``importlib.import_module("recoverylab...")`` or ``__import__("recoverylab...")``."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    first = node.args[0]
    return (
        name in ("import_module", "__import__")
        and isinstance(first, ast.Constant)
        and isinstance(first.value, str)
        and first.value.startswith("recoverylab")
    )


def _top(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "recoverylab" else None


@functools.cache
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


def _engine_module(module: str) -> bool:
    """A module inside an engines package (not the package's public face, which resolves the
    caller's ``engine=`` and runs the plan on it)."""
    return _top(module) in ENGINES and module != f"recoverylab.{_top(module)}"


def test_no_protocol_imports_an_engine() -> None:
    bad = [(i, m, where) for i, m, _, where in _edges() if _protocol(i) and _engine_module(m)]
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


# --- issue 29: cycles, private modules, the core ------------------------------------------------

#: The core: the public shared layer and the private modules it stands on (contracts, formats,
#: the source resolver, outputs, diagnosis, errors).
CORE = (
    "schema", "io", "stats", "plan",
    "_contracts", "_diagnose", "_errors", "_formats", "_order", "_outputs", "_resolve", "_signals",
)  # fmt: skip


def _modules() -> set[str]:
    return {_module_name(path) for path in PACKAGE.rglob("*.py")}


def _module_graph() -> dict[str, set[str]]:
    """Module -> modules it imports (anywhere in the file): ``from a import b`` counts as an
    import of module ``a.b`` when that is a module, else of ``a``."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for importer, imported, names, _ in _edges():
        targets = {f"{imported}.{n}" for n in names} & modules or {imported}
        graph[importer] |= {t for t in targets if t in modules and t != importer}
    return graph


def _package(module: str) -> str:
    """The package a module belongs to: its first part below recoverylab (a root-level module is
    its own package); the root package itself is ``recoverylab``."""
    return ".".join(module.split(".")[:2])


def _package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for importer, imported in _module_graph().items():
        source = _package(importer)
        graph.setdefault(source, set())
        # the root package is the public face re-exporting the others (lazily), not a layer
        graph[source] |= {
            _package(m) for m in imported if _package(m) not in (source, "recoverylab")
        }
    graph.pop("recoverylab", None)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_walk_sees_dynamic_imports() -> None:
    tree = ast.parse('importlib.import_module("recoverylab.engines")\n__import__("os")')
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert [_is_dynamic_import(c) for c in calls] == [True, False]


def test_no_module_import_cycle() -> None:
    found = cycles(_module_graph())
    assert found == [], f"import cycles between modules: {found}"


def test_no_package_import_cycle() -> None:
    found = cycles(_package_graph())
    assert found == [], f"import cycles between packages: {found}"


def _private_imports() -> list[tuple[str, str, str]]:
    """(importer, imported, where) for every import of another package's private module."""
    bad = []
    for importer, imported, _, where in _edges():
        parts = imported.split(".")
        private = next((i for i, p in enumerate(parts) if i > 1 and p.startswith("_")), None)
        if private is None:
            continue
        owner = ".".join(parts[:private])
        if importer != owner and not importer.startswith(f"{owner}."):
            bad.append((importer, imported, where))
    return sorted(set(bad))


def test_no_module_imports_another_packages_private_module() -> None:
    bad = _private_imports()
    assert bad == []


@pytest.mark.parametrize("core", CORE)
def test_the_core_imports_no_adapter_engine_or_protocol(core: str) -> None:
    forbidden = ("adapters", "cli", "report", *ENGINES, *PROTOCOLS)
    bad = [(i, m, where) for i, m, _, where in _edges() if _top(i) == core and _top(m) in forbidden]
    assert bad == []


def test_the_plan_imports_no_engine() -> None:
    """The caller chooses the engine (``engines.run(engine, plan)``), never the plan."""
    imported = _module_graph()["recoverylab.plan"]
    assert [m for m in imported if _top(m) in ENGINES] == []


# --- sizes (issue 29): ruff has no rule on the length of a function or class ---------------------

MAX_FILE_LINES = 900
MAX_BODY_LINES = 150
#: Functions longer than MAX_BODY_LINES, with the reason they stay whole: the synthetic samples'
#: generators draw every random number in one pass, and the shipped samples pin their floats.
LONG_BODIES = {
    "recoverylab/synth/_goal.py:block": "one random pass; data_samples pin its floats",
    "recoverylab/synth/_takeover.py:block": "one random pass; data_samples pin its floats",
}


def _files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def _long_bodies() -> list[tuple[str, int]]:
    found = []
    for path in _files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_BODY_LINES:
                    found.append((f"{_relative(path)}:{node.name}", lines))
    return found


def test_no_function_or_class_body_over_150_lines() -> None:
    long = [(name, n) for name, n in _long_bodies() if name not in LONG_BODIES]
    assert long == [], f"split these (at most {MAX_BODY_LINES} lines each): {long}"
    assert {name for name, _ in _long_bodies()} == set(LONG_BODIES)  # no stale exemption


def test_no_file_over_900_lines() -> None:
    sizes = {_relative(p): len(p.read_text(encoding="utf-8").splitlines()) for p in _files()}
    over = {name: n for name, n in sizes.items() if n > MAX_FILE_LINES}
    assert over == {}
