"""Start-up (issue 28, item 4): ``--help`` and argument errors import the standard library only.

Structural, not timed (``benchmarks/startup.py`` times it). One fresh interpreter runs every case
through :func:`recoverylab.cli.main` in turn, with ``SystemExit`` caught, and reports after each
case its exit status and the modules it added beyond the standard library and recoverylab's light
modules: the first case that loads polars (or numpy, pyarrow, the readers, a protocol...) is named.
The cases come from the parser itself: ``--help`` of the program, of every subcommand and of every
nested one (``router fit``, ``import inspect``), then argument errors of each (an unknown option,
missing arguments, a value outside the choices, a number that is not one), and the program's own
(no command, an unknown command, ``--version``). The last case runs a real command, so the probe is
shown to see a heavy import when there is one.

Also here (issue 19): ``import recoverylab`` alone imports no polars, yet ``recoverylab.scan``
still works; the protocol modules import scipy only for the functions that need it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from recoverylab.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
FORKS = ROOT / "data_samples" / "paired" / "main_forks.parquet"
#: Packages that no start-up path may import (the standard library is fine).
HEAVY_PACKAGES = ("polars", "numpy", "scipy", "pyarrow", "pandas", "duckdb", "sklearn", "altair")
#: recoverylab modules that import polars (or a protocol), and so must wait for a command to run.
HEAVY_MODULES = (
    "recoverylab.io",
    "recoverylab.schema",
    "recoverylab._contracts",
    "recoverylab._diagnose",
    "recoverylab._display",
    "recoverylab._order",
    "recoverylab.cli._run",
    "recoverylab.cli._table",
    "recoverylab.engines",
    "recoverylab.goal",
    "recoverylab.paired",
    "recoverylab.plan",
    "recoverylab.report",
    "recoverylab.router",
    "recoverylab.stats",
    "recoverylab.synth",
    "recoverylab.takeover",
)

#: Run in a fresh interpreter: argv lists on stdin, one JSON line of results per case on stdout.
PROBE = """
import contextlib, io, json, sys
HEAVY = {heavy!r}
before = set(sys.modules)
import recoverylab.cli

def loaded():
    added = set(sys.modules) - before
    foreign = {{m.split(".")[0] for m in added}} - set(sys.stdlib_module_names) - {{"recoverylab"}}
    ours = {{m for m in added if any(m == h or m.startswith(h + ".") for h in HEAVY)}}
    return sorted(foreign | ours)

for argv in json.loads(sys.stdin.read()):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = recoverylab.cli.main(argv)
        except SystemExit as exc:
            code = exc.code
    print(json.dumps([argv, code, out.getvalue(), err.getvalue(), loaded()]), flush=True)
"""


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every subcommand of ``parser``, nested ones included, with its words (``router fit``)."""
    for action in parser._actions:  # argparse keeps no public list of a parser's actions
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _commands(sub, (*path, name))


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.dest != "help"]


def _error_cases(path: tuple[str, ...], parser: argparse.ArgumentParser) -> Iterator[list[str]]:
    """Argument errors of one command: each is refused by argparse before anything runs."""
    yield [*path, "--no-such-option"]
    # argparse marks a positional with nargs="*" required, though it takes no value at all
    if any(a.required and a.nargs != argparse.ZERO_OR_MORE for a in parser._actions):
        yield list(path)  # the required arguments are missing
    choice = next((a for a in _options(parser) if a.choices), None)
    if choice is not None:
        yield [*path, choice.option_strings[0], "no-such-choice"]
    number = next((a for a in _options(parser) if a.type in (int, float)), None)
    if number is not None:
        yield [*path, number.option_strings[0], "not-a-number"]


PARSER = build_parser()
COMMANDS = dict(_commands(PARSER))
HELP_CASES = [["--help"], ["--version"], *([*path, "--help"] for path in COMMANDS)]
ERROR_CASES = [
    [],
    ["no-such-command"],
    ["--no-such-option"],
    ["--input-format", "no-such-format", "validate", "forks", str(FORKS)],
    ["validate", "no-such-table", str(FORKS)],
    ["paired", str(FORKS), "--ci-method"],  # an option without its value
    *(case for path, sub in COMMANDS.items() for case in _error_cases(path, sub)),
]
#: A real run, last: the probe must see polars once a command has run.
RUN_CASE = ["validate", "forks", str(FORKS)]


def _name(case: list[str]) -> str:
    return " ".join(Path(a).name if a == str(FORKS) else a for a in case) or "(no arguments)"


