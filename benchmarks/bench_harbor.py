"""Reading a Harbor job: recoverylab.adapters.harbor against ``json.load`` of every result.json.

Writes one Harbor job of ``--trials`` trials (recoverylab.synth.harbor_jobs: 4 arms x ``--attempts``
attempts x as many tasks as needed; genuine-shaped ``result.json`` and ``config.json`` per trial,
with the exceptions and missing rewards of a real run), then reads it, each reader in a fresh
process, the two alternating within each round:

* (i) ``recoverylab.adapters.harbor.forks`` -- discovery, one polars scan of every result.json,
  mapping from agent kwargs, Harbor's error policy, duplicates, attempts, the forks contract;
* (ii) the standard library: ``glob(JOB/*/result.json)`` and ``json.load`` of each file into a
  list (no mapping at all: the floor of any hand-written glue).

Reports the median wall time over ``--rounds`` rounds, each worker's peak RSS and the ratio
(i)/(ii) (target <= 1). The job is cached in ``--jobs``. Example::

    python benchmarks/bench_harbor.py --trials 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

MAPPING = {
    "condition": "agent_kwarg:condition",
    "method": "agent_kwarg:method",
    "delay": "agent_kwarg:delay",
}


def worker(which: str, jobs: str) -> dict[str, float]:
    """Read ``jobs`` once with one reader; return seconds, rows and peak RSS (GB)."""
    import polars  # noqa: F401  (both readers pay the same imports, before the clock)

    if which == "adapter":
        from recoverylab.adapters import harbor

        start = time.perf_counter()
        result = harbor.forks(jobs, **MAPPING)
        rows = result.tables["forks"].height + result.excluded.height
    else:
        import glob

        start = time.perf_counter()
        loaded = []
        for file in glob.glob(f"{glob.escape(jobs)}/*/*/result.json"):
            with open(file, "rb") as handle:
                loaded.append(json.load(handle))
        rows = len(loaded)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB -> GB
    return {"seconds": seconds, "rows": rows, "peak_gb": peak}


def _run(which: str, jobs: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--worker", which, "--jobs", str(jobs)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _make_jobs(jobs: Path, trials: int, attempts: int) -> float:
    from recoverylab.synth.harbor_jobs import ARMS, write_harbor_jobs

    if jobs.exists() and any(jobs.glob("*/*/*/result.json")):
        return 0.0
    start = time.perf_counter()
    tasks = max(1, trials // (len(ARMS) * attempts))
    write_harbor_jobs(jobs, tasks=tasks, attempts=attempts, seed=0)
    return time.perf_counter() - start


def main() -> None:
    """Make the job (once) and time both readers, alternating, in fresh processes."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--attempts", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=Path, default=Path("/tmp/recoverylab-bench-harbor"))
    parser.add_argument("--worker", choices=("adapter", "json"))
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, str(args.jobs / "jobs"))))
        return
    made = _make_jobs(args.jobs, args.trials, args.attempts)
    if made:
        print(f"wrote the job in {made:.0f} s", file=sys.stderr)
    times: dict[str, list[dict[str, float]]] = {"adapter": [], "json": []}
    for i in range(args.rounds):
        order = ("adapter", "json") if i % 2 == 0 else ("json", "adapter")
        for which in order:
            times[which].append(_run(which, args.jobs))
    for which, runs in times.items():
        median = statistics.median(r["seconds"] for r in runs)
        each = ", ".join(f"{r['seconds']:.2f}" for r in runs)
        print(
            f"{which:8s} median {median:.2f} s over {len(runs)} rounds ({each}); peak RSS "
            f"{max(r['peak_gb'] for r in runs):.2f} GB; rows {int(runs[0]['rows']):,}"
        )
    ratio = statistics.median(r["seconds"] for r in times["adapter"]) / statistics.median(
        r["seconds"] for r in times["json"]
    )
    print(f"ratio adapter / json = {ratio:.2f} (target <= 1)")


if __name__ == "__main__":
    main()
