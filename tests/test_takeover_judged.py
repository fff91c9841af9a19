"""Tests of ``takeover.summarize_judged`` (issue 40): judged pass@1 and EAR, PPI++, Rogan–Gladen."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from recoverylab import synth, takeover
from recoverylab._errors import ParameterError, RecoveryLabWarning, SchemaError


@pytest.fixture(scope="module")
def tables() -> dict[str, pl.DataFrame]:
    found = synth.generate("takeover", 60, seed=5)
    attempts = found["attempts"]
    rng = np.random.default_rng(5)
    right = pl.Series(rng.random(attempts.height) < 0.85)
    found["attempts"] = attempts.with_columns(
        judge=pl.when(right).then(pl.col("passed")).otherwise(~pl.col("passed")).cast(pl.Int8),
        gold=pl.col("passed"),
    )
    return found


def eligible_means(tables: dict[str, pl.DataFrame], column: str) -> pl.DataFrame:
    ok = tables["states"].filter(pl.col("replay_ok") & pl.col("expected_ok"))
    return (
        tables["attempts"]
        .join(ok.select("state_id", "depth"), on="state_id")
        .group_by("agent", "depth")
        .agg(pl.col(column).cast(pl.Float64).mean().alias("expected"))
    )


def test_gold_everywhere_is_the_pass_rate_and_judge_only_the_verdicts(tables: dict) -> None:
    out = takeover.summarize_judged(
        tables["states"], tables["attempts"], judge="judge", gold="gold"
    )
    gold = out.join(eligible_means(tables, "passed"), on=["agent", "depth"])
    assert gold.height == out.height > 0
    assert (gold["estimate"] - gold["expected"]).abs().max() < 1e-12
    judged = out.join(eligible_means(tables, "judge"), on=["agent", "depth"])
    assert (judged["judge_estimate"] - judged["expected"]).abs().max() < 1e-12
    assert set(out["labelled_share"]) == {1.0}


def test_rogan_gladen_by_hand(tables: dict) -> None:
    # rare passes: some lower bounds fall below 0, shown as computed and flagged
    with pytest.warns(RecoveryLabWarning, match=r"outside \[0, 1\]"):
        out = takeover.summarize_judged(
            tables["states"],
            tables["attempts"].drop("gold"),
            judge="judge",
            judge_sensitivity=0.85,
            judge_specificity=0.85,
        )
    assert (
        out["outside_unit_interval"].to_list()
        == ((out["ci_low"] < 0) | (out["ci_high"] > 1) | (out["estimate"] < 0)).to_list()
    )
    joined = out.join(eligible_means(tables, "judge"), on=["agent", "depth"])
    expected = (joined["expected"] + 0.85 - 1) / 0.7
    assert (joined["estimate"] - expected).abs().max() < 1e-12
    assert set(out["ci_method"]) == {"rogan-gladen"}


def test_judged_awareness_is_ear(tables: dict) -> None:
    attempts = tables["attempts"].with_columns(
        judge=pl.col("aware").cast(pl.Int8), gold=pl.col("aware")
    )
    # a judge that never errs leaves no disagreement to correct with: the gold-only interval
    with pytest.warns(RecoveryLabWarning, match="judge-gold disagreements"):
        out = takeover.summarize_judged(
            tables["states"], attempts, judge="judge", gold="gold", outcome="aware"
        )
    assert set(out["ci_method"]) == {"korn-graubard"}
    joined = out.join(
        eligible_means(tables | {"attempts": attempts}, "aware"), on=["agent", "depth"]
    )
    assert (joined["estimate"] - joined["expected"]).abs().max() < 1e-12


def test_bad_judged_takeover_input(tables: dict) -> None:
    with pytest.raises(ParameterError, match=re.escape("needs `gold` (human labels")):
        takeover.summarize_judged(tables["states"], tables["attempts"], judge="judge")
    with pytest.raises(ParameterError, match="not both"):
        takeover.summarize_judged(
            tables["states"],
            tables["attempts"],
            judge="judge",
            gold="gold",
            judge_sensitivity=0.9,
            judge_specificity=0.9,
        )
    bad = tables["attempts"].with_columns(gold=pl.lit(None, pl.Boolean))
    with pytest.raises(SchemaError, match="attempts: the gold column `gold` is null on all"):
        takeover.summarize_judged(tables["states"], bad, judge="judge", gold="gold")


def test_cli_takeover_judged_table_and_bad_input(
    tables: dict, tmp_path: Path, cli: Callable
) -> None:
    states, attempts = tmp_path / "states.parquet", tmp_path / "attempts.parquet"
    tables["states"].write_parquet(states)
    tables["attempts"].write_parquet(attempts)
    out = tmp_path / "out"
    common = ("takeover", "--states", states, "--attempts", attempts, "--interval", "wilson")
    result = cli(*common, "--judge", "judge", "--gold", "gold", "--out-dir", out)
    assert result.code == 0, result.err
    expected = takeover.summarize_judged(
        tables["states"], tables["attempts"], judge="judge", gold="gold"
    )
    written = pl.read_parquet(out / "judged.parquet").sort("agent", "depth")
    assert (written["estimate"] - expected.sort("agent", "depth")["estimate"]).abs().max() < 1e-12
    bad = tmp_path / "bad.parquet"
    tables["attempts"].with_columns(judge=pl.lit(None, pl.Int8)).write_parquet(bad)
    result = cli(
        "takeover", "--states", states, "--attempts", bad, "--judge", "judge", "--gold", "gold"
    )
    assert result.code == 2
    errors = [line for line in result.err.splitlines() if not line.startswith("[takeover")]
    assert errors == [
        f"recoverylab takeover: error: attempts: the judge column `judge` has "
        f"{tables['attempts'].height} nulls; the judge must score every unit (gold labels may "
        "be missing, verdicts may not)."
    ]
    result = cli(*common, "--gold", "gold")
    assert result.code == 2
    assert "need `--judge COL`" in result.err