@pytest.fixture(scope="module")
def probed() -> dict[str, tuple[object, str, str, list[str]]]:
    """Run every case in one fresh interpreter; results by case name."""
    cases = [*HELP_CASES, *ERROR_CASES, RUN_CASE]
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=(*HEAVY_PACKAGES, *HEAVY_MODULES))],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        cwd=ROOT,
    )
    results = {}
    for line in done.stdout.splitlines():
        argv, code, out, err, loaded = json.loads(line)
        results[_name(argv)] = (code, out, err, loaded)
    assert len(results) == len(cases), done.stderr
    return results


def test_the_cases_cover_every_subcommand_and_its_nested_ones() -> None:
    # the subcommands are read from the parser, so a new one is probed without editing this file
    assert {"validate", "paired", "router fit", "import inspect", "demo"} <= {
        " ".join(path) for path in COMMANDS
    }
    assert len(HELP_CASES) == len(COMMANDS) + 2


@pytest.mark.parametrize("case", HELP_CASES, ids=_name)
def test_help_imports_the_standard_library_only(probed, case) -> None:
    code, out, err, loaded = probed[_name(case)]
    assert (code, err) == (0, "")
    assert out.startswith("usage: recoverylab" if "--help" in case else "recoverylab ")
    assert loaded == []


@pytest.mark.parametrize("case", ERROR_CASES, ids=_name)
def test_an_argument_error_imports_the_standard_library_only(probed, case) -> None:
    code, out, err, loaded = probed[_name(case)]
    assert (code, out) == (2, "")
    assert err.startswith("usage: recoverylab")
    assert err.splitlines()[-1].startswith("recoverylab")
    assert ": error: " in err.splitlines()[-1]
    assert loaded == []


def test_the_probe_sees_a_heavy_import(probed) -> None:
    code, out, _, loaded = probed[_name(RUN_CASE)]
    assert (code, out) == (0, "ok: 1,054 rows\n")
    assert {"polars", "recoverylab.io", "recoverylab.schema"} <= set(loaded)


def test_the_console_command_imports_no_polars() -> None:
    """``python -m recoverylab --help`` as a whole process, import by import (-X importtime)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "recoverylab", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=ROOT,
    )
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "recoverylab" in imported  # the import log is read right
    assert imported & set(HEAVY_PACKAGES) == set()
    assert done.stdout.startswith("usage: recoverylab")


def _run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.strip().splitlines()[-1]


def test_import_recoverylab_imports_no_polars_and_scan_still_works() -> None:
    code = f"""
import json, sys
before = set(sys.modules)
import recoverylab
from recoverylab import RecoveryLabError, SchemaError
added = set(sys.modules) - before
bare = sorted({{m.split(".")[0] for m in added}} - set(sys.stdlib_module_names) - {{"recoverylab"}})
bare += sorted(m for m in added if m.startswith("recoverylab.") and m != "recoverylab._errors")
listed = {{"scan", "validate", "SPECS", "write_parquet", "io", "schema"}} <= set(dir(recoverylab))
from recoverylab import SPECS, scan, validate, write_parquet
import recoverylab.io, recoverylab.schema
same = (scan is recoverylab.io.scan and write_parquet is recoverylab.io.write_parquet
        and validate is recoverylab.schema.validate and SPECS is recoverylab.schema.SPECS)
frame = recoverylab.validate(recoverylab.scan({str(FORKS)!r}), "forks").collect()
every = all(hasattr(recoverylab, name) for name in recoverylab.__all__)
print(json.dumps([bare, listed, same, frame.height, every]))
"""
    bare, listed, same, height, every = json.loads(_run_python(code))
    assert bare == []
    assert (listed, same, height, every) == (True, True, 1054, True)


def test_an_unknown_attribute_is_still_an_attribute_error() -> None:
    import recoverylab

    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        recoverylab.no_such_name  # noqa: B018


@pytest.mark.parametrize(
    "module",
    [
        "recoverylab",
        "recoverylab.stats",
        "recoverylab.paired",
        "recoverylab.takeover",
        "recoverylab.router",
    ],
)
def test_protocol_modules_import_no_scipy(module) -> None:
    assert _run_python(f"import sys, {module}; print('scipy' in sys.modules)") == "False"


def test_engine_errors_include_arrow_once_pyarrow_is_loaded() -> None:
    code = (
        "from recoverylab._diagnose import engine_errors\n"
        "before = [e.__name__ for e in engine_errors()]\n"
        "import pyarrow as pa\n"
        "after = [e.__name__ for e in engine_errors()]\n"
        "print(before, after)"
    )
    before, after = _run_python(code).split("]", 1)
    assert "ArrowException" not in before
    assert "ArrowException" in after
