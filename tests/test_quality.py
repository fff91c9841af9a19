"""Code quality gates that CI runs with the tests: ruff (lint and format) and mypy."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)


def test_ruff_lint_and_format_are_clean() -> None:
    lint = run(sys.executable, "-m", "ruff", "check", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    formatted = run(sys.executable, "-m", "ruff", "format", "--check", ".")
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr


def test_mypy_type_checks_the_package() -> None:
    checked = run(sys.executable, "-m", "mypy")
    assert checked.returncode == 0, checked.stdout + checked.stderr
