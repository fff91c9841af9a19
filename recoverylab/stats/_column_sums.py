"""Statistics of column sums: the :data:`Statistic` signature, ratios and their difference.

Every resampled quantity is a function of the summed per-cluster partials (ARCHITECTURE §3,
principle 3). A rate is Σ numerator / Σ denominator (:func:`ratio`); a contrast of two cells
resampled jointly is :func:`ratio_difference`. A zero denominator gives NaN, never a warning.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Statistic = Callable[[np.ndarray], np.ndarray]
"""A statistic maps column sums of shape ``(..., V)`` to values of shape ``(...)``."""


def ratio(sums: np.ndarray) -> np.ndarray:
    """Return the ratio of the first two column sums, numerator / denominator.

    A zero denominator gives NaN (an undefined rate), never a warning or an infinity.

    Parameters
    ----------
    sums
        Array of shape ``(..., V)`` with V >= 2: column 0 the numerator, column 1 the denominator.

    Returns
    -------
    numpy.ndarray
        Array of shape ``(...)``.

    Examples
    --------
    >>> ratio(np.array([[3.0, 4.0], [1.0, 0.0]]))
    array([0.75,  nan])
    """
    sums = np.asarray(sums, dtype=np.float64)
    return _safe_divide(sums[..., 0], sums[..., 1])


def ratio_difference(sums: np.ndarray) -> np.ndarray:
    """Return the difference of two ratios, ``sums[0]/sums[1] - sums[2]/sums[3]``.

    For contrasts of two cells resampled jointly: a cluster's row carries the partials of both
    cells (zeros where it is absent from one), so one draw serves both (ARCHITECTURE §4).

    Parameters
    ----------
    sums
        Array of shape ``(..., V)`` with V >= 4.

    Returns
    -------
    numpy.ndarray
        Array of shape ``(...)``; NaN where either denominator is zero.

    Examples
    --------
    >>> ratio_difference(np.array([3.0, 4.0, 1.0, 2.0]))
    array(0.25)
    """
    sums = np.asarray(sums, dtype=np.float64)
    return np.asarray(
        _safe_divide(sums[..., 0], sums[..., 1]) - _safe_divide(sums[..., 2], sums[..., 3])
    )


def _safe_divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.asarray(numerator / denominator, dtype=np.float64)
    return np.where(denominator == 0, np.nan, out)
