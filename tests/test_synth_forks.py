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


# --- judged columns (issue 40) ---------------------------------------------------------------

JUDGED = {
    "judge_sensitivity": {"clean": 0.95, "*": 0.85},
    "judge_specificity": {"stale2": 0.7, "*": 0.9},
    "gold_share": 0.25,
}


def test_judged_columns_leave_the_other_columns_unchanged() -> None:
    plain = synth.generate("forks", 300, seed=9, unpaired_rate=0.1, mismatch_rate=0.05)["forks"]
    judged = synth.generate("forks", 300, seed=9, unpaired_rate=0.1, mismatch_rate=0.05, **JUDGED)[
        "forks"
    ]
    assert judged.columns == [*plain.columns, "judge", "gold"]
    assert_frame_equal(judged.drop("judge", "gold"), plain)
    assert judged.schema["judge"] == judged.schema["gold"] == pl.Boolean
    assert judged["judge"].null_count() == 0
    # gold is the true outcome, on every row of a labelled task and on none of the others
    labelled = judged.filter(pl.col("gold").is_not_null())
    assert (labelled["gold"] == labelled["success"]).all()
    per_task = judged.group_by("task_id").agg(pl.col("gold").is_null().n_unique().alias("kinds"))
    assert per_task["kinds"].max() == 1
    only_judge = synth.generate("forks", 300, seed=9, judge_specificity=0.5)["forks"]
    assert only_judge.columns[-1] == "judge"
    positives = only_judge.filter(pl.col("success"))
    assert (positives["judge"] == positives["success"]).all()  # sensitivity defaults to 1.0


def test_judge_error_and_gold_share_match_the_settings() -> None:
    forks = synth.generate("forks", 4_000, seed=12, **JUDGED)["forks"]
    rates = (
        forks.group_by("condition", "success")
        .agg((pl.col("judge") == pl.col("success")).mean().alias("right"), pl.len())
        .sort("condition", "success")
    )
    for condition, success, right, n in rates.iter_rows():
        table = JUDGED["judge_sensitivity" if success else "judge_specificity"]
        planted = table.get(condition, table["*"])
        assert right == pytest.approx(planted, abs=4 * np.sqrt(planted * (1 - planted) / n))
    tasks = forks.group_by("task_id").agg(pl.col("gold").is_not_null().any())
    assert tasks["gold"].mean() == pytest.approx(0.25, abs=4 * np.sqrt(0.25 * 0.75 / 4_000))


def test_summarize_judged_recovers_the_planted_effect() -> None:
    grid = {"conditions": ["stale2"], "delays": [0], "methods": ["refresh"]}
    forks = synth.generate(
        "forks",
        6_000,
        seed=21,
        **grid,
        judge_sensitivity=0.85,
        judge_specificity=0.8,
        gold_share=0.3,
    )["forks"]
    out = paired.summarize_judged(forks, judge="judge", gold="gold")
    truth = _forks.truth(**grid).row(0, named=True)
    planted = {
        "rescue": truth["rescue_rate"],
        "harm": truth["harm_rate"],
        "effect": truth["effect"],
    }
    for row in out.iter_rows(named=True):
        assert row["ci_method"] == ("mover" if row["outcome"] == "effect" else "ppi++-cp")
        assert row["ci_low"] <= planted[row["outcome"]] <= row["ci_high"], row
        # narrower than the gold-only interval from the same labels
        assert row["ci_high"] - row["ci_low"] <= row["gold_ci_high"] - row["gold_ci_low"]
    # the judge alone is biased: its rescue and harm rates miss the truth by far
    judge_only = dict(zip(out["outcome"], out["judge_estimate"], strict=True))
    assert abs(judge_only["harm"] - planted["harm"]) > 0.05


def test_judged_parameter_errors() -> None:
    with pytest.raises(ParameterError) as info:
        synth.generate("forks", 5, judge_sensitivity={"clean": 0.9})
    assert str(info.value) == (
        "synth forks: parameter `judge_sensitivity` has no rate for condition(s) stale1, stale2, "
        "missing; give one per condition or a default under '*'."
    )
    with pytest.raises(ParameterError) as info:
        synth.generate("forks", 5, judge_specificity=1.5)
    assert str(info.value) == (
        "synth forks: parameter `judge_specificity` has the rate 1.5; it must be in [0, 1]."
    )
    with pytest.raises(ParameterError) as info:
        synth.generate("forks", 5, gold_share=0.0)
    assert str(info.value) == "synth forks: parameter `gold_share` is 0.0; it must be in (0, 1]."


def test_cli_writes_judged_columns(cli, tmp_path) -> None:
    out = tmp_path / "judged"
    result = cli(
        "synth", "forks", "--tasks", 40, "--seed", 4, "--out", out, "--quiet",
        "--judge-sensitivity", "clean=0.95,*=0.85", "--judge-specificity", "0.9",
        "--gold-share", "0.25",
    )  # fmt: skip
    assert result.code == 0, result.err
    written = pl.read_parquet(out / "forks")
    expected = synth.generate("forks", 40, seed=4, **JUDGED | {"judge_specificity": 0.9})["forks"]
    assert_frame_equal(written, expected)
    bad = cli("synth", "forks", "--tasks", 5, "--out", out, "--judge-sensitivity", "high")
    assert bad.code == 2
    assert bad.err.strip().splitlines() == [
        "recoverylab synth: error: --judge-sensitivity is 'high'; give a rate (0.9) or rates per "
        "condition (clean=0.9,*=0.8)."
    ]
    wrong_table = cli("synth", "goal", "--tasks", 5, "--out", out, "--gold-share", "0.3")
    assert wrong_table.code == 2
    assert "apply to the forks table only, not 'goal'" in wrong_table.err
