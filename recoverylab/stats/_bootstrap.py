"""The cluster bootstrap on types: percentile and BCa intervals, per cell of a frame.

:func:`bootstrap_types` resamples K clusters as multinomial counts over their distinct types
(ARCHITECTURE §4) and applies a statistic of column sums; :func:`cluster_bootstrap` runs it in
every cell of a frame of partials, each cell on its own :func:`cell_rng` stream, so a cell's
interval does not change with the other cells or with row order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import polars as pl

from recoverylab._errors import ParameterError, format_keys, renamed, require_one_of
from recoverylab.stats import _limits
from recoverylab.stats._cells import _cell_types, _column_names
from recoverylab.stats._checks import (
    _OLD_CI_NAME,
    CI_METHODS,
    _check_confidence,
    _check_counts,
    _check_n_resamples,
    _check_seed,
    _numeric_array,
)
from recoverylab.stats._column_sums import Statistic, ratio
from recoverylab.stats._distributions import _normal_cdf, _normal_quantile
from recoverylab.stats._results import BootstrapResult
from recoverylab.stats._streams import _as_generator, _merge_types, cell_rng

_BOOTSTRAP_COLUMNS = ("estimate", "ci_low", "ci_high", "n_clusters")


def _check_statistic(statistic: object) -> Statistic:
    if not callable(statistic):
        raise ParameterError(
            f"parameter `statistic` is {statistic!r}; it must be a function of column sums, "
            "e.g. recoverylab.stats.ratio."
        )
    return statistic


def bootstrap_types(
    values: np.ndarray | Sequence[Sequence[float]],
    counts: np.ndarray | Sequence[int],
    statistic: Statistic = ratio,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    ci_method: str = "percentile",
    rng: np.random.Generator | int | None = None,
    **deprecated: object,
) -> BootstrapResult:
    """Bootstrap a statistic of column sums by resampling clusters, given as types with counts.

    Each resample draws ``M ~ Multinomial(K, counts / K)`` over the distinct cluster types
    (ARCHITECTURE §4: the same as resampling the K clusters), sums ``M @ values`` and applies
    ``statistic``: the cost per resample is the number of types. Types are merged and sorted
    first, so the result depends only on the multiset of clusters and the generator.

    Parameters
    ----------
    values
        Array (T, V): one row per cluster type, its partial sums (e.g. numerator, denominator).
    counts
        Array (T,): how many clusters have each type (positive integers).
    statistic
        Maps column sums ``(..., V)`` to ``(...)``; default :func:`ratio`
        (:func:`ratio_difference` for contrasts of two cells with joint types).
    n_resamples
        Number of bootstrap resamples (>= 1).
    confidence
        Confidence level in (0, 1).
    ci_method
        ``"percentile"`` (quantiles (1-c)/2 and (1+c)/2 of the distribution, NaN resamples
        ignored) or ``"bca"`` (bias-corrected and accelerated; the acceleration comes from the
        jackknife over clusters, computed once per type and weighted by counts).
    rng
        A numpy Generator, an integer seed, or None for seed 0.

    Returns
    -------
    BootstrapResult
        Estimate, interval, and the resampled distribution.

    Raises
    ------
    ParameterError
        For a bad shape, non-finite values, counts that are not positive integers, a confidence
        outside (0, 1), fewer than one resample, an unknown method, or a statistic that does not
        fit the value columns.

    Notes
    -----
    No warnings in degenerate cases: all resamples equal gives the BCa interval ``[estimate,
    estimate]``, all NaN a NaN interval; with K = 1 the acceleration is 0; an estimate outside
    every resample caps the BCa bias correction at the ``1 / (2 n_resamples)`` quantile.

    Examples
    --------
    Two clusters, one with 1 success in 1 trial and one with 0 in 1:

    >>> res = bootstrap_types([[1, 1], [0, 1]], [1, 1], n_resamples=2000, rng=1)
    >>> res.estimate, res.n_clusters
    (0.5, 2)
    >>> float(res.ci_low), float(res.ci_high)
    (0.0, 1.0)
    """
    method = str(renamed("bootstrap_types", deprecated, _OLD_CI_NAME).get("ci_method", ci_method))
    values_a, counts_a, statistic, n_resamples, confidence, method, gen = _bootstrap_iv(
        values, counts, statistic, n_resamples, confidence, method, rng
    )
    n_clusters = int(counts_a.sum())
    total = counts_a.astype(np.float64) @ values_a
    estimate = float(_apply_statistic(statistic, total[np.newaxis, :], values_a.shape[1])[0])

    distribution = np.empty(n_resamples, dtype=np.float64)
    probabilities = counts_a / n_clusters
    batch = max(1, _limits.MAX_BATCH_ELEMENTS // values_a.shape[0])
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        draws = gen.multinomial(n_clusters, probabilities, size=size)
        sums = draws.astype(np.float64) @ values_a
        distribution[start : start + size] = _apply_statistic(statistic, sums, values_a.shape[1])

    if method == "bca":
        low, high = _bca_interval(distribution, estimate, values_a, counts_a, statistic, confidence)
    else:
        low, high = _percentile_interval(distribution, confidence)
    distribution.setflags(write=False)
    return BootstrapResult(
        estimate, float(low), float(high), confidence, method, n_resamples, n_clusters, distribution
    )


def _bootstrap_iv(
    values: object,
    counts: object,
    statistic: object,
    n_resamples: object,
    confidence: object,
    method: object,
    rng: object,
) -> tuple[np.ndarray, np.ndarray, Statistic, int, float, str, np.random.Generator]:
    """Validate and standardise the inputs of :func:`bootstrap_types` (one place, like scipy)."""
    values_a = _numeric_array("values", values)
    if values_a.ndim != 2 or values_a.shape[0] == 0 or values_a.shape[1] == 0:
        raise ParameterError(
            f"parameter `values` has shape {values_a.shape}; it must be a non-empty 2-D array "
            "(one row per cluster type, one column per partial sum)."
        )
    values_a = values_a.astype(np.float64)
    finite = np.isfinite(values_a).all(axis=1)
    if not finite.all():
        where = np.flatnonzero(~finite)
        shown = format_keys((f"row {i}" for i in where), total=where.size)
        raise ParameterError(
            f"parameter `values` has {where.size} rows with NaN or infinite entries ({shown}); "
            "partial sums must be finite."
        )
    counts_a = _check_counts(counts, values_a.shape[0], "rows in `values`")
    statistic = _check_statistic(statistic)
    n_resamples = _check_n_resamples(n_resamples)
    confidence = _check_confidence(confidence)
    require_one_of("ci_method", method, CI_METHODS)
    gen = _as_generator(rng)
    values_a, counts_a = _merge_types(values_a, counts_a)
    return values_a, counts_a, statistic, n_resamples, confidence, str(method), gen


def _apply_statistic(statistic: Statistic, sums: np.ndarray, n_columns: int) -> np.ndarray:
    """Apply ``statistic`` to a batch of sums, checking that it returns one value per row."""
    try:  # undefined resamples (a zero denominator) are NaN, which the intervals handle
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.asarray(statistic(sums), dtype=np.float64)
    except IndexError as exc:
        raise ParameterError(
            f"parameter `statistic` cannot be applied to sums with {n_columns} value columns "
            f"({exc}). Hint: ratio needs 2 columns (numerator, denominator), ratio_difference 4."
        ) from exc
    if out.shape != sums.shape[:-1]:
        raise ParameterError(
            f"parameter `statistic` returned shape {out.shape} for sums of shape {sums.shape}; it "
            "must reduce the last axis only, returning one value per row."
        )
    return out


def _percentile_interval(distribution: np.ndarray, confidence: float) -> tuple[float, float]:
    kept = distribution[~np.isnan(distribution)]
    if kept.size == 0:
        return math.nan, math.nan
    low, high = np.quantile(kept, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def _bca_interval(
    distribution: np.ndarray,
    estimate: float,
    values: np.ndarray,
    counts: np.ndarray,
    statistic: Statistic,
    confidence: float,
) -> tuple[float, float]:
    """Return the BCa interval (Efron & Tibshirani 1993, §14.3 and Eq. 14.15)."""
    kept = distribution[~np.isnan(distribution)]
    if kept.size == 0 or math.isnan(estimate):
        return math.nan, math.nan
    if kept.min() == kept.max():
        return estimate, estimate
    levels = _bca_levels(kept, estimate, _acceleration(values, counts, statistic), confidence)
    low, high = np.quantile(kept, levels)
    return float(low), float(high)


def _bca_levels(
    kept: np.ndarray, estimate: float, acceleration: float, confidence: float
) -> np.ndarray:
    """Return the two quantile levels of the BCa interval given the bias and acceleration."""
    size = kept.size
    # Fraction of resamples below the estimate, ties counted half (as scipy does).
    ranks = np.count_nonzero(kept < estimate) + np.count_nonzero(kept <= estimate)
    below = min(max(ranks / (2 * size), 0.5 / size), 1 - 0.5 / size)
    z0 = _normal_quantile(below)
    z = np.array([_normal_quantile((1 - confidence) / 2), _normal_quantile((1 + confidence) / 2)])
    shifted = z0 + z
    with np.errstate(divide="ignore", invalid="ignore"):
        levels = _normal_cdf(z0 + shifted / (1 - acceleration * shifted))
    return np.nan_to_num(levels, nan=0.5)


def _acceleration(values: np.ndarray, counts: np.ndarray, statistic: Statistic) -> float:
    """Return the jackknife acceleration over clusters, one leave-one-out value per type.

    Every cluster of type t leaves θ₍ₜ₎, so a = Σ cₜ Uₜ³ / (6 (Σ cₜ Uₜ²)^{3/2}), Uₜ = θ̄ − θ₍ₜ₎,
    over the types whose θ₍ₜ₎ is defined (not NaN).
    """
    n_clusters = int(counts.sum())
    if n_clusters < 2:
        return 0.0
    total = counts.astype(np.float64) @ values
    leave_one_out = _apply_statistic(statistic, total[np.newaxis, :] - values, values.shape[1])
    kept = ~np.isnan(leave_one_out)
    weights = counts[kept].astype(np.float64)
    if weights.sum() == 0:
        return 0.0
    theta = leave_one_out[kept]
    deviation = weights @ theta / weights.sum() - theta
    spread = float(weights @ deviation**2)
    if spread == 0.0 or not math.isfinite(spread):
        return 0.0
    return float(weights @ deviation**3) / (6.0 * spread**1.5)


def cluster_bootstrap(
    partials: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    values: Sequence[str],
    count: str | None = None,
    statistic: Statistic = ratio,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    ci_method: str = "percentile",
    seed: int = 0,
    **deprecated: object,
) -> pl.DataFrame:
    """Bootstrap a statistic of per-cluster partials separately in every cell of a frame.

    Polars groups the frame to distinct (cell, values) types, so only the type table is
    collected; each cell goes to :func:`bootstrap_types` with its own ``cell_rng(seed, key)``,
    so its interval does not change with the other cells or with row order.

    Parameters
    ----------
    partials
        One row per cluster × cell (or per type, when ``count`` names a multiplicity column),
        with the cell key columns and the value columns. Eager or lazy.
    cells
        Key columns of a cell (may be empty: one cell for the whole table); nulls are keys.
    values
        Value columns, in the order ``statistic`` expects (:func:`ratio`: numerator, denominator).
    count
        Optional column of positive integer multiplicities (clusters per row).
    statistic, n_resamples, confidence, ci_method
        As in :func:`bootstrap_types`.
    seed
        Non-negative integer; combined with each cell key by :func:`cell_rng`.

    Returns
    -------
    polars.DataFrame
        One row per cell, sorted by the cell columns (nulls first): the cell columns, then
        ``estimate``, ``ci_low``, ``ci_high`` (Float64) and ``n_clusters`` (Int64). An empty input
        gives an empty frame with that schema.

    Raises
    ------
    ParameterError
        For a bad parameter or a column name that is not in ``partials``.
    SchemaError
        For a value column that is not numeric or holds nulls / non-finite numbers, or a
        ``count`` column that is not integer or holds values below 1.

    Examples
    --------
    >>> frame = pl.DataFrame(
    ...     {"method": ["a", "a", "a", "b"], "k": [1, 0, 1, 2], "n": [1, 1, 2, 2]}
    ... )
    >>> out = cluster_bootstrap(frame, cells=["method"], values=["k", "n"], n_resamples=200)
    >>> out.columns
    ['method', 'estimate', 'ci_low', 'ci_high', 'n_clusters']
    >>> out["estimate"].to_list()
    [0.5, 1.0]
    """
    cells_l = _column_names("cells", cells)
    values_l = _column_names("values", values, nonempty=True)
    statistic = _check_statistic(statistic)
    n_resamples = _check_n_resamples(n_resamples)
    confidence = _check_confidence(confidence)
    method = str(renamed("cluster_bootstrap", deprecated, _OLD_CI_NAME).get("ci_method", ci_method))
    require_one_of("ci_method", method, CI_METHODS)
    seed = _check_seed("seed", seed)

    keys, groups = _cell_types(partials, cells_l, values_l, count, _BOOTSTRAP_COLUMNS)
    results = [
        bootstrap_types(
            cell_values,
            cell_counts,
            statistic,
            n_resamples=n_resamples,
            confidence=confidence,
            ci_method=method,
            rng=cell_rng(seed, key),
        )
        for key, cell_values, cell_counts in groups
    ]
    return pl.DataFrame(
        [
            *keys.get_columns(),
            pl.Series("estimate", [r.estimate for r in results], dtype=pl.Float64),
            pl.Series("ci_low", [r.ci_low for r in results], dtype=pl.Float64),
            pl.Series("ci_high", [r.ci_high for r in results], dtype=pl.Float64),
            pl.Series("n_clusters", [r.n_clusters for r in results], dtype=pl.Int64),
        ]
    )
