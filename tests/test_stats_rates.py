"""Tests of the rates' interval policy: ``stats.rate_cells``, ``rate_interval``, ``korn_graubard``.

Hand-computed answers, the references (scipy's and statsmodels' Clopper–Pearson, the
Korn–Graubard formula written out), invariants by hypothesis, the ``auto`` choice, errors, and
a small coverage simulation at issue 38's sparsest setting.
"""

from __future__ import annotations

import math
import re

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from recoverylab import stats
from recoverylab._errors import ParameterError, SchemaError


def one_per_cluster(events: int, n: int) -> pl.DataFrame:
    return pl.DataFrame({"task": range(n), "y": [1] * events + [0] * (n - events), "m": [1] * n})


def test_zero_of_twenty_is_clopper_pearson() -> None:
    row = stats.rate_cells(one_per_cluster(0, 20), cells=[], numerator="y", denominator="m").row(
        0, named=True
    )
    assert row["estimate"] == 0.0
    assert row["ci_low"] == 0.0
    assert row["ci_high"] == pytest.approx(1 - 0.025 ** (1 / 20), rel=1e-12)  # 0.1684
    assert round(row["ci_high"], 4) == 0.1684
    assert (row["ci_method"], row["test"]) == ("korn-graubard", "exact-binomial")
    assert (row["n_clusters"], row["design_effect"], row["n_effective"]) == (20, 1.0, 20.0)


def test_all_of_twenty_is_clopper_pearson() -> None:
    row = stats.rate_cells(one_per_cluster(20, 20), cells=[], numerator="y", denominator="m").row(
        0, named=True
    )
    assert row["ci_high"] == 1.0
    assert row["ci_low"] == pytest.approx(0.025 ** (1 / 20), rel=1e-12)  # 0.8316
    assert row["ci_low"] < 1.0


@pytest.mark.parametrize("n", [1, 2, 7, 20, 61])
def test_one_unit_per_cluster_equals_scipy_and_statsmodels(n: int) -> None:
    confint = pytest.importorskip("statsmodels.stats.proportion").proportion_confint
    frames = [one_per_cluster(x, n).with_columns(pl.lit(x).alias("x")) for x in range(n + 1)]
    out = stats.rate_cells(pl.concat(frames), cells=["x"], numerator="y", denominator="m")
    for row in out.iter_rows(named=True):
        ci = scipy_stats.binomtest(row["x"], n).proportion_ci(0.95, method="exact")
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
        low, high = confint(row["x"], n, alpha=0.05, method="beta")
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), abs=1e-12)


def test_clustered_cell_is_the_korn_graubard_formula() -> None:
    # 8 workflows of 5 attempts; events spread over 6 of them (the design effect is estimated)
    y = np.array([0, 1, 4, 2, 0, 3, 5, 1], dtype=float)
    m = np.full(8, 5.0)
    frame = pl.DataFrame({"w": range(8), "y": y, "m": m})
    row = stats.rate_cells(frame, cells=[], numerator="y", denominator="m").row(0, named=True)
    n, k, p = m.sum(), 8, y.sum() / m.sum()
    v = k / (k - 1) * ((y - p * m) ** 2).sum() / n**2
    deff = max(1.0, v / (p * (1 - p) / (n - 1)))
    factor = (scipy_stats.t.ppf(0.975, n - 1) / scipy_stats.t.ppf(0.975, k - 1)) ** 2
    n_eff = n / deff * factor
    x_eff = p * n_eff
    low = scipy_stats.beta.ppf(0.025, x_eff, n_eff - x_eff + 1)
    high = scipy_stats.beta.ppf(0.975, x_eff + 1, n_eff - x_eff)
    assert row["estimate"] == pytest.approx(p)
    assert row["design_effect"] == pytest.approx(deff, rel=1e-12)
    assert deff > 1.5  # the clustering is real here
    assert row["n_effective"] == pytest.approx(n_eff, rel=1e-12)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), rel=1e-9)


