"""Study planning (recoverylab/paired/_planning.py) against textbook formulas, brute force and
a simulation of the exact sign-flip test."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from recoverylab import paired, stats
from recoverylab._errors import ParameterError
from recoverylab.paired import _planning
from tests.conftest import SAMPLES


def brute_force_power(n: int, p10: float, p01: float, alpha: float, alternative: str) -> float:
    """Power by enumerating every (rescues, harms) count and running the library's exact test."""
    total = 0.0
    for rescue, harm in itertools.product(range(n + 1), repeat=2):
        if rescue + harm > n:
            continue
        weight = sps.multinomial.pmf(
            [rescue, harm, n - rescue - harm], n, [p10, p01, 1 - p10 - p01]
        )
        d = [1] * rescue + [-1] * harm + [0] * (n - rescue - harm)
        p_two = stats.sign_flip_test(d).p_value
        if alternative == "two-sided":
            total += weight * (p_two <= alpha)
        elif alternative == "greater":
            total += weight * (rescue > harm and p_two / 2 <= alpha)
        else:
            total += weight * (harm > rescue and p_two / 2 <= alpha)
    return total


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
@pytest.mark.parametrize(("n", "p10", "p01"), [(12, 0.3, 0.1), (15, 0.2, 0.25), (9, 0.5, 0.05)])
def test_exact_power_equals_enumeration_of_the_exact_test(n, p10, p01, alternative):
    got = paired.power(n, p10, p01, alternative=alternative)
    assert got == pytest.approx(brute_force_power(n, p10, p01, 0.05, alternative), abs=1e-9)


def test_connor_textbook_size():
    # Connor (1987): n = (z_{α/2}·√ψ + z_β·√(ψ − δ²))² / δ², by hand for ψ = 0.2, δ = 0.1:
    # (1.959964·0.447214 + 0.841621·0.435890)² / 0.01 = 154.6
    connor = (1.959964 * math.sqrt(0.2) + 0.841621 * math.sqrt(0.2 - 0.01)) ** 2 / 0.01
    # ... which is the generalised formula at m = 1 without the continuity correction.
    s, e = _planning._moments(0.2, 0.1, 1, 0.0)
    assert ((1.959964 * e + 0.841621 * s) / 0.1) ** 2 == pytest.approx(connor, rel=1e-6)
    assert connor == pytest.approx(154.6, abs=0.05)
    # The exact test is conservative: it needs more tasks than the normal approximation.
    n = paired.tasks_needed(0.15, 0.05)
    assert n >= 155
    assert paired.power(n, 0.15, 0.05) >= 0.8 > paired.power(n - 1, 0.15, 0.05) - 0.01


def test_design_effect_scales_the_variance():
    s1, _ = _planning._moments(0.2, 0.1, 4, 0.0)
    s2, _ = _planning._moments(0.2, 0.1, 4, 0.5)
    assert (s2 / s1) ** 2 == pytest.approx(1 + 3 * 0.5)
    # More correlated pairs need more tasks; perfectly correlated pairs are one pair each.
    low = paired.tasks_needed(0.15, 0.05, pairs_per_task=4, icc=0.0)
    high = paired.tasks_needed(0.15, 0.05, pairs_per_task=4, icc=0.5)
    assert low < high


@settings(max_examples=8, deadline=None)
@given(
    psi=st.floats(0.2, 0.9),
    share=st.floats(0.55, 0.95),
    m=st.sampled_from([1, 2, 3]),
    icc=st.floats(0.0, 0.8),
)
def test_mde_inverts_tasks_needed(psi, share, m, icc):
    p10, p01 = psi * share, psi * (1 - share)
    n = paired.tasks_needed(p10, p01, pairs_per_task=m, icc=icc)
    delta = paired.mde(n, psi, pairs_per_task=m, icc=icc)
    assert delta <= p10 - p01 + 1e-6
    got = paired.power(n, (psi + delta) / 2, (psi - delta) / 2, pairs_per_task=m, icc=icc)
    assert got == pytest.approx(0.8, abs=1e-4)


