"""Workloads besides the forks comparison, each run in its own process by :mod:`worker`.

* ``stats_scale``: the cluster bootstrap (10,000 resamples) and the exact sign-flip test over a
  million clusters, in two shapes -- one pair per task (three distinct types: what a summarize
  cell holds) and per-task sums of up to 12 pairs (a few hundred types) -- against
  ``scipy.stats.bootstrap`` and ``scipy.stats.permutation_test`` (10,000 resamples, Monte Carlo)
  at the largest size each finishes within the time budget, extrapolated linearly to a million
  clusters (their cost is proportional to clusters × resamples).
* ``goal``: ``goal.score`` + ``goal.summarize`` (10,000 resamples) on the generated tables;
  ``goal_duckdb``, ``goal_pandas``: the same counts in DuckDB and pandas
  (:mod:`protocol_baselines`); ``goal_floor``: a polars scan of the columns they read.
* ``takeover``: ``takeover.summarize`` (default workflow-clustered bootstrap); ``takeover_counts``:
  the same with ``interval="wilson"`` (the counting part alone: what DuckDB computes);
  ``takeover_duckdb``, ``takeover_pandas``, ``takeover_floor`` likewise.

The goal and takeover workloads write their counts to ``<out>.counts.parquet`` so that
:mod:`run` can check that the engines agree.
* ``router``: ``Router().fit`` (and ``decide``) on generated decision points.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np

CLUSTERS = 1_000_000
RESAMPLES = 10_000


def _clusters(n: int, rng: np.random.Generator, pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster (d, n): summed y1 - y0 over ``pairs`` pairs with planted rescue/harm."""
    n_pairs = rng.integers(1, pairs + 1, size=n) if pairs > 1 else np.ones(n, dtype=np.int64)
    rescue = rng.binomial(n_pairs, 0.08)
    harm = rng.binomial(n_pairs - rescue, 0.05)
    return (rescue - harm).astype(np.int64), n_pairs


def _ours(d: np.ndarray, n: np.ndarray) -> dict:
    import polars as pl
    import scipy.signal
    import scipy.stats  # noqa: F401  (imported on first use by recoverylab: not timed)

    from recoverylab import stats

    frame = pl.DataFrame({"d": d, "n": n})
    start = time.perf_counter()
    boot = stats.cluster_bootstrap(frame, cells=[], values=["d", "n"], n_resamples=RESAMPLES)
    boot_seconds = time.perf_counter() - start
    start = time.perf_counter()
    flip = stats.sign_flip_test(d)
    flip_seconds = time.perf_counter() - start
    types = frame.select(pl.struct("d", "n").n_unique()).item()
    return {
        "bootstrap_seconds": boot_seconds,
        "sign_flip_seconds": flip_seconds,
        "types": int(types),
        "ci": [float(boot["ci_low"].item()), float(boot["ci_high"].item())],
        "p_value": float(flip.p_value),
        "p_method": flip.method,
    }


def _calibrate(run: object, d: np.ndarray, n: np.ndarray, budget: float) -> dict:
    """Grow a scipy reference's input ×3 while the next run fits ``budget`` s; extrapolate."""
    size, seconds = 100, 0.0
    while True:
        start = time.perf_counter()
        run(d[:size], n[:size])
        seconds = time.perf_counter() - start
        if seconds * 3 > budget or size * 3 > len(d):
            break
        size *= 3
    return {
        "largest_size": size,
        "seconds_at_largest": seconds,
        "extrapolated_seconds": seconds * len(d) / size,
    }


def _scipy_bootstrap(d: np.ndarray, n: np.ndarray) -> None:
    from scipy import stats as sps

    def ratio(dd: np.ndarray, nn: np.ndarray, axis: int = -1) -> np.ndarray:
        return dd.sum(axis=axis) / nn.sum(axis=axis)

    sps.bootstrap(
        (d, n),
        ratio,
        paired=True,
        vectorized=True,
        n_resamples=RESAMPLES,
        method="percentile",
        batch=50,
        rng=np.random.default_rng(0),
    )


def _scipy_sign_flip(d: np.ndarray, n: np.ndarray) -> None:
    from scipy import stats as sps

    def total(x: np.ndarray, axis: int = -1) -> np.ndarray:
        return x.sum(axis=axis)

    sps.permutation_test(
        (d.astype(np.float64),),
        total,
        permutation_type="samples",
        vectorized=True,
        n_resamples=RESAMPLES,
        batch=50,
        rng=np.random.default_rng(0),
    )


def stats_scale(size: int, budget: float) -> dict:
    rng = np.random.default_rng(0)
    clusters = size or CLUSTERS
    result: dict = {"clusters": clusters, "resamples": RESAMPLES}
    for shape, pairs in (("one_pair", 1), ("up_to_12_pairs", 12)):
        d, n = _clusters(clusters, rng, pairs)
        result[shape] = _ours(d, n)
    d, n = _clusters(clusters, rng, 1)
    result["scipy_bootstrap"] = _calibrate(_scipy_bootstrap, d, n, budget)
    result["scipy_permutation_test"] = _calibrate(_scipy_sign_flip, d, n, budget)
    return result