def test_events_in_few_clusters_take_the_largest_design_effect() -> None:
    # 2 events in 2 of 20 workflows of 15 attempts: the clustering cannot be seen, so every
    # workflow counts as one trial (Kish's effective number of clusters, 20)
    y = np.array([1.0, 1.0] + [0.0] * 18)
    found = stats.rate_interval(y, np.full(20, 15.0))
    assert found.n_effective == pytest.approx(20.0)
    assert found.design_effect == pytest.approx(15.0)
    wide = stats.rate_interval(np.array([2.0]), np.array([300.0]))  # one cluster: one trial
    assert wide.n_effective == 1.0
    # events in 5 workflows: the design effect is estimated again
    spread = stats.rate_interval(np.array([1.0] * 5 + [0.0] * 15), np.full(20, 15.0))
    assert spread.n_effective > 250


def test_fractional_cluster_values_pass_hat_k() -> None:
    # pass^2 of 3 repeats per task: C(c, 2)/C(3, 2) in {0, 1/3, 1}, one task per cluster
    values = np.array([1.0, 1 / 3, 0.0, 1 / 3, 1.0, 0.0, 0.0, 1 / 3])
    found = stats.rate_interval(values, np.ones(values.size))
    assert found.estimate == pytest.approx(values.mean())
    # bounded values vary less than 0/1 ones: the design effect is floored at 1, n* = K
    assert found.design_effect == 1.0
    assert found.n_effective == 8.0
    assert found.low < found.estimate < found.high


def test_one_sided_bounds() -> None:
    frame = one_per_cluster(3, 30)
    upper = stats.rate_cells(frame, cells=[], numerator="y", denominator="m", alternative="less")
    lower = stats.rate_cells(frame, cells=[], numerator="y", denominator="m", alternative="greater")
    ci = scipy_stats.binomtest(3, 30).proportion_ci(0.90, method="exact")
    assert upper.select("ci_low", "ci_high").row(0) == pytest.approx((0.0, ci.high), abs=1e-12)
    assert lower.select("ci_low", "ci_high").row(0) == pytest.approx((ci.low, 1.0), abs=1e-12)


def test_several_rates_one_method_per_cell_and_null_without_denominator() -> None:
    frame = pl.DataFrame(
        {
            "cell": ["a"] * 3 + ["b"] * 2,
            "aware": [1, 2, 0, 0, 1],
            "attempts": [3, 3, 3, 2, 2],
            "fixed": [1, 0, 0, 0, 0],
        }
    )
    out = stats.rate_cells(
        frame,
        cells=["cell"],
        numerator=["aware", "fixed"],
        denominator=["attempts", "aware"],
        names=["ear", "fixed_given_aware"],
    )
    assert out.columns == ["cell", "rate", *stats.RATE_COLUMNS]
    assert out.select("cell", "rate").rows() == [
        ("a", "ear"),
        ("a", "fixed_given_aware"),
        ("b", "ear"),
        ("b", "fixed_given_aware"),
    ]
    assert out.filter(pl.col("rate") == "fixed_given_aware")["n_clusters"].to_list() == [2, 1]
    assert out["ci_method"].unique().to_list() == ["korn-graubard"]


def test_auto_bootstraps_only_where_it_is_accurate() -> None:
    rng = np.random.default_rng(3)
    many = pl.DataFrame(
        {
            "task": range(150),
            "y": rng.binomial(4, 0.4, 150).astype(np.int64),
            "m": [4] * 150,
            "cell": "many",
        }
    )
    few = many.head(30).with_columns(pl.lit("few").alias("cell"))
    rare = many.with_columns(pl.lit(0, pl.Int64).alias("y"), pl.lit("rare").alias("cell"))
    frame = pl.concat([many, few, rare])
    out = stats.rate_cells(
        frame, cells=["cell"], numerator="y", denominator="m", n_resamples=500, seed=7
    )
    methods = dict(out.select("cell", "ci_method").rows())
    assert methods == {"few": "korn-graubard", "many": "percentile", "rare": "korn-graubard"}
    tests = dict(out.select("cell", "test").rows())
    assert tests == {"few": "exact-binomial", "many": "none", "rare": "exact-binomial"}
    # the bootstrap cell is the cluster bootstrap of that cell, on its own stream
    expected = stats.cluster_bootstrap(
        many, cells=["cell"], values=["y", "m"], n_resamples=500, seed=7
    )
    row = out.filter(pl.col("cell") == "many").row(0, named=True)
    assert (row["ci_low"], row["ci_high"]) == expected.select("ci_low", "ci_high").row(0)
    # forcing the exact interval: no resample, same estimate
    exact = stats.rate_cells(
        frame, cells=["cell"], numerator="y", denominator="m", ci_method="korn-graubard"
    )
    assert exact["ci_method"].unique().to_list() == ["korn-graubard"]
    assert exact["estimate"].to_list() == out["estimate"].to_list()