def test_icc_oneway_equals_textbook_anova():
    groups = [np.array([1.0, 0, 1]), np.array([0.0, 0]), np.array([1.0, 1, 1, 0]), np.array([-1.0])]
    y = np.concatenate(groups)
    n, k = len(y), len(groups)
    grand = y.mean()
    msb = sum(len(g) * (g.mean() - grand) ** 2 for g in groups) / (k - 1)
    msw = sum(((g - g.mean()) ** 2).sum() for g in groups) / (n - k)
    m0 = (n - sum(len(g) ** 2 for g in groups) / n) / (k - 1)
    reference = (msb - msw) / (msb + (m0 - 1) * msw)
    rows = np.array(
        [[g.sum() ** 2 / len(g), g.sum(), (g**2).sum(), len(g), len(g) ** 2, 1] for g in groups]
    )
    assert float(stats.icc_oneway(rows.sum(axis=0))) == pytest.approx(reference)
    assert np.isnan(stats.icc_oneway(rows[:1].sum(axis=0)))  # one cluster: undefined


def test_simulation_model_has_the_stated_icc():
    sums = _planning._simulate_sums(np.random.default_rng(3), 1, 20_000, 2, 0.3, 0.2, 0.4)
    # For m = 2 the ICC of the pairs equals Cov/Var; recover it from the task sums:
    # Var(D) = 2σ²(1 + ρ) with σ² = ψ − δ².
    sigma2 = 0.5 - 0.1**2
    rho = sums.var() / (2 * sigma2) - 1
    assert rho == pytest.approx(0.4, abs=0.04)


GRID = [
    (0.15, 0.05, 1, 0.0, "two-sided"),
    (0.15, 0.05, 1, 0.0, "greater"),
    (0.3, 0.1, 1, 0.0, "two-sided"),
    (0.4, 0.25, 1, 0.0, "greater"),
    (0.15, 0.05, 2, 0.2, "two-sided"),
    (0.15, 0.05, 3, 0.0, "greater"),
    (0.3, 0.1, 4, 0.5, "two-sided"),
    (0.3, 0.1, 2, 0.2, "greater"),
    (0.4, 0.25, 3, 0.0, "two-sided"),
    (0.4, 0.25, 4, 0.5, "greater"),
    # Rare, clustered discordant pairs: the task sums are skewed (the old design-effect formula
    # over-planned these by 5-10 %).
    (0.1, 0.02, 4, 0.5, "two-sided"),
    (0.05, 0.01, 8, 0.3, "greater"),
    (0.1, 0.02, 2, 0.9, "greater"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("p10", "p01", "m", "icc", "alternative"), GRID)
def test_planned_size_reaches_target_power_in_simulation(p10, p01, m, icc, alternative):
    n = paired.tasks_needed(p10, p01, pairs_per_task=m, icc=icc, alternative=alternative)
    sim = paired.simulate_power(
        n, p10, p01, pairs_per_task=m, icc=icc, alternative=alternative, n_sims=3000, seed=5
    )
    assert abs(sim.power - 0.8) <= 0.03, (n, sim)


def test_plan_study_from_rates_and_from_a_pilot():
    plan = paired.plan_study(p10=0.15, p01=0.05, n_tasks=168)
    assert plan.columns == list(_planning.PLAN_COLUMNS)
    row = plan.row(0, named=True)
    assert row["tasks_needed"] == paired.tasks_needed(0.15, 0.05)
    assert row["mde"] == pytest.approx(0.1, abs=0.002)
    assert row["power_method"] == "exact"

    forks = SAMPLES / "paired" / "main_forks.parquet"
    lazy = pl.scan_parquet(forks)
    pilot = paired.pilot_rates(lazy, by=["condition", "method"], n_resamples=200)
    summary = paired.summarize(lazy, n_resamples=10)
    # p10 over every delay of a cell is its rescues over its pairs.
    totals = summary.group_by("condition", "method").agg(pl.col("rescue", "n").sum())
    joined = pilot.join(totals, on=["condition", "method"])
    assert (joined["p10"] - joined["rescue"] / joined["n"]).abs().max() < 1e-12
    assert (pilot["pairs_per_task"] > 1).all()
    assert (pilot["icc_ci_low"] <= pilot["icc"]).all()
    assert (pilot["icc"] <= pilot["icc_ci_high"]).all()
    planned = paired.plan_study(forks, by=["condition", "method"], n_tasks=100, n_resamples=200)
    assert planned["power_method"].unique().to_list() == ["normal-approximation"]
    assert (planned["tasks_needed_icc_high"] >= planned["tasks_needed"]).all()


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: paired.tasks_needed(0.05, 0.15, alternative="greater"), "cannot detect"),
        (lambda: paired.tasks_needed(0.7, 0.5), "sum to"),
        (lambda: paired.tasks_needed(0.2, 0.1, alpha=1.5), "`alpha`"),
        (lambda: paired.tasks_needed(0.2, 0.1, alternative="up"), "`alternative`"),
        (lambda: paired.tasks_needed(0.2, 0.1, icc=-0.1), "`icc`"),
        (lambda: paired.tasks_needed(0.2, 0.1, pairs_per_task=0), "`pairs_per_task`"),
        (lambda: paired.mde(5, 0.1), "plan more tasks"),
        (lambda: paired.power(0, 0.2, 0.1), "`n_tasks`"),
        (paired.plan_study, "either `pilot`"),
        (lambda: paired.plan_study(p10=0.2), "either `pilot`"),
    ],
)
def test_bad_parameters_raise_our_errors(call, match):
    with pytest.raises(ParameterError, match=match):
        call()


