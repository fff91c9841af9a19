"""Tests of judged outcomes: ``stats.judged_cells`` (PPI++), the paired version, judge error.

The reference implementation (``ppi_py.ppi_mean_ci``, test extra) on unclustered data, a
cluster-level formula written out unit by unit, invariants by hypothesis (row order, a
cluster's partials split over rows, cluster names), stratification, the gold-only fallback,
Rogan–Gladen by hand, and the exact errors of bad judge and gold columns.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from recoverylab import stats
from recoverylab._errors import ParameterError, RecoveryLabWarning, SchemaError


def judged_units(
    n_clusters: int,
    size: int,
    *,
    rate: float = 0.3,
    accuracy: float = 0.85,
    share: float = 0.3,
    seed: int = 0,
) -> pl.DataFrame:
    """Units in clusters with a heterogeneous rate, a judge of given accuracy, gold at random."""
    rng = np.random.default_rng(seed)
    task = np.repeat(np.arange(n_clusters), size)
    p = 1.0 / (1.0 + np.exp(-(math.log(rate / (1 - rate)) + rng.normal(0, 1, n_clusters))))
    y = (rng.random(task.size) < p[task]).astype(float)
    f = np.where(rng.random(task.size) < accuracy, y, 1.0 - y)
    labelled = rng.random(task.size) < share
    return pl.DataFrame(
        {
            "task": task,
            "stratum": task % 2,
            "judge": f,
            "gold": pl.Series(np.where(labelled, y, np.nan)).fill_nan(None),
        }
    )


def partials(units: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    return stats.judged_partials(units, by=by, judge="judge", gold="gold").collect()


def one_row(frame: pl.DataFrame, **kwargs: object) -> dict:
    return stats.judged_cells(frame, **kwargs).row(0, named=True)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the reference: ppi_py


@pytest.mark.parametrize("seed", range(4))
def test_unclustered_interval_equals_ppi_python(seed: int) -> None:
    ppi = pytest.importorskip("ppi_py")
    units = judged_units(1500, 1, share=0.1 + 0.05 * seed, seed=seed)
    row = one_row(partials(units, ["task"]), cells=[], cluster="task", ci_method="ppi++")
    y, f = units["gold"].to_numpy(), units["judge"].to_numpy()
    lab = ~np.isnan(y)
    for lam in (row["lam"], 0.0, 0.5, 1.0):
        ours = one_row(
            partials(units, ["task"]), cells=[], cluster="task", lam=lam, ci_method="ppi++"
        )
        low, high = ppi.ppi_mean_ci(y[lab], f[lab], f[~lab], alpha=0.05, lam=lam)
        point = ppi.ppi_mean_pointestimate(y[lab], f[lab], f[~lab], lam=lam)
        assert ours["estimate"] == pytest.approx(float(np.squeeze(point)), abs=1e-9)
        assert ours["ci_low"] == pytest.approx(float(low[0]), abs=1e-6)
        assert ours["ci_high"] == pytest.approx(float(high[0]), abs=1e-6)
    assert row["ci_method"] == "ppi++"
    # our default is ppi_mean_ci's default interval: its λ (the judge's variance pooled over
    # both arms, n − 1), its variance, its z
    default_low, default_high = ppi.ppi_mean_ci(y[lab], f[lab], f[~lab], alpha=0.05)
    theta1 = float(np.squeeze(ppi.ppi_mean_pointestimate(y[lab], f[lab], f[~lab], lam=1)))
    lam_ppi = float(
        ppi.ppi._calc_lam_glm(
            y[lab] - theta1, f[lab] - theta1, f[~lab] - theta1, np.eye(1), clip=True
        )
    )
    assert row["lam"] == pytest.approx(lam_ppi, abs=1e-12)
    assert row["ci_low"] == pytest.approx(float(default_low[0]), abs=1e-6)
    assert row["ci_high"] == pytest.approx(float(default_high[0]), abs=1e-6)


@pytest.mark.parametrize(
    ("size", "method"), [(5, "ppi++"), (5, "auto"), (1, "auto"), (1, "ppi++-logit")]
)
def test_tuned_lambda_never_widens_the_wald_interval(size: int, method: str) -> None:
    """λ̂ minimises the variance the interval reports, v(λ̂) ≤ v(λ) for every λ: with clusters,
    and in every method but ``ppi++`` on unit clusters (ppi_py's own λ, tested above)."""
    part = partials(judged_units(1000 // size, size, share=0.3, seed=21), ["task"])
    tuned = one_row(part, cells=[], cluster="task", ci_method=method)
    assert 0.0 < tuned["lam"] < 1.0
    for lam in np.linspace(0.0, 1.0, 21):
        fixed = one_row(part, cells=[], cluster="task", ci_method=method, lam=float(lam))
        assert tuned["std_error"] <= fixed["std_error"] * (1 + 1e-12)


# ---------------------------------------------------------------- hand-computed, clustered


def cluster_reference(units: pl.DataFrame, lam: float) -> tuple[float, float]:
    """PPI and its cluster-linearised standard error (CR1), written out from the unit rows."""
    y = units["gold"].to_numpy()
    f = units["judge"].to_numpy()
    task = units["task"].to_numpy()
    lab = ~np.isnan(y)
    tasks = np.unique(task)
    k = tasks.size
    y_bar, fl_bar, fu_bar = y[lab].mean(), f[lab].mean(), f[~lab].mean()
    theta = y_bar - lam * fl_bar + lam * fu_bar
    psi = []
    for t in tasks:
        here = task == t
        rect = (y[here & lab] - lam * f[here & lab]) - (y_bar - lam * fl_bar)
        judge = f[here & ~lab] - fu_bar
        psi.append(rect.sum() / (lab.sum() / k) + lam * judge.sum() / ((~lab).sum() / k))
    # clusters of several units: the CR1 factor K / (K − 1)
    return theta, math.sqrt(np.sum(np.square(psi)) / k**2 * k / (k - 1))


@pytest.mark.parametrize("lam", [0.0, 0.4, 1.0])
def test_clustered_variance_is_the_cluster_linearisation(lam: float) -> None:
    units = judged_units(40, 6, seed=3)
    row = one_row(partials(units, ["task"]), cells=[], cluster="task", lam=lam, ci_method="ppi++")
    theta, se = cluster_reference(units, lam)
    assert row["estimate"] == pytest.approx(theta, rel=1e-12)
    assert row["std_error"] == pytest.approx(se, rel=1e-10)
    # ... and a t quantile with (labelled clusters − 1) degrees of freedom
    t = scipy_stats.t.ppf(0.975, row["n_labelled_clusters"] - 1)
    assert row["ci_low"] == pytest.approx(theta - t * se, rel=1e-10)
    assert row["gold_drawn_by"] == "unit"


def test_tuned_lambda_minimises_the_variance() -> None:
    units = judged_units(60, 5, seed=4)
    row = one_row(partials(units, ["task"]), cells=[], cluster="task", ci_method="ppi++")
    grid = np.linspace(0, 1, 101)
    ses = [cluster_reference(units, lam)[1] for lam in grid]
    assert row["std_error"] <= min(ses) + 1e-12
    assert row["std_error"] <= row["gold_ci_high"] - row["gold_estimate"]


def test_gold_by_cluster_is_recognised() -> None:
    units = judged_units(81, 4, share=1.0, seed=5).with_columns(
        pl.when(pl.col("task") % 3 == 0).then(pl.col("gold")).alias("gold")
    )
    row = one_row(partials(units, ["task"]), cells=[], cluster="task")
    assert row["gold_drawn_by"] == "cluster"
    assert row["n_labelled_clusters"] == 27
    _, se = cluster_reference(units, row["lam"])
    assert row["std_error"] == pytest.approx(se, rel=1e-10)


def test_logit_interval_by_hand_and_inverts_its_test() -> None:
    units = judged_units(1500, 1, rate=0.05, share=0.3, seed=14)
    part = partials(units, ["task"])
    row = one_row(part, cells=[], cluster="task", ci_method="ppi++-logit", null=0.03)
    wald = one_row(part, cells=[], cluster="task", ci_method="ppi++", lam=row["lam"], null=0.03)
    assert (row["ci_method"], row["test"]) == ("ppi++-logit", "wald-logit")
    theta, se = wald["estimate"], wald["std_error"]
    z = scipy_stats.norm.ppf(0.975)
    logit = math.log(theta / (1 - theta))
    half = z * se / (theta * (1 - theta))
    assert row["estimate"] == theta
    assert row["ci_low"] == pytest.approx(1 / (1 + math.exp(-(logit - half))), rel=1e-12)
    assert row["ci_high"] == pytest.approx(1 / (1 + math.exp(-(logit + half))), rel=1e-12)
    assert 0.0 < row["ci_low"] < theta < row["ci_high"] < 1.0
    statistic = abs(logit - math.log(0.03 / 0.97)) / (se / (theta * (1 - theta)))
    assert row["p_value"] == pytest.approx(2 * scipy_stats.norm.sf(statistic), rel=1e-9)
    for null in np.linspace(0.01, 0.12, 23):  # θ0 outside exactly when p < 0.05
        p = one_row(part, cells=[], cluster="task", ci_method="ppi++-logit", null=float(null))[
            "p_value"
        ]
        assert (p < 0.05) == (not row["ci_low"] <= null <= row["ci_high"])


@pytest.mark.parametrize(("units_per_task", "seed"), [(1, 14), (10, 15)])
def test_rate_default_is_clopper_pearson_on_the_effective_sample(
    units_per_task: int, seed: int
) -> None:
    """auto on binary gold: n* = θ(1 − θ)/se² · (z/q)², capped at N; Clopper–Pearson on x* = θn*."""
    units = judged_units(1500 // units_per_task, units_per_task, rate=0.08, share=0.3, seed=seed)
    part = partials(units, ["task"])
    row = one_row(part, cells=[], cluster="task", null=0.05)
    # the Wald row at the same λ: its estimate and standard error
    wald = one_row(part, cells=[], cluster="task", ci_method="ppi++", lam=row["lam"], null=0.05)
    assert (row["ci_method"], row["test"]) == ("ppi++-cp", "exact-binomial")
    theta, se = wald["estimate"], wald["std_error"]
    z = scipy_stats.norm.ppf(0.975)
    # one unit per cluster: PPI++'s normal quantile; clusters: t with labelled clusters − 1 df
    q = z if units_per_task == 1 else scipy_stats.t.ppf(0.975, row["n_labelled_clusters"] - 1)
    n_eff = min(theta * (1 - theta) / se**2 * (z / q) ** 2, row["n"])
    x_eff = theta * n_eff
    assert row["estimate"] == theta
    assert row["ci_low"] == pytest.approx(
        scipy_stats.beta.ppf(0.025, x_eff, n_eff - x_eff + 1), rel=1e-9
    )
    assert row["ci_high"] == pytest.approx(
        scipy_stats.beta.ppf(0.975, x_eff + 1, n_eff - x_eff), rel=1e-9
    )
    for null in np.linspace(0.02, 0.16, 29):  # θ0 outside exactly when p < 0.05
        p = one_row(part, cells=[], cluster="task", null=float(null))["p_value"]
        assert (p < 0.05) == (not row["ci_low"] <= null <= row["ci_high"])


def test_gold_only_interval_is_korn_graubard_of_the_labelled_units() -> None:
    units = judged_units(200, 5, rate=0.2, share=0.3, seed=16)
    row = one_row(partials(units, ["task"]), cells=[], cluster="task")
    labelled = (
        units.filter(pl.col("gold").is_not_null())
        .group_by("task")
        .agg(pl.col("gold").sum().alias("y"), pl.len().alias("m"))
    )
    reference = stats.rate_cells(
        labelled, cells=[], numerator="y", denominator="m", ci_method="korn-graubard"
    ).row(0, named=True)
    assert row["gold_ci_method"] == "korn-graubard"
    assert row["gold_estimate"] == pytest.approx(reference["estimate"], rel=1e-12)
    assert row["gold_ci_low"] == pytest.approx(reference["ci_low"], rel=1e-9)
    assert row["gold_ci_high"] == pytest.approx(reference["ci_high"], rel=1e-9)


# ---------------------------------------------------------------- invariants


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), split=st.integers(1, 4))
def test_row_order_and_split_partials_do_not_matter(seed: int, split: int) -> None:
    units = judged_units(30, 4, share=0.5, seed=seed).with_columns(
        (pl.int_range(pl.len()) % split).alias("part")
    )

    def cells(part: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
        # a small draw may fall back to the gold-only interval, with its warning: the same
        # warnings, like the same numbers, whatever the row order or the split
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RecoveryLabWarning)
            out = stats.judged_cells(part, cells=[], cluster="task")
        return out, [str(w.message) for w in caught]

    whole, warned = cells(partials(units, ["task"]))
    pieces = partials(units, ["task", "part"]).sample(fraction=1.0, shuffle=True, seed=seed)
    parted, warned_parted = cells(pieces.drop("part"))
    renamed, warned_renamed = cells(
        partials(units, ["task"]).with_columns((pl.col("task") * 7 + 3).cast(str))
    )
    assert warned_parted == warned == warned_renamed
    for other in (parted, renamed):
        for name in ("estimate", "ci_low", "ci_high", "lam", "gold_estimate", "judge_estimate"):
            expected = whole[name][0]  # null where the fallback has no such number (lam)
            assert other[name][0] == (
                None if expected is None else pytest.approx(expected, rel=1e-9, abs=1e-12)
            )


def test_cells_are_computed_alone() -> None:
    units = judged_units(240, 4, seed=6).with_columns(cell=pl.col("task") % 3)
    together = stats.judged_cells(partials(units, ["cell", "task"]), cells=["cell"], cluster="task")
    for cell in range(3):
        alone = one_row(
            partials(units.filter(pl.col("cell") == cell), ["task"]), cells=[], cluster="task"
        )
        row = together.filter(pl.col("cell") == cell).row(0, named=True)
        assert row["ci_low"] == pytest.approx(alone["ci_low"], rel=1e-12)
        assert row["lam"] == pytest.approx(alone["lam"], rel=1e-12)


# ---------------------------------------------------------------- strata


def test_one_stratum_equals_no_strata_and_strata_weight_by_units() -> None:
    units = judged_units(60, 4, seed=7)
    plain = one_row(partials(units, ["task"]), cells=[], cluster="task")
    one = one_row(
        partials(units.with_columns(pl.lit("a").alias("s")), ["task", "s"]),
        cells=[],
        cluster="task",
        strata=["s"],
    )
    assert one["ci_low"] == pytest.approx(plain["ci_low"], rel=1e-12)
    # strata with a fixed λ: the estimate is Σ_h W_h θ_h by hand
    two = one_row(
        partials(units, ["task", "stratum"]), cells=[], cluster="task", strata=["stratum"], lam=1.0
    )
    expected = 0.0
    for _, part in units.group_by("stratum"):
        lab = part.filter(pl.col("gold").is_not_null())
        unl = part.filter(pl.col("gold").is_null())
        theta = lab["gold"].mean() - lab["judge"].mean() + unl["judge"].mean()
        expected += part.height / units.height * theta
    assert two["estimate"] == pytest.approx(expected, rel=1e-12)
    assert two["lam"] is None  # one λ per stratum
    assert "within strata (stratum)" in two["assumption"]


def test_stratum_without_gold_gives_a_null_estimate_and_a_warning() -> None:
    units = judged_units(60, 4, seed=8).with_columns(
        pl.when(pl.col("stratum") == 1).then(None).otherwise(pl.col("gold")).alias("gold")
    )
    with pytest.warns(RecoveryLabWarning, match="a stratum with units but no gold label"):
        row = one_row(
            partials(units, ["task", "stratum"]), cells=[], cluster="task", strata=["stratum"]
        )
    assert row["estimate"] is None
    assert row["judge_estimate"] is not None


# ---------------------------------------------------------------- the fallback


def test_too_few_labels_fall_back_to_gold_only_korn_graubard() -> None:
    units = judged_units(8, 4, share=0.5, seed=9)
    message = (
        "judged outcome: 1 cells have fewer than 20 labelled clusters, 30 labelled units or 5 "
        "labelled events, non-events and judge-gold disagreements (cell all), too few for the "
        "normal approximation of "
        "PPI++; they show the gold-only Korn–Graubard interval instead (ci_method says which)."
    )
    with pytest.warns(RecoveryLabWarning, match=re.escape(message)):
        row = one_row(partials(units, ["task"]), cells=[], cluster="task", null=0.5)
    gold = (
        units.filter(pl.col("gold").is_not_null())
        .group_by("task")
        .agg(pl.col("gold").sum(), pl.len().alias("m"))
    )
    exact = stats.rate_interval(gold["gold"].to_numpy(), gold["m"].to_numpy())
    assert (row["ci_method"], row["test"]) == ("korn-graubard", "exact-binomial")
    assert (row["estimate"], row["ci_low"], row["ci_high"]) == pytest.approx(
        (exact.estimate, exact.low, exact.high), rel=1e-12
    )
    assert row["std_error"] is None
    assert row["lam"] is None
    assert (row["p_value"] < 0.05) == (not row["ci_low"] <= 0.5 <= row["ci_high"])


def test_no_gold_event_is_not_a_zero_width_interval() -> None:
    units = judged_units(60, 4, rate=0.02, share=0.3, seed=10).with_columns(
        pl.when(pl.col("gold").is_not_null()).then(0.0).alias("gold")
    )
    with pytest.warns(RecoveryLabWarning):
        row = one_row(partials(units, ["task"]), cells=[], cluster="task")
    assert row["ci_low"] == 0.0 < row["ci_high"]


# ---------------------------------------------------------------- paired


def paired_units(seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    task = np.repeat(np.arange(80), 3)
    y0 = (rng.random(task.size) < 0.4).astype(float)
    y1 = np.where(rng.random(task.size) < 0.3, 1.0 - y0, y0)
    f0 = np.where(rng.random(task.size) < 0.9, y0, 1 - y0)
    f1 = np.where(rng.random(task.size) < 0.9, y1, 1 - y1)
    lab = rng.random(task.size) < 0.4

    def gold(values: np.ndarray) -> pl.Series:
        return pl.Series(np.where(lab, values, np.nan)).fill_nan(None)

    return pl.DataFrame({"task": task, "f0": f0, "f1": f1, "g0": gold(y0), "g1": gold(y1)})


def test_paired_effect_is_rescue_minus_harm_at_a_fixed_lambda() -> None:
    out = stats.judged_paired_cells(
        paired_units(), cells=[], cluster="task", judge=("f0", "f1"), gold=("g0", "g1"), lam=1.0
    )
    assert out["outcome"].to_list() == ["rescue", "harm", "effect"]
    rescue, harm, effect = out["estimate"].to_list()
    assert effect == pytest.approx(rescue - harm, abs=1e-12)
    assert out["judge_estimate"][2] == pytest.approx(
        out["judge_estimate"][0] - out["judge_estimate"][1]
    )
    assert out["ci_method"].to_list() == ["ppi++-cp", "ppi++-cp", "mover"]
    for row in out.iter_rows(named=True):  # the interval inverts its test of 0
        assert (row["p_value"] < 0.05) == (not row["ci_low"] <= 0.0 <= row["ci_high"])


def test_paired_pair_with_one_gold_branch_is_unlabelled() -> None:
    units = paired_units().with_columns(pl.lit(None, pl.Float64).alias("g1"))
    with pytest.warns(RecoveryLabWarning, match="no gold label"):
        out = stats.judged_paired_cells(
            units, cells=[], cluster="task", judge=("f0", "f1"), gold=("g0", "g1")
        )
    assert out["n_labelled"].to_list() == [0, 0, 0]


# ---------------------------------------------------------------- judge error, Rogan–Gladen


def test_judge_error_counts_are_clopper_pearson_with_one_unit_per_cluster() -> None:
    units = judged_units(400, 1, share=0.5, seed=11)
    out = stats.judge_error_cells(partials(units, ["task"]), cells=[], cluster="task")
    lab = units.filter(pl.col("gold").is_not_null())
    positives = lab.filter(pl.col("gold") == 1)
    negatives = lab.filter(pl.col("gold") == 0)
    counts = {
        "sensitivity": (int(positives["judge"].sum()), positives.height),
        "specificity": (int((1 - negatives["judge"]).sum()), negatives.height),
        "agreement": (int((lab["judge"] == lab["gold"]).sum()), lab.height),
    }
    assert out["measure"].to_list() == list(stats.JUDGE_MEASURES)
    for row in out.iter_rows(named=True):
        x, n = counts[row["measure"]]
        ci = scipy_stats.binomtest(x, n).proportion_ci(0.95, method="exact")
        assert row["n"] == n
        assert row["estimate"] == pytest.approx(x / n, rel=1e-12)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-10)


def test_rogan_gladen_by_hand_and_flagged_outside() -> None:
    units = judged_units(200, 1, share=0.0, seed=12)
    part = partials(units, ["task"])
    out = stats.rogan_gladen_cells(part, cells=[], cluster="task", sensitivity=0.9, specificity=0.8)
    row = out.row(0, named=True)
    q = units["judge"].mean()
    assert row["estimate"] == pytest.approx((q + 0.8 - 1) / 0.7, rel=1e-12)
    judge = stats.rate_interval(units["judge"].to_numpy(), np.ones(units.height))
    assert row["ci_low"] == pytest.approx((judge.low + 0.8 - 1) / 0.7, rel=1e-12)
    assert row["outside_unit_interval"] is False
    with pytest.warns(RecoveryLabWarning, match=r"outside \[0, 1\]"):
        out = stats.rogan_gladen_cells(
            part, cells=[], cluster="task", sensitivity=0.3, specificity=0.99
        )
    assert out["outside_unit_interval"][0] is True
    assert out["estimate"][0] > 1.0  # shown as computed, never clipped
    with pytest.raises(ParameterError, match="must be better than chance"):
        stats.rogan_gladen_cells(part, cells=[], cluster="task", sensitivity=0.5, specificity=0.5)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            pl.when(pl.col("task") < 3).then(None).otherwise(pl.col("judge")).alias("judge"),
            "units: the judge column `judge` has 3 nulls; the judge must score every unit "
            "(gold labels may be missing, verdicts may not).",
        ),
        (
            pl.when(pl.col("task") < 2).then(2.0).otherwise(pl.col("gold")).alias("gold"),
            "units: the gold column `gold` has 2 values outside {0, 1} (2.0); a gold label is "
            "0/1, true/false, or null where not labelled.",
        ),
        (
            pl.lit(None, pl.Float64).alias("gold"),
            "units: the gold column `gold` is null on all 50 rows; PPI needs human labels on a "
            "random subset. Hint: without gold labels, give the judge's sensitivity and "
            "specificity for a Rogan–Gladen correction.",
        ),
        (
            (pl.col("judge") * 3).alias("judge"),
            "units: the judge column `judge` has",
        ),
    ],
)
def test_bad_judge_and_gold_are_one_clear_error(change: pl.Expr, message: str) -> None:
    units = judged_units(50, 1, seed=13).with_columns(change)
    if units["judge"].max() == 3:
        message = f"{message} {int((units['judge'] > 1).sum())} values outside [0, 1]"
    with pytest.raises(SchemaError, match=re.escape(message)):
        stats.check_judged_units(units, judge="judge", gold="gold")


