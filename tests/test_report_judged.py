"""``recoverylab report`` with judged takeover and goal inputs: options and bad input.

The numbers of the judged sections are compared with the commands' outputs in
``tests/test_report_consistency.py``; here: the options are on ``--help``, a judge without its
gold or its protocol's tables is refused, and bad judged columns (gold outside {0, 1}, a judge
with nulls, no gold at all) are one line and exit status 2 with no report written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from recoverylab.cli import _report
from tests.conftest import SAMPLES

pytest.importorskip("altair")
pytest.importorskip("vl_convert")

STATES = SAMPLES / "takeover" / "states.parquet"
ATTEMPTS = SAMPLES / "takeover" / "judged_attempts.parquet"
GOAL = SAMPLES / "goal" / "synthetic"
EPISODES = SAMPLES / "goal" / "judged_episodes.parquet"
GOAL_ARGS = [
    arg
    for name in _report._GOAL_TABLES
    for arg in (f"--{name}", EPISODES if name == "episodes" else GOAL / name)
]
TAKEOVER_JUDGE = ["--takeover-judge", "judge_passed", "--takeover-gold", "gold_passed"]
GOAL_JUDGE = ["--goal-judge", "judge_success", "--goal-gold", "gold_success"]


def test_the_judged_options_are_on_help(cli: Callable) -> None:
    result = cli("report", "--help")
    assert result.code == 0
    for option in ("--takeover-judge", "--takeover-gold", "--takeover-judge-outcome"):
        assert option in result.out
    for option in ("--goal-judge", "--goal-gold"):
        assert option in result.out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--states", STATES, "--attempts", ATTEMPTS, "--takeover-judge", "judge_passed"],
            "the judged takeover report needs --takeover-gold as well.",
        ),
        (
            ["--states", STATES, "--attempts", ATTEMPTS, "--takeover-gold", "gold_passed"],
            "the judged takeover report needs --takeover-judge as well.",
        ),
        (
            TAKEOVER_JUDGE,
            "`--takeover-judge` and `--takeover-gold` need `--states` and `--attempts`.",
        ),
        ([*GOAL_ARGS, "--goal-judge", "judge_success"], "the judged goal report needs --goal-gold"),
        (
            GOAL_JUDGE,
            "`--goal-judge` and `--goal-gold` need `--cases`, `--resources` and `--episodes`.",
        ),
        (
            [*GOAL_ARGS, "--goal-judge", "verdict", "--goal-gold", "gold_success"],
            "the judge column `verdict` is not in the table",
        ),
    ],
)
def test_a_judged_report_missing_a_part_is_one_line(
    cli: Callable, tmp_path: Path, args: list, message: str
) -> None:
    result = cli("--quiet", "report", *args, "--resamples", 20, "--out", tmp_path / "r.html")
    assert result.code == 2
    assert len(result.err.strip().splitlines()) == 1
    assert result.err.startswith("recoverylab report: error: ")
    assert message in result.err
    assert not (tmp_path / "r.html").exists()


def _gold_two(frame: pl.DataFrame, gold: str) -> pl.DataFrame:
    labelled = pl.col(gold).is_not_null()
    return frame.with_columns(pl.when(labelled).then(pl.lit(2)).otherwise(None).alias(gold))


def _judge_null(frame: pl.DataFrame, judge: str) -> pl.DataFrame:
    return frame.with_columns(
        pl.when(pl.int_range(pl.len()) % 3 == 0).then(None).otherwise(pl.col(judge)).alias(judge)
    )


def _no_gold(frame: pl.DataFrame, gold: str) -> pl.DataFrame:
    return frame.with_columns(pl.lit(None, pl.Boolean).alias(gold))


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (lambda f, j, g: _gold_two(f, g), "values outside {0, 1} (2); a gold label is 0/1"),
        (lambda f, j, g: _judge_null(f, j), "nulls; the judge must score every unit"),
        (lambda f, j, g: _no_gold(f, g), "PPI needs human labels on a random subset."),
    ],
    ids=["gold outside 0/1", "judge null", "no gold"],
)
@pytest.mark.parametrize("protocol", ["takeover", "goal"])
def test_bad_judged_columns_are_one_line_and_exit_2(
    cli: Callable, tmp_path: Path, protocol: str, spoil: Callable, message: str
) -> None:
    bad = tmp_path / "bad.parquet"
    if protocol == "takeover":
        spoil(pl.read_parquet(ATTEMPTS), "judge_passed", "gold_passed").write_parquet(bad)
        args = ["--states", STATES, "--attempts", bad, *TAKEOVER_JUDGE]
        table, column = "attempts", "judge_passed" if "judge" in message else "gold_passed"
    else:
        spoil(pl.read_parquet(EPISODES), "judge_success", "gold_success").write_parquet(bad)
        args = [*(bad if a == EPISODES else a for a in GOAL_ARGS), *GOAL_JUDGE]
        table, column = "episodes", "judge_success" if "judge" in message else "gold_success"
    result = cli("--quiet", "report", *args, "--resamples", 20, "--out", tmp_path / "r.html")
    assert result.code == 2
    (line,) = result.err.strip().splitlines()
    assert line.startswith(f"recoverylab report: error: {table}: the ")
    assert f"column `{column}`" in line
    assert message in line
    assert not (tmp_path / "r.html").exists()


def test_the_takeover_judge_of_awareness_gives_ear(cli: Callable, tmp_path: Path) -> None:
    # --takeover-judge-outcome aware: the rows are EAR's, named in the table and provenance
    out = tmp_path / "r.html"
    judge = ["--takeover-judge", "judge_aware", "--takeover-gold", "gold_aware"]
    args = ["--states", STATES, "--attempts", ATTEMPTS, *judge, "--takeover-judge-outcome", "aware"]
    result = cli("--quiet", "report", *args, "--resamples", 20, "--out", out)
    assert result.code == 0, result.err
    text = out.read_text(encoding="utf-8")
    assert "judge_aware (decides aware)" in text
    assert 'data-column="judged_outcome">aware<' in text
    assert 'data-column="judged_outcome">passed<' not in text
