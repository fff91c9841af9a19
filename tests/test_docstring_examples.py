"""The ``Examples`` sections of the package's docstrings run and print what they show.

Every module of :mod:`recoverylab` is imported and its doctests run; a docstring example that
no longer matches the code is a documentation bug. Left out: ``__main__`` (importing it runs the
command line) and the Spark engine's module, whose examples need a Spark session
(``tests/test_engines.py`` covers the engine).
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import recoverylab

SKIPPED = {"recoverylab.__main__", "recoverylab.engines._spark"}
MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(recoverylab.__path__, prefix="recoverylab.")
    if info.name not in SKIPPED
)


def test_every_module_is_listed() -> None:
    assert "recoverylab.stats" in MODULES
    assert "recoverylab.paired._summary" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run_as_written(name: str) -> None:
    module = importlib.import_module(name)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(module, optionflags=flags, report=True, verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed (above)"
