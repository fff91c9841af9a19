"""Multiplicity and sidedness: Holm and Benjamini–Hochberg adjustments, error per side.

:func:`adjust_p_values` adjusts the p-values of a result's cells as one family (``adjust=``);
:func:`_alpha_per_side` is the error each bounded side of an interval may spend, (1 − c)/2
two-sided and 1 − c one-sided, shared by the test-compatible intervals.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recoverylab._errors import ParameterError, require_one_of
from recoverylab.stats._checks import _numeric_array


def adjust_p_values(p_values: np.ndarray | Sequence[float], method: str) -> np.ndarray:
    """Adjust a family of p-values for multiplicity: Holm (FWER) or Benjamini–Hochberg (FDR).

    The family is every p-value given (a result's cells); NaN entries stay NaN, outside the
    family. Matches ``statsmodels.stats.multitest.multipletests`` (``"holm"``, ``"fdr_bh"``).
    A 2-D array holds one family per column (the sequential gate adjusts its claims after each
    arriving task at once): each column is adjusted exactly as it would be alone.

    Parameters
    ----------
    p_values
        1-D array of p-values in [0, 1] (NaN allowed), or a 2-D array of them without NaN.
    method
        ``"holm"`` or ``"bh"``.

    Returns
    -------
    numpy.ndarray
        Adjusted p-values, same shape, capped at 1.

    Raises
    ------
    ParameterError
        For an unknown method, an input of another dimension, p-values outside [0, 1], or NaN
        in a 2-D input.

    Examples
    --------
    >>> adjust_p_values([0.01, 0.04, 0.03], "holm").round(4).tolist()
    [0.03, 0.06, 0.06]
    >>> adjust_p_values([0.01, 0.04, 0.03], "bh").round(4).tolist()
    [0.03, 0.04, 0.04]
    """
    require_one_of("method", method, ("holm", "bh"))
    p = _numeric_array("p_values", p_values).astype(np.float64)
    if p.ndim not in (1, 2):
        raise ParameterError(f"parameter `p_values` has shape {p.shape}; it must be 1-D or 2-D.")
    known = ~np.isnan(p)
    if ((p[known] < 0) | (p[known] > 1)).any():
        raise ParameterError("parameter `p_values` holds values outside [0, 1].")
    if p.ndim == 2:
        if not known.all():
            raise ParameterError("a 2-D `p_values` (one family per column) may not hold NaN.")
        return _adjust_columns(p, method)
    out = np.full(p.shape, np.nan)
    if known.any():
        out[known] = _adjust_columns(p[known][:, None], method)[:, 0]
    return out


def _adjust_columns(p: np.ndarray, method: str) -> np.ndarray:
    """Adjust each column of a NaN-free 2-D array as one family (see :func:`adjust_p_values`)."""
    size = p.shape[0]
    if size == 0:
        return p.copy()
    order = np.argsort(p, axis=0, kind="stable")
    ranked = np.take_along_axis(p, order, axis=0)
    if method == "holm":
        steps = np.maximum.accumulate((size - np.arange(size))[:, None] * ranked, axis=0)
    else:
        factor = (size / np.arange(size, 0, -1))[:, None]
        steps = np.minimum.accumulate(factor * ranked[::-1], axis=0)[::-1]
    adjusted = np.empty_like(p)
    np.put_along_axis(adjusted, order, np.minimum(steps, 1.0), axis=0)
    return adjusted


def _alpha_per_side(confidence: float, alternative: str) -> float:
    """Return the error allowed on each bounded side: (1 − c)/2 two-sided, 1 − c one-sided."""
    return (1.0 - confidence) / 2.0 if alternative == "two-sided" else 1.0 - confidence
