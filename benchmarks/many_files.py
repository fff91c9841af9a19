"""Many small text files against one file: ``python benchmarks/many_files.py``.

Issue 26 found ``recoverylab paired`` on a directory of 2,000 CSV files of 10 rows killed after
60 s (500 files 3.5 s, 1,000 files 20 s: quadratic). The mechanism: the reader made one lazy
scan per text file and concatenated them (``pl.concat(..., how="diagonal_relaxed")``); polars
plans such an N-way union in time that grows with N² (one ``select(pl.len())`` over 500 files
took 0.12 s of CPU, over 1,000 files 0.46 s), and paid it again on every one of the command's
queries. The reader now checks each text file once (linear), parses the small ones together as
one text per header, and scans binary files with one scan per schema, so no query sees more
than a handful of inputs; this script measures the result. It writes the same forks rows
(seeded, rows shuffled) as one CSV file and as ``--files`` CSV files of ``--rows`` rows each, runs
``recoverylab paired`` on each as a whole process, and prints the median wall and CPU time of
``--repeats`` runs and the ratio many/one (target: under 3). It also checks that the two runs
print the same table. ``--json PATH`` writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parent.parent


def write_inputs(folder: Path, files: int, rows: int, seed: int) -> tuple[Path, Path]:
    """Write the same rows as one CSV file and as ``files`` CSV files of ``rows`` rows."""
    sys.path.insert(0, str(ROOT))
    from recoverylab import synth

    total = files * rows
    tasks = total // 40 + 1  # synth writes about 50 forks rows per task
    forks = synth.generate("forks", tasks, seed=seed)["forks"]
    forks = forks.sample(fraction=1.0, shuffle=True, seed=seed).head(total)
    if forks.height < total:
        raise SystemExit(f"synth gave {forks.height} rows; fewer than {total}")
    one = folder / "one.csv"
    forks.write_csv(one)
    many = folder / "many"
    many.mkdir()
    for i in range(files):
        forks.slice(i * rows, rows).write_csv(many / f"part-{i:05d}.csv")
    return one, many


def timed(command: list[str]) -> tuple[float, float, str]:
    """Run ``command``; return its wall time, its CPU time (user + system) and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def measure(source: Path, repeats: int, resamples: int) -> dict[str, object]:
    """Median wall and CPU seconds of ``recoverylab paired SOURCE`` over ``repeats`` runs."""
    command = [
        *(sys.executable, "-m", "recoverylab", "paired", str(source)),
        *("--resamples", str(resamples), "--quiet", "--format", "csv"),
    ]
    runs = [timed(command) for _ in range(repeats)]
    return {
        "wall_seconds": statistics.median(r[0] for r in runs),
        "cpu_seconds": statistics.median(r[1] for r in runs),
        "output": runs[0][2],
    }


def main(argv: list[str] | None = None) -> dict[str, object]:
    """Measure, print the times and the ratio, and return them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000, help="number of small files")
    parser.add_argument("--rows", type=int, default=10, help="rows per small file")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each command")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        one, many = write_inputs(Path(tmp), args.files, args.rows, args.seed)
        single = measure(one, args.repeats, args.resamples)
        split = measure(many, args.repeats, args.resamples)
    same = single.pop("output") == split.pop("output")
    result = {
        "files": args.files,
        "rows_per_file": args.rows,
        "one_file": single,
        "many_files": split,
        "ratio_wall": split["wall_seconds"] / single["wall_seconds"],  # type: ignore[operator]
        "ratio_cpu": split["cpu_seconds"] / single["cpu_seconds"],  # type: ignore[operator]
        "same_output": same,
        "polars": pl.__version__,
    }
    print(
        f"recoverylab paired, {args.files * args.rows:,} forks rows: one CSV file "
        f"{single['wall_seconds']:.2f} s wall ({single['cpu_seconds']:.2f} s CPU); "
        f"{args.files:,} CSV files of {args.rows} rows {split['wall_seconds']:.2f} s wall "
        f"({split['cpu_seconds']:.2f} s CPU)"
    )
    print(
        f"ratio many/one: {result['ratio_wall']:.2f} wall, {result['ratio_cpu']:.2f} CPU "
        f"(target < 3); same output: {'yes' if same else 'NO'}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
