"""The synthetic AgentHeal generator ``goal``: layout, planted truth, determinism, options."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest

from recoverylab import ParameterError, goal, synth
from recoverylab.synth import _goal as synth_goal

TABLES = ("cases", "resources", "episodes", "steps", "citations")


@pytest.fixture(scope="module")
def tables() -> dict[str, pl.DataFrame]:
    return synth.generate("goal", 90, seed=4)


def scored(frames: dict[str, pl.DataFrame]) -> pl.DataFrame:
    return goal.score(*(frames[t] for t in TABLES)).collect()


def test_tables_pass_every_check(tables) -> None:
    assert set(tables) == set(TABLES)
    out = scored(tables)  # full contract and consistency checks
    assert out.height == tables["episodes"].height == 90 * 3 * 4


def test_one_case_per_goal_and_regime(tables) -> None:
    cases = tables["cases"]
    assert cases.height == 270
    per_goal = cases.group_by("goal_id").agg(pl.col("regime").sort())
    assert per_goal.height == 90
    assert per_goal["regime"].to_list() == [sorted(goal.REGIMES)] * 90
    assert cases.filter(pl.col("goal_id") == "g000000")["case_id"].sort().to_list() == [
        "g000000-free",
        "g000000-rec",
        "g000000-unrec",
    ]


def test_families_categories_and_models(tables) -> None:
    cases = tables["cases"]
    assert cases["family"].n_unique() == 9
    assert cases["category"].n_unique() == 4
    assert cases.group_by("family").agg(pl.col("category").n_unique())["category"].max() == 1
    assert sorted(tables["episodes"]["model"].unique()) == list(synth_goal.MODELS)
    # a goal keeps its family across its three regimes
    assert cases.group_by("goal_id").agg(pl.col("family").n_unique())["family"].max() == 1


def test_regimes_match_their_resources(tables) -> None:
    reachable = pl.col("reachable")
    counts = (
        tables["resources"]
        .group_by("case_id")
        .agg(
            ((pl.col("relation") == "copy") & reachable).sum().alias("copies"),
            ((pl.col("relation") == "other_version") & reachable).sum().alias("versions"),
        )
        .join(tables["cases"], on="case_id")
    )
    regime = pl.col("regime")
    free = counts.filter(regime == "barrier_free")
    assert free.filter(pl.col("copies") == 0).height == 0
    assert free["barrier"].null_count() == free.height
    assert not free["needs_user_help"].any()
    recoverable = counts.filter(regime == "recoverable")
    assert recoverable.filter(pl.col("copies") + pl.col("versions") == 0).height == 0
    assert 0 < recoverable.filter(pl.col("copies") > 0).height < recoverable.height
    dead = counts.filter(regime == "unrecoverable")
    assert dead.filter(pl.col("copies") + pl.col("versions") > 0).height == 0
    assert dead["barrier"].null_count() == 0


def test_planted_outcomes_are_scored_exactly(tables) -> None:
    out = scored(tables)
    assert out.filter(pl.col("success") != pl.col("planted_success")).height == 0
    assert out.filter(~pl.col("reason").eq_missing(pl.col("planted_reason"))).height == 0


def test_all_branches_and_reasons_occur() -> None:
    out = scored(synth.generate("goal", 400, seed=2))
    assert set(out["branch"].unique()) == set(goal.BRANCHES)
    assert set(out["reason"].drop_nulls().unique()) == set(goal.REASONS)


def test_model_skills_order_the_ts() -> None:
    out = scored(synth.generate("goal", 3000, seed=8, models=("best", "worst")))
    ts = goal.summarize(out, by=("model",), n_resamples=200)
    best, worst = ts.sort("model")["ts"].to_list()
    assert best > worst
    assert best - worst == pytest.approx(0.10, abs=0.03)


def test_truth_table() -> None:
    truth = synth_goal.truth(models=("a", "b", "c"))
    assert truth.columns == ["model", "regime", "ts"]
    assert truth.height == 9
    free = truth.filter(pl.col("regime") == "barrier_free").sort("model")["ts"].to_list()
    assert free == pytest.approx([0.93, 0.88, 0.83])
    assert synth_goal.skills(("only",)) == {"only": 0.0}


def test_same_seed_same_rows_and_blocks_are_independent() -> None:
    a = synth.generate("goal", 30, seed=7)
    b = synth.generate("goal", 30, seed=7)
    for name in TABLES:
        assert a[name].equals(b[name])
    c = synth.generate("goal", 30, seed=8)
    assert not a["episodes"].equals(c["episodes"])
    part = synth_goal.block(5, 10, np.random.default_rng(0))
    assert part["cases"]["goal_id"].unique().sort().to_list() == [f"g{i:06d}" for i in range(5, 10)]


def test_repeats_and_no_judged_columns() -> None:
    frames = synth.generate("goal", 10, seed=1, models=("m",), repeats=3, judged=False)
    episodes = frames["episodes"]
    assert episodes.height == 10 * 3 * 3
    assert sorted(episodes["repeat"].unique()) == [0, 1, 2]
    assert not set(goal.JUDGED) & set(episodes.columns)
    assert scored(frames).height == episodes.height


def test_judged_columns_have_unjudged_nulls() -> None:
    episodes = synth.generate("goal", 500, seed=3)["episodes"]
    share = episodes["honest_report"].null_count() / episodes.height
    assert share == pytest.approx(synth_goal.UNJUDGED_SHARE, abs=0.03)
    assert episodes.schema["recovered"] == pl.Boolean


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"models": ()},
            "synth goal: parameter `models` is []; it must be a non-empty list without repeats.",
        ),
        (
            {"models": ("a", "a")},
            "synth goal: parameter `models` is ['a', 'a']; it must be a non-empty list without "
            "repeats.",
        ),
        ({"repeats": 0}, "synth goal: parameter `repeats` is 0; it must be >= 1."),
    ],
)
def test_option_errors(options, message) -> None:
    with pytest.raises(ParameterError, match="^" + re.escape(message) + "$"):
        synth.generate("goal", 3, **options)


def test_synth_command_writes_the_five_tables(cli, tmp_path) -> None:
    result = cli("synth", "goal", "--tasks", 20, "--seed", 3, "--out", tmp_path, "--quiet")
    assert result.code == 0, result.err
    for name in TABLES:
        assert list((tmp_path / name).glob("*.parquet")), name
    out = goal.score(*(tmp_path / t for t in TABLES)).collect()
    assert out.height == 20 * 3 * 4
