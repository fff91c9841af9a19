"""The paired effect Σd / Σn per cell: an interval and the p-value of the test it inverts.

:func:`paired_effect_cells` is the last step of every paired comparison (rescue minus harm, a
policy's gain): an interval chosen per cell (the ``ci_method`` column) and, beside it, the
p-value of the test that this very interval inverts (the ``test`` column), so zero lies
outside exactly when ``p_value < 1 − confidence`` by construction (ARCHITECTURE §4); the exact
sign-flip test is reported in a column of its own (``p_sign_flip``). The cluster bootstrap,
on request, inverts no test (``ci_inverts_test`` false). Cells with few informative clusters
are flagged ``sparse``. :func:`interval_agrees_with_test` checks the agreement;
:func:`agree_with_test`, which used to move bounds, is deprecated and moves nothing.
"""

from __future__ import annotations

import warnings
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
    _cluster_melded,
    _fay_lumbard,
    _sign_flip_inversion,
)
from recoverylab.stats._results import Interval
from recoverylab.stats._signflip import sign_flip_cells

#: A cell is flagged ``sparse`` below these: clusters with a nonzero difference, clusters.
SPARSE_NONZERO_CLUSTERS = 10

SPARSE_CLUSTERS = 20

#: The ``test`` column of the bootstrap methods: the p-value is the sign-flip test's, and the
#: interval is not its inversion (``ci_inverts_test`` false).
BOOTSTRAP_TEST = "sign-flip"


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
    outcome differences over ``n`` pairs. Beside each interval, ``p_value`` is the p-value of
    the test that this interval inverts (the same procedure's confidence curve at zero, named
    in ``test``): zero lies outside the interval exactly when ``p_value < 1 − confidence``,
    because bound and p-value are one computation; every bound is the named method's own
    output, never moved. ``p_sign_flip`` is :func:`sign_flip_cells` of ``d`` (exact for
    integers), a second test in a column of its own.

    Interval methods (``ci_method``; the ``ci_method`` column names what each cell got) and
    the test each reports (``test``):

    * ``"fay-lumbard"``: every cluster one pair (n = 1, d in {−1, 0, 1}): the exact,
      McNemar-compatible meld of :func:`fay_lumbard_interval`, no Monte Carlo. ``test``
      ``"fay-lumbard"``: the meld's curve at zero, which is the exact McNemar p-value.
    * ``"cluster-melded"``: several pairs per cluster: :func:`cluster_melded_interval`, the
      hull of the exact sign-flip inversion and a meld on design-effect-adjusted counts.
      ``test`` ``"cluster-melded"``: the hull's own p-value, per side the larger of its two
      parts' (zero is outside the hull exactly when it is outside both), so it can exceed
      ``p_sign_flip`` where the meld is the wider part. The meld's effective counts carry a
      few-clusters factor (z / t)² that depends on the level, so this is the hull's curve at
      zero *at the reported confidence*: the agreement is exact at that level.
    * ``"sign-flip"``: the exact inversion of the sign-flip test alone,
      :func:`sign_flip_interval` (any integer partials); under-covers in sparse cells.
      ``test`` ``"sign-flip"``: the inversion's own curve at zero (the exact sign-flip p-value).
    * ``"auto"`` (default; also what ``"fay-lumbard"`` and ``"cluster-melded"`` do):
      ``fay-lumbard`` where every cluster is one pair, ``cluster-melded`` otherwise.
    * ``"percentile"`` / ``"bca"``: the cluster bootstrap (:func:`cluster_bootstrap`, stream
      per cell); for comparison. It inverts no test: ``test`` is ``"sign-flip"``, ``p_value``
      the sign-flip p-value, and ``ci_inverts_test`` is false (the interval may contradict it).

    A cell is ``sparse`` with fewer than
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
        One row per cell: cell columns, ``ci_low``, ``ci_high``, ``n_clusters``, ``p_value``
        (of ``test``), ``ci_method`` (String), ``sparse`` (Boolean), ``test`` (String: the test
        whose p-value ``p_value`` is), ``ci_inverts_test`` (Boolean: the interval is that
        test's inversion, so it excludes zero exactly when ``p_value < 1 − confidence``),
        ``p_sign_flip`` (Float64: the sign-flip test of ``d``), and ``p_adjusted`` (of
        ``p_value``) when ``adjust`` is set.

    Raises
    ------
    ParameterError
        For a bad parameter or column name.

    Examples
    --------
    >>> types = pl.DataFrame({"cell": ["x", "x"], "d": [1, 0], "n": [1, 1], "count": [6, 4]})
    >>> out = paired_effect_cells(types, cells=["cell"])
    >>> out["p_value"].item(), out["ci_method"].item(), out["test"].item(), out["ci_low"].item() > 0
    (0.03125, 'fay-lumbard', 'fay-lumbard', True)
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
    ).select(*cells_l, pl.col("p_value").alias("p_sign_flip"))
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
    if method in CI_METHODS:
        out = out.with_columns(pl.col("p_sign_flip").alias("p_value"))
    out = out.select(
        *cells_l,
        "ci_low",
        "ci_high",
        "n_clusters",
        "p_value",
        "ci_method",
        "sparse",
        "test",
        "ci_inverts_test",
        "p_sign_flip",
    )
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
        pl.lit(BOOTSTRAP_TEST).alias("test"),
        pl.lit(False).alias("ci_inverts_test"),
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
    """Compute test-based intervals, each with the p-value of the test it inverts.

    Fay–Lumbard (vectorised) for one-pair cells, else the cluster meld or the sign-flip
    inversion per cell.
    """
    keys, groups = _cell_types(types, cells, values, count, ("ci_low", "ci_high", "n_clusters"))
    size = len(groups)
    low, high, p_value = np.full(size, np.nan), np.full(size, np.nan), np.ones(size)
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
        if method == "sign-flip":
            found = _sign_flip_inversion(
                cell_values, cell_counts, confidence, alternative, (-1.0, 1.0)
            )
        else:
            chosen[i] = "cluster-melded"
            found = _cluster_melded(cell_values, cell_counts, confidence, alternative)
        low[i], high[i] = float(found.low), float(found.high)
        p_value[i] = float(found.p_value(alternative))
    melded = chosen == "fay-lumbard"
    if melded.any():
        rescue, harm, pairs = counts_fl[melded].T
        found = _fay_lumbard(rescue, harm, pairs, confidence, alternative)
        low[melded], high[melded] = found.low, found.high
        p_value[melded] = found.p_value(alternative)
    return pl.DataFrame(
        [
            *keys.get_columns(),
            pl.Series("ci_low", low, dtype=pl.Float64),
            pl.Series("ci_high", high, dtype=pl.Float64),
            pl.Series("n_clusters", n_clusters, dtype=pl.Int64),
            pl.Series("p_value", p_value, dtype=pl.Float64),
            pl.Series("ci_method", chosen.tolist(), dtype=pl.String),
            pl.Series("sparse", sparse, dtype=pl.Boolean),
            pl.Series("test", chosen.tolist(), dtype=pl.String),
            pl.Series("ci_inverts_test", np.ones(size, dtype=bool), dtype=pl.Boolean),
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
    """Return the bounds unchanged (deprecated: this function used to move them).

    It once moved a bound to the smallest float beyond zero, or extended it to zero, so that
    an interval seemed to agree with another procedure's p-value: the moved bound was no
    method's output. Every interval of recoverylab now comes with the p-value of the test it
    inverts (see :func:`paired_effect_cells`), so nothing needs moving; check agreement with
    :func:`interval_agrees_with_test`. Kept, with its signature, for the stored public API.

    Parameters
    ----------
    low, high, p_value
        Arrays of bounds and p-values.
    confidence, alternative
        The confidence level and the alternative of the test (checked, otherwise unused).

    Returns
    -------
    Interval
        ``low`` and ``high`` as given, as float arrays.

    Warns
    -----
    DeprecationWarning
        Always, naming :func:`interval_agrees_with_test`.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     ci = agree_with_test(np.array([-0.01]), np.array([0.2]), np.array([0.01]))
    >>> float(ci.low[0]), float(ci.high[0])
    (-0.01, 0.2)
    """
    warnings.warn(
        "agree_with_test is deprecated and returns the bounds unchanged: a moved bound is no "
        "method's output. Report the p-value of the test the interval inverts "
        "(paired_effect_cells does) and check with stats.interval_agrees_with_test.",
        DeprecationWarning,
        stacklevel=2,
    )
    _check_confidence(confidence)
    require_one_of("alternative", alternative, ALTERNATIVES)
    del p_value
    return Interval(low=np.array(low, dtype=np.float64), high=np.array(high, dtype=np.float64))


def interval_agrees_with_test(
    low: np.ndarray | float,
    high: np.ndarray | float,
    p_value: np.ndarray | float,
    *,
    confidence: float = 0.95,
    alternative: str = "two-sided",
) -> np.ndarray:
    """Return, per interval, whether zero lies outside it exactly when the test rejects.

    The check of ARCHITECTURE §4 for an interval reported beside the p-value of the test it
    inverts: ``p_value < 1 − confidence`` (the test rejects effect 0) must hold exactly when
    zero is outside ``[low, high]`` (``low > 0`` or ``high < 0``; for ``"greater"`` only the
    lower bound counts, for ``"less"`` only the upper). A NaN interval agrees only with a
    p-value that does not reject. It checks, it changes nothing.

    Parameters
    ----------
    low, high, p_value
        Bounds and p-values (scalars or arrays that broadcast).
    confidence
        The interval's confidence level in (0, 1).
    alternative
        ``"two-sided"``, ``"greater"`` or ``"less"``.

    Returns
    -------
    numpy.ndarray
        Boolean array: True where interval and p-value agree.

    Raises
    ------
    ParameterError
        For a confidence outside (0, 1) or an unknown alternative.

    Examples
    --------
    >>> interval_agrees_with_test([0.01, -0.03], [0.2, 0.2], [0.01, 0.01]).tolist()
    [True, False]
    """
    confidence = _check_confidence(confidence)
    require_one_of("alternative", alternative, ALTERNATIVES)
    low, high, p = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.float64) for v in (low, high, p_value))
    )
    above = low > 0 if alternative != "less" else np.zeros(low.shape, dtype=bool)
    below = high < 0 if alternative != "greater" else np.zeros(high.shape, dtype=bool)
    return np.asarray((above | below) == (p < 1.0 - confidence))
