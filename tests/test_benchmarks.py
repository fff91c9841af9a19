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


def run_benchmark(tmp_path: Path, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """Run ``benchmarks/run.py OPTIONS`` on data under ``tmp_path``, writing ``out``; no waiting."""
    command = [
        sys.executable,
        str(BENCH / "run.py"),
        *options,
        *("--data-dir", str(tmp_path / "data"), "--out", str(out)),
        *("--max-wait", "0", "--retries", "0"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_quick_benchmark_runs_and_engines_agree(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    done = run_benchmark(tmp_path, out, "--quick")
    assert "counts identical across recoverylab, recoverylab_stats, duckdb, pandas" in done.stdout
    assert "per-task types identical across recoverylab, duckdb_per_task, pandas_per_task" in (
        done.stdout
    )
    # the other data shape (rows scattered across files, integer task ids) counts the same
    assert "recoverylab_stats@shuffled_across_int, duckdb@shuffled_across_int;" in done.stdout
    assert "pandas_per_task, duckdb_per_task@shuffled_across_int" in done.stdout
    assert "goal: counts identical across recoverylab, duckdb, pandas" in done.stdout
    assert "takeover: counts identical across recoverylab, duckdb, pandas" in done.stdout
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["correct"] is True
    assert set(record["rounds"]) >= {"floor", "recoverylab", "recoverylab_stats", "duckdb"}
    text = out.read_text()
    assert "## Ratios and targets" in text
    assert "## Paired on every data shape" in text
    assert "## Goal and takeover against DuckDB and pandas" in text
    assert set(record["protocols"]["goal"]) == {"floor", "recoverylab", "duckdb", "pandas"}
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


def test_generate_only_writes_every_paired_shape_and_measures_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "run.py"),
            "--paired-tasks",
            "40",
            "--generate-only",
            "--data-dir",
            str(data),
            "--out",
            str(tmp_path / "RESULTS.md"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    base = data / "forks_40_seed0"
    grouped = pl.read_parquet(base / "forks" / "*.parquet")
    sys.path.insert(0, str(BENCH))
    try:
        import run
    finally:
        sys.path.remove(str(BENCH))
    for shape, (_, ids, files, _) in run.SHAPES.items():
        frame = pl.read_parquet(base / f"forks_40_seed0_{shape}" / "*.parquet")
        assert frame.height == grouped.height
        assert frame["task_id"].n_unique() == 40
        assert frame["task_id"].dtype == (pl.Int64 if ids == "int" else pl.String)
        if files:
            assert len(list((base / f"forks_40_seed0_{shape}").glob("*.parquet"))) == files
    assert not (tmp_path / "RESULTS.md").exists()
    assert not list((data / "out").glob("*.parquet"))


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


def _bench_module(name: str) -> object:
    sys.path.insert(0, str(BENCH))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(BENCH))


def test_protocol_comparison_reports_a_difference() -> None:
    baselines = _bench_module("protocol_baselines")
    reference = pl.DataFrame({"agent": ["a"], "depth": [0], "n": [3], "pass_at_1": [0.5]})
    assert baselines.compare_frames(reference, reference, ("pass_at_1",)) is None
    close = reference.with_columns(pl.col("pass_at_1") + 1e-12)
    assert baselines.compare_frames(reference, close, ("pass_at_1",)) is None
    far = reference.with_columns(pl.col("pass_at_1") + 1e-6)
    assert baselines.compare_frames(reference, far, ("pass_at_1",)).startswith("pass_at_1 differs")
    other = reference.with_columns(pl.lit(4, dtype=pl.Int64).alias("n"))
    assert baselines.compare_frames(reference, other, ("pass_at_1",)).startswith("integer counts")


def test_import_profile_names_the_packages_a_command_imports() -> None:
    startup = _bench_module("startup")
    profile = startup.import_profile([sys.executable, "-c", "import json"], repeats=1)
    assert "json" in profile["by_package_seconds"]
    assert profile["heavy_imported"] == []


def test_paired_ratio_measures_every_budget_against_duckdb(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "paired_ratio.py"),
            "--tasks",
            "40",
            "--rounds",
            "1",
            "--shapes",
            "shuffled_across",
            "--memory",
            "default,0.001",
            "--data-dir",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [
        line.split("|")[1:3] for line in done.stdout.splitlines() if line.startswith("| shuffled")
    ]
    assert [[c.strip() for c in row] for row in rows] == [
        ["shuffled_across", "default"],
        ["shuffled_across", "0.001"],
    ]
    # every engine and budget counted the same (the 0.001 GB run spilled: below what the
    # process holds beside its pass)
    counts = [pl.read_parquet(f) for f in sorted((tmp_path / "data" / "out").glob("ratio_*"))]
    assert len(counts) == 3
    assert all(c.equals(counts[0]) for c in counts)


def test_ratios_run_writes_its_section_and_keeps_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    out.write_text("# Benchmark results\n\nset-up\n\n## Earlier section\n\nkept\n")
    ratios_options = ("--ratios", "--ratio-tasks", "30", "--ratio-rounds", "1")
    sizes = ("--goal-units", "40", "--takeover-units", "6", "--skip", "startup")
    run_benchmark(tmp_path, out, *ratios_options, *sizes)
    text = out.read_text()
    sys.path.insert(0, str(BENCH))
    import ratios

    assert text.count(ratios.HEADING) == 1
    assert text.index("set-up") < text.index(ratios.HEADING) < text.index("## Earlier section")
    assert "kept" in text
    rows = [line for line in text.splitlines() if line.startswith("| paired") or "|" in line[:3]]
    labels = [line.split("|")[1].strip() for line in rows if line.startswith("| ")]
    shapes = [f"paired: summarize ({s})" for s in ratios.PAIRED_SHAPES]
    protocols = [label for label, *_ in ratios.PROTOCOL_PAIRS]
    assert labels[1:] == shapes + protocols  # labels[0] is the header row
    assert "counts were compared and are identical" in text
    # a second run replaces the section instead of adding one
    again = ratios.replace_section(text, ratios.HEADING + "\n\nnew\n")
    assert again.count(ratios.HEADING) == 1
    assert "new" in again
    assert "| paired" not in again
    assert "kept" in again


def test_ratios_verdict_needs_the_cpu_ratio_and_the_peak() -> None:
    sys.path.insert(0, str(BENCH))
    import ratios

    def runs(cpu: float, peak_gb: float) -> list[dict]:
        return [{"cpu_seconds": cpu, "seconds": cpu, "peak_rss_bytes": peak_gb * 1e9}]

    fast_small = ratios.ratio_row("x", "d", runs(1.0, 1.0), runs(1.0, 0.5), 1.0, 1.5)
    slow = ratios.ratio_row("x", "d", runs(1.1, 1.0), runs(1.0, 0.5), 1.0, 1.5)
    big = ratios.ratio_row("x", "d", runs(0.5, 1.6), runs(1.0, 0.5), 1.0, 1.5)
    unbounded = ratios.ratio_row("x", "d", runs(1.9, 9.0), runs(1.0, 0.5), 2.0, None)
    assert [r["met"] for r in (fast_small, slow, big, unbounded)] == [True, False, False, True]
    section = ratios.render([fast_small, slow], ["header"])
    assert "**1 of 2 targets met.** Missed: x (d)." in section
    # met on the medians, but one round's own ratio is over the target: on the line
    ours = [*runs(0.9, 1.0), *runs(1.2, 1.0), *runs(0.95, 1.0)]
    theirs = [*runs(1.0, 0.5), *runs(1.0, 0.5), *runs(1.0, 0.5)]
    line = ratios.ratio_row("y", "e", ours, theirs, 1.0, 1.5)
    assert (line["met"], line["every_round"], line["round_ratios"]) == (True, False, (0.9, 1.2))
    assert fast_small["every_round"]
    section = ratios.render([fast_small, line], ["header"])
    assert "**2 of 2 targets met.** On the line: y (e)." in section
    assert "| 0.90–1.20 |" in section
    assert "| **on the line** |" in section


def test_sequences_scale_prints_a_row_per_workload_and_size() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "sequences_scale.py"), "--tasks", "50,200"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "| tasks | workload | CPU s | peak RSS GB |"
    for tasks in ("50", "200"):
        workloads = [line.split(" | ")[1] for line in lines if line.startswith(f"| {tasks} |")]
        assert workloads == ["floor", "one_sided", "two_sided"]
