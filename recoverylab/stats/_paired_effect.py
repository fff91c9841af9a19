"""The paired effect Σd / Σn per cell: interval, p-value and the agreement of the two.

:func:`paired_effect_cells` is the last step of every paired comparison (rescue minus harm, a
policy's gain): the sign-flip p-value, and an interval chosen per cell (the ``ci_method``
column) that never contradicts it by default (:func:`agree_with_test`, ARCHITECTURE §4), or
the cluster bootstrap on request. Cells with few informative clusters are flagged ``sparse``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from recoverylab._errors import ParameterError, renamed, require_one_of
from recoverylab.stats._bootstrap import cluster_bootstrap
from recoverylab.stats._cells import _cell_types, _column_names
from recoverylab.stats._checks import (
    _OLD_CI_NAME,
    ADJUST_METHODS,
    ALTERNATIVES,
    CI_METHODS,
    PAIRED_CI_METHODS,
    _check_confidence,
)
from recoverylab.stats._multiplicity import adjust_p_values
from recoverylab.stats._paired_intervals import (
    cluster_melded_interval,
    fay_lumbard_interval,
    sign_flip_interval,
)
from recoverylab.stats._results import Interval
from recoverylab.stats._signflip import sign_flip_cells

#: A cell is flagged ``sparse`` below these: clusters with a nonzero difference, clusters.
SPARSE_NONZERO_CLUSTERS = 10

SPARSE_CLUSTERS = 20


def paired_effect_cells(
    types: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    difference: str = "d",
    n: str = "n",
    count: str | None = "count",
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    ci_method: str = "auto",
    seed: int = 0,
    alternative: str = "two-sided",
    adjust: str | None = None,
    **deprecated: object,
) -> pl.DataFrame:
    """Interval and p-value of a paired effect Σd / Σn per cell, from per-cluster types.

    The last step of every paired comparison (rescue minus harm, a policy's gain over never
    recovering, one policy's margin over another): a cluster is a task with ``d`` = its summed
    outcome differences over ``n`` pairs. The p-value is :func:`sign_flip_cells` of ``d``
    (exact for integers). The default interval never contradicts it (ARCHITECTURE §4): zero
    lies outside it exactly when ``p_value < 1 − confidence``.

    Interval methods (``ci_method``; the ``ci_method`` column names what each cell got):

    * ``"fay-lumbard"``: every cluster one pair (n = 1, d in {−1, 0, 1}): the exact,
      McNemar-compatible meld of :func:`fay_lumbard_interval`, no Monte Carlo.
    * ``"cluster-melded"``: several pairs per cluster: :func:`cluster_melded_interval`, the
      hull of the exact sign-flip inversion and a meld on design-effect-adjusted counts.
    * ``"sign-flip"``: the exact inversion of the sign-flip test alone,
      :func:`sign_flip_interval` (any integer partials); under-covers in sparse cells.
    * ``"auto"`` (default; also what ``"fay-lumbard"`` and ``"cluster-melded"`` do):
      ``fay-lumbard`` where every cluster is one pair, ``cluster-melded`` otherwise.
    * ``"percentile"`` / ``"bca"``: the cluster bootstrap (:func:`cluster_bootstrap`, stream
      per cell); for comparison, not guaranteed to agree with the test.

    Test-based bounds then go through :func:`agree_with_test` with the reported p-value, so
    agreement is exact, not up to floating point. A cell is ``sparse`` with fewer than
    ``SPARSE_NONZERO_CLUSTERS`` (10) clusters with a nonzero difference or fewer than
    ``SPARSE_CLUSTERS`` (20) clusters: its interval is wide by necessity and a bootstrap there
    would be overconfident.

    Parameters
    ----------
    types
        One row per cluster, or per distinct (cells, d, n) type with multiplicity ``count``.
    cells, difference, n, count
        Column names: cell keys, per-cluster summed difference, per-cluster pairs, multiplicity
        (``None`` when every row is one cluster).
    n_resamples, seed
        Resamples and seed of the bootstrap methods and of Monte Carlo p-values.
    confidence
        Confidence level in (0, 1) (above 0.5 for one-sided bootstrap intervals).
    ci_method
        ``"auto"``, ``"fay-lumbard"``, ``"sign-flip"``, ``"percentile"`` or ``"bca"``.
    alternative
        ``"two-sided"``, ``"greater"`` (H1: effect > 0; the interval is ``[ci_low, 1]``) or
        ``"less"`` (``[-1, ci_high]``); the p-value is one-sided to match.
    adjust
        ``None``, ``"holm"`` or ``"bh"`` (Benjamini–Hochberg): adds ``p_adjusted``, adjusted
        over the family of all cells of this result (see :func:`adjust_p_values`).

    Returns
    -------
    pl.DataFrame
        One row per cell: cell columns, ``ci_low``, ``ci_high``, ``n_clusters``, ``p_value``,
        ``ci_method`` (String), ``sparse`` (Boolean), and ``p_adjusted`` when ``adjust`` is set.

    Raises
    ------
    ParameterError
        For a bad parameter or column name.

    Examples
    --------
    >>> types = pl.DataFrame({"cell": ["x", "x"], "d": [1, 0], "n": [1, 1], "count": [6, 4]})
    >>> out = paired_effect_cells(types, cells=["cell"])
    >>> out["p_value"].item(), out["ci_method"].item(), out["ci_low"].item() > 0
    (0.03125, 'fay-lumbard', True)
    """
    cells_l = _column_names("cells", cells)
    old = renamed("paired_effect_cells", deprecated, _OLD_CI_NAME)
    method = str(old.get("ci_method", ci_method))
    require_one_of("ci_method", method, PAIRED_CI_METHODS)
    require_one_of("alternative", alternative, ALTERNATIVES)
    require_one_of("adjust", adjust, ADJUST_METHODS)
    confidence = _check_confidence(confidence)
    flip = sign_flip_cells(
        types, cells=cells_l, difference=difference, count=count, seed=seed, alternative=alternative
    ).select(*cells_l, "p_value")
    values = [difference, n]
    if method in CI_METHODS:
        intervals = _bootstrap_effect_cells(
            types, cells_l, values, count, n_resamples, confidence, method, seed, alternative
        )
    else:
        intervals = _test_effect_cells(
            types, cells_l, values, count, confidence, method, alternative
        )
    if cells_l:
        out = intervals.join(flip, on=cells_l, how="left", nulls_equal=True, maintain_order="left")
    else:
        out = intervals.hstack(flip)
    if method not in CI_METHODS:
        ci = agree_with_test(
            *(out[c].to_numpy() for c in ("ci_low", "ci_high", "p_value")),
            confidence=confidence,
            alternative=alternative,
        )
        out = out.with_columns(
            pl.Series("ci_low", np.asarray(ci.low), dtype=pl.Float64),
            pl.Series("ci_high", np.asarray(ci.high), dtype=pl.Float64),
        )
    out = out.select(*cells_l, "ci_low", "ci_high", "n_clusters", "p_value", "ci_method", "sparse")
    if adjust is not None:
        adjusted = adjust_p_values(out["p_value"].to_numpy(), adjust)
        out = out.with_columns(pl.Series("p_adjusted", adjusted, dtype=pl.Float64))
    return out


def _bootstrap_effect_cells(
    types: pl.DataFrame | pl.LazyFrame,
    cells: list[str],
    values: list[str],
    count: str | None,
    n_resamples: int,
    confidence: float,
    method: str,
    seed: int,
    alternative: str,
) -> pl.DataFrame:
    """Cluster-bootstrap intervals (one-sided: one bound of the 1 − 2α two-sided interval)."""
    level = confidence
    if alternative != "two-sided":
        if confidence <= 0.5:
            raise ParameterError(
                f"parameter `confidence` is {confidence!r}; a one-sided bootstrap interval needs "
                "a confidence above 0.5."
            )
        level = 2 * confidence - 1
    boot = cluster_bootstrap(
        types,
        cells=cells,
        values=values,
        count=count,
        n_resamples=n_resamples,
        confidence=level,
        ci_method=method,
        seed=seed,
    )
    _, groups = _cell_types(types, cells, values, count, ("ci_low", "ci_high", "n_clusters"))
    sparse = [_is_sparse(v[:, 0], c) for _, v, c in groups]
    return boot.select(
        *cells,
        pl.lit(-1.0).alias("ci_low") if alternative == "less" else "ci_low",
        pl.lit(1.0).alias("ci_high") if alternative == "greater" else "ci_high",
        "n_clusters",
        pl.lit(method).alias("ci_method"),
        pl.Series("sparse", sparse, dtype=pl.Boolean),
    )


def _is_sparse(d: np.ndarray, counts: np.ndarray) -> bool:
    """Apply the documented ``sparse`` rule: few clusters with a nonzero difference, or few."""
    nonzero = int(counts[d != 0].sum())
    return nonzero < SPARSE_NONZERO_CLUSTERS or int(counts.sum()) < SPARSE_CLUSTERS


def _test_effect_cells(
    types: object,
    cells: list[str],
    values: list[str],
    count: str | None,
    confidence: float,
    method: str,
    alternative: str,
) -> pl.DataFrame:
    """Compute test-based intervals: Fay–Lumbard (vectorised) for one-pair cells, else inversion."""
    keys, groups = _cell_types(types, cells, values, count, ("ci_low", "ci_high", "n_clusters"))
    size = len(groups)
    low, high = np.full(size, np.nan), np.full(size, np.nan)
    n_clusters = np.zeros(size, dtype=np.int64)
    sparse = np.zeros(size, dtype=bool)
    chosen = np.full(size, "sign-flip", dtype=object)
    counts_fl = np.zeros((size, 3))
    for i, (key, cell_values, cell_counts) in enumerate(groups):
        d, pairs = cell_values[:, 0], cell_values[:, 1]
        if (cell_values != np.round(cell_values)).any() or (pairs < 0).any():
            raise ParameterError(
                f"partials: cell {key!r} has non-integer `{values[0]}` or `{values[1]}` values; "
                f"ci_method {method!r} needs integer per-cluster counts. Hint: use "
                "ci_method='percentile' for non-integer partials."
            )
        n_clusters[i] = int(cell_counts.sum())
        sparse[i] = _is_sparse(d, cell_counts)
        if method != "sign-flip" and bool(np.all(pairs == 1)) and bool(np.all(np.abs(d) <= 1)):
            chosen[i] = "fay-lumbard"
            counts_fl[i] = [cell_counts[d == 1].sum(), cell_counts[d == -1].sum(), n_clusters[i]]
            continue
        interval = sign_flip_interval if method == "sign-flip" else cluster_melded_interval
        chosen[i] = "sign-flip" if method == "sign-flip" else "cluster-melded"
        ci = interval(cell_values, cell_counts, confidence=confidence, alternative=alternative)
        low[i], high[i] = float(ci.low), float(ci.high)
    melded = chosen == "fay-lumbard"
    if melded.any():
        rescue, harm, pairs = counts_fl[melded].T
        ci = fay_lumbard_interval(
            rescue, harm, pairs, confidence=confidence, alternative=alternative
        )
        low[melded], high[melded] = ci.low, ci.high
    return pl.DataFrame(
        [
            *keys.get_columns(),
            pl.Series("ci_low", low, dtype=pl.Float64),
            pl.Series("ci_high", high, dtype=pl.Float64),
            pl.Series("n_clusters", n_clusters, dtype=pl.Int64),
            pl.Series("ci_method", chosen.tolist(), dtype=pl.String),
            pl.Series("sparse", sparse, dtype=pl.Boolean),
        ]
    )


def agree_with_test(
    low: np.ndarray,
    high: np.ndarray,
    p_value: np.ndarray,
    *,
    confidence: float = 0.95,
    alternative: str = "two-sided",
) -> Interval:
    """Put zero on the side of an interval that the test's p-value decides.

    Zero is kept inside (the interval extended to it) when ``p_value >= 1 − confidence``, and
    moved just outside when the test rejects (the bound between zero and the data becomes the
    smallest float beyond zero). For this module's exact intervals this changes a bound only
    when p is within rounding of 1 − confidence; it makes the hull of
    :func:`cluster_melded_interval` agree with the test.

    Parameters
    ----------
    low, high, p_value
        Arrays of bounds and p-values (NaN bounds stay NaN).
    confidence, alternative
        The confidence level and the alternative of the test.

    Returns
    -------
    Interval
        The adjusted bounds, as arrays.

    Examples
    --------
    >>> ci = agree_with_test(np.array([-0.01]), np.array([0.2]), np.array([0.01]))
    >>> bool(ci.low[0] > 0), float(ci.high[0])
    (True, 0.2)
    """
    confidence = _check_confidence(confidence)
    require_one_of("alternative", alternative, ALTERNATIVES)
    low = np.array(low, dtype=np.float64)
    high = np.array(high, dtype=np.float64)
    reject = np.asarray(p_value, dtype=np.float64) < 1.0 - confidence
    tiny = float(np.nextafter(0.0, 1.0))
    # The side of zero the data lie on: a rejecting test has its interval on that side.
    positive = (low + high) > 0 if alternative == "two-sided" else alternative == "greater"
    if alternative != "less":
        low = np.where(reject & positive, np.maximum(low, tiny), low)
        low = np.where(~reject, np.minimum(low, 0.0), low)
    if alternative != "greater":
        high = np.where(reject & ~positive, np.minimum(high, -tiny), high)
        high = np.where(~reject, np.maximum(high, 0.0), high)
    return Interval(low=low, high=high)
