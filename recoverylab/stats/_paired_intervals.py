"""Intervals for paired proportions and clustered paired effects, each with its own p-value.

* :func:`fay_lumbard_interval`: one pair per cluster, the exact McNemar-compatible meld.
* :func:`sign_flip_interval`: the exact inversion of the sign-flip test (half-sampling).
* :func:`cluster_melded_interval`: several pairs per cluster, the hull of that inversion and a
  meld on design-effect-adjusted counts (:func:`effective_melded_interval`).

These are the ``ci_method`` values of :func:`~recoverylab.stats.paired_effect_cells` other
than the bootstrap; none of them resamples. Each is computed with the p-value of the test it
inverts (its confidence curve at zero, :class:`_Tested`): zero lies outside the interval
exactly when that p-value is below 1 − confidence, because the bound and the p-value are read
off one curve (ARCHITECTURE §4); no bound is moved afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from recoverylab._errors import ParameterError, require_one_of
from recoverylab.stats import _limits
from recoverylab.stats._checks import ALTERNATIVES, _check_confidence, _check_counts, _numeric_array
from recoverylab.stats._distributions import _binomial_half_pmf, _normal_quantile, _special
from recoverylab.stats._meld import _meld_at_zero, _meld_quantile
from recoverylab.stats._multiplicity import _alpha_per_side
from recoverylab.stats._results import Interval
from recoverylab.stats._streams import _merge_types


class _Tested(NamedTuple):
    """An interval with the one-sided p-values at zero of the test it inverts.

    ``p_greater`` (H0: effect <= 0) is the lower bound's confidence curve at zero: ``low > 0``
    exactly when ``p_greater`` is below the lower side's error; ``p_less`` likewise for the
    upper bound. :meth:`p_value` combines them for an alternative.
    """

    low: np.ndarray | float
    high: np.ndarray | float
    p_greater: np.ndarray | float
    p_less: np.ndarray | float

    def p_value(self, alternative: str) -> np.ndarray | float:
        """Return the p-value this interval inverts (two-sided: twice the smaller side, <= 1).

        Doubling is exact in floating point, so with α/2 per side (``_alpha_per_side``)
        ``p < 1 − confidence`` exactly when a one-sided p-value is below α/2.
        """
        if alternative == "greater":
            return self.p_greater
        if alternative == "less":
            return self.p_less
        return np.minimum(1.0, 2.0 * np.minimum(self.p_greater, self.p_less))

    def interval(self) -> Interval:
        """Return the bounds as an :class:`Interval`."""
        return Interval(low=self.low, high=self.high)


def fay_lumbard_interval(
    rescue: np.ndarray | int,
    harm: np.ndarray | int,
    n: np.ndarray | int,
    confidence: float = 0.95,
    alternative: str = "two-sided",
) -> Interval:
    """Interval for a difference of matched proportions, compatible with the exact McNemar test.

    Of n pairs, ``rescue`` (only the recovery branch succeeds) and ``harm`` (only the
    no-recovery branch succeeds): θ = ψ·(2φ − 1), ψ the chance a pair is discordant, φ the
    chance a discordant pair is a rescue. As Fay & Lumbard (2021; ``mcnemarExactDP`` of R's
    exact2x2), the exact confidence distributions of ψ (Beta(m, n − m + 1), Beta(m + 1, n − m),
    m = rescue + harm) and φ (Beta(x, m − x + 1), Beta(x + 1, m − x)) are *melded*: the lower
    bound is the smaller α-quantile of T·(2B − 1) over both ψ distributions T with the lower φ
    distribution B, the upper bound the larger (1 − α)-quantile with the upper one. As T > 0,
    the lower bound is above zero exactly when P(B < ½) < α (the one-sided exact binomial test
    rejects): zero is outside exactly when the exact McNemar p-value is below 1 − confidence.
    That p-value is the meld's own confidence curve at zero (``_meld_at_zero``), the very
    number each bound's search is anchored on, so the agreement holds in floating point too
    (:func:`~recoverylab.stats.paired_effect_cells` reports it as ``p_value``). The quantiles
    come from deterministic quadrature (no Monte Carlo noise).

    Parameters
    ----------
    rescue, harm, n
        Counts (scalars or arrays that broadcast); rescue + harm <= n.
    confidence
        Confidence level in (0, 1).
    alternative
        ``"two-sided"`` (central interval, α/2 per side), ``"greater"`` (lower bound only, the
        upper is 1) or ``"less"`` (upper bound only, the lower is −1).

    Returns
    -------
    Interval
        ``low`` and ``high`` (floats for scalar inputs); NaN where n == 0.

    Raises
    ------
    ParameterError
        For negative or non-integer counts, rescue + harm > n, a confidence outside (0, 1) or
        an unknown alternative.

    Examples
    --------
    >>> ci = fay_lumbard_interval(0, 1, 100)
    >>> round(ci.low, 4), round(ci.high, 4)
    (-0.0545, 0.0295)
    """
    return _fay_lumbard(rescue, harm, n, confidence, alternative).interval()


def _fay_lumbard(
    rescue: np.ndarray | int,
    harm: np.ndarray | int,
    n: np.ndarray | int,
    confidence: float,
    alternative: str,
) -> _Tested:
    """:func:`fay_lumbard_interval` with the p-values of the test it inverts."""
    confidence = _check_confidence(confidence)
    require_one_of("alternative", alternative, ALTERNATIVES)
    x, m, total = _matched_counts_iv(rescue, harm, n)
    alpha = _alpha_per_side(confidence, alternative)
    found = _melded_curves(x, m, m, total, alpha, alternative)
    if np.ndim(found.low) == 0:
        return _Tested(*(float(v) for v in found))
    return found


#: Effective counts within this of 0 (or of their total) are 0 (or the total): a beta with a
#: shape parameter below it lies within 1e-300 of its end with probability above 1 - 1e-9 (its
#: quantiles are the point mass's), and scipy's beta functions overflow near the tiniest doubles.
_TINY_COUNT = 1e-12


def _snap_count(part: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Return ``part`` with values within :data:`_TINY_COUNT` of 0 or of ``total`` snapped."""
    part = np.where(part < _TINY_COUNT, 0.0, part)
    return np.where((total - part < _TINY_COUNT) & (part > 0), total, part)


