"""Paired summary against DuckDB's pairing+counts on every data shape, CPU time and peak RSS.

``python benchmarks/paired_ratio.py --tasks 1040000`` (issue 28 item 5): generates the forks
and their shapes with :mod:`run` (``--generate-only``; skipped when present: 1,040,000 tasks is
the 52M-row size, ~1.6 GB of parquet under ``--data-dir``, minutes, and ~10 GB of RAM for the
shuffle across files; 100,000 tasks is the 5M-row size), then runs ``recoverylab_stats``
(``paired.summarize``, exact p-values, default intervals) and ``duckdb`` (pairing and counts
only) alternately, each in a fresh :mod:`worker` process, ``--rounds`` times on every shape.
Prints a markdown table of the medians: CPU and wall seconds of the workload (imports
excluded), peak RSS, and the CPU and wall ratios. On a loaded machine compare CPU seconds.
``--memory GB`` passes a budget to ``paired.summarize`` (default: its own default).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402

ENGINES = ("recoverylab_stats", "duckdb")


def _measure(workload: str, data: Path, out: Path, memory: float | None) -> dict:
    command = [sys.executable, str(HERE / "worker.py"), workload, "--data", str(data)]
    command += ["--out", str(out), *(["--memory", str(memory)] if memory else [])]
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
    parser.add_argument("--memory", type=float, help="paired.summarize's budget in GB")
    parser.add_argument("--data-dir", type=Path, default=HERE / "data")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    data_options = ["--data-dir", str(args.data_dir), "--seed", str(args.seed)]
    run.main(["--paired-tasks", str(args.tasks), "--generate-only", *data_options])
    folder = args.data_dir / f"forks_{args.tasks}_seed{args.seed}"
    shapes = {"grouped": folder / "forks"}
    shapes |= {s: folder / f"{folder.name}_{s}" for s in run.SHAPES}
    work = args.data_dir / "out"
    work.mkdir(parents=True, exist_ok=True)
    found: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        for shape, data in shapes.items():
            for engine in ENGINES:
                result = _measure(engine, data, work / f"ratio_{engine}_{shape}", args.memory)
                found.setdefault((shape, engine), []).append(result)
                print(
                    f"round {r + 1} {shape} {engine}: {result['cpu_seconds']:.2f} s CPU, "
                    f"{result['seconds']:.2f} s wall, {result['peak_rss_bytes'] / 1e9:.2f} GB, "
                    f"load {result['load1']:.1f}",
                    file=sys.stderr,
                    flush=True,
                )
    print(
        "| shape | recoverylab CPU (s) | DuckDB CPU (s) | CPU ratio | wall ratio "
        "| recoverylab peak (GB) | DuckDB peak (GB) | load |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for shape in shapes:
        med = {
            (e, k): statistics.median(x[k] for x in found[shape, e])
            for e in ENGINES
            for k in ("cpu_seconds", "seconds", "peak_rss_bytes", "load1")
        }
        ours, duck = "recoverylab_stats", "duckdb"
        print(
            f"| {shape} | {med[ours, 'cpu_seconds']:.2f} | {med[duck, 'cpu_seconds']:.2f} "
            f"| {med[ours, 'cpu_seconds'] / med[duck, 'cpu_seconds']:.2f} "
            f"| {med[ours, 'seconds'] / med[duck, 'seconds']:.2f} "
            f"| {max(x['peak_rss_bytes'] for x in found[shape, ours]) / 1e9:.2f} "
            f"| {max(x['peak_rss_bytes'] for x in found[shape, duck]) / 1e9:.2f} "
            f"| {med[ours, 'load1']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
