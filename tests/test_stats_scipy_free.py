"""The numpy/stdlib replacements in recoverylab.stats, cross-checked against scipy.

``recoverylab.stats`` computes normal quantiles and CDFs with the standard library, Binomial(n, ½)
probabilities in exact integers (or normalised log-ratios for large n) and convolutions with
numpy's FFT, so that a command that runs an exact test does not pay scipy's import. Each is
checked here against the scipy function it replaces, over a grid.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import signal, special
from scipy import stats as sps

from recoverylab import stats


def test_normal_quantile_matches_ndtri_over_a_grid():
    grid = np.concatenate((np.logspace(-12, -1, 200), np.linspace(0.01, 0.99, 199)))
    grid = np.concatenate((grid, 1 - np.logspace(-12, -1, 200)))
    ours = np.array([stats._normal_quantile(float(p)) for p in grid])
    np.testing.assert_allclose(ours, special.ndtri(grid), rtol=1e-14, atol=1e-15)
    assert stats._normal_quantile(0.0) == -np.inf
    assert stats._normal_quantile(1.0) == np.inf
    assert np.isnan(stats._normal_quantile(float("nan")))


def test_normal_cdf_matches_ndtr_over_a_grid_including_the_far_lower_tail():
    grid = np.concatenate((np.linspace(-37.5, 8.5, 4001), [-np.inf, np.inf]))
    ours = stats._normal_cdf(grid)
    np.testing.assert_allclose(ours, special.ndtr(grid), rtol=1e-12, atol=0)
    assert stats._normal_cdf(np.array([[0.0, np.nan]])).shape == (1, 2)
    assert np.isnan(stats._normal_cdf(np.nan))


@pytest.mark.parametrize("n", [0, 1, 2, 7, 40, 513, 4096, 4097, 20_001, 1_000_000])
def test_binomial_half_pmf_matches_scipy(n):
    ours = stats._binomial_half_pmf(n, 0, n)
    theirs = sps.binom.pmf(np.arange(n + 1), n, 0.5)
    seen = theirs > 1e-280
    np.testing.assert_allclose(ours[seen], theirs[seen], rtol=5e-11)
    assert abs(ours.sum() - 1.0) < 1e-12
    window = stats._binomial_half_pmf(n, n // 3, n // 2 + 3)
    np.testing.assert_allclose(window, ours[n // 3 : n // 2 + 4], rtol=0, atol=0)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 30_000), share=st.floats(0.0, 1.0))
def test_binomial_two_sided_matches_binomtest(n, share):
    k = round(share * n)
    ours = stats._binomial_half_two_sided(k, n)
    expected = sps.binomtest(k, n, 0.5).pvalue
    if expected > 1e-250:  # scipy's binomial CDF underflows to 0 far in the tail
        assert ours == pytest.approx(expected, rel=1e-10)
    if n <= 3000:  # and the exact value, from integers
        low = min(k, n - k)
        exact = 1.0 if 2 * low == n else 2 * sum(math.comb(n, j) for j in range(low + 1)) / 2**n
        assert ours == pytest.approx(min(exact, 1.0), rel=1e-15)


def test_mcnemar_exact_matches_binomtest_over_a_grid():
    for rescue in range(0, 60, 7):
        for harm in range(0, 60, 5):
            if rescue + harm:
                expected = sps.binomtest(rescue, rescue + harm, 0.5).pvalue
                got = stats.mcnemar_exact(rescue, harm).p_value
                assert got == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("left", "right"), [(1, 1), (5, 300), (1000, 1000), (4097, 33)])
def test_fft_convolve_matches_scipy(left, right):
    gen = np.random.default_rng(left * right)
    a, b = gen.random(left), gen.random(right)
    np.testing.assert_allclose(
        stats._fft_convolve(a, b), signal.fftconvolve(a, b), rtol=1e-10, atol=1e-12
    )


def test_student_and_beta_quantiles_match_scipy_stats():
    # The sparse-cell interval takes them from scipy.special (not scipy.stats, 0.4 s more).
    for df in (1, 2, 5, 30, 1000):
        for p in (0.6, 0.9, 0.975, 0.999):
            assert stats._special().stdtrit(df, p) == pytest.approx(sps.t.ppf(p, df), rel=1e-12)
    a, b = np.meshgrid([0.5, 1.0, 3.0, 40.0], [0.5, 2.0, 17.0])
    for q in (0.025, 0.5, 0.975):
        np.testing.assert_allclose(
            stats._special().betaincinv(a, b, q), sps.beta.ppf(q, a, b), rtol=1e-12
        )


def test_sign_flip_exact_p_values_match_scipy_references():
    # One distinct |difference|: a binomial test; several: the lattice convolution, checked
    # against scipy's own convolution of the scaled binomials.
    result = stats.sign_flip_test(np.array([1.0] * 9 + [-1.0] * 2))
    assert result.p_value == pytest.approx(sps.binomtest(9, 11, 0.5).pvalue, rel=1e-12)
    gen = np.random.default_rng(3)
    d = gen.integers(-4, 5, size=3000).astype(float)
    ours = stats.sign_flip_test(d)
    assert ours.method == "exact-convolution"
    nonzero = np.abs(d[d != 0]).astype(int)
    pmf = np.ones(1)
    for a in np.unique(nonzero):
        m = int((nonzero == a).sum())
        piece = np.zeros(a * m + 1)
        piece[::a] = sps.binom.pmf(np.arange(m + 1), m, 0.5)
        pmf = signal.convolve(pmf, piece)
    support = 2 * np.arange(pmf.size) - nonzero.sum()
    expected = pmf[np.abs(support) >= abs(d.sum())].sum()
    assert ours.p_value == pytest.approx(expected, rel=1e-9)