def test_cli_plan_prints_and_writes(cli, tmp_path):
    shown = cli("plan", "--p10", "0.15", "--p01", "0.05", "--tasks", "168", "--wide")
    assert shown.code == 0, shown.err
    assert "needed" in shown.out
    assert "168" in shown.out
    out = tmp_path / "plan.parquet"
    forks = SAMPLES / "paired" / "main_forks.parquet"
    written = cli("plan", forks, "--by", "condition,method", "--resamples", "100", "--out", out)
    assert written.code == 0, written.err
    assert pl.read_parquet(out).height == 2
    bad = cli("plan", "--p10", "0.15")
    assert bad.code == 2
    assert "either `pilot`" in bad.err


@pytest.mark.slow
def test_simulated_sizing_agrees_with_the_approximation_in_the_skewed_corner():
    design = {"pairs_per_task": 4, "icc": 0.5}
    normal = paired.tasks_needed(0.1, 0.02, **design)
    simulated = paired.tasks_needed(0.1, 0.02, **design, n_sims=1000, seed=2)
    assert abs(simulated - normal) <= 0.06 * normal, (simulated, normal)
    check = paired.simulate_power(simulated, 0.1, 0.02, **design, n_sims=2500, seed=11)
    assert abs(check.power - 0.8) <= 0.03, check
    plan = paired.plan_study(p10=0.1, p01=0.02, **design, n_sims=200, seed=2)
    assert plan["power_method"].item() == "simulation"
    assert plan["planned_power"].item() == pytest.approx(0.8, abs=0.08)


def _sum_pmf(p10, p01, m, icc):
    """Enumerated law of a task's summed difference under the shared-category model."""
    rates = np.array([p10, p01, 1 - p10 - p01])
    law = np.zeros(2 * m + 1)
    for category in range(3):
        keep = np.zeros(3)
        keep[category] = math.sqrt(icc)
        up, down, zero = (1 - math.sqrt(icc)) * rates + keep
        acc = np.array([1.0])
        for _ in range(m):
            acc = np.convolve(acc, [down, zero, up])
        law += rates[category] * acc
    return np.arange(-m, m + 1), law


@pytest.mark.parametrize(("p10", "p01", "m", "icc"), [(0.1, 0.02, 4, 0.5), (0.3, 0.1, 3, 0.0)])
def test_sum_moments_equal_enumeration_and_the_design_effect(p10, p01, m, icc):
    values, law = _sum_pmf(p10, p01, m, icc)
    moments = _planning._sum_moments(p10, p01, m, icc)
    assert moments == pytest.approx([law @ values**j for j in (1, 2, 3, 4)], rel=1e-12)
    psi, delta = p10 + p01, p10 - p01
    variance = m * (psi - delta**2) * (1 + (m - 1) * icc)
    assert moments[1] - moments[0] ** 2 == pytest.approx(variance, rel=1e-12)


@pytest.mark.parametrize("m", [1.0, 2.5, 4.0])
def test_two_sided_power_is_symmetric_in_rescue_and_harm(m):
    # A two-sided study detects harm > rescue as well as rescue > harm (a pilot may show either).
    for n in (20, 200, 25_000):
        helps = paired.power(n, 0.15, 0.05, pairs_per_task=m, icc=0.2)
        harms = paired.power(n, 0.05, 0.15, pairs_per_task=m, icc=0.2)
        assert harms == pytest.approx(helps, rel=1e-12)
    assert paired.tasks_needed(0.05, 0.15, pairs_per_task=m, icc=0.2) == paired.tasks_needed(
        0.15, 0.05, pairs_per_task=m, icc=0.2
    )
