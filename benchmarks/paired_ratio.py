"""Paired summary against DuckDB's pairing+counts on every data shape, CPU time and peak RSS.

``python benchmarks/paired_ratio.py --tasks 1040000`` (issue 28 item 5): generates the forks
and their shapes with :mod:`run` (``--generate-only``; skipped when present: 1,040,000 tasks is
the 52M-row size, ~1.6 GB of parquet under ``--data-dir``, minutes, and ~10 GB of RAM for the
shuffle across files; 100,000 tasks is the 5M-row size), then runs ``recoverylab_stats``
(``paired.summarize``, exact p-values, default intervals) and ``duckdb`` (pairing and counts
only) alternately, each in a fresh :mod:`worker` process, ``--rounds`` times on every shape.
Prints a markdown table of the medians: CPU and wall seconds of the workload (imports
excluded), peak RSS, and the CPU and wall ratios. On a loaded machine compare CPU seconds.
``--memory 1.5`` passes a budget in GB to ``paired.summarize`` (``--memory default,1.5``:
both, alternating); ``--shapes grouped,shuffled_across`` measures only those shapes; ``--work
DIR`` puts the workers' outputs there instead of under ``--data-dir`` (read-only shared data).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402


def _measure(workload: str, data: Path, out: Path) -> dict:
    """Run ``workload`` (``recoverylab_stats@GB`` for a budget) in a fresh worker process."""
    name, _, memory = workload.partition("@")
    command = [sys.executable, str(HERE / "worker.py"), name, "--data", str(data)]
    command += ["--out", str(out), *(["--memory", memory] if memory else [])]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=HERE.parent)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"paired_ratio: {workload} failed on {data}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "load1": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    """Generate the data if needed, measure, print the table; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000, help="forks tasks (~50 rows each)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory", default="default", help="budgets in GB, comma separated")
    parser.add_argument("--shapes", default=",".join(["grouped", *run.SHAPES]))
    parser.add_argument("--data-dir", type=Path, default=HERE / "data")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--work", type=Path, help="where the workers write their outputs (default: DATA_DIR/out)"
    )
    parser.add_argument(
        "--no-generate", action="store_true", help="measure the shapes already written only"
    )
    args = parser.parse_args(argv)
    data_options = ["--data-dir", str(args.data_dir), "--seed", str(args.seed)]
    if not args.no_generate:
        with contextlib.redirect_stdout(sys.stderr):
            run.main(["--paired-tasks", str(args.tasks), "--generate-only", *data_options])
    folder = args.data_dir / f"forks_{args.tasks}_seed{args.seed}"
    every = {"grouped": folder / "forks"} | {s: folder / f"{folder.name}_{s}" for s in run.SHAPES}
    shapes = {s: every[s] for s in args.shapes.split(",")}
    ours = [
        "recoverylab_stats" + ("" if m == "default" else f"@{float(m)}")
        for m in args.memory.split(",")
    ]
    engines = (*ours, "duckdb")
    work = args.work or args.data_dir / "out"
    work.mkdir(parents=True, exist_ok=True)
    found: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        for shape, data in shapes.items():
            for engine in engines:
                name = engine.replace("@", "_").replace(".", "p")
                result = _measure(engine, data, work / f"ratio_{name}_{shape}")
                found.setdefault((shape, engine), []).append(result)
                print(
                    f"round {r + 1} {shape} {engine}: {result['cpu_seconds']:.2f} s CPU, "
                    f"{result['seconds']:.2f} s wall, {result['peak_rss_bytes'] / 1e9:.2f} GB, "
                    f"load {result['load1']:.1f}",
                    file=sys.stderr,
                    flush=True,
                )
    _table(found, shapes, ours)
    return 0


def _table(found: dict[tuple[str, str], list[dict]], shapes: dict, ours: list[str]) -> None:
    """Print the medians per shape and budget, with the ratios against DuckDB."""
    print(
        "| shape | budget | recoverylab CPU (s) | DuckDB CPU (s) | CPU ratio | wall ratio "
        "| recoverylab peak (GB) | DuckDB peak (GB) | load |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for shape in shapes:
        duck = found[shape, "duckdb"]
        for engine in ours:
            runs = found[shape, engine]
            cpu, wall = (statistics.median(x[k] for x in runs) for k in ("cpu_seconds", "seconds"))
            duck_cpu, duck_wall = (
                statistics.median(x[k] for x in duck) for k in ("cpu_seconds", "seconds")
            )
            print(
                f"| {shape} | {engine.partition('@')[2] or 'default'} | {cpu:.2f} "
                f"| {duck_cpu:.2f} | {cpu / duck_cpu:.2f} | {wall / duck_wall:.2f} "
                f"| {max(x['peak_rss_bytes'] for x in runs) / 1e9:.2f} "
                f"| {max(x['peak_rss_bytes'] for x in duck) / 1e9:.2f} "
                f"| {statistics.median(x['load1'] for x in runs):.0f} |"
            )


if __name__ == "__main__":
    raise SystemExit(main())
