"""CPU time and peak memory of the anytime-valid sequences as the number of tasks grows.

``python benchmarks/sequences_scale.py [--tasks 10000,100000,1000000]``: each measurement runs
in a fresh process (so its peak RSS is its own) and prints one markdown row: the confidence
sequence of :mod:`recoverylab.stats.sequences` (401-point grid) two-sided, as ``paired.monitor``
asks for it, and one-sided, as ``paired.gate --sequential`` does; beside them, as the peer in the
same run, the cumulative sum of the per-task values that any sequential method must at least
read (the floor). Figures of 2026-12-04 (2 cores): at 1M tasks one side took 15-16 s CPU and
0.26 GB peak (was 32.9 s and 4.4 GB before the grid was walked in blocks sized by the tasks).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

WORKLOADS = ("floor", "one_sided", "two_sided")


def measure(workload: str, tasks: int) -> dict:
    """Run one workload on ``tasks`` simulated tasks in this process; return its figures."""
    import numpy as np

    from recoverylab.stats import sequences

    rng = np.random.default_rng(0)
    x = rng.choice([-1.0, 0.0, 1.0], p=[0.1, 0.6, 0.3], size=tasks)
    m = np.ones(tasks)
    start = time.process_time()
    if workload == "floor":
        np.cumsum(x - 0.2 * m)
    else:
        alternative = "greater" if workload == "one_sided" else "two-sided"
        sequences.confidence_sequence(x, m, alpha=0.025, alternative=alternative)
    cpu = time.process_time() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux -> GB
    return {"workload": workload, "tasks": tasks, "cpu_seconds": cpu, "peak_gb": peak}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="10000,100000,1000000")
    parser.add_argument("--worker", nargs=2, metavar=("WORKLOAD", "TASKS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(measure(args.worker[0], int(args.worker[1]))))
        return
    print("| tasks | workload | CPU s | peak RSS GB |\n|---:|---|---:|---:|")
    for tasks in (int(t) for t in args.tasks.split(",")):
        for workload in WORKLOADS:
            command = [sys.executable, __file__, "--worker", workload, str(tasks)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"| {tasks:,} | {workload} | {row['cpu_seconds']:.2f} | {row['peak_gb']:.2f} |")


if __name__ == "__main__":
    main()