def _cpu() -> float:
    """CPU seconds (user + system, all threads) of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def goal_workload(data: Path, out: Path) -> dict:
    import polars as pl
    import scipy.signal
    import scipy.stats  # noqa: F401  (imported on first use by recoverylab: not timed)
    from protocol_baselines import GOAL_TABLES, goal_counts_of_summary

    from recoverylab import goal

    tables = {t: pl.scan_parquet(data / t / "*.parquet") for t in GOAL_TABLES}
    steps = tables["steps"].select(pl.len()).collect().item()
    start, cpu = time.perf_counter(), _cpu()
    scored = goal.score(*(tables[t] for t in GOAL_TABLES))
    summary = goal.summarize(scored, n_resamples=RESAMPLES)
    seconds, cpu = time.perf_counter() - start, _cpu() - cpu
    goal_counts_of_summary(summary).write_parquet(out.with_suffix(".counts.parquet"))
    return {"seconds": seconds, "cpu_seconds": cpu, "rows_in": steps, "rows_out": summary.height}


def takeover_workload(data: Path, out: Path, interval: str = "bootstrap") -> dict:
    import polars as pl
    import scipy.signal
    import scipy.stats  # noqa: F401  (imported on first use by recoverylab: not timed)
    from protocol_baselines import takeover_counts_of_summary

    from recoverylab import takeover

    states = pl.scan_parquet(data / "states" / "*.parquet")
    attempts = pl.scan_parquet(data / "attempts" / "*.parquet")
    rows = attempts.select(pl.len()).collect().item()
    start, cpu = time.perf_counter(), _cpu()
    summary = takeover.summarize(states, attempts, n_resamples=RESAMPLES, interval=interval)
    seconds, cpu = time.perf_counter() - start, _cpu() - cpu
    takeover_counts_of_summary(summary).write_parquet(out.with_suffix(".counts.parquet"))
    return {"seconds": seconds, "cpu_seconds": cpu, "rows_in": rows, "rows_out": summary.height}


def baseline_workload(protocol: str, engine: str, data: Path, out: Path) -> dict:
    """Time a DuckDB or pandas equivalent (or the scan floor) of ``goal`` / ``takeover``."""
    import protocol_baselines as pb

    needed = pb.GOAL_NEEDED if protocol == "goal" else pb.TAKEOVER_NEEDED
    if engine == "duckdb":
        import duckdb  # noqa: F401  (import time is not query time)
    if engine == "pandas":
        import pandas  # noqa: F401
    start, cpu = time.perf_counter(), _cpu()
    if engine == "floor":
        rows = pb.scan_floor(data, needed)
        return {
            "seconds": time.perf_counter() - start,
            "cpu_seconds": _cpu() - cpu,
            "rows_in": rows,
        }
    result = getattr(pb, f"{protocol}_{engine}")(data)
    seconds, cpu = time.perf_counter() - start, _cpu() - cpu
    result.write_parquet(out.with_suffix(".counts.parquet"))
    return {"seconds": seconds, "cpu_seconds": cpu, "rows_out": result.height}


def router_workload(tasks: int) -> dict:
    import sklearn.linear_model  # noqa: F401  (import time is not fit time)

    from recoverylab import synth
    from recoverylab.router import Router
    from recoverylab.synth._router import FEATURES

    tables = synth.generate("decision_points", tasks, seed=0)
    points, forks = tables["decision_points"], tables["forks"]
    start = time.perf_counter()
    router = Router().fit(points, forks, list(FEATURES))
    fit = time.perf_counter() - start
    start = time.perf_counter()
    router.decide(points).collect()
    return {
        "seconds": fit,
        "decide_seconds": time.perf_counter() - start,
        "rows_in": points.height,
        "oof_gain": float(router.fit_report_.oof_gain),
        "oof_clean_harm": float(router.fit_report_.oof_clean_harm_rate),
    }


def run(workload: str, data: Path, size: int, budget: float, out: Path) -> dict:
    """Run one extra workload by name."""
    if workload == "stats_scale":
        return stats_scale(size, budget)
    if workload == "goal":
        return goal_workload(data, out)
    if workload == "takeover":
        return takeover_workload(data, out)
    if workload == "takeover_counts":
        return takeover_workload(data, out, interval="wilson")
    if workload == "router":
        return router_workload(size)
    protocol, _, engine = workload.partition("_")
    if protocol in ("goal", "takeover") and engine in ("duckdb", "pandas", "floor"):
        return baseline_workload(protocol, engine, data, out)
    raise SystemExit(f"unknown workload {workload!r}")
