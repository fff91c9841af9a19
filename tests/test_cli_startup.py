"""Start-up of the command line (issue 19): what building the parser and `--help` import.

Structural, not timed: a fresh interpreter builds the parser (or imports a module) and reports
which heavy packages ended up in ``sys.modules``. The command modules import their protocol
when a command runs, the engines' error types are resolved on the except path, and
``recoverylab.stats`` takes scipy only for the functions that need it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("scipy", "sklearn", "altair", "pyspark", "pyarrow", "pandas", "numpy")


def _imported_after(code: str) -> list[str]:
    probe = (
        f"import sys\n{code}\n"
        f"import json; print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_building_the_parser_imports_no_heavy_package():
    code = "import recoverylab.cli\nrecoverylab.cli.build_parser()"
    assert _imported_after(code) == []


def test_help_imports_no_heavy_package():
    code = (
        "import contextlib, io, recoverylab.cli\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    recoverylab.cli.main(['--help'])\n"
        "    recoverylab.cli.main(['paired', '--help'])"
    )
    assert _imported_after(code) == []


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
def test_protocol_modules_import_no_scipy(module):
    assert "scipy" not in _imported_after(f"import {module}")


def test_engine_errors_include_arrow_once_pyarrow_is_loaded():
    code = (
        "from recoverylab._diagnose import engine_errors\n"
        "before = [e.__name__ for e in engine_errors()]\n"
        "import pyarrow as pa\n"
        "after = [e.__name__ for e in engine_errors()]\n"
        "print(before, after)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert "ArrowException" not in done.stdout.split("]")[0]
    assert "ArrowException" in done.stdout.split("]")[1]
