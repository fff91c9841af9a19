"""The judged variants of the shipped samples (issue 40): columns, gold design, judge's error.

``data_samples/paired/judged_forks.parquet``, ``data_samples/takeover/judged_attempts.parquet``
and ``data_samples/goal/judged_episodes.parquet`` carry a judge's verdict on every unit and gold
labels on a random subset, as each folder's README.md documents: these tests hold the files to
those documents (columns, labelled counts, gold drawn by task / attempt / goal, the judge's
error rates) and to the scripts that build them.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest

from tests.conftest import SAMPLES, assert_same_as_stored

PAIRED = SAMPLES / "paired" / "judged_forks.parquet"
TAKEOVER = SAMPLES / "takeover" / "judged_attempts.parquet"
GOAL = SAMPLES / "goal" / "judged_episodes.parquet"


def _script(folder: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"{folder}_make_samples", SAMPLES / folder / "make_samples.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Per sample: the file, its (judge, gold, truth) column triples, the cluster gold is drawn by
#: (None: by unit), and the documented labelled clusters / clusters and labelled / all units.
SAMPLES_JUDGED = {
    "paired": (PAIRED, [("judge", "gold", "success")], "task_id", (94, 300), (559, 1_782)),
    "takeover": (
        TAKEOVER,
        [
            ("judge_passed", "gold_passed", "passed"),
            ("judge_aware", "gold_aware", "aware"),
        ],
        None,
        None,
        (7_851, 39_351),
    ),
    "goal": (
        GOAL,
        [("judge_success", "gold_success", "planted_success")],
        "goal_id",
        (74, 225),
        (888, 2_700),
    ),
}


def _with_goal_id(frame: pl.DataFrame) -> pl.DataFrame:
    cases = pl.read_parquet(SAMPLES / "goal" / "synthetic" / "cases").select("case_id", "goal_id")
    return frame.join(cases, on="case_id", how="left")


@pytest.mark.parametrize("sample", sorted(SAMPLES_JUDGED))
def test_judge_everywhere_gold_only_true_false_or_null(sample: str) -> None:
    path, columns, _, _, (labelled, units) = SAMPLES_JUDGED[sample]
    frame = pl.read_parquet(path)
    assert frame.height == units
    for judge, gold, truth in columns:
        # boolean columns: gold can hold nothing but true, false or null
        assert frame.schema[judge] == pl.Boolean
        assert frame.schema[gold] == pl.Boolean
        assert frame[judge].null_count() == 0
        assert frame[gold].is_not_null().sum() == labelled
        # a gold label is the true outcome; the judge errs on both sides
        given = frame.filter(pl.col(gold).is_not_null())
        assert (given[gold] == given[truth]).all()
        assert (frame[judge] != frame[truth]).any()
        assert (frame[judge] == frame[truth]).mean() > 0.75  # type: ignore[operator]


@pytest.mark.parametrize("sample", ["paired", "goal"])
def test_gold_is_drawn_by_cluster_with_the_documented_share(sample: str) -> None:
    path, columns, cluster, (labelled, clusters), _ = SAMPLES_JUDGED[sample]
    frame = pl.read_parquet(path)
    if cluster == "goal_id":
        frame = _with_goal_id(frame)
    gold = columns[0][1]
    per_cluster = frame.group_by(cluster).agg(
        pl.col(gold).is_not_null().all().alias("all"), pl.col(gold).is_not_null().any().alias("any")
    )
    assert per_cluster.height == clusters
    assert (per_cluster["all"] == per_cluster["any"]).all()  # a cluster is labelled whole
    assert per_cluster["all"].sum() == labelled


def test_takeover_gold_is_drawn_by_unit_for_both_outcomes() -> None:
    frame = pl.read_parquet(TAKEOVER)
    # the same attempts carry both gold labels (a human labels the whole attempt)
    assert (frame["gold_passed"].is_null() == frame["gold_aware"].is_null()).all()
    # drawn by (state, agent) unit: every repeat of a unit or none, 2,617 of 13,117 units
    per_unit = frame.group_by("state_id", "agent").agg(
        pl.col("gold_passed").is_not_null().all().alias("all"),
        pl.col("gold_passed").is_not_null().any().alias("any"),
    )
    assert (per_unit["all"] == per_unit["any"]).all()
    assert (per_unit["all"].sum(), per_unit.height) == (2_617, 13_117)
    share = per_unit["all"].mean()
    assert share == pytest.approx(_script("takeover").GOLD_SHARE, abs=0.01)
    # within workflows (the clusters): every workflow has labelled and unlabelled attempts
    states = pl.read_parquet(SAMPLES / "takeover" / "states.parquet")
    workflows = frame.join(states.select("state_id", "workflow_id"), on="state_id")
    per_workflow = workflows.group_by("workflow_id").agg(pl.col("gold_passed").is_not_null().mean())
    assert per_workflow.height == 100
    assert per_workflow["gold_passed"].min() > 0  # type: ignore[operator]
    assert per_workflow["gold_passed"].max() < 1  # type: ignore[operator]


def _close(observed: float, expected: float, n: int) -> bool:
    """Within four binomial standard errors of the documented rate."""
    return abs(observed - expected) <= 4 * math.sqrt(expected * (1 - expected) / n)


def _error_rates(frame: pl.DataFrame, judge: str, truth: str) -> tuple[float, int, float, int]:
    positive = frame.filter(pl.col(truth))
    negative = frame.filter(~pl.col(truth))
    return (
        float(positive[judge].mean()),  # type: ignore[arg-type]
        positive.height,
        float((~negative[judge]).mean()),  # type: ignore[arg-type]
        negative.height,
    )


def test_the_judges_error_rates_are_the_documented_ones() -> None:
    paired = _script("paired").JUDGED
    forks = pl.read_parquet(PAIRED)
    for condition in ("clean", "stale2"):
        rows = forks.filter(pl.col("condition") == condition)
        se, n_pos, sp, n_neg = _error_rates(rows, "judge", "success")
        assert _close(se, paired["judge_sensitivity"][condition], n_pos), (condition, se)
        assert _close(sp, paired["judge_specificity"][condition], n_neg), (condition, sp)
    attempts = pl.read_parquet(TAKEOVER)
    for outcome, (sensitivity, specificity) in _script("takeover").JUDGE.items():
        se, n_pos, sp, n_neg = _error_rates(attempts, f"judge_{outcome}", outcome)
        assert _close(se, sensitivity, n_pos), (outcome, se)
        assert _close(sp, specificity, n_neg), (outcome, sp)
    goal = _script("goal").JUDGE
    se, n_pos, sp, n_neg = _error_rates(pl.read_parquet(GOAL), "judge_success", "planted_success")
    assert _close(se, goal["sensitivity"], n_pos)
    assert _close(sp, goal["specificity"], n_neg)


def test_the_judged_samples_are_what_the_scripts_write(tmp_path: Path) -> None:
    # takeover and goal: the judged file from the shipped tables it extends (those are checked
    # against their generators elsewhere); paired: judged_forks is part of build() (see
    # tests/test_cli_paired.py), checked here on its own too
    takeover = _script("takeover").judged_attempts(
        pl.read_parquet(SAMPLES / "takeover" / "attempts.parquet")
    )
    assert_same_as_stored(pl.read_parquet(TAKEOVER), takeover, TAKEOVER.name)
    synthetic = SAMPLES / "goal" / "synthetic"
    goal = _script("goal").judged_episodes(
        pl.read_parquet(synthetic / "episodes"), pl.read_parquet(synthetic / "cases")
    )
    assert_same_as_stored(pl.read_parquet(GOAL), goal, GOAL.name)
    assert_same_as_stored(pl.read_parquet(PAIRED), _script("paired").judged_cohort(), PAIRED.name)
    # the judged goal episodes are the synthetic ones, column for column, plus the two columns
    shipped = pl.read_parquet(synthetic / "episodes").sort("episode_id")
    assert_same_as_stored(shipped, pl.read_parquet(GOAL).drop("judge_success", "gold_success"), "")


def _pct(value: object) -> str:
    return f"{float(value) * 100:.1f} %"  # type: ignore[arg-type]


def _readme(folder: str) -> str:
    """A folder's README.md with every run of whitespace one space (lines wrap anywhere)."""
    return " ".join((SAMPLES / folder / "README.md").read_text("utf-8").split())


def test_the_readmes_quote_the_measured_error_rates() -> None:
    # each folder's README states the judge's measured rates: they are the files' own
    forks = pl.read_parquet(PAIRED)
    for condition in ("clean", "stale2"):
        rows = forks.filter(pl.col("condition") == condition)
        se, _, sp, _ = _error_rates(rows, "judge", "success")
        assert f"{_pct(se)} / {_pct(sp)} on `{condition}`" in _readme("paired"), condition
    attempts = pl.read_parquet(TAKEOVER)
    takeover = _readme("takeover")
    se, _, sp, _ = _error_rates(attempts, "judge_passed", "passed")
    assert f"sensitivity {_pct(se)}, specificity {_pct(sp)}" in takeover
    rates = attempts.select(pl.col("judge_passed", "passed", "judge_aware", "aware").mean()).row(0)
    assert f"pass rate is {_pct(rates[0])} where the true one is {_pct(rates[1])}" in takeover
    assert f"aware rate of {_pct(rates[2])} against {_pct(rates[3])}" in takeover
    se, _, sp, _ = _error_rates(pl.read_parquet(GOAL), "judge_success", "planted_success")
    assert f"sensitivity {_pct(se)}, specificity {_pct(sp)}" in _readme("goal")
