"""Tests of ``paired.summarize_judged``, ``judged_pairs`` and ``judge_agreement`` (issue 40).

A judge that is always right with gold everywhere must give ``summarize``'s own rescue, harm and
effect (carry-forward included); the judge-only estimate must be ``summarize`` run on the
judge's verdicts; bad judge and gold columns are one clear error.
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest

from recoverylab import paired, synth
from recoverylab._errors import RecoveryLabWarning, SchemaError

FEW = "too few for the normal approximation of PPI"


@pytest.fixture(scope="module")
def forks() -> pl.DataFrame:
    table = synth.generate("forks", 120, seed=3)["forks"]
    rng = np.random.default_rng(3)
    right = pl.Series(rng.random(table.height) < 0.9)
    return table.with_columns(
        judge=pl.when(right).then(pl.col("success")).otherwise(~pl.col("success")),
        gold=pl.col("success").cast(pl.Int8),
    )


def rates(summary: pl.DataFrame) -> pl.DataFrame:
    cells = ["condition", "delay", "method"]
    return summary.select(
        *cells,
        (pl.col("rescue") / pl.col("n")).alias("rescue"),
        (pl.col("harm") / pl.col("n")).alias("harm"),
        pl.col("effect"),
    ).unpivot(index=cells, variable_name="outcome", value_name="expected")


def test_gold_everywhere_gives_summarize(forks: pl.DataFrame) -> None:
    with pytest.warns(RecoveryLabWarning, match=FEW):  # cells with under 5 rescues or harms
        out = paired.summarize_judged(forks, judge="judge", gold="gold")
    joined = out.join(
        rates(paired.summarize(forks)), on=["condition", "delay", "method", "outcome"]
    )
    assert joined.height == out.height > 0
    assert (joined["estimate"] - joined["expected"]).abs().max() < 1e-12
    assert (joined["gold_estimate"] - joined["expected"]).abs().max() < 1e-12
    assert set(joined["labelled_share"]) == {1.0}


def test_judge_only_is_summarize_on_the_verdicts(forks: pl.DataFrame) -> None:
    with pytest.warns(RecoveryLabWarning, match=FEW):
        out = paired.summarize_judged(forks, judge="judge", gold="gold")
    verdicts = paired.summarize(forks.with_columns(success=pl.col("judge")))
    joined = out.join(rates(verdicts), on=["condition", "delay", "method", "outcome"])
    assert (joined["judge_estimate"] - joined["expected"]).abs().max() < 1e-12


def test_judged_pairs_carry_forward_takes_the_none_branch(forks: pl.DataFrame) -> None:
    sparse = forks.with_columns(
        gold=pl.when(pl.col("task_id").cast(pl.String).str.contains("1")).then(pl.col("gold"))
    )
    rows = paired.judged_pairs(sparse, judge="judge", gold="gold").collect()
    carried = rows.filter(pl.col("carried_forward"))
    assert carried.height > 0
    assert carried.select((pl.col("f0") == pl.col("f1")).all()).item()
    assert carried.select((pl.col("g0").is_null() == pl.col("g1").is_null()).all()).item()


def test_judge_agreement_overall(forks: pl.DataFrame) -> None:
    out = paired.judge_agreement(forks, judge="judge", gold="gold", by=())
    agree = forks.select((pl.col("judge") == pl.col("success")).mean()).item()
    row = out.filter(pl.col("measure") == "agreement").row(0, named=True)
    assert row["estimate"] == pytest.approx(agree, rel=1e-12)
    assert row["n"] == forks.height


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            pl.when(pl.col("method") == "none").then(None).otherwise(pl.col("judge")),
            "forks: the judge column `judge` has",
        ),
        (
            pl.col("judge").cast(pl.Float64) * 0.5,
            "forks: the judge column `judge` has",
        ),
    ],
)
def test_bad_judge_is_one_error(forks: pl.DataFrame, change: pl.Expr, message: str) -> None:
    with pytest.raises(SchemaError, match=re.escape(message)):
        paired.summarize_judged(
            forks.with_columns(change.alias("judge")), judge="judge", gold="gold"
        )


def test_no_gold_is_one_error(forks: pl.DataFrame) -> None:
    message = f"forks: the gold column `gold` is null on all {forks.height} rows"
    with pytest.raises(SchemaError, match=re.escape(message)):
        paired.summarize_judged(
            forks.with_columns(gold=pl.lit(None, pl.Int8)), judge="judge", gold="gold"
        )
