"""The judged paired effect: rescue − harm with a MOVER interval that inverts its p-value."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoverylab import stats
from recoverylab._errors import RecoveryLabWarning


def pairs(n_pairs: int, size: int, *, share: float, accuracy: float, seed: int) -> pl.DataFrame:
    """Pairs in clusters of ``size``: rescue 25 %, harm 8 %, both branches judged."""
    rng = np.random.default_rng(seed)
    task = np.arange(n_pairs) // size
    p = 1.0 / (1.0 + np.exp(-(-0.4 + rng.normal(0, 1, task.max() + 1))))
    y0 = (rng.random(n_pairs) < p[task]).astype(float)
    flip = rng.random(n_pairs) < np.where(y0 == 1, 0.08, 0.25)
    y1 = np.where(flip, 1.0 - y0, y0)

    def judged(y: np.ndarray) -> np.ndarray:
        return np.where(rng.random(n_pairs) < accuracy, y, 1.0 - y)

    labelled = rng.random(n_pairs) < share
    gold = {name: np.where(labelled, y, np.nan) for name, y in (("g0", y0), ("g1", y1))}
    return pl.DataFrame({"task": task, "f0": judged(y0), "f1": judged(y1), **gold}).with_columns(
        pl.col("g0", "g1").fill_nan(None)
    )


def effect_cells(units: pl.DataFrame, **options: object) -> pl.DataFrame:
    return stats.judged_paired_cells(
        units, cells=[], cluster="task", judge=("f0", "f1"), gold=("g0", "g1"), **options
    )


@pytest.mark.parametrize("lam", [0.0, 1.0])
def test_mover_of_wald_rates_is_the_wald_interval_of_the_difference(lam: float) -> None:
    """With Wald rates and a fixed λ the effect's influence is rescue's minus harm's: MOVER
    then gives exactly the Wald interval PPI++ computes on the per-pair difference."""
    units = pairs(3000, 5, share=0.3, accuracy=0.85, seed=3)
    out = effect_cells(units, ci_method="ppi++", lam=lam)
    assert out["ci_method"].to_list() == ["ppi++", "ppi++", "mover"]
    direct = stats.judged_cells(
        stats.judged_partials(
            units.with_columns(
                (pl.col("f1") - pl.col("f0")).alias("f"), (pl.col("g1") - pl.col("g0")).alias("g")
            ),
            by=["task"],
            judge="f",
            gold="g",
        ),
        cells=[],
        cluster="task",
        ci_method="ppi++",
        lam=lam,
        value_range=(-1.0, 1.0),
    ).row(0, named=True)
    effect = out.row(2, named=True)
    assert effect["estimate"] == pytest.approx(direct["estimate"], abs=1e-12)
    assert effect["std_error"] == pytest.approx(direct["std_error"], rel=1e-9)
    assert effect["ci_low"] == pytest.approx(direct["ci_low"], rel=1e-9)
    assert effect["ci_high"] == pytest.approx(direct["ci_high"], rel=1e-9)


def test_effect_is_rescue_minus_harm_with_the_mover_formula() -> None:
    units = pairs(3000, 5, share=0.3, accuracy=0.85, seed=4)
    out = effect_cells(units)
    rescue, harm, effect = out.iter_rows(named=True)
    assert (rescue["ci_method"], harm["ci_method"]) == ("ppi++-cp", "ppi++-cp")
    assert (effect["ci_method"], effect["test"]) == ("mover", "mover")
    assert effect["estimate"] == rescue["estimate"] - harm["estimate"]
    assert effect["gold_estimate"] == rescue["gold_estimate"] - harm["gold_estimate"]
    assert effect["judge_estimate"] == pytest.approx(
        rescue["judge_estimate"] - harm["judge_estimate"], abs=1e-12
    )
    # ρ back from the effect's standard error: Var = v_r + v_h − 2ρ se_r se_h
    se_r, se_h = rescue["std_error"], harm["std_error"]
    rho = (se_r**2 + se_h**2 - effect["std_error"] ** 2) / (2 * se_r * se_h)
    assert -1.0 < rho < 0.0  # rescue and harm of one pair exclude each other
    r, h = rescue["estimate"], harm["estimate"]
    down = (r - rescue["ci_low"], harm["ci_high"] - h)
    up = (rescue["ci_high"] - r, h - harm["ci_low"])
    low = r - h - np.sqrt(down[0] ** 2 + down[1] ** 2 - 2 * rho * down[0] * down[1])
    high = r - h + np.sqrt(up[0] ** 2 + up[1] ** 2 - 2 * rho * up[0] * up[1])
    assert effect["ci_low"] == pytest.approx(low, rel=1e-9)
    assert effect["ci_high"] == pytest.approx(high, rel=1e-9)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    share=st.sampled_from([0.1, 0.3, 0.6]),
    size=st.sampled_from([1, 4]),
    confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_effect_p_value_inverts_its_interval(
    seed: int, share: float, size: int, confidence: float
) -> None:
    """0 lies outside the effect's interval exactly when p < 1 − confidence, fallback or not."""
    units = pairs(400, size, share=share, accuracy=0.8, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RecoveryLabWarning)  # a small draw may fall back
        effect = effect_cells(units, confidence=confidence).row(2, named=True)
    if effect["p_value"] is None:
        return
    outside = not effect["ci_low"] <= 0.0 <= effect["ci_high"]
    p, alpha = effect["p_value"], 1.0 - confidence
    if abs(p - alpha) > 1e-6 * alpha:  # a bound on 0 itself is a tie either way
        assert (p < alpha) == outside


def test_a_fallback_warning_names_the_outcome_that_fell_back() -> None:
    """Rescue and harm warn apart; each names its cells with their outcome."""
    units = pairs(600, 1, share=0.1, accuracy=0.8, seed=5).with_columns(
        pl.lit("stale2").alias("condition")
    )
    with pytest.warns(RecoveryLabWarning, match=r"\(cell stale2/harm\)"):
        out = stats.judged_paired_cells(
            units, cells=["condition"], cluster="task", judge=("f0", "f1"), gold=("g0", "g1")
        )
    assert out.filter(pl.col("outcome") == "harm")["ci_method"].item() == "korn-graubard"
