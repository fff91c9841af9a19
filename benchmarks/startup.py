"""Start-up cost of the command line, as whole processes: ``python benchmarks/startup.py``.

Times ``recoverylab --help`` and ``recoverylab paired <shipped sample>`` (and, for scale, a bare
``python -c pass`` and ``import polars``) with hyperfine when it is installed (``apt-get install
hyperfine``), else with a loop of subprocesses that runs the commands in turn, one run of each
per round, so a change of load hits them alike; reports wall time *and* the CPU time of the
process (user + system; a mean with hyperfine, a median otherwise), which a loaded machine
disturbs much less than wall time. Issue 28's target is the ratio ``recoverylab --help`` /
``python -c "import polars"`` of the median wall times (10 runs each) at most 1.0: ``ratios``
holds it, and the same ratio of CPU times. Then runs each command under ``python -X importtime``
and adds up the import time by top-level package, and names the heavy packages (polars, numpy,
scipy, pyarrow...) each command imports. Prints one JSON object (``--json PATH`` also writes it)
that :mod:`report` renders.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data_samples" / "paired" / "main_forks.parquet"
#: Packages whose import a command should not pay unless it needs them (issue 19).
HEAVY = ("scipy", "sklearn", "altair", "pyspark", "pandas", "pyarrow", "numpy", "polars", "duckdb")


def commands() -> dict[str, list[str]]:
    """The measured commands, by label (python -m recoverylab is the console script's body)."""
    py = sys.executable
    return {
        "python -c pass": [py, "-c", "pass"],
        "python -c 'import polars'": [py, "-c", "import polars"],
        "recoverylab --help": [py, "-m", "recoverylab", "--help"],
        "recoverylab paired <sample>": [py, "-m", "recoverylab", "paired", str(SAMPLE)],
    }


def _hyperfine(label: str, command: list[str], runs: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "hf.json"
        subprocess.run(
            [
                *("hyperfine", "-N", "--warmup", "2", "--runs", str(runs)),
                *("--export-json", str(out), "--command-name", label),
                " ".join(_quote(c) for c in command),
            ],
            check=True,
            capture_output=True,
            cwd=ROOT,
        )
        result = json.loads(out.read_text())["results"][0]
    return {
        "tool": "hyperfine",
        "median": result["median"],
        "min": result["min"],
        "max": result["max"],
        "cpu": result["user"] + result["system"],  # hyperfine reports their means
        "runs": runs,
    }


def _quote(part: str) -> str:
    return f"'{part}'" if re.search(r"[\s'\"<>]", part) else part


def _loop(commands: dict[str, list[str]], runs: int) -> dict[str, dict]:
    """Time every command ``runs`` times (after two warm-up rounds), one run of each per round."""
    walls: dict[str, list[float]] = {label: [] for label in commands}
    cpus: dict[str, list[float]] = {label: [] for label in commands}
    for i in range(runs + 2):
        for label, command in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if i >= 2:  # two warm-up runs, as with hyperfine
                walls[label].append(wall)
                cpus[label].append(
                    after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
                )
    return {
        label: {
            "tool": "subprocess loop",
            "median": statistics.median(walls[label]),
            "min": min(walls[label]),
            "max": max(walls[label]),
            "cpu": statistics.median(cpus[label]),
            "runs": runs,
        }
        for label in commands
    }


def ratios(timings: dict[str, dict]) -> dict[str, float]:
    """``recoverylab --help`` over ``import polars``: median wall times, and CPU times (≤ 1.0)."""
    ours, polars = timings["recoverylab --help"], timings["python -c 'import polars'"]
    return {
        "help_over_import_polars_wall": ours["median"] / polars["median"],
        "help_over_import_polars_cpu": ours["cpu"] / polars["cpu"],
    }


def import_profile(command: list[str], repeats: int = 3) -> dict:
    """Import time by top-level package (median over ``repeats`` runs of -X importtime)."""
    per_run = []
    for _ in range(repeats):
        done = subprocess.run(
            [command[0], "-X", "importtime", *command[1:]],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
        )
        totals: dict[str, int] = {}
        for line in done.stderr.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|\s*(\S+)", line)
            if m:
                package = m[3].split(".")[0]
                totals[package] = totals.get(package, 0) + int(m[1])
        per_run.append(totals)
    names = set().union(*per_run)
    median = {n: statistics.median(r.get(n, 0) for r in per_run) / 1e6 for n in names}
    ranked = dict(sorted(median.items(), key=lambda kv: -kv[1]))
    return {
        "total_seconds": sum(median.values()),
        "by_package_seconds": {k: round(v, 4) for k, v in list(ranked.items())[:15]},
        "heavy_imported": [h for h in HEAVY if h in names],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if shutil.which("hyperfine") is not None:
        timings = {
            label: _hyperfine(label, command, args.runs) for label, command in commands().items()
        }
    else:
        timings = _loop(commands(), args.runs)
    imports = {
        "import recoverylab.cli": import_profile([sys.executable, "-c", "import recoverylab.cli"]),
        "recoverylab --help": import_profile(commands()["recoverylab --help"]),
        "recoverylab paired <sample>": import_profile(commands()["recoverylab paired <sample>"]),
    }
    record = {"timings": timings, "ratios": ratios(timings), "imports": imports}
    if args.json:
        args.json.write_text(json.dumps(record, indent=1))
    return record


if __name__ == "__main__":
    print(json.dumps(main()))
