"""Takeover's judged path on every engine (issue 40): EAR, pass@1, pass@k and pass^k.

``takeover.summarize_judged`` and ``takeover.reliability_judged`` are plans: the sharded polars
engine (any number of shards) and Spark give the polars result exactly, warnings and errors
included.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from recoverylab import engines, synth, takeover
from recoverylab._errors import RecoveryLabError


def spread(frame: pl.DataFrame, directory: Path, files: int = 3, seed: int = 0) -> str:
    """Write ``frame`` with its rows shuffled as ``files`` parquet files; return the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=seed)
    size = -(-shuffled.height // files)
    for i in range(files):
        shuffled.slice(i * size, size).write_parquet(directory / f"part-{i}.parquet")
    return str(directory)


@pytest.fixture(scope="module")
def tables() -> dict[str, pl.DataFrame]:
    """Synthetic takeover tables: a 0/1 judge of passed and of aware (85 % right), a judge
    probability, gold on whole units (half of them) and on random attempts (a third)."""
    found = synth.generate("takeover", 40, seed=11, splits=("a", "b"))
    attempts = found["attempts"]
    rng = np.random.default_rng(11)
    right = pl.Series(rng.random(attempts.height) < 0.85)
    keys = attempts.select("state_id", "agent").unique().sort("state_id", "agent")
    keys = keys.with_columns(__whole=pl.Series(rng.random(keys.height) < 0.5))
    found["attempts"] = (
        attempts.join(keys, on=["state_id", "agent"])
        .with_columns(
            judge=pl.when(right).then(pl.col("passed")).otherwise(~pl.col("passed")).cast(pl.Int8),
            judge_aware=pl.when(right)
            .then(pl.col("aware"))
            .otherwise(~pl.col("aware"))
            .cast(pl.Int8),
            judge_p=pl.Series(np.round(rng.random(attempts.height), 3)),
            gold=pl.when(pl.col("__whole")).then(pl.col("passed").cast(pl.Int8)),
            gold_aware=pl.when(pl.Series(rng.random(attempts.height) < 1 / 3)).then(
                pl.col("aware").cast(pl.Int8)
            ),
        )
        .drop("__whole")
    )
    return found


def recorded(run: Callable[[], pl.DataFrame]) -> tuple[object, list[str]]:
    """The frame (or the error's type and message) and the warnings' messages of one run."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result: object = run()
        except RecoveryLabError as exc:
            result = (type(exc).__name__, str(exc))
    return result, sorted(str(w.message) for w in caught)


def same(expected: tuple[object, list[str]], got: tuple[object, list[str]]) -> None:
    assert got[1] == expected[1]
    if isinstance(expected[0], pl.DataFrame):
        assert isinstance(got[0], pl.DataFrame), got[0]
        assert_frame_equal(expected[0], got[0], check_exact=True)
    else:
        assert got[0] == expected[0]


#: One call of each judged verb, by name: (states, attempts, engine) -> result.
VERBS: dict[str, Callable[[object, object, object], pl.DataFrame]] = {
    "pass@1": lambda s, a, e: takeover.summarize_judged(
        s, a, judge="judge", gold="gold", by=("agent",), engine=e
    ),
    "ear": lambda s, a, e: takeover.summarize_judged(
        s, a, judge="judge_aware", gold="gold_aware", outcome="aware", engine=e
    ),
    "rogan-gladen": lambda s, a, e: takeover.summarize_judged(
        s, a, judge="judge", judge_sensitivity=0.85, judge_specificity=0.85, engine=e
    ),
    "pass@k": lambda s, a, e: takeover.reliability_judged(
        s, a, judge="judge", gold="gold", k=2, by=("agent",), engine=e
    ),
    "pass@k[common]": lambda s, a, e: takeover.reliability_judged(
        s,
        a,
        judge="judge",
        gold="gold",
        by=("agent", "depth", "split"),
        common_states=True,
        common_sample=True,
        engine=e,
    ),
    "pass@k[probability]": lambda s, a, e: takeover.reliability_judged(
        s, a, judge="judge_p", gold="gold", k=3, by=("agent",), gold_strata="split", engine=e
    ),
}


@pytest.mark.parametrize("shards", [1, 2, 3, 4])
@pytest.mark.parametrize("verb", list(VERBS))
def test_sharded_engine_gives_the_polars_result(tables: dict, verb: str, shards: int) -> None:
    states, attempts = tables["states"], tables["attempts"]
    expected = recorded(lambda: VERBS[verb](states, attempts, "polars"))
    assert isinstance(expected[0], pl.DataFrame)
    assert expected[0].height > 0
    sharded = engines.ShardedEngine(k=shards)
    same(expected, recorded(lambda: VERBS[verb](states, attempts, sharded)))


def test_sharded_engine_gives_the_polars_errors(tables: dict) -> None:
    states, attempts = tables["states"], tables["attempts"]
    broken = {
        "gold outside": attempts.with_columns(gold=pl.col("gold") * 3),
        "no gold": attempts.with_columns(gold=pl.lit(None, pl.Int8)),
        "null judge": attempts.with_columns(judge=pl.when(pl.col("repeat") > 0).then(1)),
        "gold only in part": attempts.with_columns(
            gold=pl.when(pl.col("repeat") == 0).then(pl.col("passed").cast(pl.Int8))
        ),
    }
    for name, table in broken.items():
        for verb in ("pass@1", "pass@k"):
            expected = recorded(lambda t=table, v=verb: VERBS[v](states, t, "polars"))
            assert isinstance(expected[0], tuple) or name == "gold only in part", name
            got = recorded(lambda t=table, v=verb: VERBS[v](states, t, engines.ShardedEngine(3)))
            same(expected, got)
    expected = recorded(lambda: VERBS["pass@k"](states, attempts, "polars"))
    too_many = recorded(
        lambda: takeover.reliability_judged(
            states, attempts, judge="judge", gold="gold", k=9, engine=engines.ShardedEngine(2)
        )
    )
    assert too_many[0][0] == "ParameterError"  # type: ignore[index]
    assert str(too_many[0][1]).startswith("parameter `k` is 9 but")  # type: ignore[index]


@pytest.mark.slow
def test_spark_gives_the_polars_result(spark: object, tables: dict, tmp_path: Path) -> None:
    states = spread(tables["states"], tmp_path / "states", seed=1)
    attempts = spread(tables["attempts"], tmp_path / "attempts", seed=2)
    for verb, run in VERBS.items():
        expected = recorded(lambda r=run: r(states, attempts, "polars"))
        assert isinstance(expected[0], pl.DataFrame), verb
        same(expected, recorded(lambda r=run: r(states, attempts, spark)))
    # bad judge or gold: one error with the whole table's counts, as on polars
    broken = {
        "gold outside": tables["attempts"].with_columns(gold=pl.col("gold") * 3),
        "null judge": tables["attempts"].with_columns(judge=pl.when(pl.col("repeat") > 0).then(1)),
    }
    for name, table in broken.items():
        bad = spread(table, tmp_path / name.replace(" ", "_"), seed=3)
        for verb in ("pass@1", "pass@k"):
            expected = recorded(lambda b=bad, v=verb: VERBS[v](states, b, "polars"))
            assert isinstance(expected[0], tuple), (name, verb)
            same(expected, recorded(lambda b=bad, v=verb: VERBS[v](states, b, spark)))


@pytest.mark.slow
def test_cli_takeover_judged_on_spark(
    spark: object, tables: dict, tmp_path: Path, cli: Callable
) -> None:
    states = tmp_path / "states.parquet"
    attempts = tmp_path / "attempts.parquet"
    tables["states"].write_parquet(states)
    tables["attempts"].write_parquet(attempts)
    common = ("takeover", "--states", states, "--attempts", attempts, "--judge", "judge")
    options = ("--gold", "gold", "--k", "2", "--by", "agent", "--resamples", "200")
    polars_out, spark_out = tmp_path / "polars", tmp_path / "spark"
    result = cli(*common, *options, "--out-dir", polars_out)
    assert result.code == 0, result.err
    result = cli(*common, *options, "--engine", "spark", "--out-dir", spark_out)
    assert result.code == 0, result.err
    for name in ("judged", "judged_pass_k"):
        assert_frame_equal(
            pl.read_parquet(polars_out / f"{name}.parquet"),
            pl.read_parquet(spark_out / f"{name}.parquet"),
            check_exact=True,
        )
