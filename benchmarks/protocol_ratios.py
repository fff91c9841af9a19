"""Goal and takeover against DuckDB in CPU time, on a loaded machine: one alternating run.

``python benchmarks/protocol_ratios.py --goal DIR --takeover DIR [--rounds 2]``: ``DIR`` is a
folder ``recoverylab synth goal`` / ``takeover`` wrote (``benchmarks/run.py`` writes them under
``benchmarks/data`` as ``goal_250000_seed0`` and ``takeover_12500_seed0``). Every measurement is
a fresh :mod:`worker` process (imports not timed), the engines alternate within each round, and
the table reports per workload the median wall and CPU seconds (user + system, all threads), the
peak RSS and the ratio of CPU seconds to DuckDB's on the same data. CPU time is the fair measure
when other processes compete for the cores (wall time then mostly measures the waiting); the
load average at the start and end is printed with the table.
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

#: (workload, its DuckDB reference) per protocol, in the order of a round.
WORKLOADS = {
    "goal": (("goal_duckdb", None), ("goal", "goal_duckdb")),
    "takeover": (
        ("takeover_duckdb", None),
        ("takeover", "takeover_duckdb"),
        ("takeover_counts", "takeover_duckdb"),
    ),
}


def measure(workload: str, data: Path, out: Path) -> dict:
    """Run one workload in a fresh process; return its JSON line."""
    command = [sys.executable, str(HERE / "worker.py"), workload, "--data", str(data)]
    done = subprocess.run([*command, "--out", str(out)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goal", type=Path, help="goal data folder")
    parser.add_argument("--takeover", type=Path, help="takeover data folder")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("/tmp/protocol_ratios"))
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {os.getloadavg()}, {os.cpu_count()} CPUs", flush=True)
    runs: dict[str, list[dict]] = {}
    folders = {"goal": args.goal, "takeover": args.takeover}
    for r in range(args.rounds):
        for protocol, data in folders.items():
            for workload, _ in WORKLOADS[protocol] if data else ():
                result = measure(workload, data, args.work / f"{workload}_r{r}")
                runs.setdefault(workload, []).append(result)
                print(f"round {r + 1}: {workload} {json.dumps(result)}", flush=True)
    print(f"load average at end: {os.getloadavg()}")
    cpu = {w: statistics.median(x["cpu_seconds"] for x in rs) for w, rs in runs.items()}
    print("| workload | wall s | CPU s | peak RSS GB | CPU / DuckDB |")
    print("|---|---:|---:|---:|---:|")
    for protocol in folders:
        for workload, reference in WORKLOADS[protocol]:
            if workload not in runs:
                continue
            rs = runs[workload]
            wall = statistics.median(x["seconds"] for x in rs)
            peak = max(x["peak_rss_bytes"] for x in rs) / 1e9
            ratio = f"{cpu[workload] / cpu[reference]:.2f}" if reference in cpu else "-"
            print(f"| {workload} | {wall:.1f} | {cpu[workload]:.2f} | {peak:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
