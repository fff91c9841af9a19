"""Reliability statistics of clustered observations: the one-way intra-class correlation.

:func:`icc_oneway` is written as a statistic of column sums of per-cluster partials
(:data:`ICC_COLUMNS`), so :func:`~recoverylab.stats.bootstrap_types` gives its cluster-bootstrap
interval at the cost of the cluster types: the takeover protocol's ``repeat_icc`` of repeated
runs and the paired study planner's within-task correlation.
"""

from __future__ import annotations

import numpy as np

ICC_COLUMNS = ("sum_sq_over_m", "sum", "sum_sq", "m", "m_sq", "one")
"""Per-cluster partials :func:`icc_oneway` expects, in order: S²/m, S, Q, m, m², 1."""


def icc_oneway(sums: np.ndarray) -> np.ndarray:
    """Return the one-way ANOVA intra-class correlation from column sums of cluster partials.

    Cluster i with mᵢ observations xᵢⱼ contributes Sᵢ²/mᵢ, Sᵢ = Σⱼ xᵢⱼ, Qᵢ = Σⱼ xᵢⱼ², mᵢ, mᵢ²
    and 1 (:data:`ICC_COLUMNS`): a statistic of column sums, so :func:`bootstrap_types` gives its
    interval at the cost of the cluster types. With N = Σmᵢ and K clusters: MSB = (ΣSᵢ²/mᵢ −
    (ΣSᵢ)²/N)/(K − 1), MSW = (ΣQᵢ − ΣSᵢ²/mᵢ)/(N − K), m₀ = (N − Σmᵢ²/N)/(K − 1) and ICC = (MSB −
    MSW)/(MSB + (m₀ − 1)·MSW) (the unbalanced one-way estimator; it may be negative). NaN when
    undefined: fewer than two clusters, no cluster with two observations, or no variation.

    Parameters
    ----------
    sums
        Array of shape ``(..., 6)``.

    Returns
    -------
    numpy.ndarray
        Array of shape ``(...)``.

    Examples
    --------
    Two clusters, each with two equal values (perfect agreement within clusters):

    >>> rows = np.array([[0.0, 0, 0, 2, 4, 1], [2.0, 2, 2, 2, 4, 1]])
    >>> float(icc_oneway(rows.sum(axis=0)))
    1.0
    """
    sums = np.asarray(sums, dtype=np.float64)
    s2m, s, q, n, n2, k = (sums[..., i] for i in range(6))
    with np.errstate(divide="ignore", invalid="ignore"):
        msb = (s2m - s * s / n) / (k - 1)
        msw = (q - s2m) / (n - k)
        m0 = (n - n2 / n) / (k - 1)
        denominator = msb + (m0 - 1) * msw
        out = np.asarray((msb - msw) / denominator, dtype=np.float64)
    undefined = (k < 2) | (n - k < 1) | ~(np.abs(denominator) > 1e-12 * (1 + np.abs(msb)))
    return np.where(undefined, np.nan, out)
