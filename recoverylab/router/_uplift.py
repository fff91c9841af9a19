"""Router evaluation as uplift: how well a score ranks the points where recovery helps.

Paired forks observe both outcomes at every decision point, so the per-point effect of a refresh
τ = y1 − y0 (+1 rescue, −1 harm, 0 otherwise) is known, not estimated. A router, or any score
S, prioritises points; the Targeting Operator Characteristic (TOC; Yadlowsky et al. 2021, grf's
``rank_average_treatment_effect``) asks how much better the top q of points by S fare than all:

    TOC(q) = E[τ | S in its top q] − E[τ],

and the Rank-weighted Average Treatment Effect summarises the curve: AUTOC = ∫₀¹ TOC(q) dq,
QINI = ∫₀¹ q·TOC(q) dq. The estimators follow grf exactly: sort by S (decreasing), replace τ by
its average within each group of tied scores, TOC at i/n is the mean of the top i minus the mean
of all, AUTOC the (weighted) mean of TOC over i and QINI its mean with weights i/n. The Qini
curve is q·TOC(q) (extra net rescues per point from treating the top q instead of a random q) and
uplift@k is the mean τ of the top k share of points.

Intervals resample *tasks* (every point of a drawn task enters with the task's multinomial count
as its weight), and one set of draws serves every score, so the difference in RATE between the
router and a baseline has a paired interval.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from recoverylab import engines, paired, plan, stats
from recoverylab._errors import InputError, ParameterError
from recoverylab.router import _data

__all__ = [
    "CURVE_COLUMNS",
    "METRIC_COLUMNS",
    "Uplift",
    "rate_statistics",
    "uplift",
]

#: Columns of :attr:`Uplift.curves`.
CURVE_COLUMNS = (
    "policy",
    "q",
    "toc",
    "toc_ci_low",
    "toc_ci_high",
    "qini",
    "qini_ci_low",
    "qini_ci_high",
    "ci_method",
    "test",
)
#: Columns of :attr:`Uplift.metrics`.
METRIC_COLUMNS = (
    "policy",
    "reference",
    "metric",
    "estimate",
    "ci_low",
    "ci_high",
    "points",
    "tasks",
    "ci_method",
    "test",
)
#: The ``ci_method`` of every uplift interval (task-clustered percentile bootstrap); ``test``
#: is null: no p-value is reported beside these intervals, so they invert none.
_UPLIFT_CI_METHOD = "percentile"
_DEFAULT_Q = tuple(round(0.05 * i, 2) for i in range(1, 21))
#: Upper bound on resamples × points held in memory at once.
_MAX_BATCH_ELEMENTS = 2_000_000


@dataclass(frozen=True)
class Uplift(stats.ResultHtml):
    """TOC/Qini curves and RATE metrics of several scores on the same decision points.

    Every interval is a task-clustered percentile bootstrap (``ci_method`` ``"percentile"``);
    no p-value is reported beside it, so ``test`` is null.

    Attributes
    ----------
    curves
        One row per (policy, q): :data:`CURVE_COLUMNS`.
    metrics
        One row per (policy, metric) with ``reference`` null (``autoc``, ``qini``,
        ``uplift_at_k``, ``ate``), then one row per (policy, reference, metric) for the paired
        differences ``autoc`` and ``qini`` of the first policy minus each other one:
        :data:`METRIC_COLUMNS`.
    confidence, n_resamples, at
        The interval settings and the share of points of uplift@k.
    """

    curves: pl.DataFrame = field(repr=False)
    metrics: pl.DataFrame = field(repr=False)
    confidence: float
    n_resamples: int
    at: float


def _ordering(score: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the decreasing-score order, the start of each tie group in it, and group sizes."""
    order = np.argsort(-score, kind="stable")
    ordered = score[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    sizes = np.diff(np.r_[starts, len(score)])
    return order, starts, sizes


def _curves(
    tau: np.ndarray, weights: np.ndarray, starts: np.ndarray, sizes: np.ndarray, q: np.ndarray
) -> dict[str, np.ndarray]:
    """TOC on the grid, AUTOC, QINI, ATE for each row of ``weights`` (points in score order).

    A weight is a multiplicity (a task drawn twice by the bootstrap puts its points in twice),
    and the result is grf's estimator on the replicated points, in closed form per point: a
    point of effect v and weight w entering after C points with effect sum S adds the TOC
    values (S + j·v)/(C + j) − ATE for j = 1..w, whose sum is w·v + (S − C·v)·(H(C + w) − H(C))
    − w·ATE (H the harmonic numbers) and whose q-weighted sum is (w·S + v·w(w + 1)/2 −
    ATE·(w·C + w(w + 1)/2)) / N.
    """
    from scipy import special  # a slow import (0.3 s), kept off `import recoverylab.router`

    tw = weights * tau
    # grf: tied scores share the average effect of their group.
    group_tw = np.add.reduceat(tw, starts, axis=1)
    group_w = np.add.reduceat(weights, starts, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        average = np.where(group_w > 0, group_tw / group_w, 0.0)
    v = np.repeat(average, sizes, axis=1)
    cum_w = np.cumsum(weights, axis=1)
    cum_s = np.cumsum(weights * v, axis=1)
    n = cum_w[:, -1:]
    ate = cum_s[:, -1:] / n
    before_w, before_s = cum_w - weights, cum_s - weights * v
    harmonic = special.digamma(cum_w + 1) - special.digamma(before_w + 1)
    toc_sum = weights * v + (before_s - before_w * v) * harmonic - weights * ate
    tri = weights * (weights + 1) / 2
    qini_sum = (weights * before_s + v * tri - ate * (weights * before_w + tri)) / n
    autoc = _flat_zero(toc_sum.sum(axis=1) / n[:, 0])
    qini = _flat_zero(qini_sum.sum(axis=1) / n[:, 0])
    # TOC(q): the mean of the top m = floor(q·N) replicated points (grf's findInterval), m >= 1.
    columns = []
    for level in q:
        m = np.maximum(np.floor(level * n[:, 0] + 1e-9), 1.0)[:, np.newaxis]
        block = np.minimum((cum_w < m).sum(axis=1, keepdims=True), cum_w.shape[1] - 1)
        s_b = np.take_along_axis(before_s, block, axis=1)
        c_b = np.take_along_axis(before_w, block, axis=1)
        v_b = np.take_along_axis(v, block, axis=1)
        columns.append(((s_b + (m - c_b) * v_b) / m - ate)[:, 0])
    return {
        "toc": _flat_zero(np.stack(columns, axis=1)),
        "autoc": autoc,
        "qini": qini,
        "ate": ate[:, 0],
    }


def _flat_zero(values: np.ndarray) -> np.ndarray:
    """Set rounding residue to 0: a flat ranking (one tie group) has no targeting effect."""
    return np.where(np.abs(values) < 1e-12, 0.0, values)


def rate_statistics(
    tau: np.ndarray | Sequence[float],
    score: np.ndarray | Sequence[float],
    weights: np.ndarray | Sequence[float] | None = None,
    q: Sequence[float] = _DEFAULT_Q,
) -> dict[str, np.ndarray | float]:
    """Return grf's TOC on a grid, AUTOC, QINI and the ATE for one score.

    Parameters
    ----------
    tau
        Per-point effects.
    score
        Per-point priorities (higher = treat first).
    weights
        Optional non-negative integer multiplicities (a point of weight 2 counts as two
        identical points; bootstrap draws of tasks).
    q
        Grid of shares of points in (0, 1] for the TOC.

    Returns
    -------
    dict
        ``toc`` (array over ``q``), ``autoc``, ``qini``, ``ate`` (floats).

    Examples
    --------
    >>> out = rate_statistics([1, 0, 0, -1], [4, 3, 2, 1], q=[0.25, 1.0])
    >>> out["toc"].tolist(), round(out["autoc"], 6)
    ([1.0, 0.0], 0.458333)
    """
    t = np.asarray(tau, dtype=np.float64)
    s = np.asarray(score, dtype=np.float64)
    w = np.ones_like(t) if weights is None else np.asarray(weights, dtype=np.float64)
    if not (t.ndim == s.ndim == w.ndim == 1 and len(t) == len(s) == len(w) > 0):
        raise ParameterError(
            "`tau`, `score` and `weights` must be non-empty 1-d arrays of one length."
        )
    order, starts, sizes = _ordering(s)
    out = _curves(t[order][np.newaxis], w[order][np.newaxis], starts, sizes, np.asarray(q))
    return {
        "toc": out["toc"][0],
        "autoc": float(out["autoc"][0]),
        "qini": float(out["qini"][0]),
        "ate": float(out["ate"][0]),
    }


#: The score column a fitted policy ranks by (its priority for a refresh).
_POLICY_SCORE = {
    "router": "utility",
    "anomaly": "p_err",
    "rate_matched": "p_err",
    "break_even": "p_fail",
}


def _score_expr(name: str, scorer: object, points: pl.LazyFrame, at: list[str]) -> pl.LazyFrame:
    """Return the point keys ``at`` and ``__score`` for one named score (checked scorers)."""
    if isinstance(scorer, str):
        if scorer not in points.collect_schema():
            raise ParameterError(
                f"parameter `scores`: {name!r} names the column `{scorer}`, which is not a column "
                f"of `decision_points` ({', '.join(points.collect_schema().names())})."
            )
        return points.select(*at, pl.col(scorer).cast(pl.Float64).alias("__score"))
    kind = getattr(scorer, "kind", None)
    if kind == "never":
        return points.select(*at, pl.lit(0.0).alias("__score"))
    scored = scorer.score(points)  # type: ignore[attr-defined]
    return scored.select(*at, pl.col(_POLICY_SCORE[str(kind)]).alias("__score"))


def _points_partial(
    frames: Mapping[str, pl.LazyFrame],
    design: Any,
    *,
    pairs: plan.Partial,
    scores: Mapping[str, object],
    delays: tuple[int, ...],
    method: str,
    pair_by: tuple[str, ...],
) -> dict[str, pl.LazyFrame]:
    """Return one row per candidate point of a shard: keys, ``y0``, ``y1``, the scores.

    ``y0``/``y1`` are null without a paired outcome; the i-th score is ``__score{i}`` (names may
    be any string). ``pairs`` is the per-task stage of :func:`recoverylab.paired.pairs_plan`
    (the shard's pairs against the whole table's ``design``); a score is a function of its row.
    """
    at = [*_data.episode_keys(pair_by), "delay"]
    points = _data.points(frames[_data.TABLE], pair_by)
    outcomes = _data.method_outcomes(pairs(frames, design)["pairs"].lazy(), at, method)
    frame = (
        points.filter(pl.col("delay").is_in(list(delays)))
        .select(at)
        .join(outcomes, on=at, how="left", nulls_equal=True)
    )
    for i, (name, scorer) in enumerate(scores.items()):
        score = _score_expr(name, scorer, points, at).rename({"__score": _score_column(i)})
        frame = frame.join(score, on=at, how="left", nulls_equal=True)
    return {"points": frame}


def _score_column(i: int) -> str:
    return f"__score{i}"


def _labelled(points: pl.DataFrame, scores: int, at: list[str], method: str) -> pl.DataFrame:
    """Sort the combined candidate points and add τ = y1 − y0 (``__tau``).

    Raises InputError for points without a paired outcome or a finite score, or no points.
    """
    frame = points.sort(at, nulls_last=True)
    _data.check_labels(frame, at, method)
    names = [_score_column(i) for i in range(scores)]
    missing = frame.filter(pl.any_horizontal(pl.col(names).is_null() | pl.col(names).is_nan()))
    if missing.height:
        raise InputError(
            f"decision_points: {missing.height} candidate point(s) have no finite score "
            f"({', '.join('/'.join(map(str, r)) for r in missing.select(at).rows()[:5])}); every "
            "point needs a score from every policy."
        )
    if frame.height == 0:
        raise InputError("decision_points: no candidate point at the given `delays`.")
    tau = pl.col("y1").cast(pl.Int64) - pl.col("y0").cast(pl.Int64)
    return frame.select(*at, tau.cast(pl.Float64).alias("__tau"), *names)


def _bootstrap(
    tau: np.ndarray,
    scores: dict[str, np.ndarray],
    task_codes: np.ndarray,
    q: np.ndarray,
    at: float,
    n_resamples: int,
    seed: int,
) -> dict[str, dict[str, np.ndarray]]:
    """Estimate (row 0, weights 1) and resampled statistics (rows 1..R) for every score."""
    n_tasks = int(task_codes.max()) + 1
    gen = np.random.default_rng(seed)
    grid = np.r_[q, at]
    prepared = {name: _ordering(score) for name, score in scores.items()}
    parts: dict[str, list[dict[str, np.ndarray]]] = {name: [] for name in scores}
    batch = max(1, _MAX_BATCH_ELEMENTS // len(tau))
    draws_left = n_resamples + 1
    while draws_left:
        size = min(batch, draws_left)
        counts = gen.multinomial(n_tasks, np.full(n_tasks, 1 / n_tasks), size=size).astype(float)
        if draws_left == n_resamples + 1:  # row 0: the data as observed
            counts[0] = 1.0
        weights = counts[:, task_codes]
        for name, (order, starts, sizes) in prepared.items():
            parts[name].append(_curves(tau[order], weights[:, order], starts, sizes, grid))
        draws_left -= size
    return {
        name: {key: np.concatenate([p[key] for p in chunks]) for key in chunks[0]}
        for name, chunks in parts.items()
    }


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """Estimate (row 0) and the percentile interval of the resampled rows."""
    resampled = values[1:]
    resampled = resampled[np.isfinite(resampled)]
    if resampled.size == 0:
        return float(values[0]), float("nan"), float("nan")
    low, high = np.quantile(resampled, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(values[0]), float(low), float(high)


def _check_uplift(
    scores: object, q: object, at: object, confidence: object, n_resamples: object, seed: object
) -> None:
    """Check the parameters and the scorers of :func:`uplift` (before any data is read)."""
    grid = np.asarray(q, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or not np.all((grid > 0) & (grid <= 1)):
        raise ParameterError(f"parameter `q` is {q!r}; it must be shares in (0, 1].")
    if not isinstance(at, float) or not 0 < at <= 1:
        raise ParameterError(f"parameter `at` is {at!r}; it must be a share in (0, 1].")
    stats.check_resampling(confidence=confidence, n_resamples=n_resamples, seed=seed)
    if not isinstance(scores, Mapping) or not scores:
        raise ParameterError("parameter `scores` must be a non-empty mapping {name: scorer}.")
    for name, scorer in scores.items():
        kind = getattr(scorer, "kind", None)
        if isinstance(scorer, str) or kind == "never":
            continue
        if _POLICY_SCORE.get(str(kind)) is None or not callable(getattr(scorer, "score", None)):
            raise ParameterError(
                f"parameter `scores`: {name!r} is a {type(scorer).__name__}; give a fitted Router, "
                "AnomalyRouter, RateMatchedAnomaly, Never, or the name of a score column."
            )


def uplift(
    scores: Mapping[str, object],
    decision_points: object,
    forks: object,
    *,
    delays: Sequence[int] = (1, 2, 4),
    method: str = "refresh",
    clean_label: str = "clean",
    pair_by: Sequence[str] = (),
    q: Sequence[float] = _DEFAULT_Q,
    at: float = 0.1,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    engine: object = "polars",
) -> Uplift:
    """Score policies as uplift rankers on held-out points: TOC, RATE (AUTOC, QINI), Qini, uplift@k.

    Parameters
    ----------
    scores
        ``{name: scorer}``; the first is the one compared with the others. A scorer is a fitted
        :class:`Router` (ranks by ``utility``), :class:`AnomalyRouter` or
        :class:`RateMatchedAnomaly` (by ``p_err``), :class:`BreakEven` (by the failure
        probability 1 − p0), :class:`Never` (a constant: TOC ≡ 0), or
        the name of a numeric column of ``decision_points`` (e.g. a feature).
    decision_points, forks
        Held-out decision points and their forks.
    delays, method, clean_label, pair_by
        Which points are candidates and how they are labelled (as for the router).
    q
        Grid of shares for the curves.
    at
        Share of points of uplift@k.
    confidence, n_resamples, seed
        Task-clustered bootstrap (shared draws across scores).
    engine
        ``"polars"`` (default), a SparkSession (or ``"spark"``) or an engine object (see
        :mod:`recoverylab.engines`); the result is the same. The points are labelled and
        scored per task on the engine (the scorers travel to Spark's workers pickled); the
        bootstrap runs on the driver.

    Returns
    -------
    Uplift
        ``curves`` and ``metrics`` (see :class:`Uplift`).

    Raises
    ------
    ParameterError
        For a bad parameter or scorer.
    InputError
        For points without a paired outcome or without a score.

    Examples
    --------
    >>> import polars as pl
    >>> points = pl.DataFrame({"task_id": ["a", "b"], "condition": ["stale2"] * 2,
    ...                        "delay": [1, 1], "s": [1.0, 0.0]})
    >>> forks = pl.DataFrame({"task_id": ["a", "a", "b", "b"], "condition": ["stale2"] * 4,
    ...                       "method": ["none", "refresh"] * 2, "delay": [None, 1] * 2,
    ...                       "success": [False, True, True, True]})
    >>> res = uplift({"s": "s"}, points, forks, delays=[1], n_resamples=50)
    >>> res.metrics.filter(metric="autoc")["estimate"].item()
    0.25
    """
    # stages: the design grid of paired.pairs_plan, then each shard's points labelled and scored
    keys = tuple(pair_by)
    named = dict(scores) if isinstance(scores, Mapping) else {}
    pairing = paired.pairs_plan(forks, pair_by=keys)
    design, pairs = pairing.stages
    statistics: dict[str, Any] = {
        "at": at,
        "confidence": confidence,
        "n_resamples": n_resamples,
        "seed": seed,
    }
    return engines.run(
        engine,
        plan.Plan(
            inputs=(
                plan.Input(_data.TABLE, decision_points, key="task_id", contract=_data.TABLE),
                *pairing.inputs,
            ),
            check=functools.partial(_check_uplift, scores, q, at, confidence, n_resamples, seed),
            stages=(
                design,
                plan.Stage(
                    "labelling and scoring points per task",
                    functools.partial(
                        _points_partial,
                        pairs=pairs.partial,
                        scores=named,
                        delays=tuple(delays),
                        method=method,
                        pair_by=keys,
                    ),
                ),
            ),
            finish=functools.partial(
                _uplift_finish, names=list(named), q=q, method=method, pair_by=keys, **statistics
            ),
        ),
    )


def _uplift_finish(
    parts: dict[str, pl.DataFrame],
    *,
    names: list[str],
    q: Sequence[float],
    method: str,
    pair_by: tuple[str, ...],
    at: float,
    confidence: float,
    n_resamples: int,
    seed: int,
) -> Uplift:
    """Label the combined points and bootstrap every score over tasks."""
    at_keys = [*_data.episode_keys(pair_by), "delay"]
    frame = _labelled(parts["points"], len(names), at_keys, method)
    grid = np.asarray(q, dtype=np.float64)
    codes = frame.select(pl.col("task_id").rank("dense").cast(pl.Int64) - 1).to_series().to_numpy()
    tau = frame["__tau"].to_numpy()
    arrays = {
        name: frame[_score_column(i)].to_numpy().astype(np.float64) for i, name in enumerate(names)
    }
    results = _bootstrap(tau, arrays, codes, grid, at, n_resamples, seed)
    return Uplift(
        curves=_curve_frame(results, grid, confidence),
        metrics=_metric_frame(results, confidence, frame.height, int(codes.max()) + 1),
        confidence=confidence,
        n_resamples=n_resamples,
        at=at,
    )


def _curve_frame(results: dict, grid: np.ndarray, confidence: float) -> pl.DataFrame:
    rows = []
    for name, res in results.items():
        for j, level in enumerate(grid):
            toc = _interval(res["toc"][:, j], confidence)
            qini = _interval(level * res["toc"][:, j], confidence)
            rows.append((name, float(level), *toc, *qini, _UPLIFT_CI_METHOD, None))
    types = (pl.String,) + (pl.Float64,) * 7 + (pl.String,) * 2
    schema = dict(zip(CURVE_COLUMNS, types, strict=True))
    return pl.DataFrame(rows, schema=schema, orient="row")


def _metric_frame(results: dict, confidence: float, points: int, tasks: int) -> pl.DataFrame:
    rows = []
    for name, res in results.items():
        top = res["toc"][:, -1] + res["ate"]  # uplift@k: TOC at the share `at`, plus the ATE
        for metric in ("autoc", "qini", "uplift_at_k", "ate"):
            values = top if metric == "uplift_at_k" else res[metric]
            interval = _interval(values, confidence)
            rows.append((name, None, metric, *interval, points, tasks, _UPLIFT_CI_METHOD, None))
    names = list(results)
    for other in names[1:]:
        for metric in ("autoc", "qini"):
            diff = results[names[0]][metric] - results[other][metric]
            interval = _interval(diff, confidence)
            rows.append(
                (names[0], other, metric, *interval, points, tasks, _UPLIFT_CI_METHOD, None)
            )
    types = (pl.String,) * 3 + (pl.Float64,) * 3 + (pl.Int64,) * 2 + (pl.String,) * 2
    schema = dict(zip(METRIC_COLUMNS, types, strict=True))
    return pl.DataFrame(rows, schema=schema, orient="row")
