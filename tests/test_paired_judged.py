"""Tests of ``paired.summarize_judged``, ``judged_pairs`` and ``judge_agreement`` (issue 40).

A judge that is always right with gold everywhere must give ``summarize``'s own rescue, harm and
effect (carry-forward included); the judge-only estimate must be ``summarize`` run on the
judge's verdicts; bad judge and gold columns are one clear error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

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


# ---------------------------------------------------------------- command line


def test_cli_judged_paired_writes_the_api_result(
    forks: pl.DataFrame, tmp_path: Path, cli: Callable
) -> None:
    source = tmp_path / "forks.parquet"
    forks.write_parquet(source)
    out, agreement = tmp_path / "judged.parquet", tmp_path / "judge.parquet"
    result = cli(
        "paired",
        source,
        "--judge",
        "judge",
        "--gold",
        "gold",
        "--out",
        out,
        "--judge-out",
        agreement,
    )
    assert result.code == 0, result.err
    with pytest.warns(RecoveryLabWarning, match=FEW):
        expected = paired.summarize_judged(forks, judge="judge", gold="gold")
    keys = ["condition", "delay", "method", "outcome"]
    written = pl.read_parquet(out).sort(keys)  # the writer sorts by the keys
    expected = expected.sort(keys)
    assert written.columns == expected.columns
    assert (written["estimate"] - expected["estimate"]).abs().max() < 1e-12
    assert pl.read_parquet(agreement)["measure"].unique().sort().to_list() == [
        "agreement",
        "sensitivity",
        "specificity",
    ]
    assert "recoverylab paired: warning: judged outcome:" in result.err


@pytest.mark.parametrize(
    ("change", "options", "message"),
    [
        (
            pl.when(pl.col("gold") == 1).then(2).otherwise(pl.col("gold")).alias("gold"),
            ("--judge", "judge", "--gold", "gold"),
            "forks: the gold column `gold` has",
        ),
        (
            pl.when(pl.col("method") == "none")
            .then(None)
            .otherwise(pl.col("judge"))
            .alias("judge"),
            ("--judge", "judge", "--gold", "gold"),
            "forks: the judge column `judge` has",
        ),
        (
            pl.lit(None, pl.Int8).alias("gold"),
            ("--judge", "judge", "--gold", "gold"),
            "forks: the gold column `gold` is null on all",
        ),
        (pl.col("gold"), ("--gold", "gold"), "the judge's error rates need `--judge COL`"),
        (pl.col("gold"), ("--judge", "judge"), "`--judge` needs `--gold COL` (human labels"),
    ],
)
def test_cli_bad_judged_input_is_one_line_exit_2(
    forks: pl.DataFrame,
    tmp_path: Path,
    cli: Callable,
    change: pl.Expr,
    options: tuple[str, ...],
    message: str,
) -> None:
    source = tmp_path / "forks.parquet"
    forks.with_columns(change).write_parquet(source)
    result = cli("paired", source, *options)
    assert result.code == 2
    lines = [line for line in result.err.splitlines() if not line.startswith("[paired")]
    assert len(lines) == 1, result.err
    assert message in lines[0]


def test_rogan_gladen_effect_maps_the_judge_effect(forks: pl.DataFrame) -> None:
    out = paired.rogan_gladen_effect(forks, judge="judge", sensitivity=0.9, specificity=0.9)
    verdicts = paired.summarize(forks.with_columns(success=pl.col("judge")))
    assert (out["estimate"] - verdicts["effect"] / 0.8).abs().max() < 1e-12
    assert (out["ci_low"] - verdicts["ci_low"] / 0.8).abs().max() < 1e-12
    assert out["p_value"].to_list() == verdicts["p_value"].to_list()
    assert set(out["ci_method"]) == {"rogan-gladen"}


def test_cli_rogan_gladen_effect(forks: pl.DataFrame, tmp_path: Path, cli: Callable) -> None:
    source = tmp_path / "forks.parquet"
    forks.write_parquet(source)
    out = tmp_path / "rg.parquet"
    result = cli(
        "paired",
        source,
        "--judge",
        "judge",
        "--judge-sensitivity",
        "0.9",
        "--judge-specificity",
        "0.9",
        "--out",
        out,
    )
    assert result.code == 0, result.err
    assert pl.read_parquet(out).height == paired.summarize(forks).height
    result = cli(
        "paired",
        source,
        "--judge",
        "judge",
        "--gold",
        "gold",
        "--judge-sensitivity",
        "0.9",
        "--judge-specificity",
        "0.9",
    )
    assert result.code == 2
    assert "not both" in result.err
