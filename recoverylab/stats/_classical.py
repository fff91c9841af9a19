"""Classical closed-form statistics: the exact McNemar test and the Wilson score interval.

:func:`mcnemar_exact` is the sign-flip test on ±1 data, kept as a cross-check and for summaries
with only two counts; :func:`wilson_interval` and :func:`wilson_exprs` give a proportion's
interval on arrays and inside lazy polars queries with the same formula.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from recoverylab._errors import ParameterError, format_keys
from recoverylab.stats._checks import _check_confidence, _is_int, _numeric_array
from recoverylab.stats._distributions import _binomial_half_two_sided, _normal_quantile
from recoverylab.stats._results import Interval, IntervalExprs, TestResult


def mcnemar_exact(rescue: int, harm: int) -> TestResult:
    """Exact McNemar test: a two-sided binomial test of rescue vs harm discordant counts.

    Under H0 a discordant pair is a rescue or a harm with probability ½ each: the same test, and
    p-value, as :func:`sign_flip_test` on ±1 differences; a cross-check, and for summaries with
    only the two counts.

    Parameters
    ----------
    rescue
        Number of pairs where only the recovery branch succeeds.
    harm
        Number of pairs where only the no-recovery branch succeeds.

    Returns
    -------
    TestResult
        ``statistic`` = rescue − harm, ``p_value`` of the two-sided binomial test (as
        ``scipy.stats.binomtest(rescue, rescue + harm, 0.5)``; 1.0 when there is no discordant
        pair), ``method`` = ``"exact-binomial"``.

    Raises
    ------
    ParameterError
        If a count is not a non-negative integer.

    Examples
    --------
    >>> mcnemar_exact(5, 0).p_value
    0.0625
    """
    for name, value in (("rescue", rescue), ("harm", harm)):
        if not _is_int(value) or int(value) < 0:
            raise ParameterError(
                f"parameter `{name}` is {value!r}; it must be a non-negative integer count."
            )
    rescue, harm = int(rescue), int(harm)
    total = rescue + harm
    p_value = 1.0 if total == 0 else _binomial_half_two_sided(min(rescue, harm), total)
    return TestResult(statistic=float(rescue - harm), p_value=p_value, method="exact-binomial")


def wilson_interval(
    successes: np.ndarray | float, n: np.ndarray | float, confidence: float = 0.95
) -> Interval:
    """Return the Wilson score interval of a proportion, vectorised over arrays.

    Parameters
    ----------
    successes
        Number of successes (array or scalar), 0 <= successes <= n.
    n
        Number of trials (array or scalar, broadcast against ``successes``).
    confidence
        Confidence level in (0, 1).

    Returns
    -------
    Interval
        ``low`` and ``high``, floats for scalar inputs and arrays otherwise; NaN where n == 0.

    Raises
    ------
    ParameterError
        For a confidence outside (0, 1), shapes that do not broadcast, or counts that are
        negative, non-finite or have successes > n.

    Examples
    --------
    >>> ci = wilson_interval(8, 10)
    >>> round(ci.low, 4), round(ci.high, 4)
    (0.4902, 0.9433)
    """
    confidence = _check_confidence(confidence)
    k = _numeric_array("successes", successes).astype(np.float64)
    trials = _numeric_array("n", n).astype(np.float64)
    try:
        k, trials = np.broadcast_arrays(k, trials)
    except ValueError as exc:
        raise ParameterError(
            f"parameters `successes` and `n` have shapes {k.shape} and {trials.shape}, which do "
            "not broadcast together."
        ) from exc
    bad = ~np.isfinite(k) | ~np.isfinite(trials) | (k < 0) | (k > trials)
    if bad.any():
        where = np.flatnonzero(bad.reshape(-1))
        shown = format_keys(
            (f"{k.reshape(-1)[i]:g} of {trials.reshape(-1)[i]:g}" for i in where), total=where.size
        )
        raise ParameterError(
            f"parameters `successes` and `n` have {where.size} impossible pairs ({shown}); "
            "successes must be finite with 0 <= successes <= n."
        )
    z = _normal_quantile((1 + confidence) / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        low, high = _wilson_bounds(k, trials, z)
    # The bounds are exactly 0 at k = 0 and 1 at k = n; rounding would leave ±1e-17.
    low = np.where(trials == 0, np.nan, np.where(k == 0, 0.0, np.clip(low, 0.0, 1.0)))
    high = np.where(trials == 0, np.nan, np.where(k == trials, 1.0, np.clip(high, 0.0, 1.0)))
    if low.ndim == 0:
        return Interval(low=float(low), high=float(high))
    return Interval(low=low, high=high)


def _wilson_bounds(k: Any, n: Any, z: float) -> tuple[Any, Any]:
    """Return the Wilson bounds; works on numpy arrays and on polars expressions alike."""
    z2 = z * z
    p = k / n
    denominator = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denominator
    half = z * (p * (1 - p) / n + z2 / (4 * n * n)) ** 0.5 / denominator
    return center - half, center + half


def wilson_exprs(
    successes: str | pl.Expr, n: str | pl.Expr, confidence: float = 0.95
) -> IntervalExprs:
    """Return polars expressions for the Wilson interval, for use inside lazy queries.

    The formula of :func:`wilson_interval`, evaluated by polars; null bounds where n is 0 or
    null, so a group with no data never gets an invented interval.

    Parameters
    ----------
    successes
        Column name or expression for the number of successes.
    n
        Column name or expression for the number of trials.
    confidence
        Confidence level in (0, 1).

    Returns
    -------
    IntervalExprs
        ``low`` and ``high`` expressions, aliased ``ci_low`` and ``ci_high``; it unpacks like a
        pair.

    Raises
    ------
    ParameterError
        For a confidence outside (0, 1) or an argument that is neither a name nor an expression.

    Examples
    --------
    >>> frame = pl.DataFrame({"k": [8, 0], "n": [10, 0]})
    >>> out = frame.with_columns(*wilson_exprs("k", "n"))
    >>> out["ci_low"].round(4).to_list()
    [0.4902, None]
    """
    confidence = _check_confidence(confidence)
    k = _as_expr("successes", successes).cast(pl.Float64)
    trials = _as_expr("n", n).cast(pl.Float64)
    z = _normal_quantile((1 + confidence) / 2)
    low, high = _wilson_bounds(k, trials, z)
    empty = trials.is_null() | (trials <= 0)

    def bound(value: pl.Expr, at_edge: pl.Expr, edge: float) -> pl.Expr:
        return pl.when(empty).then(None).when(at_edge).then(edge).otherwise(value.clip(0.0, 1.0))

    return IntervalExprs(
        bound(low, k == 0, 0.0).alias("ci_low"), bound(high, k == trials, 1.0).alias("ci_high")
    )


def _as_expr(name: str, value: object) -> pl.Expr:
    if isinstance(value, str):
        return pl.col(value)
    if isinstance(value, pl.Expr):
        return value
    raise ParameterError(
        f"parameter `{name}` is {value!r}; it must be a column name or a polars expression."
    )
