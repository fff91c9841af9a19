"""Tests of the synthetic forks generator (recoverylab.synth._forks): shape, truth, options."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from recoverylab import paired, synth
from recoverylab._errors import ParameterError
from recoverylab.schema import validate
from recoverylab.synth import _forks


def test_fifty_two_rows_per_task_without_carry_forward() -> None:
    forks = synth.generate("forks", 30, seed=3, end_hazard=0.0)["forks"]
    assert forks.height == 30 * 52
    assert forks.schema == pl.Schema(
        {
            "task_id": pl.String,
            "condition": pl.String,
            "method": pl.String,
            "delay": pl.Int64,
            "success": pl.Boolean,
            "prefix_hash": pl.String,
            "perturb_action": pl.Int64,
            "end_action": pl.Int64,
            "factual_success": pl.Boolean,
        }
    )
    validate(forks, "forks").collect()
    per_task = forks.group_by("task_id").len()
    assert per_task["len"].unique().to_list() == [52]
    none = forks.filter(pl.col("method") == "none")
    assert none.height == 30 * 4
    assert none["delay"].null_count() == none.height
    assert none["end_action"].null_count() == 0
    assert forks.filter(pl.col("method") != "none")["end_action"].null_count() == 30 * 48
    assert sorted(forks["method"].unique()) == ["content_ablated", "none", "refresh", "replan_only"]
    assert sorted(forks["delay"].drop_nulls().unique()) == [0, 1, 2, 4]
    # the clean no-recovery branch replays the factual run
    clean = none.filter(pl.col("condition") == "clean")
    assert (clean["success"] == clean["factual_success"]).all()


def test_options_choose_the_grid() -> None:
    forks = synth.generate(
        "forks",
        10,
        seed=1,
        conditions=["clean", "noisy"],
        delays=[0, 3],
        methods=["refresh"],
        end_hazard=0.0,
    )["forks"]
    assert forks.height == 10 * 2 * (1 + 2)
    assert sorted(forks["condition"].unique()) == ["clean", "noisy"]
    assert sorted(forks["delay"].drop_nulls().unique()) == [0, 3]


def test_same_seed_same_rows_whatever_the_chunking(tmp_path) -> None:
    whole = synth.generate("forks", 25_000, seed=7)["forks"]
    again = synth.generate("forks", 25_000, seed=7)["forks"]
    assert_frame_equal(whole, again)
    written = synth.write("forks", tmp_path, 25_000, seed=7, chunk_units=10_000)
    assert len(written["forks"]) == 3
    assert_frame_equal(pl.read_parquet(written["forks"]), whole)
    other = synth.generate("forks", 100, seed=8)["forks"]
    assert not other.equals(whole.filter(pl.col("task_id") < "t0000100"))


def test_carried_points_have_no_recovery_row_and_pair_consistently() -> None:
    forks = synth.generate("forks", 2_000, seed=5, end_hazard=0.2)["forks"]
    none = forks.filter(pl.col("method") == "none").select(
        "task_id", "condition", "perturb_action", "end_action"
    )
    recovery = forks.filter(pl.col("method") != "none").join(
        none, on=["task_id", "condition"], suffix="_none"
    )
    # no recovery row at or after the end of the no-recovery run
    after = recovery.filter(
        pl.col("perturb_action_none") + pl.col("delay") >= pl.col("end_action_none")
    )
    assert after.height == 0
    pairs = paired.pairs(forks).collect()
    assert pairs.height == 2_000 * 4 * 4 * 3
    assert pairs.filter(pl.col("carried_forward") & (pl.col("y0") != pl.col("y1"))).height == 0
    share = pairs.group_by("delay").agg(pl.col("carried_forward").mean()).sort("delay")
    expected = [1 - 0.8**d for d in (0, 1, 2, 4)]
    assert share["carried_forward"].to_list() == pytest.approx(expected, abs=0.03)


def test_planted_exclusions() -> None:
    forks = synth.generate("forks", 5_000, seed=2, mismatch_rate=0.1, unpaired_rate=0.05)["forks"]
    counts = paired.exclusions(forks).collect().group_by("reason").agg(pl.col("rows").sum())
    counts = dict(counts.iter_rows())
    recovery_rows = forks.filter(pl.col("method") != "none").height
    assert counts["unpaired"] / recovery_rows == pytest.approx(0.05, abs=0.01)
    paired_rows = recovery_rows - counts["unpaired"]
    assert counts["prefix_mismatch"] / paired_rows == pytest.approx(0.1, abs=0.01)


def test_truth_table() -> None:
    truth = _forks.truth()
    assert truth.height == 48
    row = truth.filter(
        (pl.col("condition") == "stale2") & (pl.col("delay") == 2) & (pl.col("method") == "refresh")
    ).row(0, named=True)
    carried = 1 - 0.98**2
    rescue = (1 - carried) * 0.4 * 0.30 * 0.9**2
    harm = (1 - carried) * 0.6 * 0.06
    assert row["rescue_rate"] == pytest.approx(rescue)
    assert row["harm_rate"] == pytest.approx(harm)
    assert row["effect"] == pytest.approx(rescue - harm)
    assert row["recovery_rate"] == pytest.approx(0.6 + rescue - harm)
    factual = _forks.truth(cohort="factual_success").filter(pl.col("condition") == "clean")
    assert (factual["base_rate"] == 1.0).all()
    assert (factual["rescue_rate"] == 0.0).all()
    with pytest.raises(ParameterError, match=r"parameter `cohort` is 'all'"):
        _forks.truth(cohort="all")


@pytest.mark.parametrize("cohort", ["full", "factual_success"])
def test_summarize_recovers_the_planted_truth(cohort: str) -> None:
    forks = synth.generate("forks", 20_000, seed=11, mismatch_rate=0.02, unpaired_rate=0.02)
    got = paired.summarize(forks["forks"], cohort=cohort, n_resamples=2_000)
    truth = _forks.truth(cohort=cohort)
    joined = got.join(truth, on=["condition", "delay", "method"], suffix="_true")
    assert joined.height == 48
    # 48 cells: allow 4 standard errors (the 95% interval spans about 3.92)
    se = (joined["ci_high"] - joined["ci_low"]) / 3.92
    assert ((joined["effect"] - joined["effect_true"]).abs() <= 4 * se + 1e-9).all()
    inside = (joined["ci_low"] <= joined["effect_true"]) & (
        joined["effect_true"] <= joined["ci_high"]
    )
    assert inside.mean() >= 0.85
    rescue_rate = joined["rescue"] / joined["n"]
    assert (rescue_rate - joined["rescue_rate"]).abs().max() < 0.02
    carried = joined["carried_forward"] / joined["n"]
    assert (carried - joined["carried"]).abs().max() < 0.02


def test_parameter_errors() -> None:
    with pytest.raises(ParameterError) as info:
        synth.generate("forks", 5, methods=["none", "refresh"])
    assert str(info.value) == (
        "synth forks: parameter `methods` contains 'none'; `none` marks the no-recovery branch "
        "and is always generated."
    )
    with pytest.raises(ParameterError) as info:
        synth.generate("forks", 5, delays=[0, 0])
    assert str(info.value) == (
        "synth forks: parameter `delays` is [0, 0]; it must be a non-empty list without repeats."
    )
    with pytest.raises(ParameterError, match=r"parameter `delays` is \[-1\]; delays >= 0"):
        synth.generate("forks", 5, delays=[-1])
    with pytest.raises(ParameterError) as info:
        synth.generate("forks", 5, end_hazard=1.0)
    assert str(info.value) == "synth forks: parameter `end_hazard` is 1.0; it must be in [0, 1)."


def test_block_uses_only_its_generator() -> None:
    a = _forks.block(0, 50, np.random.default_rng(4))["forks"]
    b = _forks.block(0, 50, np.random.default_rng(4))["forks"]
    assert_frame_equal(a, b)
    shifted = _forks.block(100, 150, np.random.default_rng(4))["forks"]
    assert shifted["task_id"].min() == "t0000100"
