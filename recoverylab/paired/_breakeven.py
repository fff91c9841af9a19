"""Break-even failure probability of a recovery, per cell.

A recovery helps a run that would fail and can hurt a run that would succeed. With p = P(y0
fails), r = rescue / #(y0 fails) (the rescue rate among failing runs) and d = harm / #(y0
succeeds) (the harm rate among succeeding runs), the net effect of always recovering is

    p·r − (1 − p)·d   (= (rescue − harm) / n, the cell's effect),

and recovering pays exactly when the failure probability exceeds p* = d / (r + d): "recover only
when failure is likelier than p*". A router that predicts failure should intervene above p*; a
harness without a model can use p* with a failure-rate estimate as a sanity baseline.

The interval of p* is a task-level cluster bootstrap of the ratio statistic over the per-task
counts (rescue, unchanged, harm, kept): one draw of tasks serves r and d together.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from recoverylab import engines, plan, stats
from recoverylab._errors import require_one_of
from recoverylab.paired._pairs import COHORTS, Cohort, Design
from recoverylab.paired._shards import design_stage, forks_input, shard_pairs

__all__ = [
    "BREAK_EVEN_COLUMNS",
    "break_even",
    "break_even_statistic",
    "join_break_even",
]

#: Columns :func:`break_even` adds after the cell keys (and that ``summarize(break_even=True)``
#: appends to the summary).
BREAK_EVEN_COLUMNS = (
    "p_fail",
    "rescue_given_fail",
    "harm_given_success",
    "net_effect",
    "break_even",
    "break_even_ci_low",
    "break_even_ci_high",
    "break_even_ci_method",
    "break_even_test",
)
_COUNTS = ("rescue", "unchanged", "harm", "kept")


def break_even_statistic(sums: np.ndarray) -> np.ndarray:
    """Return p* = d / (r + d) from column sums (rescue, unchanged, harm, kept).

    NaN where undefined: no failing or no succeeding run (r or d undefined), or r + d = 0.

    Examples
    --------
    >>> round(float(break_even_statistic(np.array([2.0, 6.0, 1.0, 9.0]))), 6)
    0.285714
    """
    sums = np.asarray(sums, dtype=np.float64)
    r = stats.ratio(np.stack([sums[..., 0], sums[..., 0] + sums[..., 1]], axis=-1))
    d = stats.ratio(np.stack([sums[..., 2], sums[..., 2] + sums[..., 3]], axis=-1))
    return stats.ratio(np.stack([d, r + d], axis=-1))


def break_even(
    forks: object,
    *,
    by: Sequence[str] = (),
    pair_by: Sequence[str] = (),
    cohort: Cohort = "full",
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    ci_method: str = "percentile",
    engine: object = "polars",
) -> pl.DataFrame:
    """Return the break-even failure probability p* per (condition, delay, method, *by*).

    Parameters
    ----------
    forks, by, pair_by, cohort
        As in :func:`recoverylab.paired.summarize`.
    confidence, n_resamples, seed, ci_method
        Task-level cluster bootstrap of p*.
    engine
        ``"polars"`` (default), a SparkSession (or ``"spark"``) or an engine object (see
        :mod:`recoverylab.engines`); the result is the same.

    Returns
    -------
    polars.DataFrame
        One row per cell: condition, delay, method, *by*, ``n``, then
        :data:`BREAK_EVEN_COLUMNS`: ``p_fail`` = (rescue + unchanged) / n,
        ``rescue_given_fail`` = r, ``harm_given_success`` = d, ``net_effect`` = p·r − (1 − p)·d,
        ``break_even`` = d / (r + d) with its interval, ``break_even_ci_method`` (the
        bootstrap method) and ``break_even_test`` (null: no p-value is reported beside this
        interval; prefixed so the columns can join a summary's). Null where undefined (e.g.
        no succeeding run: d has no denominator).

    Examples
    --------
    >>> forks = pl.DataFrame({"task_id": ["t1", "t1", "t2", "t2", "t3", "t3"],
    ...                       "condition": ["stale2"] * 6, "method": ["none", "refresh"] * 3,
    ...                       "delay": [None, 0] * 3,
    ...                       "success": [False, True, True, False, True, True]})
    >>> break_even(forks, n_resamples=100).select("net_effect", "break_even").row(0)
    (0.0, 0.3333333333333333)
    """
    keys: dict[str, Any] = {"by": tuple(by), "pair_by": pair_by, "cohort": cohort}
    statistics: dict[str, Any] = {
        "confidence": confidence,
        "n_resamples": n_resamples,
        "seed": seed,
        "ci_method": ci_method,
    }
    return engines.run(
        engine,
        plan.Plan(
            inputs=(forks_input(forks),),
            check=functools.partial(_check, cohort=cohort, **statistics),
            stages=(
                design_stage(pair_by=pair_by, cohort=cohort),
                plan.Stage("counting outcomes per task", functools.partial(_task_partial, **keys)),
            ),
            finish=functools.partial(
                _finish, cells=["condition", "delay", "method", *by], **statistics
            ),
        ),
    )


def _check(*, cohort: object, **statistics: Any) -> None:
    """Check the parameters before any data is read."""
    require_one_of("cohort", cohort, COHORTS)
    stats.check_resampling(**statistics)


def _task_partial(
    frames: Mapping[str, pl.LazyFrame],
    design: Design,
    *,
    by: Sequence[str],
    pair_by: Sequence[str],
    cohort: str,
) -> dict[str, pl.LazyFrame]:
    """Per (task, cell): the counts of rescue, unchanged, harm and kept pairs (one shard)."""
    rows = shard_pairs(frames["forks"], design, pair_by=pair_by, cohort=cohort, carry=by)
    outcome = pl.col("outcome")
    per_task = rows.group_by("task_id", "condition", "delay", "method", *by).agg(
        *((outcome == c).sum().cast(pl.Float64).alias(c) for c in _COUNTS)
    )
    return {"per_task": per_task}


def _finish(parts: dict[str, pl.DataFrame], *, cells: list[str], **statistics: Any) -> pl.DataFrame:
    """Bootstrap p* over the per-task counts; add the cell rates."""
    per_task = parts["per_task"]
    boot = stats.cluster_bootstrap(
        per_task, cells=cells, values=list(_COUNTS), statistic=break_even_statistic, **statistics
    )
    totals = per_task.group_by(cells).agg(pl.col(c).sum() for c in _COUNTS)
    rescue, unchanged, harm, kept = (pl.col(c) for c in _COUNTS)
    n = rescue + unchanged + harm + kept
    fail, succeed = rescue + unchanged, harm + kept
    rates = totals.with_columns(
        n.cast(pl.Int64).alias("n"),
        (fail / n).alias("p_fail"),
        pl.when(fail > 0).then(rescue / fail).alias("rescue_given_fail"),
        pl.when(succeed > 0).then(harm / succeed).alias("harm_given_success"),
        ((rescue - harm) / n).alias("net_effect"),
    )
    joined = rates.join(boot, on=cells, how="left", nulls_equal=True).with_columns(
        pl.col("estimate").fill_nan(None).alias("break_even"),
        pl.col("ci_low").fill_nan(None).alias("break_even_ci_low"),
        pl.col("ci_high").fill_nan(None).alias("break_even_ci_high"),
        pl.lit(str(statistics["ci_method"])).alias("break_even_ci_method"),
        pl.lit(None, dtype=pl.String).alias("break_even_test"),
    )
    return joined.select(*cells, "n", *BREAK_EVEN_COLUMNS).sort(cells, nulls_last=False)


def join_break_even(summary: pl.DataFrame, forks: object, **options: object) -> pl.DataFrame:
    """Append :data:`BREAK_EVEN_COLUMNS` to a :func:`~recoverylab.paired.summarize` result."""
    by = list(options.pop("by", ()) or ())  # type: ignore[call-overload]
    extra = break_even(forks, by=by, **options)  # type: ignore[arg-type]
    keys = ["condition", "delay", "method", *by]
    return summary.join(
        extra.select(*keys, *BREAK_EVEN_COLUMNS),
        on=keys,
        how="left",
        nulls_equal=True,
        maintain_order="left",
    )
