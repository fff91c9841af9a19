"""Accuracy of the melded (Fay–Lumbard) quantiles against independent references (issue 19).

Both references evaluate P(T·(2B − 1) ≤ w) = F_T(w)·[w > 0] + ∫_{t > |w|} f_T(t)·F_B((1 +
w/t)/2) dt by adaptive quadrature and share no code with the Gauss–Legendre panels of
``stats``: scipy's ``quad`` on T's own scale (t below the median, r = 1 − t above it) for
counts, and mpmath's tanh-sinh at 25 digits over the logit of t for effective counts far
below 1, whose mass next to 0 or 1 doubles cannot hold (Beta(17.85, 0.12) has 1.5 % of its
mass within 1e-16 of 1, where the scipy reference is off by 3e-5). Each computed quantile q
must hold the true one within ±1e-6: F(q − 1e-6) < level ≤ F(q + 1e-6) by the reference.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import integrate, special

from recoverylab import stats
from recoverylab.stats._meld import _meld_at_zero

mp = pytest.importorskip("mpmath")

#: The tables print 4 decimals; the quadrature must be far below that.
TOLERANCE = 1e-6


def _quad(f, a: float, b: float) -> float:
    # Tolerances far below the test's: quad may warn that round-off stops it short of them.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        return float(integrate.quad(f, a, b, epsabs=1e-14, epsrel=1e-12, limit=400)[0])


def quad_cdf(w: float, t_a: float, t_b: float, b_a: float, b_b: float) -> float:
    """P(T·(2B − 1) ≤ w) by scipy's quad on T's scale (all parameters positive)."""
    log_norm = float(special.betaln(t_a, t_b))

    def f_b(t: float) -> float:
        return float(special.betainc(b_a, b_b, min(max((1 + w / t) / 2, 0.0), 1.0)))

    def density(t: float, r: float) -> float:
        return math.exp((t_a - 1) * math.log(t) + (t_b - 1) * math.log(r) - log_norm)

    def low_side(t: float) -> float:
        return 0.0 if t <= 0 else density(t, 1 - t) * f_b(t)

    def high_side(r: float) -> float:
        return 0.0 if r <= 0 else density(1 - r, r) * f_b(1 - r)

    total = float(special.betainc(t_a, t_b, min(w, 1.0))) if w > 0 else 0.0
    start, median = abs(w), float(special.betaincinv(t_a, t_b, 0.5))
    probs = (1e-12, 1e-8, 1e-5, 1e-3, 0.02, 0.1, 0.3)
    t_points = [float(special.betaincinv(t_a, t_b, p)) for p in probs]
    r_points = [float(special.betaincinv(t_b, t_a, p)) for p in probs]
    if start < median:
        edges = [start, *sorted(p for p in t_points if start < p < median), median]
        total += sum(_quad(low_side, a, b) for a, b in itertools.pairwise(edges))
    r_end = 1 - max(start, median)
    if r_end > 0:
        r_edges = [0.0, *sorted(p for p in r_points if 0 < p < r_end), r_end]
        total += sum(_quad(high_side, a, b) for a, b in itertools.pairwise(r_edges))
    return total


def mp_cdf(w: float, t_a: float, t_b: float, b_a: float, b_b: float) -> float:
    """P(T·(2B − 1) ≤ w) by mpmath over the logit of t (all parameters positive; slow)."""
    with mp.workdps(25):
        t_a, t_b, b_a, b_b, w = (mp.mpf(v) for v in (t_a, t_b, b_a, b_b, w))
        log_norm = mp.log(mp.beta(t_a, t_b))

        def integrand(logit):
            # density of logit(T): t^a (1 − t)^b / B(a, b)
            log_t, log_r = -mp.log1p(mp.exp(-logit)), -mp.log1p(mp.exp(logit))
            t = mp.exp(log_t)
            y = min(max((1 + w / t) / 2, mp.mpf(0)), mp.mpf(1))
            f_b = mp.betainc(b_a, b_b, 0, y, regularized=True)
            return mp.exp(t_a * log_t + t_b * log_r - log_norm) * f_b

        centre = mp.digamma(t_a) - mp.digamma(t_b)
        spread = mp.sqrt(mp.psi(1, t_a) + mp.psi(1, t_b))
        start = mp.log(abs(w)) - mp.log1p(-abs(w)) if w != 0 else -mp.inf
        points = [centre + k * spread for k in (-30, -8, -3, -1, 0, 1, 3, 8, 30)]
        points = [start, *(p for p in points if p > start), mp.inf]
        below = mp.betainc(t_a, t_b, 0, w, regularized=True) if w > 0 else 0
        return float(below + mp.quad(integrand, points))


def _quantile_jobs(x, m_phi, m_psi, n_psi, alpha):
    """The four (T, B, level) quantiles of the bounds whose parameters are all positive."""
    psi = ((m_psi, n_psi - m_psi + 1), (m_psi + 1, n_psi - m_psi))
    phi = (((x, m_phi - x + 1), alpha), ((x + 1, m_phi - x), 1 - alpha))
    for t in psi:
        for b, level in phi:
            if min(*t, *b) > 0:
                yield (*t, *b), level


# (x, m_phi, m_psi, n_psi): integer counts (x = rescue, m = discordant, n = pairs) -- tiny m,
# m = n, rescue-only, n up to 1e6 -- and effective non-integer counts as
# cluster_melded_interval makes them (φ and ψ scaled apart).
CASES = [
    (1.0, 1.0, 1.0, 5.0),
    (1.0, 2.0, 2.0, 30.0),
    (3.0, 7.0, 7.0, 7.0),
    (14.0, 15.0, 15.0, 30.0),
    (20.0, 60.0, 60.0, 1000.0),
    (999.0, 1000.0, 1000.0, 100_000.0),
    (1538.0, 5591.0, 5591.0, 100_000.0),
    (1.0, 20_000.0, 20_000.0, 1_000_000.0),
    (499_500.0, 500_000.0, 500_000.0, 1_000_000.0),
    (3.7, 9.2, 5.1, 250.3),
    (279.9, 1460.7, 177.0, 770.4),
]
#: Effective counts with parameters far below 1 (the mpmath reference).
TINY_CASES = [
    (0.53, 1.07, 0.10, 89.3),
    (0.0123, 0.019, 0.0283, 24.98),
    (0.638, 0.741, 0.183, 0.498),
    (10.24, 39.06, 16.85, 16.97),
]


def _check_quantiles(case, reference_cdf):
    for params, level in _quantile_jobs(*case, 0.025):
        q = float(stats._meld_quantile(*(np.array([v]) for v in params), level)[0])
        assert reference_cdf(q - TOLERANCE, *params) < level, (params, level, q)
        assert reference_cdf(min(q + TOLERANCE, 1.0), *params) >= level, (params, level, q)


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_melded_quantiles_hold_the_reference_quantile_within_1e6(case):
    _check_quantiles(case, quad_cdf)


@pytest.mark.parametrize("case", TINY_CASES, ids=[str(c) for c in TINY_CASES])
def test_melded_quantiles_of_tiny_effective_counts_match_mpmath(case):
    _check_quantiles(case, mp_cdf)


@pytest.mark.parametrize(
    "params",
    [(60.0, 941.0, 21.0, 40.0), (5.0, 26.0, 15.0, 1.0), (2.05, 67.5, 1.07, 0.2)],
)
def test_melded_cdf_matches_the_reference(params):
    # the CDF itself across its range, with T (first two) and B (third) as the outer variable
    meld = stats._meld_setup(*(np.array([v]) for v in params))
    for w in (-0.3, -0.02, 0.0, 0.01, 0.05, 0.2):
        got = stats._meld_cdf(meld, np.array([w]), np.array([True]))[0]
        # worst here: B = Beta(1.07, 0.2), whose CDF has a (1 − y)^0.2 kink at the range's cut
        # (1.5e-7 at w = 0.01); a quantile moves by that over the density there (about 15)
        assert got == pytest.approx(quad_cdf(w, *params), abs=5e-7)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 1_000_000),
    share=st.floats(0.0, 1.0),
    rescue_share=st.floats(0.0, 1.0),
)
def test_melded_bounds_keep_the_sign_of_the_exact_mcnemar_test(n, share, rescue_share):
    m = int(share * n)
    rescue = int(rescue_share * m)
    ci = stats.fay_lumbard_interval(rescue, m - rescue, n)
    p = stats.mcnemar_exact(rescue, m - rescue).p_value
    assert ((ci.low > 0) or (ci.high < 0)) == (p < 0.05)
    assert ci.low <= (2 * rescue - m) / n <= ci.high


@settings(max_examples=30, deadline=None)
@given(
    n=st.floats(0.01, 1e6),
    share=st.floats(0.0, 1.0),
    rescue_share=st.floats(0.0, 1.0),
    scale_phi=st.floats(0.01, 1.0),
)
# counts near the smallest doubles (found by Hypothesis on a clean clone): point masses
@example(n=18.0, share=0.5, rescue_share=2.2250738585072014e-308, scale_phi=1.0)
@example(n=1.0, share=0.5, rescue_share=2.2250738585072014e-308, scale_phi=0.5)
@example(n=1.0, share=1.0, rescue_share=2.2250738585072014e-308, scale_phi=1.0)
@example(n=1.0, share=1.0, rescue_share=1.0 - 1e-16, scale_phi=1.0)
@example(n=5.0, share=1e-300, rescue_share=0.5, scale_phi=1.0)
def test_melded_bounds_of_effective_counts_are_ordered_and_inside(
    n, share, rescue_share, scale_phi
):
    # effective (non-integer) counts as cluster_melded_interval makes them: any size, no warning
    m = share * n
    x = rescue_share * m
    low, high = stats._melded_bounds(
        *(np.array([v]) for v in (x * scale_phi, m * scale_phi, m, n)), 0.025, "two-sided"
    )
    assert -1.0 <= low[0] <= high[0] <= 1.0
    estimate = (2 * x - m) / n
    assert low[0] - 1e-9 <= estimate <= high[0] + 1e-9


def test_meld_quantile_keeps_the_shape_of_its_arguments():
    got = stats._meld_quantile(np.full((2, 3), 5.0), 26.0, 15.0, 1.0, 0.025)
    assert got.shape == (2, 3)
    assert np.all(got == got[0, 0])
    assert stats._meld_quantile(np.zeros(0), 1.0, 1.0, 1.0, 0.5).shape == (0,)


@settings(max_examples=60, deadline=None)
@given(
    t_a=st.one_of(st.just(0.0), st.floats(1e-3, 1e4)),
    t_b=st.one_of(st.just(0.0), st.floats(1e-3, 1e4)),
    b_a=st.one_of(st.just(0.0), st.floats(1e-3, 1e4)),
    b_b=st.floats(1e-3, 1e4),
    level=st.sampled_from([0.005, 0.025, 0.05, 0.1, 0.25, 0.5]),
)
# the exact curve at zero on the level itself: Beta(1, 1) at ½ is ½; Beta(5, 1) is 1/32
@example(t_a=3.0, t_b=4.0, b_a=1.0, b_b=1.0, level=0.5)
@example(t_a=1.0, t_b=0.0, b_a=5.0, b_b=1.0, level=0.5**5)
def test_meld_quantile_is_beyond_zero_exactly_when_its_curve_at_zero_is_below_the_level(
    t_a, t_b, b_a, b_b, level
):
    # by construction, not to rounding: the search is anchored on the exact value at zero,
    # the same number the paired intervals report as their p-value
    args = [np.array([v]) for v in (t_a, t_b, b_a, b_b)]
    q = float(stats._meld_quantile(*args, level)[0])
    at_zero = float(_meld_at_zero(*args)[0])
    assert (q > 0) == (at_zero < level)
    assert -1.0 <= q <= 1.0