def test_bad_parameters() -> None:
    part = partials(judged_units(30, 2), ["task"])
    with pytest.raises(ParameterError, match="parameter `lam` is 2"):
        stats.judged_cells(part, cells=[], cluster="task", lam=2)
    with pytest.raises(ParameterError, match="parameter `value_range`"):
        stats.judged_cells(part, cells=[], cluster="task", value_range=(1, 0))
    with pytest.raises(ParameterError, match="column `gold_square` is missing"):
        stats.judged_cells(part.drop("gold_square"), cells=[], cluster="task")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert stats.judged_cells(part.clear(), cells=[], cluster="task").height == 0


# ---------------------------------------------------------------- planning


def test_gold_labels_needed_by_hand_and_by_simulation() -> None:
    plan = stats.gold_labels_needed(0.03, rate=0.3, sensitivity=0.9, specificity=0.9, units=5000)
    q = 0.3 * 0.9 + 0.7 * 0.1
    rho2 = 0.21 * 0.8**2 / (q * (1 - q))
    z = scipy_stats.norm.ppf(0.975)
    target = 0.03**2 / (z * z * 0.21)
    assert plan.labels == math.ceil((1 - rho2) / (target - rho2 / 5000))
    assert plan.labels_gold_only == math.ceil(1 / target)
    # the PPI++ interval with that many labels has about that half-width
    rng = np.random.default_rng(15)
    reps, n = 200, 5000
    y = (rng.random((reps, n)) < 0.3).astype(float)
    f = np.where(rng.random((reps, n)) < 0.9, y, 1 - y)
    labelled = np.argsort(rng.random((reps, n)), axis=1) < plan.labels
    units = pl.DataFrame(
        {
            "rep": np.repeat(np.arange(reps), n),
            "task": np.tile(np.arange(n), reps),
            "judge": f.ravel(),
            "gold": np.where(labelled, y, np.nan).ravel(),
        }
    ).with_columns(pl.col("gold").fill_nan(None))
    out = stats.judged_cells(
        partials(units, ["rep", "task"]), cells=["rep"], cluster="task", ci_method="ppi++"
    )
    half = ((out["ci_high"] - out["ci_low"]) / 2).mean()
    assert half == pytest.approx(0.03, rel=0.05)
    assert (
        stats.gold_labels_needed(
            0.005, rate=0.3, sensitivity=0.9, specificity=0.9, units=5000
        ).labels
        is None
    )
    with pytest.raises(ParameterError, match="better than chance"):
        stats.gold_labels_needed(0.03, rate=0.3, sensitivity=0.5, specificity=0.5, units=100)
