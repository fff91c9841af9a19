"""The benchmark command runs end to end at its quick size, and its engines agree.

Only the correctness comparison is checked here (identical counts across recoverylab, DuckDB
and pandas); timings are never asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"

pytest.importorskip("duckdb")
pytest.importorskip("pandas")


def test_quick_benchmark_runs_and_engines_agree(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "run.py"),
            "--quick",
            "--data-dir",
            str(tmp_path / "data"),
            "--out",
            str(out),
            "--max-wait",
            "0",
            "--retries",
            "0",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "counts identical across recoverylab, recoverylab_stats, duckdb, pandas" in done.stdout
    assert "per-task types identical across recoverylab, duckdb_per_task, pandas_per_task" in (
        done.stdout
    )
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["correct"] is True
    assert set(record["rounds"]) >= {"floor", "recoverylab", "recoverylab_stats", "duckdb"}
    text = out.read_text()
    assert "## Ratios and targets" in text
    # the counts the engines wrote are the same frames, and not empty
    counts = {
        name: pl.read_parquet(tmp_path / "data" / "out" / f"{name}_r0.counts.parquet")
        for name in ("recoverylab", "recoverylab_stats", "duckdb", "pandas")
    }
    reference = counts["duckdb"]
    assert reference.height == 48
    assert reference["n"].sum() > 0
    assert reference["carried_forward"].sum() > 0
    for frame in counts.values():
        assert frame.equals(reference)


def test_comparison_reports_a_difference(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import run
    finally:
        sys.path.remove(str(BENCH))
    counts = pl.DataFrame(
        {"condition": ["clean"], "delay": [0], "method": ["refresh"], "n": [3], "rescue": [1]}
    )
    outputs = {name: tmp_path / name for name in ("recoverylab", "duckdb", "pandas")}
    for name, path in outputs.items():
        frame = counts.with_columns(pl.lit(2 if name == "pandas" else 1).alias("rescue"))
        frame.write_parquet(path.with_suffix(".counts.parquet"))
    problems = run.compare(outputs)
    assert len(problems) == 1
    assert problems[0].startswith("pandas differs from recoverylab (.counts.parquet)")
