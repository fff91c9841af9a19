"""Shared fixtures: running the command line in-process, and eager/lazy input variants."""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from hypothesis import settings

from recoverylab import engines
from recoverylab.cli import main

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "data_samples"

# No per-example deadline: Hypothesis' default 200 ms deadline times the machine, not the code,
# and fails on a loaded CI runner (a first example that builds a polars query or starts a
# subprocess can take longer). Speed goals live in benchmarks/, not in unit tests.
settings.register_profile("recoverylab", deadline=None)
settings.load_profile("recoverylab")


@dataclass(frozen=True)
class CliResult:
    """Exit code and captured output of one in-process command-line run."""

    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run ``recoverylab ARGS...`` in-process; return its exit code, stdout and stderr."""

    def run(*args: object) -> CliResult:
        capsys.readouterr()
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture(params=["eager", "lazy"])
def frame_kind(request: pytest.FixtureRequest) -> Callable[[pl.DataFrame], object]:
    """Turn a DataFrame into the eager or the lazy input form (each test runs on both)."""
    if request.param == "eager":
        return lambda df: df
    return lambda df: df.lazy()


def assert_same_as_stored(stored: pl.DataFrame, regenerated: pl.DataFrame, label: object) -> None:
    """Compare a regenerated table with a stored file: exact for keys, close for floats.

    Float math (``np.exp``, ``log``...) is not bitwise reproducible across CPUs, so a file made on
    one machine may differ from the same computation on another by a rounding step; anything else
    (row order, keys, integers, booleans, strings) must match exactly.
    """
    from polars.testing import assert_frame_equal

    try:
        assert_frame_equal(stored, regenerated, check_exact=False, rel_tol=1e-9, abs_tol=1e-12)
    except AssertionError as exc:
        raise AssertionError(f"{label}: {exc}") from None


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession for the test session (starting one takes 10-40 s here)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip(
            "no Java runtime: Spark needs Java 17+ (Debian: apt-get install default-jre-headless)"
        )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        session = engines.session(
            "local[2]",
            config={
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "4",
                "spark.default.parallelism": "2",
                "spark.driver.memory": "1g",
            },
        )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
