"""The public face: what `import recoverylab` offers and what it does not load."""

from __future__ import annotations

import subprocess
import sys

import pytest

import recoverylab


def test_every_public_name_resolves() -> None:
    for name in recoverylab.__all__:
        assert getattr(recoverylab, name) is not None, name
    assert set(recoverylab.__all__) <= set(dir(recoverylab))


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nosuch'"):
        recoverylab.nosuch  # noqa: B018


def test_import_stays_light() -> None:
    """Importing recoverylab loads neither scipy nor optional extras (fast start-up)."""
    heavy = ["scipy", "sklearn", "altair", "pyspark", "pandas", "duckdb"]
    code = f"import sys, recoverylab; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
