"""Every public name keeps its signature (issue 29: "public API unchanged").

Each public module of recoverylab (the package and every module or subpackage whose dotted path
has no ``_`` part) is imported; every name in its ``__all__`` is recorded as one line of
``tests/api_signatures.txt``::

    module <TAB> name <TAB> kind <TAB> signature

and a public class's public methods and properties as ``Class.method`` lines of their own. The
test fails, naming the module and the name, when a stored name is gone, changes kind or
signature, or when a public name appears that the stored list does not hold. Adding a public name
is allowed once it is listed: regenerate the file with one command, from the project root::

    python -m tests.test_api_signatures --update

and review the diff (added lines are new API; changed or removed lines break callers).

Signatures are written in a form that survives moving code between private modules: the dotted
path of a recoverylab type in an annotation or default is cut to its name (a class moved from
``stats.py`` into ``stats/_results.py`` is the same API), and memory addresses are dropped.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import recoverylab

STORED = Path(__file__).with_name("api_signatures.txt")
UPDATE_COMMAND = "python -m tests.test_api_signatures --update"
_DOTTED = re.compile(r"\brecoverylab(?:\.\w+)*\.(?=\w)")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")

Entry = tuple[str, str, str, str]


def public_modules() -> list[str]:
    """Dotted names of recoverylab's public modules: no part after the first starts with ``_``."""
    found = pkgutil.walk_packages(recoverylab.__path__, "recoverylab.")
    names = [i.name for i in found if not any(p.startswith("_") for p in i.name.split(".")[1:])]
    return sorted(["recoverylab", *names])


def _clean(text: str) -> str:
    return _ADDRESS.sub("", _DOTTED.sub("", text))


def _signature(obj: Any) -> str:
    try:
        return _clean(str(inspect.signature(obj)))
    except (TypeError, ValueError):  # builtins and some extension types have none
        return ""


def _kind(obj: Any) -> str:
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return "function"
    if callable(obj):
        return f"callable {type(obj).__name__}"
    return f"constant {type(obj).__name__}"


def _members(cls: type) -> list[tuple[str, str, str]]:
    """(name, kind, signature) of a class's own public methods and properties, MRO included
    up to (not including) classes from outside recoverylab."""
    seen: dict[str, tuple[str, str]] = {}
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("recoverylab"):
            continue
        for name, raw in vars(klass).items():
            if name.startswith("_") and name not in ("__init__", "__call__"):
                continue
            if isinstance(raw, property):
                seen[name] = ("property", "")
            elif isinstance(raw, (staticmethod, classmethod)):
                seen[name] = (type(raw).__name__, _signature(getattr(cls, name)))
            elif inspect.isfunction(raw):
                seen[name] = ("method", _signature(raw))
    return [(name, kind, sig) for name, (kind, sig) in sorted(seen.items())]


def entries_of(module_name: str) -> list[Entry]:
    """The stored lines of one module, from the code as it is now."""
    module: ModuleType = importlib.import_module(module_name)
    out: list[Entry] = []
    for name in sorted(getattr(module, "__all__", ())):
        obj = getattr(module, name)
        kind = _kind(obj)
        sig = "" if kind == "module" or kind.startswith("constant") else _signature(obj)
        out.append((module_name, name, kind, sig))
        if kind == "class" and obj.__module__.startswith("recoverylab"):
            out.extend(
                (module_name, f"{name}.{member}", mkind, msig)
                for member, mkind, msig in _members(obj)
            )
    return out


def current() -> list[Entry]:
    return [entry for module in public_modules() for entry in entries_of(module)]


def stored() -> list[Entry]:
    rows = []
    for line in STORED.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            module, name, kind, sig = line.split("\t")
            rows.append((module, name, kind, sig))
    return rows


def write(entries: list[Entry]) -> None:
    header = f"# module\tname\tkind\tsignature -- regenerate with: {UPDATE_COMMAND}\n"
    body = "".join("\t".join(entry) + "\n" for entry in entries)
    STORED.write_text(header + body, encoding="utf-8")


def differences(module_name: str, now: list[Entry], before: list[Entry]) -> list[str]:
    """One sentence per name of ``module_name`` whose stored line and current line differ."""
    old = {(m, n): (k, s) for m, n, k, s in before if m == module_name}
    new = {(m, n): (k, s) for m, n, k, s in now if m == module_name}
    problems = []
    for key in sorted(old.keys() | new.keys()):
        name = f"{key[0]}.{key[1]}"
        if key not in new:
            problems.append(f"{name}: removed (stored as {old[key][0]} {old[key][1]})")
        elif key not in old:
            problems.append(
                f"{name}: new public name ({new[key][0]} {new[key][1]}) not in "
                f"{STORED.name}; if intended, run `{UPDATE_COMMAND}`"
            )
        elif old[key] != new[key]:
            problems.append(
                f"{name}: was {old[key][0]} {old[key][1]}, now {new[key][0]} {new[key][1]}"
            )
    return problems


def test_the_stored_list_covers_the_public_modules() -> None:
    listed = {module for module, *_ in stored()}
    gone = sorted(listed - set(public_modules()))
    assert gone == [], f"public modules gone (or renamed private): {gone}"
    assert {"recoverylab", "recoverylab.stats", "recoverylab.paired"} <= listed


@pytest.mark.parametrize("module_name", public_modules())
def test_public_names_keep_their_signatures(module_name: str) -> None:
    problems = differences(module_name, entries_of(module_name), stored())
    assert problems == [], "public API changed:\n" + "\n".join(problems)


def test_a_changed_signature_is_named() -> None:
    """The comparison names the module and the name that changed (the test can fail)."""
    before = [("recoverylab.x", "f", "function", "(a, b=1)"), ("recoverylab.x", "g", "class", "()")]
    now = [("recoverylab.x", "f", "function", "(a, b=2)"), ("recoverylab.x", "h", "function", "()")]
    assert differences("recoverylab.x", now, before) == [
        "recoverylab.x.f: was function (a, b=1), now function (a, b=2)",
        "recoverylab.x.g: removed (stored as class ())",
        "recoverylab.x.h: new public name (function ()) not in api_signatures.txt; "
        f"if intended, run `{UPDATE_COMMAND}`",
    ]


def test_moved_recoverylab_types_keep_their_text() -> None:
    assert _clean("(r: recoverylab.stats._results.Interval) -> recoverylab.plan.Plan") == (
        "(r: Interval) -> Plan"
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        write(current())
        print(f"wrote {STORED} ({len(current())} lines)")
    else:
        sys.exit(f"usage: {UPDATE_COMMAND}")
