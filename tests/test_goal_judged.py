"""Tests of ``goal.summarize_judged`` (issue 40): judged task success, PPI++ and Rogan–Gladen."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from recoverylab import goal, synth
from recoverylab._errors import ParameterError, SchemaError


@pytest.fixture(scope="module")
def episodes() -> pl.DataFrame:
    rng = np.random.default_rng(8)
    n = 3000
    case = rng.integers(0, 300, n)
    success = rng.random(n) < np.where(case % 3 == 0, 0.3, 0.6)
    right = rng.random(n) < 0.85
    return pl.DataFrame(
        {
            "case_id": [f"c{c:03d}" for c in case],
            "regime": np.where(case % 3 == 0, "unrecoverable", "recoverable"),
            "success": success,
            "judge": np.where(right, success, ~success),
            "labelled": rng.random(n) < 0.4,
        }
    ).with_columns(gold=pl.when(pl.col("labelled")).then(pl.col("success")))


def test_ppi_gold_everywhere_and_judge_only(episodes: pl.DataFrame) -> None:
    out = goal.summarize_judged(
        episodes.with_columns(gold=pl.col("success")), judge="judge", gold="gold"
    ).sort("regime")
    expected = (
        episodes.group_by("regime")
        .agg(pl.col("success").mean().alias("ts"), pl.col("judge").mean().alias("judged"))
        .sort("regime")
    )
    assert (out["estimate"] - expected["ts"]).abs().max() < 1e-12
    assert (out["judge_estimate"] - expected["judged"]).abs().max() < 1e-12
    assert out["n_clusters"].to_list() == [200, 100]


def test_ppi_lies_nearer_the_truth_than_the_judge(episodes: pl.DataFrame) -> None:
    out = goal.summarize_judged(episodes, judge="judge", gold="gold").sort("regime")
    truth = episodes.group_by("regime").agg(pl.col("success").mean()).sort("regime")["success"]
    assert ((out["estimate"] - truth).abs() < (out["judge_estimate"] - truth).abs()).all()
    assert set(out["ci_method"]) == {"ppi++-cp"}


def test_rogan_gladen_and_bad_input(episodes: pl.DataFrame) -> None:
    out = goal.summarize_judged(
        episodes, judge="judge", judge_sensitivity=0.85, judge_specificity=0.85
    ).sort("regime")
    q = episodes.group_by("regime").agg(pl.col("judge").mean()).sort("regime")["judge"]
    assert (out["estimate"] - (q - 0.15) / 0.7).abs().max() < 1e-12
    with pytest.raises(ParameterError, match="not both"):
        goal.summarize_judged(
            episodes, judge="judge", gold="gold", judge_sensitivity=0.9, judge_specificity=0.9
        )
    with pytest.raises(ParameterError, match=re.escape("column `family`")):
        goal.summarize_judged(episodes, judge="judge", gold="gold", by="family")
    with pytest.raises(SchemaError, match="has 3000 values outside"):
        goal.summarize_judged(episodes.with_columns(gold=pl.lit(3)), judge="judge", gold="gold")


def test_cli_goal_judged(tmp_path: Path, cli: Callable) -> None:
    tables = synth.generate("goal", 60, seed=2)
    scored = goal.score(*tables.values()).collect()
    rng = np.random.default_rng(2)
    right = pl.Series(rng.random(scored.height) < 0.85)
    verdicts = scored.select(
        "episode_id",
        judge=pl.when(right).then(pl.col("success")).otherwise(~pl.col("success")),
        gold=pl.col("success"),
    )
    tables["episodes"] = tables["episodes"].join(verdicts, on="episode_id")
    paths = {}
    for name, frame in tables.items():
        paths[name] = tmp_path / f"{name}.parquet"
        frame.write_parquet(paths[name])
    args = [item for name in paths for item in (f"--{name}", paths[name])]
    out = tmp_path / "judged.parquet"
    result = cli("goal", *args, "--judge", "judge", "--gold", "gold", "--judged-out", out)
    assert result.code == 0, result.err
    written = pl.read_parquet(out).sort("regime")
    expected = scored.group_by("regime").agg(pl.col("success").mean()).sort("regime")
    assert (written["estimate"] - expected["success"]).abs().max() < 1e-12
    result = cli("goal", *args, "--gold", "gold")
    assert result.code == 2
    assert "need `--judge COL`" in result.err
