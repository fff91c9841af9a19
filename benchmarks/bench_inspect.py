"""Reading inspect_ai logs: recoverylab.adapters.inspect.forks against inspect's samples_df.

Makes genuine inspect logs offline with the mock model (recoverylab.synth.inspect_logs: 2
conditions x (a no-recovery arm + recovery at 2 delays) = 6 evals, ``--samples`` samples x
``--epochs`` epochs each), then reads the same logs, each reader in a fresh process, with

* (i) ``recoverylab.adapters.inspect.forks`` -- headers + sample summaries, files in parallel;
* (ii) ``inspect_ai.analysis.samples_df(logs, quiet=True)`` -- inspect's own sample table
  (default columns, sample summaries), as an analyst would before writing the glue by hand.

Reports median wall time over ``--rounds`` rounds, the worker's peak RSS and the ratio (i)/(ii)
(target <= 0.5; issue 25: at most 1). The logs are cached in ``--logs`` (generation is the slow
part: inspect runs every sample). With ``--evals N`` the 6 genuine logs are copied, with inspect's
own reader and writer, into N evals of their own (a new ``task_id`` each, the arm's condition
suffixed with the copy number in the eval metadata, which the mapping reads). Examples::

    python benchmarks/bench_inspect.py --samples 50 --scale 20 --epochs 2  # 12,000 sample runs
    python benchmarks/bench_inspect.py --samples 100 --epochs 1 --evals 1000  # 1,000 x 100
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

MAPPING = {
    "condition": "eval_metadata:condition",
    "method": "task_arg:method",
    "delay": "task_arg:delay",
    "epochs": "forks",
}


def worker(which: str, logs: str) -> dict[str, float]:
    """Read ``logs`` once with one reader; return seconds, rows and peak RSS (GB)."""
    import inspect_ai.analysis
    import inspect_ai.log  # noqa: F401  (both readers pay the same imports, before the clock)

    if which == "adapter":
        from recoverylab.adapters import inspect as ri

        start = time.perf_counter()
        result = ri.forks(logs, **MAPPING)  # type: ignore[arg-type]
        rows = result.forks.height + result.excluded.height
    else:
        from inspect_ai.analysis import samples_df

        start = time.perf_counter()
        rows = len(samples_df(logs, quiet=True))
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB -> GB
    return {"seconds": seconds, "rows": rows, "peak_gb": peak}


def _run(which: str, logs: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--worker", which, "--logs", str(logs)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _make_logs(logs: Path, samples: int, epochs: int, scale: int, evals: int) -> float:
    """Run the experiment through inspect, then widen every log ``scale``-fold with inspect's API.

    Running 10,000 mock samples through inspect takes many minutes on 2 cores; copying each
    genuine sample under new ids (``read_eval_log`` -> ``write_eval_log``) gives logs of the same
    shape and format, written by inspect itself, in seconds.
    """
    from inspect_ai.log import read_eval_log, write_eval_log

    from recoverylab.synth.inspect_logs import write_inspect_logs

    if logs.exists() and any(logs.glob("*recovery*.eval")):
        start = time.perf_counter()
        _copy_evals(sorted(logs.glob("*recovery*.eval")), evals)
        return time.perf_counter() - start
    os.environ.setdefault("INSPECT_LOG_DIR", str(logs.parent / "inspect-default"))
    start = time.perf_counter()
    paths = write_inspect_logs(
        logs, samples=samples, epochs=epochs, errors={"stale": [2]}, max_samples=200
    )
    for path in paths:
        log = read_eval_log(str(path))
        log.eval.metadata = {**(log.eval.metadata or {}), **log.eval.task_args}
        if scale > 1:
            copies = [
                s.model_copy(update={"id": int(s.id) + k * samples, "uuid": f"{s.uuid}-{k}"})
                for k in range(scale)
                for s in log.samples or []
            ]
            log.samples = copies
            log.eval.dataset.samples = samples * scale
            log.eval.dataset.sample_ids = list(range(1, samples * scale + 1))
        write_eval_log(log, str(path))
    _copy_evals(paths, evals)
    return time.perf_counter() - start


def _copy_evals(paths: list[Path], evals: int, workers: int = 2) -> None:
    """Copy the genuine logs into ``evals`` evals of their own (round-robin over the arms).

    Each copy gets its own ``task_id`` and ``eval_id``, its own sample uuids (``samples_df``
    drops repeated uuids) and the copy number in its condition; copies already written are kept.
    Copies are written by ``workers`` processes (inspect's writer is the slow part).
    """
    todo = [k for k in range(len(paths), evals) if not _copy_path(paths, k).exists()]
    if not todo:
        return
    with ProcessPoolExecutor(workers) as pool:
        chunks = [todo[i::workers] for i in range(workers)]
        list(pool.map(_write_copies, [paths] * workers, chunks))


def _copy_path(paths: list[Path], k: int) -> Path:
    batch, arm = divmod(k, len(paths))
    return paths[0].parent / f"copy-{batch:04d}-{arm}.eval"


def _write_copies(paths: list[Path], ks: list[int]) -> None:
    from inspect_ai.log import read_eval_log, write_eval_log

    originals = [read_eval_log(str(p)) for p in paths]
    for k in ks:
        batch, arm = divmod(k, len(paths))
        log = originals[arm].model_copy(deep=True)
        log.eval.task_id = f"{log.eval.task_id}-{batch}"
        log.eval.eval_id = f"{log.eval.eval_id}-{batch}"
        metadata = dict(log.eval.metadata or {})
        metadata["condition"] = f"{metadata['condition']}-{batch}"
        log.eval.metadata = metadata
        for sample in log.samples or []:
            sample.uuid = f"{sample.uuid}-{batch}"
        write_eval_log(log, str(_copy_path(paths, k)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--scale", type=int, default=1, help="copies of every sample")
    parser.add_argument("--evals", type=int, default=6, help="logs in all (copies past 6)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--logs", type=Path, default=None)
    parser.add_argument("--worker", choices=("adapter", "samples_df"))
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, str(args.logs))))
        return
    name = f"bench-inspect-{args.samples}x{args.scale}x{args.epochs}x{args.evals}"
    logs = args.logs or Path(name)
    made = _make_logs(logs, args.samples, args.epochs, args.scale, args.evals)
    runs: dict[str, list[dict[str, float]]] = {"adapter": [], "samples_df": []}
    for _ in range(args.rounds):
        for which, record in runs.items():
            record.append(_run(which, logs))
    median = {k: statistics.median(r["seconds"] for r in v) for k, v in runs.items()}
    peak = {k: max(r["peak_gb"] for r in v) for k, v in runs.items()}
    evals = max(6, args.evals)
    sample_runs = evals * args.samples * args.scale * args.epochs
    print(f"logs: {logs} ({evals} evals, {sample_runs:,} sample runs; generated in {made:.0f}s)")
    for which in runs:
        rows = int(runs[which][0]["rows"])
        print(
            f"{which:>10}: median {median[which]:.2f}s, peak RSS {peak[which]:.2f} GB, {rows} rows"
        )
    print(
        f"ratio adapter / samples_df: {median['adapter'] / median['samples_df']:.2f}",
        "(target <= 1; issue 15 asked <= 0.5)",
    )


if __name__ == "__main__":
    main()