def _melded_bounds(
    x: np.ndarray,
    m_phi: np.ndarray,
    m_psi: np.ndarray,
    n_psi: np.ndarray,
    alpha: float,
    alternative: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Return the bounds of :func:`_melded_curves` (without its p-values)."""
    found = _melded_curves(x, m_phi, m_psi, n_psi, alpha, alternative)
    return np.asarray(found.low), np.asarray(found.high)


def _melded_curves(
    x: np.ndarray,
    m_phi: np.ndarray,
    m_psi: np.ndarray,
    n_psi: np.ndarray,
    alpha: float,
    alternative: str,
) -> _Tested:
    """Meld the beta confidence distributions of φ (x of m_phi) and ψ (m_psi of n_psi).

    Counts may be effective (non-integer) sizes. The lower bound is the smaller α-quantile of
    T·(2B − 1) over the two ψ distributions T, with B ~ Beta(x, m_phi − x + 1); its curve at
    zero, the larger of the two exact values at zero, is ``p_greater``. The upper bound is the
    same construction mirrored (−W = T·(2B' − 1), B' ~ Beta(m_phi − x, x + 1) = 1 − B_upper):
    minus the smaller α-quantile, with ``p_less``. So ``low > 0`` exactly when
    ``p_greater < alpha`` and ``high < 0`` exactly when ``p_less < alpha``. An unbounded side
    has p-value 1. The quantiles of every cell are searched in one batch.
    """
    x, m_phi, m_psi, n_psi = np.broadcast_arrays(x, m_phi, m_psi, n_psi)
    shape = x.shape
    x, m_phi, m_psi, n_psi = (np.ravel(v).astype(np.float64) for v in (x, m_phi, m_psi, n_psi))
    m_phi = _snap_count(m_phi, m_phi)
    x, m_psi = _snap_count(x, m_phi), _snap_count(m_psi, n_psi)
    psi = ((m_psi, n_psi - m_psi + 1), (m_psi + 1, n_psi - m_psi))
    sides = []  # the φ distribution of each bounded side, the upper side's mirrored
    if alternative != "less":
        sides.append((x, m_phi - x + 1))
    if alternative != "greater":
        sides.append((m_phi - x, x + 1))
    jobs = [(t, b) for b in sides for t in psi]
    params = [np.concatenate([job[i][j] for job in jobs]) for i in (0, 1) for j in (0, 1)]
    t_a, t_b, b_a, b_b = params
    quantiles = _meld_quantile(t_a, t_b, b_a, b_b, alpha).reshape(len(jobs), x.size)
    at_zero = _meld_at_zero(t_a, t_b, b_a, b_b).reshape(len(jobs), x.size)
    low, high = np.full(x.size, -1.0), np.full(x.size, 1.0)
    p_greater, p_less = np.ones(x.size), np.ones(x.size)
    if alternative != "less":
        low = np.minimum(quantiles[0], quantiles[1])
        p_greater = np.maximum(at_zero[0], at_zero[1])
    if alternative != "greater":
        high = -np.minimum(quantiles[-2], quantiles[-1])
        p_less = np.maximum(at_zero[-2], at_zero[-1])
    empty = n_psi == 0
    low, high = np.where(empty, np.nan, low), np.where(empty, np.nan, high)
    p_greater, p_less = np.where(empty, 1.0, p_greater), np.where(empty, 1.0, p_less)
    return _Tested(*(v.reshape(shape) for v in (low, high, p_greater, p_less)))


def cluster_melded_interval(
    values: np.ndarray | Sequence[Sequence[float]],
    counts: np.ndarray | Sequence[int] | None = None,
    *,
    confidence: float = 0.95,
    alternative: str = "two-sided",
) -> Interval:
    """Interval for a clustered paired effect: the sign-flip inversion widened by a meld.

    With several pairs per cluster, :func:`sign_flip_interval` alone under-covers when few
    clusters carry a nonzero difference (it cannot move beyond the signs it saw). This is the
    hull of it and the Fay–Lumbard meld (:func:`fay_lumbard_interval`) on *effective* counts:
    θ = ψ·(2φ − 1), ψ = Σ|d| / Σn, φ = Σd⁺ / Σ|d|; each count is divided by its cluster design
    effect (cluster-robust over binomial variance of the ratio, in [1, largest cluster size];
    that size when it cannot be estimated) and scaled by (z / t_{K−1})² for few clusters (Korn
    & Graubard 1998). Its test is the hull's own: zero lies outside the hull exactly when it
    lies outside both parts on one side, so its one-sided p-value is the larger of the two
    parts' (each part's confidence curve at zero), and the two-sided p-value twice the smaller
    side (:func:`~recoverylab.stats.paired_effect_cells` reports it); the meld's few-clusters
    factor depends on the level, so that p-value is the hull's at this ``confidence``. Where
    the exact lattice is too large, the meld alone is the interval (its own p-value with it).

    Parameters
    ----------
    values
        Array of shape (T, 2): per cluster type, the integer summed difference d and pairs n.
    counts
        Clusters per type (positive integers); None means one cluster per row.
    confidence, alternative
        As :func:`sign_flip_interval`.

    Returns
    -------
    Interval
        ``low`` and ``high`` as floats; NaN when no cluster has a pair.

    Raises
    ------
    ParameterError
        As :func:`sign_flip_interval`.

    Examples
    --------
    >>> ci = cluster_melded_interval([[2, 4], [0, 4], [-1, 4]], [5, 20, 2])
    >>> bool(ci.low < 0.074 < ci.high)
    True
    """
    return _cluster_melded(values, counts, confidence, alternative).interval()


def _cluster_melded(
    values: np.ndarray | Sequence[Sequence[float]],
    counts: np.ndarray | Sequence[int] | None,
    confidence: float,
    alternative: str,
) -> _Tested:
    """:func:`cluster_melded_interval` with the p-values of the hull's test."""
    meld = _effective_melded(values, counts, confidence, alternative)
    try:
        exact = _sign_flip_inversion(values, counts, confidence, alternative, (-1.0, 1.0))
    except ParameterError:
        if math.isnan(float(meld.low)):
            raise
        # too large a lattice for the exact inversion: there the meld alone is wide enough
        return meld
    if math.isnan(float(exact.low)):
        return exact
    # the hull excludes zero on a side exactly when both parts do: the larger p-value
    return _Tested(
        low=min(float(meld.low), float(exact.low)),
        high=max(float(meld.high), float(exact.high)),
        p_greater=max(float(meld.p_greater), float(exact.p_greater)),
        p_less=max(float(meld.p_less), float(exact.p_less)),
    )


def effective_melded_interval(
    values: np.ndarray | Sequence[Sequence[float]],
    counts: np.ndarray | Sequence[int] | None = None,
    *,
    confidence: float = 0.95,
    alternative: str = "two-sided",
) -> Interval:
    """Return the Fay–Lumbard meld on design-effect-adjusted counts.

    One half of :func:`cluster_melded_interval`, which describes the effective counts.

    Parameters
    ----------
    values, counts, confidence, alternative
        As :func:`cluster_melded_interval` (non-integer ``values`` allowed).

    Returns
    -------
    Interval
        ``low`` and ``high`` as floats; NaN when no cluster has a pair.

    Raises
    ------
    ParameterError
        For a confidence outside (0, 1) or an unknown alternative.

    Examples
    --------
    >>> ci = effective_melded_interval([[2, 4], [0, 4], [-1, 4]], [5, 20, 2])
    >>> bool(ci.low < 0.074 < ci.high)
    True
    """
    return _effective_melded(values, counts, confidence, alternative).interval()


def _effective_melded(
    values: np.ndarray | Sequence[Sequence[float]],
    counts: np.ndarray | Sequence[int] | None,
    confidence: float,
    alternative: str,
) -> _Tested:
    """:func:`effective_melded_interval` with the p-values of its meld at zero."""
    confidence = _check_confidence(confidence)
    require_one_of("alternative", alternative, ALTERNATIVES)
    array = _numeric_array("values", values).astype(np.float64)
    c = np.ones(array.shape[0]) if counts is None else np.asarray(counts, dtype=np.float64)
    d, pairs = array[:, 0], array[:, 1]
    if float(c @ pairs) == 0:
        return _Tested(low=math.nan, high=math.nan, p_greater=1.0, p_less=1.0)
    alpha = _alpha_per_side(confidence, alternative)
    effective = _effective_counts(d, pairs, c, alpha)
    x, m_phi, m_psi, n_psi = (np.asarray(v, dtype=np.float64) for v in effective)
    return _Tested(*(float(v) for v in _melded_curves(x, m_phi, m_psi, n_psi, alpha, alternative)))


def _normal_over_t_squared(df: float, alpha: float) -> float:
    """``(z_{1-α} / t_{df, 1-α})²``, the few-clusters factor of the effective counts.

    At α = 0.5 (a one-sided interval at confidence 0.5) both quantiles are 0; the ratio is then
    its limit, the ratio of the densities at 0: ``(f_t(0) / φ(0))²`` with
    ``f_t(0) = Γ((df+1)/2) / (√(df π) Γ(df/2))`` and ``φ(0) = 1/√(2π)``.
    """
    t = float(_special().stdtrit(df, 1 - alpha))
    if t != 0.0:
        return (_normal_quantile(1 - alpha) / t) ** 2
    gammaln = _special().gammaln
    log_density_ratio = (
        float(gammaln((df + 1) / 2) - gammaln(df / 2)) - 0.5 * math.log(df * math.pi)
    ) + 0.5 * math.log(2 * math.pi)
    return math.exp(2 * log_density_ratio)


def _effective_counts(
    d: np.ndarray, pairs: np.ndarray, c: np.ndarray, alpha: float
) -> tuple[float, float, float, float]:
    """Return effective (rescue units, discordant units for φ, discordant for ψ, pairs)."""
    up, units = np.maximum(d, 0.0), np.abs(d)
    clusters = float(c.sum())
    total_up, total_units, total_pairs = float(c @ up), float(c @ units), float(c @ pairs)
    nonzero = float(c[units > 0].sum())

    def design_effect(w: np.ndarray, num: np.ndarray, den: np.ndarray, cap: float) -> float:
        n_clusters = float(w.sum())
        top, bottom = float(w @ num), float(w @ den)
        share = top / bottom
        binomial = share * (1 - share) / bottom
        if n_clusters < 2 or binomial <= 0:
            return cap
        robust = n_clusters / (n_clusters - 1) * float(w @ (num - share * den) ** 2) / bottom**2
        return min(max(robust / binomial, 1.0), cap)

    def few(n_clusters: float) -> float:
        if n_clusters < 2:
            return 1.0
        return _normal_over_t_squared(n_clusters - 1, alpha)

    scale_psi = few(clusters) / design_effect(c, units, pairs, float(pairs.max()))
    if total_units > 0:
        kept = units > 0
        cap = float(units[kept].max())
        deff_phi = design_effect(c[kept], up[kept], units[kept], cap)
        scale_phi = few(nonzero) / deff_phi
    else:
        scale_phi = 1.0
    return (
        total_up * scale_phi,
        total_units * scale_phi,
        total_units * scale_psi,
        total_pairs * scale_psi,
    )


def _matched_counts_iv(
    rescue: object, harm: object, n: object
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate matched-pair counts and return (rescue, discordant, n) as float arrays."""
    arrays = []
    for name, value in (("rescue", rescue), ("harm", harm), ("n", n)):
        array = _numeric_array(name, value).astype(np.float64)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(array) | (array < 0) | (array != np.round(array))
        if bad.any():
            raise ParameterError(
                f"parameter `{name}` holds {int(bad.sum())} values that are not non-negative "
                "integer counts."
            )
        arrays.append(array)
    try:
        x, harms, total = np.broadcast_arrays(*arrays)
    except ValueError as exc:
        raise ParameterError(
            "parameters `rescue`, `harm` and `n` have shapes that do not broadcast together."
        ) from exc
    m = x + harms
    if (m > total).any():
        raise ParameterError(
            "parameters `rescue` and `harm` add up to more than `n` for "
            f"{int((m > total).sum())} entries; discordant pairs are a subset of the n pairs."
        )
    return x, m, total


#: Hoeffding half-width, in √m, of the window kept for Binomial(m, ½): outside it < 3e-14.
_HALF_SAMPLE_WIDTH = 4.0

#: Mass below which an edge of the joint (D, N) pmf is trimmed (far below any α used).
_TRIM_MASS = 1e-16

#: The half-sample curve's error near a level α, beyond one rounding unit (of α) per cumulated
#: atom: absolute, the mass left out (trimmed edges, binomial tails beyond 8 sd: ~1e-15 a type);
#: relative, the convolution's rounding (below 5e-14 near ½ against exact integer counts, up to
#: 2e5 atoms). A curve value this close to α is a tie (:func:`_half_sample_bound`).
_CURVE_ATOL = 1e-14
_CURVE_RTOL = 1e-12


def sign_flip_interval(
    values: np.ndarray | Sequence[Sequence[float]],
    counts: np.ndarray | Sequence[int] | None = None,
    *,
    confidence: float = 0.95,
    alternative: str = "two-sided",
    limits: tuple[float, float] = (-1.0, 1.0),
) -> Interval:
    """Interval for a clustered paired effect Σd / Σn by inverting the sign-flip test (exact).

    θ = Σdᵢ / Σnᵢ over clusters i with summed difference dᵢ over nᵢ pairs. δ is kept when the
    sign-flip test of eᵢ = dᵢ − δ·nᵢ does not reject at 1 − confidence. Flipping the signs of a
    random set S gives T* ≥ T exactly when Σ_{i∈S} eᵢ ≤ 0, so the one-sided p-value is
    P(Q ≤ δ), Q = Σ_S d / Σ_S n the effect on a random half of the clusters (each in S with
    chance ½; S empty counts on both sides). The interval is the pair of α-quantiles of Q (a
    *half-sampling* interval), and zero lies outside it exactly when the sign-flip test of the
    dᵢ rejects (the symmetric null's two-sided p is twice the smaller one-sided one): each
    bound is the first point where the one-sided p-value curve reaches α, and that curve at
    zero is the p-value :func:`~recoverylab.stats.paired_effect_cells` reports, so the two
    agree in floating point too. Q's law is
    exact: (Σ_S d, Σ_S n) = Σₜ Kₜ·(dₜ, nₜ), Kₜ ~ Binomial(mₜ, ½), convolved on the integer
    lattice (mass beyond 4·√mₜ of mₜ/2, below 3e-14, dropped): the cost grows with the types
    and √(clusters), never with rows.

    Parameters
    ----------
    values
        Array of shape (T, 2): per cluster type, the integer summed difference d and pairs n.
    counts
        Clusters per type (positive integers); None means one cluster per row.
    confidence
        Confidence level in (0, 1).
    alternative
        ``"two-sided"``, ``"greater"`` (lower bound only; the upper is ``limits[1]``) or
        ``"less"`` (upper bound only).
    limits
        The range of the effect; a bound the test cannot reach (too few clusters) is the limit.

    Returns
    -------
    Interval
        ``low`` and ``high`` as floats; NaN when no cluster has a pair.

    Raises
    ------
    ParameterError
        For a bad shape, non-integer or negative pairs, non-integer differences, bad counts,
        a confidence outside (0, 1) or an unknown alternative.

    Examples
    --------
    >>> ci = sign_flip_interval([[1, 1], [0, 1], [-1, 1]], [12, 30, 3])
    >>> round(ci.low, 4), round(ci.high, 4)
    (0.0435, 0.3636)
    """
    return _sign_flip_inversion(values, counts, confidence, alternative, limits).interval()


def _sign_flip_inversion(
    values: np.ndarray | Sequence[Sequence[float]],
    counts: np.ndarray | Sequence[int] | None,
    confidence: float,
    alternative: str,
    limits: tuple[float, float],
) -> _Tested:
    """:func:`sign_flip_interval` with the one-sided sign-flip p-values at zero."""
    confidence = _check_confidence(confidence)
    require_one_of("alternative", alternative, ALTERNATIVES)
    array = _numeric_array("values", values).astype(np.float64)
    if array.ndim != 2 or array.shape[1] != 2 or array.shape[0] == 0:
        raise ParameterError(
            f"parameter `values` has shape {array.shape}; it must be (T, 2): one row per cluster "
            "type with its summed difference and its number of pairs."
        )
    bad = ~np.isfinite(array).all(axis=1) | (array != np.round(array)).any(axis=1)
    bad |= array[:, 1] < 0
    if bad.any():
        raise ParameterError(
            f"parameter `values` has {int(bad.sum())} rows that are not integer (difference, "
            "pairs) with pairs >= 0; the exact inversion needs integer partials."
        )
    c = (
        np.ones(array.shape[0], dtype=np.int64)
        if counts is None
        else _check_counts(counts, array.shape[0], "rows in `values`")
    )
    types, c = _merge_types(array, c)
    keep = (types != 0).any(axis=1)
    types, c = types[keep].astype(np.int64), c[keep]
    if types.size == 0 or int(c @ types[:, 1]) == 0:
        return _Tested(low=math.nan, high=math.nan, p_greater=1.0, p_less=1.0)
    try:
        ratios, mass, empty = _half_sample_distribution(types, c)
    except _LatticeTooLargeError:
        raise ParameterError(
            "the sign-flip inversion of this cell needs a lattice of more than "
            f"{_limits.MAX_LATTICE} points (many clusters with large, varied per-cluster sizes). "
            "Hint: use "
            "cluster_melded_interval, which falls back to the meld, or the bootstrap."
        ) from None
    alpha = _alpha_per_side(confidence, alternative)
    low, high = float(limits[0]), float(limits[1])
    p_greater = p_less = 1.0
    if alternative != "less":
        low, p_greater = _half_sample_bound(ratios, mass, empty, alpha, (low, high))
    if alternative != "greater":
        mirrored, p_less = _half_sample_bound(
            -ratios[::-1], mass[::-1], empty, alpha, (-high, -low)
        )
        high = -mirrored
    return _Tested(low=low, high=high, p_greater=p_greater, p_less=p_less)


def _half_sample_bound(
    ratios: np.ndarray,
    mass: np.ndarray,
    empty: float,
    alpha: float,
    limits: tuple[float, float],
) -> tuple[float, float]:
    """Return (lower bound, one-sided p-value at zero) from one curve p(δ) = P(Q ≤ δ) + empty.

    ``ratios`` sorted with their ``mass``; the curve at δ is the cumulated mass at the last
    ratio <= δ plus the empty half-sample's (``empty`` where no ratio is <= δ). The bound is
    the smallest δ in ``limits`` with p(δ) >= α (the low limit when p already reaches α there,
    the high limit when it never does); the p-value is p(0). Both compare the same floats
    with α, so the bound is above zero exactly when p(0) < α.

    The exact curve steps in multiples of 2^-clusters, so it can equal α exactly (types
    (0, 1) × 28 and (2, 2) × 27: P(Q ≥ 2/3) = ½, α at confidence 0.5): a tie, which the test
    does not reject, so δ is kept, as at every level just above. Rounding puts such a value on
    either side of α (0.4999999999999999 there), and below it δ was dropped at exactly this
    level only. So a curve value within its error of α (:data:`_CURVE_ATOL`, :data:`_CURVE_RTOL`
    and a rounding unit per cumulated atom) *is* α, on the one curve that gives both the bound
    and p(0): the interval at each confidence is the limit of those above it, and p(0) (α at
    a tie) is below α exactly when the bound is above zero. A value nearer α than that error
    but not equal (a near-tie, possible beyond ~50 clusters) is read as a tie too.
    """
    curve = np.append(np.cumsum(mass) + empty, empty)  # the last entry: p below every ratio
    error = _CURVE_ATOL + alpha * (_CURVE_RTOL + curve.size * np.finfo(np.float64).eps)
    curve = np.where(np.abs(curve - alpha) <= error, alpha, curve)
    curve, empty = curve[:-1], float(curve[-1])

    def at(delta: float) -> float:
        index = int(np.searchsorted(ratios, delta, side="right"))
        return float(curve[index - 1]) if index > 0 else float(empty)

    p_zero = at(0.0)
    if at(limits[0]) >= alpha:
        return float(limits[0]), p_zero
    reached = np.flatnonzero(curve >= alpha)
    if reached.size == 0:
        return float(limits[1]), p_zero
    return float(max(ratios[reached[0]], limits[0])), p_zero


def _half_sample_distribution(
    types: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """Distribution of Q = Σ Kₜdₜ / Σ Kₜnₜ: sorted ratios, their masses, and P(Σ Kₜnₜ = 0)."""
    d_gcd = int(np.gcd.reduce(np.abs(types[:, 0]))) or 1
    n_gcd = int(np.gcd.reduce(types[:, 1])) or 1
    joint, d_offset = _joint_half_sample_pmf(types[:, 0] // d_gcd, types[:, 1] // n_gcd, counts)
    d_values = (d_offset + np.arange(joint.shape[0]))[:, np.newaxis]
    n_values = np.arange(joint.shape[1])[np.newaxis, :]
    empty = float(joint[:, 0].sum())
    positive = (joint > 0) & (n_values > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio_grid = (d_values * d_gcd) / (n_values * n_gcd)
    ratios, mass = ratio_grid[positive], joint[positive]
    order = np.argsort(ratios, kind="stable")
    return ratios[order], mass[order], empty


def _joint_half_sample_pmf(
    d: np.ndarray, n: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, int]:
    """Joint pmf of (Σ Kₜdₜ, Σ Kₜnₜ) as a 2-D array, rows from ``d_offset``, columns from 0."""
    from scipy import signal  # a slow import, kept off `import recoverylab`

    # The untrimmed lattice bounds every intermediate one: refuse before any work.
    widths = np.minimum(counts, 2 * _HALF_SAMPLE_WIDTH * np.sqrt(counts) + 3)
    if float(np.abs(d) @ widths + 1) * float(n @ widths + 1) > _limits.MAX_LATTICE:
        raise _LatticeTooLargeError
    joint, d_offset = np.ones((1, 1)), 0
    for step_d, step_n, size in zip(d.tolist(), n.tolist(), counts.tolist(), strict=True):
        half = _HALF_SAMPLE_WIDTH * math.sqrt(size) + 1.0
        lo, hi = max(0, math.floor(size / 2 - half)), min(size, math.ceil(size / 2 + half))
        k = np.arange(lo, hi + 1)
        shape = (abs(step_d) * (hi - lo) + 1, step_n * (hi - lo) + 1)
        grown = (joint.shape[0] + shape[0] - 1) * (joint.shape[1] + shape[1] + step_n * lo - 1)
        if shape[0] * shape[1] > _limits.MAX_LATTICE or grown > _limits.MAX_LATTICE:
            raise _LatticeTooLargeError
        piece = np.zeros(shape)
        rows = (k - lo) * abs(step_d) if step_d >= 0 else (hi - k) * abs(step_d)
        piece[rows, (k - lo) * step_n] = _binomial_half_pmf(size, lo, hi)
        piece_offset = step_d * lo if step_d >= 0 else step_d * hi
        if joint.size * piece.size <= _limits.DIRECT_CONVOLVE_MAX:
            joint = signal.convolve(joint, piece, method="direct")
        else:
            joint = np.clip(signal.fftconvolve(joint, piece), 0.0, None)
        d_offset += piece_offset
        # Column j of the joint is Σ Kn = j + (column offset); keep columns absolute from 0.
        joint = np.pad(joint, ((0, 0), (step_n * lo, 0)))[:, : joint.shape[1] + step_n * lo]
        joint, trimmed = _trim_rows(joint)
        d_offset += trimmed
    return joint, d_offset


class _LatticeTooLargeError(Exception):
    """The joint (Σd, Σn) lattice of a half-sample distribution would exceed _limits.MAX_LATTICE."""


def _trim_rows(joint: np.ndarray) -> tuple[np.ndarray, int]:
    """Drop leading/trailing rows and trailing columns whose mass is negligible."""
    rows = np.flatnonzero(joint.sum(axis=1) > _TRIM_MASS)
    columns = np.flatnonzero(joint.sum(axis=0) > _TRIM_MASS)
    if rows.size == 0:
        return joint, 0
    return joint[rows[0] : rows[-1] + 1, : columns[-1] + 1], int(rows[0])
