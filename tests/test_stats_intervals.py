"""Intervals that agree with the sign-flip test, one-sided tests and multiplicity (issue 16).

References are independent: brute-force enumeration of sign vectors and of half samples,
Monte Carlo of the melded beta products (the ``nmc`` branch of R's ``mcnemarExactDP``),
``scipy.stats.binomtest`` and ``statsmodels.stats.multitest.multipletests``.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from recoverylab import stats
from recoverylab._errors import ParameterError

ROOT = Path(__file__).resolve().parent.parent
TIE_RTOL = 100 * np.finfo(np.float64).eps


def brute_one_sided(x: np.ndarray, alternative: str) -> float:
    """P(T* >= T) or P(T* <= T) over all 2^n sign vectors (ties within 100 eps·Σ|x|)."""
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=x.size)))
    null = signs @ x
    observed = math.fsum(x)
    tolerance = TIE_RTOL * float(np.abs(x).sum())
    if alternative == "greater":
        return float(np.mean(null >= observed - tolerance))
    return float(np.mean(null <= observed + tolerance))


def brute_half_sample_interval(d: np.ndarray, n: np.ndarray, alpha: float) -> tuple[float, float]:
    """Invert the shifted sign-flip test over every candidate δ (all half-sample ratios)."""
    subsets = np.array(list(itertools.product((0, 1), repeat=d.size)))
    big_d, big_n = subsets @ d, subsets @ n
    candidates = np.unique(np.r_[big_d[big_n > 0] / big_n[big_n > 0], -1.0, 1.0])
    kept = [
        c
        for c in candidates
        if np.mean(big_d - c * big_n <= 1e-12) >= alpha - 1e-12
        and np.mean(big_d - c * big_n >= -1e-12) >= alpha - 1e-12
    ]
    return min(kept), max(kept)


# ------------------------------------------------------------------------------------------
# One-sided sign-flip tests
# ------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 16),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["greater", "less"]),
    st.booleans(),
)
def test_one_sided_sign_flip_equals_brute_force_up_to_16(n, seed, alternative, integer):
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, size=n).astype(float) if integer else rng.normal(0.3, 1.0, size=n)
    res = stats.sign_flip_test(x, alternative=alternative)
    assert res.alternative == alternative
    assert res.p_value == pytest.approx(brute_one_sided(x, alternative), abs=1e-12)


def test_one_sided_sign_flip_on_plus_minus_one_equals_binomtest():
    for rescue, harm in [(5, 0), (3, 9), (40, 25), (0, 0), (1, 1)]:
        x = np.r_[np.ones(rescue), -np.ones(harm), np.zeros(3)]
        for alternative in ("greater", "less"):
            p = stats.sign_flip_test(x, alternative=alternative).p_value
            expected = (
                1.0
                if rescue + harm == 0
                else sps.binomtest(rescue, rescue + harm, 0.5, alternative=alternative).pvalue
            )
            assert p == pytest.approx(expected, rel=1e-12)


def test_one_sided_monte_carlo_matches_exact():
    rng = np.random.default_rng(5)
    x = rng.integers(-3, 4, size=60).astype(float) + 0.3
    exact = brute_one_sided(x[:14], "greater")
    mc = stats.sign_flip_test(x[:14], method="monte-carlo", n_resamples=4000, alternative="greater")
    assert mc.method == "monte-carlo"
    assert mc.p_value == pytest.approx(exact, abs=5 * math.sqrt(0.25 / 4000))
    far = stats.sign_flip_test(x, n_resamples=20_000, alternative="less")
    assert far.method == "monte-carlo"
    reference = stats.sign_flip_test(np.round(x * 10), alternative="less").p_value
    assert far.p_value == pytest.approx(reference, abs=0.02)


def test_sign_flip_alternative_errors():
    with pytest.raises(ParameterError, match="parameter `alternative` is 'up'"):
        stats.sign_flip_test([1, 2], alternative="up")


# ------------------------------------------------------------------------------------------
# Fay–Lumbard melded interval
# ------------------------------------------------------------------------------------------


def test_fay_lumbard_edges_are_clopper_pearson_bounds():
    # No rescue: B_L is the point mass at 0, so the lower bound is minus the upper
    # Clopper-Pearson bound of the discordant rate (Beta(m + 1, n - m) quantile).
    ci = stats.fay_lumbard_interval(0, 1, 100)
    assert ci.low == pytest.approx(-sps.beta.ppf(0.975, 2, 99), rel=1e-12)
    empty = stats.fay_lumbard_interval(0, 0, 10)
    assert empty.low == pytest.approx(-sps.beta.ppf(0.975, 1, 10), rel=1e-12)
    assert empty.high == pytest.approx(-empty.low, rel=1e-12)
    # Every pair a rescue and n = m: both ψ and φ upper distributions are the point mass at 1.
    assert stats.fay_lumbard_interval(7, 0, 7).high == 1.0


@pytest.mark.parametrize(("x", "m", "n"), [(2, 3, 100), (15, 20, 100), (4, 9, 30), (1, 2, 5)])
def test_fay_lumbard_matches_monte_carlo_meld(x, m, n):
    # The Monte Carlo branch of mcnemarExactDP, with 400,000 draws per beta.
    rng = np.random.default_rng(11)
    size = 400_000
    t_low, t_high = rng.beta(m, n - m + 1, size), rng.beta(m + 1, n - m, size)
    b_low, b_high = rng.beta(x, m - x + 1, size), rng.beta(x + 1, m - x, size)
    low = min(
        np.quantile(t_low * (2 * b_low - 1), 0.025), np.quantile(t_high * (2 * b_low - 1), 0.025)
    )
    high = max(
        np.quantile(t_low * (2 * b_high - 1), 0.975), np.quantile(t_high * (2 * b_high - 1), 0.975)
    )
    ci = stats.fay_lumbard_interval(x, m - x, n)
    assert ci.low == pytest.approx(low, abs=3e-3)
    assert ci.high == pytest.approx(high, abs=3e-3)


def test_fay_lumbard_agrees_with_exact_mcnemar_everywhere_small():
    rescue, harm = np.meshgrid(np.arange(0, 26), np.arange(0, 26))
    rescue, harm = rescue.ravel(), harm.ravel()
    ci = stats.fay_lumbard_interval(rescue, harm, 60)
    p = np.array(
        [stats.mcnemar_exact(int(r), int(h)).p_value for r, h in zip(rescue, harm, strict=True)]
    )
    excluded = (ci.low > 0) | (ci.high < 0)
    assert (excluded == (p < 0.05)).all()
    greater = stats.fay_lumbard_interval(rescue, harm, 60, alternative="greater")
    p_greater = np.array(
        [
            stats.sign_flip_test(np.r_[np.ones(r), -np.ones(h), 0.0], alternative="greater").p_value
            for r, h in zip(rescue, harm, strict=True)
        ]
    )
    assert ((greater.low > 0) == (p_greater < 0.05)).all()
    assert (greater.high == 1.0).all()


def test_fay_lumbard_errors():
    with pytest.raises(ParameterError, match="add up to more than `n`"):
        stats.fay_lumbard_interval(5, 6, 10)
    with pytest.raises(ParameterError, match="parameter `rescue`"):
        stats.fay_lumbard_interval(-1, 0, 10)


# ------------------------------------------------------------------------------------------
# Sign-flip inversion and the clustered meld
# ------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(6, 11), st.integers(0, 2**32 - 1))
def test_sign_flip_interval_equals_brute_force_inversion(k, seed):
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 4, size=k)
    d = np.clip(rng.integers(-3, 4, size=k), -n, n)
    ci = stats.sign_flip_interval(np.c_[d, n])
    low, high = brute_half_sample_interval(d.astype(float), n.astype(float), 0.025)
    assert ci.low == pytest.approx(low, abs=1e-12)
    assert ci.high == pytest.approx(high, abs=1e-12)


def test_sign_flip_interval_counts_equal_expanded_and_few_clusters_give_the_range():
    values, counts = np.array([[2, 4], [0, 4], [-1, 3]]), np.array([5, 9, 2])
    grouped = stats.sign_flip_interval(values, counts)
    expanded = stats.sign_flip_interval(np.repeat(values, counts, axis=0))
    assert (grouped.low, grouped.high) == (expanded.low, expanded.high)
    # 5 clusters: the sign-flip test can never reach p < 0.05, so nothing is excluded.
    few = stats.sign_flip_interval([[1, 1]] * 5)
    assert (few.low, few.high) == (-1.0, 1.0)


def test_cluster_melded_contains_the_inversion_and_covers_all_zero_cells():
    values, counts = np.array([[2, 4], [0, 4], [-1, 4]]), np.array([5, 20, 2])
    exact = stats.sign_flip_interval(values, counts)
    melded = stats.cluster_melded_interval(values, counts)
    assert melded.low <= exact.low
    assert melded.high >= exact.high
    nothing = stats.cluster_melded_interval([[0, 4]], [30])
    assert nothing.low < 0 < nothing.high


# ------------------------------------------------------------------------------------------
# paired_effect_cells: the default interval never contradicts the test
# ------------------------------------------------------------------------------------------

cells_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(-4, 4), st.integers(1, 4)),
    min_size=1,
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(
    cells_strategy,
    st.booleans(),
    st.sampled_from(["two-sided", "greater", "less"]),
    st.sampled_from([0.8, 0.9, 0.95]),
)
def test_default_interval_never_contradicts_the_test(rows, one_pair, alternative, confidence):
    if one_pair:
        rows = [(cell, int(np.sign(d)), 1) for cell, d, _ in rows]
    else:
        rows = [(cell, max(-n, min(n, d)), n) for cell, d, n in rows]
    frame = pl.DataFrame(rows, schema=["cell", "d", "n"], orient="row")
    out = stats.paired_effect_cells(
        frame, cells=["cell"], count=None, confidence=confidence, alternative=alternative
    )
    excluded = (out["ci_low"] > 0) | (out["ci_high"] < 0)
    assert excluded.to_list() == (out["p_value"] < 1 - confidence).to_list()
    expected = "fay-lumbard" if one_pair else None
    for method in out["ci_method"].to_list():
        assert method in ("fay-lumbard", "cluster-melded")
        if expected:
            assert method == expected
    if alternative == "greater":
        assert (out["ci_high"] == 1.0).all()
    if alternative == "less":
        assert (out["ci_low"] == -1.0).all()


def test_issue_examples_no_longer_contradict():
    # 100 tasks, 0 rescues and 1 (or 2) harms: p = 1.0 (0.5); the interval must contain 0
    # and allow a benefit.
    for harms, p in ((1, 1.0), (2, 0.5)):
        frame = pl.DataFrame({"d": [-1, 0], "n": [1, 1], "count": [harms, 100 - harms]})
        out = stats.paired_effect_cells(frame, cells=[])
        assert out["p_value"].item() == pytest.approx(p)
        assert out["ci_low"].item() < 0 < out["ci_high"].item()
        assert out["sparse"].item() is True
        assert out["ci_method"].item() == "fay-lumbard"


def test_extra_one_valued_cell_column_gives_the_same_interval():
    rng = np.random.default_rng(2)
    frame = pl.DataFrame(
        {"cell": rng.choice(["x", "y"], 300), "d": rng.integers(-2, 3, 300), "n": 2}
    )
    one = stats.paired_effect_cells(frame, cells=["cell"], count=None)
    two = stats.paired_effect_cells(
        frame.with_columns(extra=pl.lit("only")), cells=["cell", "extra"], count=None
    )
    assert one["ci_low"].to_list() == two["ci_low"].to_list()
    assert one["ci_high"].to_list() == two["ci_high"].to_list()


def test_methods_sparse_flag_and_bootstrap_one_sided():
    frame = pl.DataFrame(
        {"cell": ["x"] * 3, "d": [1, 0, -1], "n": [1, 1, 1], "count": [30, 60, 10]}
    )
    auto = stats.paired_effect_cells(frame, cells=["cell"])
    assert auto.columns == [
        "cell",
        "ci_low",
        "ci_high",
        "n_clusters",
        "p_value",
        "ci_method",
        "sparse",
        "test",
        "ci_inverts_test",
        "p_sign_flip",
    ]
    assert auto["sparse"].item() is False
    flip = stats.paired_effect_cells(frame, cells=["cell"], ci_method="sign-flip")
    assert flip["ci_method"].item() == "sign-flip"
    boot = stats.paired_effect_cells(
        frame, cells=["cell"], ci_method="percentile", alternative="greater", n_resamples=500
    )
    assert boot["ci_method"].item() == "percentile"
    assert boot["ci_high"].item() == 1.0
    with pytest.raises(ParameterError, match="parameter `ci_method`"):
        stats.paired_effect_cells(frame, cells=["cell"], ci_method="wald")


# ------------------------------------------------------------------------------------------
# Multiplicity
# ------------------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30),
    st.sampled_from([("holm", "holm"), ("bh", "fdr_bh")]),
)
def test_adjusted_p_values_equal_statsmodels(p_values, methods):
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    ours, theirs = methods
    expected = multitest.multipletests(p_values, method=theirs)[1]
    np.testing.assert_allclose(
        stats.adjust_p_values(p_values, ours), expected, rtol=1e-12, atol=1e-300
    )


def test_adjust_in_paired_effect_cells_and_nan_and_errors():
    frame = pl.DataFrame({"cell": ["x", "y", "z"], "d": [1, 1, -1], "n": 1, "count": [9, 3, 1]})
    out = stats.paired_effect_cells(frame, cells=["cell"], adjust="holm")
    np.testing.assert_allclose(
        out["p_adjusted"].to_numpy(), stats.adjust_p_values(out["p_value"].to_numpy(), "holm")
    )
    assert np.isnan(stats.adjust_p_values([np.nan, 0.01], "bh")[0])
    with pytest.raises(ParameterError, match="parameter `adjust`"):
        stats.paired_effect_cells(frame, cells=["cell"], adjust="bonferroni")
    with pytest.raises(ParameterError, match="outside"):
        stats.adjust_p_values([1.5], "holm")


# ------------------------------------------------------------------------------------------
# The coverage benchmark runs at a tiny size
# ------------------------------------------------------------------------------------------


def test_coverage_benchmark_runs_quick(tmp_path: Path) -> None:
    out = tmp_path / "COVERAGE.md"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "coverage.py"),
            "--quick",
            "--reps",
            "12",
            "--resamples",
            "50",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text()
    assert "| tasks | pairs/task |" in text
    assert "| auto |" in text
    assert "| bca |" in text


def test_non_integer_partials_need_the_bootstrap():
    frame = pl.DataFrame({"cell": ["x", "x"], "d": [0.5, 1.0], "n": [1, 1]})
    with pytest.raises(ParameterError, match=r"cell \('x',\) has non-integer `d` or `n`"):
        stats.paired_effect_cells(frame, cells=["cell"], count=None)
    out = stats.paired_effect_cells(
        frame, cells=["cell"], count=None, ci_method="percentile", n_resamples=200
    )
    assert out["ci_method"].item() == "percentile"


def test_huge_lattice_refused_by_the_inversion_and_melded_falls_back():
    rng = np.random.default_rng(0)
    n = rng.integers(1, 51, size=20_000)
    d = rng.binomial(n, 0.1) - rng.binomial(n, 0.05)
    with pytest.raises(ParameterError, match="needs a lattice of more than"):
        stats.sign_flip_interval(np.c_[d, n])
    ci = stats.cluster_melded_interval(np.c_[d, n])
    assert ci.low < d.sum() / n.sum() < ci.high


def _bisection_quantile(t_a, t_b, b_a, b_b, level):
    """The melded quantile by plain bisection (36 halvings of [-1, 1]) of the same CDF."""
    meld = stats._meld_setup(t_a, t_b, b_a, b_b)
    every = np.ones(t_a.shape, dtype=bool)
    low, high = np.full(t_a.shape, -1.0), np.full(t_a.shape, 1.0)
    for _ in range(36):
        mid = (low + high) / 2
        above = stats._meld_cdf(meld, mid, every) >= level
        low, high = np.where(above, low, mid), np.where(above, mid, high)
    return high


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), level=st.sampled_from([0.005, 0.025, 0.05, 0.95, 0.975]))
def test_melded_quantile_root_search_equals_bisection(seed, level):
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 5000, size=12).astype(float)
    m = np.floor(n * rng.random(12))
    x = np.floor(m * rng.random(12))
    x[0] = 0.0  # no rescue among the discordant
    m[1] = x[1] = 0.0  # no discordant pair
    args = (m + 1, n - m, x + 1, m - x + 1)  # the bounds' shapes (all parameters > 0)
    got = stats._meld_quantile(*args, level)
    assert np.abs(got - _bisection_quantile(*args, level)).max() <= 2.0**-34


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(-3, 3), st.integers(1, 3), st.integers(1, 30)), min_size=1, max_size=5
    ),
    alternative=st.sampled_from(["greater", "less"]),
)
def test_one_sided_interval_at_confidence_one_half_is_the_limit_from_above(
    rows: list[tuple[int, int, int]], alternative: str
) -> None:
    """At confidence 0.5 a one-sided meld's t and normal quantiles are both 0 (it divided by
    zero): the few-clusters factor is their limit, so the interval is continuous there."""
    types = pl.DataFrame(
        {
            "cell": ["x"] * len(rows),
            "d": [max(-n, min(n, d)) for d, n, _ in rows],
            "n": [n for _, n, _ in rows],
            "count": [c for *_, c in rows],
        }
    )

    def interval(confidence: float) -> tuple[float, float]:
        out = stats.paired_effect_cells(
            types, cells=["cell"], confidence=confidence, alternative=alternative
        )
        return out["ci_low"].item(), out["ci_high"].item()

    at_half, above = interval(0.5), interval(0.5 + 1e-9)
    assert all(math.isfinite(v) for v in at_half)
    assert at_half == pytest.approx(above, abs=1e-6)


def test_one_sided_interval_at_confidence_one_half_found_by_a_sweep() -> None:
    types = pl.DataFrame(
        {"cell": ["x"] * 4, "d": [3, 0, -2, -1], "n": [3, 2, 2, 2], "count": [16, 12, 19, 29]}
    )
    out = stats.paired_effect_cells(types, cells=["cell"], confidence=0.5, alternative="greater")
    low = out["ci_low"].item()
    # a one-sided bound at confidence 0.5 sits near the point estimate (-19 / 168 here)
    assert abs(low - (3 * 16 - 2 * 19 - 29) / (3 * 16 + 2 * 12 + 2 * 19 + 2 * 29)) < 0.05


def exact_half_sample_law(
    types: list[tuple[int, int]], counts: list[int]
) -> tuple[dict[Fraction, int], int, int]:
    """Half samples per ratio Σ_S d / Σ_S n, those with Σ_S n = 0, and 2^clusters: integers."""
    law: dict[Fraction, int] = {}
    empty = 0
    for ks in itertools.product(*(range(m + 1) for m in counts)):
        ways = math.prod(math.comb(m, k) for m, k in zip(counts, ks, strict=True))
        big_d = sum(k * d for k, (d, _) in zip(ks, types, strict=True))
        big_n = sum(k * n for k, (_, n) in zip(ks, types, strict=True))
        if big_n == 0:
            empty += ways
        else:
            law[Fraction(big_d, big_n)] = law.get(Fraction(big_d, big_n), 0) + ways
    return law, empty, 2 ** sum(counts)


def exact_curve(law: dict[Fraction, int], empty: int, total: int) -> list[tuple[float, Fraction]]:
    """(ratio, P(Q <= ratio) + P(empty)) in exact arithmetic, ratios ascending."""
    ratios = sorted(law)
    cumulated = itertools.accumulate(law[r] for r in ratios)
    return [(float(r), Fraction(empty + c, total)) for r, c in zip(ratios, cumulated, strict=True)]


def exact_lower_bound(
    curve: list[tuple[float, Fraction]], p_empty: Fraction, alpha: Fraction
) -> float:
    """The smallest δ in [-1, 1] with P(Q <= δ) + P(empty) >= α (ties kept, as the test does)."""
    if p_empty >= alpha:
        return -1.0
    return next((max(r, -1.0) for r, p in curve if p >= alpha), 1.0)


def test_one_sided_interval_at_confidence_one_half_keeps_the_tied_half_sample_bound() -> None:
    # Found by the hypothesis test above on a CI run. K1 ~ Bin(28, ½), K2 ~ Bin(27, ½) rows
    # (0, 1) and (2, 2) on a random half: P(Q >= 2/3) = P(K2 >= K1) = ½ exactly, so at
    # confidence 0.5 the upper bound is 2/3 as at every level above; the rounded curve
    # (0.4999999999999999) dropped it to the next ratio, 0.6582 (0.6660 after the hull).
    types = pl.DataFrame({"cell": ["x", "x"], "d": [0, 2], "n": [1, 2], "count": [28, 27]})
    for method in ("auto", "sign-flip"):
        got = [
            stats.paired_effect_cells(
                types, cells=["cell"], confidence=c, alternative="less", ci_method=method
            )
            for c in (0.5, 0.5 + 1e-9)
        ]
        assert got[0]["ci_high"].item() == got[1]["ci_high"].item() == 2 / 3
    exact = stats.sign_flip_interval([[0, 1], [2, 2]], [28, 27], confidence=0.5, alternative="less")
    assert exact.high == 2 / 3


@settings(max_examples=80, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(-2, 2), st.integers(1, 2), st.integers(1, 40)), min_size=1, max_size=3
    ).filter(lambda rows: math.prod(c + 1 for *_, c in rows) <= 3_000),
    two_sided=st.booleans(),
)
def test_sign_flip_inversion_at_levels_its_exact_curve_reaches_keeps_the_tie(
    rows: list[tuple[int, int, int]], two_sided: bool
) -> None:
    """At levels α the exact half-sample curve takes (its p-values at zero, the shortest
    dyadics such as ½), the inversion is the exact one, keeping the tied δ (the limit from the
    levels above), and its p-value is the exact one, below α exactly when zero is outside. Up
    to 80 clusters (beyond 53 the float curve is not exact); a value nearer α than the curve's
    precision (a near-tie) may go either way."""
    merged: dict[tuple[int, int], int] = {}
    for d, n, c in rows:
        merged[(max(-n, min(n, d)), n)] = merged.get((max(-n, min(n, d)), n), 0) + c
    types, counts = list(merged), list(merged.values())
    law, empty, total = exact_half_sample_law(types, counts)
    p_empty = Fraction(empty, total)
    lower = exact_curve(law, empty, total)
    upper = exact_curve({-r: w for r, w in law.items()}, empty, total)  # P(Q >= δ), mirrored
    frame = pl.DataFrame({"d": [d for d, _ in types], "n": [n for _, n in types], "count": counts})
    at_zero = [next((p for r, p in reversed(curve) if r <= 0), p_empty) for curve in (lower, upper)]
    levels = {p for _, p in lower + upper if 0 < p < (Fraction(1, 2) if two_sided else 1)}
    # the p-values at zero and the shortest dyadic levels (½ by symmetry), each exact in float
    levels = sorted(levels, key=lambda p: (p not in at_zero, p.denominator, p))[:8]
    for alpha in (a for a in levels if a.denominator <= 2**40):
        confidence = 1 - 2 * float(alpha) if two_sided else 1 - float(alpha)
        slack = Fraction(1, 10**13) + alpha / 10**10
        for alternative in ("two-sided",) if two_sided else ("greater", "less"):
            out = stats.paired_effect_cells(
                frame,
                cells=[],
                confidence=confidence,
                alternative=alternative,
                ci_method="sign-flip",
            )
            low, high, p = out["ci_low"].item(), out["ci_high"].item(), out["p_value"].item()
            if alternative != "less":
                want = exact_lower_bound(lower, p_empty, alpha)
                assert exact_lower_bound(lower, p_empty, alpha - slack) <= low <= want
            if alternative != "greater":
                want = -exact_lower_bound(upper, p_empty, alpha)
                assert want <= high <= -exact_lower_bound(upper, p_empty, alpha - slack)
            assert (low > 0 or high < 0) == (p < 1 - confidence)
            sides = {"greater": at_zero[0], "less": at_zero[1]}
            want_p = sides.get(alternative, min(1, 2 * min(at_zero)))
            assert abs(Fraction(p) - want_p) <= 2 * slack


@settings(max_examples=40, deadline=None)
@given(
    shape=st.tuples(st.integers(0, 8), st.integers(1, 6)),
    method=st.sampled_from(["holm", "bh"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_2d_family_adjusts_each_column_as_alone(shape, method, seed) -> None:
    rng = np.random.default_rng(seed)
    p = rng.choice([0.0, 0.01, 0.5, 1.0], size=shape) if seed % 3 == 0 else rng.random(shape)
    got = stats.adjust_p_values(p, method)
    assert got.shape == p.shape
    for column in range(p.shape[1]):
        assert got[:, column].tolist() == stats.adjust_p_values(p[:, column], method).tolist()


def test_a_2d_family_with_nan_is_refused() -> None:
    with pytest.raises(ParameterError, match="2-D `p_values`"):
        stats.adjust_p_values(np.array([[0.1, np.nan]]), "holm")
    with pytest.raises(ParameterError, match="must be 1-D or 2-D"):
        stats.adjust_p_values(np.zeros((2, 2, 2)), "holm")