cluster_rows = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 6), st.sampled_from(["x", "y"])),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=cluster_rows, seed=st.integers(0, 10_000))
def test_invariants(rows: list[tuple[int, int, str]], seed: int) -> None:
    # (events, non-events, cell) per cluster: events <= denominator by construction
    frame = pl.DataFrame(
        {
            "y": [e for e, _, _ in rows],
            "m": [e + f for e, f, _ in rows],
            "cell": [c for _, _, c in rows],
        }
    )
    out = stats.rate_cells(frame, cells=["cell"], numerator="y", denominator="m")
    # row order never matters
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=seed)
    assert stats.rate_cells(shuffled, cells=["cell"], numerator="y", denominator="m").equals(out)
    # identical clusters given once with a count are the same clusters
    counted = frame.group_by("y", "m", "cell").agg(pl.len().cast(pl.Int64).alias("k"))
    by_count = stats.rate_cells(counted, cells=["cell"], numerator="y", denominator="m", count="k")
    assert by_count.equals(out)
    for row in out.iter_rows(named=True):
        assert 0.0 <= row["ci_low"] <= row["estimate"] <= row["ci_high"] <= 1.0
        # never a zero-width interval: the truth can always differ from the estimate
        assert row["ci_high"] > row["ci_low"]
        assert row["design_effect"] >= 1.0
        assert 0.0 < row["n_effective"] <= frame.filter(pl.col("cell") == row["cell"])["m"].sum()


def test_zero_denominator_cells_have_no_row() -> None:
    frame = pl.DataFrame({"cell": ["a", "b"], "y": [0, 1], "m": [0, 2]})
    out = stats.rate_cells(frame, cells=["cell"], numerator="y", denominator="m")
    assert out["cell"].to_list() == ["b"]


def test_errors() -> None:
    frame = pl.DataFrame({"cell": ["a", "b"], "y": [3, 1], "m": [2, 2]})
    with pytest.raises(SchemaError) as info:
        stats.rate_cells(frame, cells=["cell"], numerator="y", denominator="m")
    assert str(info.value) == (
        "partials: numerator `y` lies outside [0, `m`] in 1 cells (a); a rate's events must be "
        "between 0 and its denominator."
    )
    with pytest.raises(ParameterError, match=re.escape("parameter `ci_method` is 'wilson'")):
        stats.rate_cells(frame, cells=[], numerator="y", denominator="m", ci_method="wilson")
    with pytest.raises(ParameterError) as info:
        stats.rate_cells(
            frame, cells=[], numerator="y", denominator="m", ci_method="bca", alternative="less"
        )
    assert str(info.value).startswith(
        "parameter `ci_method` is 'bca' with alternative 'less'; the bootstrap intervals of a "
        "rate are two-sided."
    )
    with pytest.raises(ParameterError, match="one denominator per numerator"):
        stats.rate_cells(frame, cells=[], numerator=["y", "y"], denominator="m")
    with pytest.raises(ParameterError, match="outside"):
        stats.rate_interval([3.0], [2.0])


def test_coverage_at_the_sparsest_issue_setting() -> None:
    # issue 38: pass^4 over 20 tasks × 4 trials at p = 0.5 covered 72 % (28 % were [0, 0])
    rng = np.random.default_rng(38)
    reps, tasks, truth = 400, 20, 0.5**4
    passed = rng.binomial(4, 0.5, (reps, tasks)) == 4
    frame = pl.DataFrame(
        {
            "rep": np.repeat(np.arange(reps), tasks),
            "y": passed.reshape(-1).astype(np.float64),
            "m": np.ones(reps * tasks),
        }
    )
    out = stats.rate_cells(frame, cells=["rep"], numerator="y", denominator="m")
    covered = ((out["ci_low"] <= truth) & (truth <= out["ci_high"])).mean()
    assert covered >= 0.93
    assert (out["ci_high"] > out["ci_low"]).all()
    assert math.isclose(out["estimate"].mean(), truth, abs_tol=0.02)
