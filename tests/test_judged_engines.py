"""Judged outcomes on every engine (issue 40): the partials add up, Spark gives polars' result.

``paired.summarize_judged``, ``paired.judge_agreement`` and ``goal.summarize_judged`` run as plans
(``recoverylab._judged_plan``): the judge and gold columns are checked with additive counts,
the judged partials are computed per shard of whole clusters and the finish adds them. So
``ShardedEngine(k)`` for any k must give the polars engine's frame exactly -- fractional
verdicts too, whose partial sums are added in fixed point -- with the same warnings, and bad
input the same one error (the whole table's counts). Spark must give the same frames;
``--engine spark`` must write them.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from recoverylab import engines, goal, paired, stats
from recoverylab._errors import ParameterError, RecoveryLabWarning, SchemaError

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:UserWarning"
)

_CONDITIONS = ("clean", "stale")
_BRANCHES = (("none", None), ("refresh", 1), ("refresh", 2))


def _recorded(compute: Callable[[], Any]) -> tuple[Any, list[str]]:
    """Run ``compute``; return its result and its RecoveryLabWarning messages, in order."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RecoveryLabWarning)
        result = compute()
    return result, [str(w.message) for w in caught]


@st.composite
def judged_forks(draw: st.DrawFn) -> pl.DataFrame:
    """Forks of a few tasks (two conditions, a shared replay, two delays) judged, some gold."""
    n_tasks = draw(st.integers(1, 10))
    rows = []
    for task in range(n_tasks):
        site = draw(st.sampled_from(["a", "b"]))
        for condition in _CONDITIONS:
            # the run without recovery ended at action 2, 3 or 9 (perturbed at 1): a recovery
            # point at or after the end is carried forward from the whole table's design grid
            end = draw(st.sampled_from([2, 3, 9]))
            for method, delay in _BRANCHES:
                if delay is not None and 1 + delay >= end:
                    continue
                rows.append(
                    {
                        "task_id": f"t{task:02d}",
                        "condition": condition,
                        "method": method,
                        "delay": delay,
                        "success": draw(st.booleans()),
                        "judge": draw(st.booleans()),
                        "gold": draw(st.none() | st.sampled_from([0, 1])),
                        "site": site,
                        "perturb_action": 1,
                        "end_action": end if method == "none" else None,
                    }
                )
    frame = pl.DataFrame(
        rows,
        schema={
            "task_id": pl.String,
            "condition": pl.String,
            "method": pl.String,
            "delay": pl.Int64,
            "success": pl.Boolean,
            "judge": pl.Boolean,
            "gold": pl.Int8,
            "site": pl.String,
            "perturb_action": pl.Int64,
            "end_action": pl.Int64,
        },
    )
    # gold somewhere (no gold at all is an error, tested below)
    return frame.with_columns(
        gold=pl.when(pl.int_range(pl.len()) == 0).then(pl.lit(1, pl.Int8)).otherwise("gold")
    )


@st.composite
def judged_episodes(draw: st.DrawFn, fractional: bool) -> pl.DataFrame:
    """Episodes of a few cases in two regimes and two strata; judge 0/1 or a probability."""
    n = draw(st.integers(1, 60))
    cases = draw(st.lists(st.integers(0, 14), min_size=n, max_size=n))
    verdict = st.floats(0, 1) if fractional else st.sampled_from([0.0, 1.0])
    judge = draw(st.lists(verdict, min_size=n, max_size=n))
    gold = draw(st.lists(st.none() | st.sampled_from([0, 1]), min_size=n, max_size=n))
    gold[0] = 1 if gold[0] is None else gold[0]
    return pl.DataFrame(
        {
            "case_id": [f"c{c:02d}" for c in cases],
            "regime": ["recoverable" if c % 3 else "unrecoverable" for c in cases],
            "batch": [draw(st.sampled_from(["x", "y"])) for _ in cases],
            "judge": judge,
            "gold": gold,
        },
        schema_overrides={"gold": pl.Int8},
    )


def _paired_verbs(forks: pl.DataFrame) -> dict[str, Callable[[object], pl.DataFrame]]:
    return {
        "summarize_judged": lambda engine: paired.summarize_judged(
            forks, judge="judge", gold="gold", engine=engine
        ),
        "summarize_judged strata": lambda engine: paired.summarize_judged(
            forks, judge="judge", gold="gold", gold_strata="site", engine=engine
        ),
        "judge_agreement": lambda engine: paired.judge_agreement(
            forks, judge="judge", gold="gold", engine=engine
        ),
        "rogan_gladen_effect": lambda engine: paired.rogan_gladen_effect(
            forks, judge="judge", sensitivity=0.9, specificity=0.85, engine=engine
        ),
    }


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forks=judged_forks(), k=st.integers(1, 4), verb=st.sampled_from(sorted(_paired_verbs({}))))
def test_paired_judged_shards_equal_polars_exactly(forks: pl.DataFrame, k: int, verb: str) -> None:
    run = _paired_verbs(forks)[verb]
    expected, said = _recorded(lambda: run("polars"))
    got, said_sharded = _recorded(lambda: run(engines.ShardedEngine(k)))
    assert_frame_equal(got, expected, check_exact=True)
    assert said_sharded == said


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forks=judged_forks(), strata=st.sampled_from([(), ("site",)]))
def test_paired_judged_plan_equals_the_pairs_composed_on_the_whole_table(
    forks: pl.DataFrame, strata: tuple[str, ...]
) -> None:
    """The plan (grid, then pairs per shard) equals pairing the whole table, then the cells."""
    expected, said = _recorded(
        lambda: stats.judged_paired_cells(
            paired.judged_pairs(forks, judge="judge", gold="gold"),
            cells=["condition", "delay", "method"],
            cluster="task_id",
            judge=("f0", "f1"),
            gold=("g0", "g1"),
            strata=strata,
        )
    )
    got, said_plan = _recorded(
        lambda: paired.summarize_judged(forks, judge="judge", gold="gold", gold_strata=strata)
    )
    assert_frame_equal(got, expected, check_exact=True)
    assert said_plan == said


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), k=st.integers(1, 4), fractional=st.booleans(), strata=st.booleans())
def test_goal_judged_shards_equal_polars(
    data: st.DataObject, k: int, fractional: bool, strata: bool
) -> None:
    episodes = data.draw(judged_episodes(fractional))
    options: dict[str, Any] = {"judge": "judge", "gold": "gold"}
    options["gold_strata"] = ("batch",) if strata else ()
    expected, said = _recorded(lambda: goal.summarize_judged(episodes, **options))
    got, said_sharded = _recorded(
        lambda: goal.summarize_judged(episodes, **options, engine=engines.ShardedEngine(k))
    )
    # fractional verdicts too: stats.judged_partials adds them in fixed point
    assert_frame_equal(got, expected, check_exact=True)
    assert said_sharded == said


@settings(max_examples=10, deadline=None)
@given(data=st.data(), k=st.integers(1, 4))
def test_goal_rogan_gladen_shards_equal_polars(data: st.DataObject, k: int) -> None:
    episodes = data.draw(judged_episodes(fractional=False))
    options: dict[str, Any] = {"judge": "judge", "judge_sensitivity": 0.9}
    options["judge_specificity"] = 0.8
    expected, said = _recorded(lambda: goal.summarize_judged(episodes, **options))
    got, said_sharded = _recorded(
        lambda: goal.summarize_judged(episodes, **options, engine=engines.ShardedEngine(k))
    )
    assert_frame_equal(got, expected, check_exact=True)
    assert said_sharded == said


# ---------------------------------------------------------------- bad input, every engine

#: (what is wrong, the change to the table, the error message) -- the same on every engine.
_BAD = [
    (
        "gold outside {0, 1}",
        pl.when(pl.col("gold") == 1).then(pl.lit(2, pl.Int8)).otherwise("gold").alias("gold"),
        "the gold column `gold` has {gold_ones} values outside {{0, 1}} (2); a gold label is "
        "0/1, true/false, or null where not labelled.",
    ),
    (
        "no gold at all",
        pl.lit(None, pl.Int8).alias("gold"),
        "the gold column `gold` is null on all {rows} rows; PPI needs human labels on a random "
        "subset.",
    ),
    (
        "a null verdict",
        pl.when(pl.int_range(pl.len()) % 7 == 0).then(None).otherwise("judge").alias("judge"),
        "the judge column `judge` has {sevenths} nulls; the judge must score every unit",
    ),
    (
        "no judge column",
        pl.col("judge").alias("verdict"),
        "the judge column `judge` is not in the table",
    ),
    (
        "a string judge column",
        pl.col("judge").cast(pl.String).alias("judge"),
        "the judge column `judge` has type String; it must be numeric or boolean.",
    ),
]


def _bad_table(frame: pl.DataFrame, change: pl.Expr) -> pl.DataFrame:
    changed = frame.with_columns(change)
    return changed.drop("judge") if "verdict" in changed.columns else changed


def _message(template: str, table: str, frame: pl.DataFrame) -> str:
    counts = {
        "gold_ones": int((frame["gold"] == 1).sum()),
        "rows": frame.height,
        "sevenths": len(range(0, frame.height, 7)),
    }
    return f"{table}: " + template.format(**counts)


@pytest.fixture(scope="module")
def forks() -> pl.DataFrame:
    """Synthetic forks with a 0.9-accurate judge and gold on about 40 % of the branches."""
    from recoverylab import synth

    table = synth.generate("forks", 60, seed=3)["forks"]
    rng = np.random.default_rng(3)
    right = pl.Series(rng.random(table.height) < 0.9)
    labelled = pl.Series(rng.random(table.height) < 0.4)
    return table.with_columns(
        judge=pl.when(right).then(pl.col("success")).otherwise(~pl.col("success")),
        gold=pl.when(labelled).then(pl.col("success").cast(pl.Int8)),
    )


@pytest.fixture(scope="module")
def episodes() -> pl.DataFrame:
    """Episodes of 200 cases in two regimes, a 0.85-accurate judge, gold on about 40 %."""
    rng = np.random.default_rng(8)
    n = 1200
    case = rng.integers(0, 200, n)
    success = rng.random(n) < np.where(case % 3 == 0, 0.3, 0.6)
    right = rng.random(n) < 0.85
    return pl.DataFrame(
        {
            "case_id": [f"c{c:03d}" for c in case],
            "regime": np.where(case % 3 == 0, "unrecoverable", "recoverable"),
            "judge": np.where(right, success, ~success),
            "gold": np.where(rng.random(n) < 0.4, success.astype(np.int8), -1),
        }
    ).with_columns(gold=pl.when(pl.col("gold") >= 0).then(pl.col("gold")))


def _judged(protocol: str, table: pl.DataFrame, engine: object) -> pl.DataFrame:
    if protocol == "paired":
        return paired.summarize_judged(table, judge="judge", gold="gold", engine=engine)
    return goal.summarize_judged(table, judge="judge", gold="gold", engine=engine)


@pytest.mark.parametrize(("problem", "change", "template"), _BAD, ids=[b[0] for b in _BAD])
@pytest.mark.parametrize("protocol", ["paired", "goal"])
@pytest.mark.parametrize("engine", ["polars", "sharded"])
def test_bad_judged_input_is_one_error_on_every_engine(
    forks: pl.DataFrame,
    episodes: pl.DataFrame,
    protocol: str,
    engine: str,
    problem: str,
    change: pl.Expr,
    template: str,
) -> None:
    frame = forks if protocol == "paired" else episodes
    table = "forks" if protocol == "paired" else "episodes"
    runner = "polars" if engine == "polars" else engines.ShardedEngine(3)
    message = _message(template, table, frame)
    with pytest.raises(SchemaError, match=re.escape(message)):
        _judged(protocol, _bad_table(frame, change), runner)


def test_a_fractional_paired_verdict_is_refused_on_every_engine(forks: pl.DataFrame) -> None:
    half = forks.with_columns(judge=pl.col("judge").cast(pl.Float64) * 0.5)
    ones = int(forks["judge"].sum())
    message = (
        f"forks: the judge column `judge` has {ones} values other than 0 and 1; a paired "
        "outcome is a verdict (true/false), not a probability."
    )
    for engine in ("polars", engines.ShardedEngine(4)):
        with pytest.raises(SchemaError, match=re.escape(message)):
            paired.summarize_judged(half, judge="judge", gold="gold", engine=engine)
        with pytest.raises(SchemaError, match=re.escape(message)):
            paired.judge_agreement(half, judge="judge", gold="gold", engine=engine)


@pytest.mark.parametrize("engine", ["polars", "sharded"])
def test_a_column_a_parameter_names_is_checked_first(forks: pl.DataFrame, engine: str) -> None:
    runner = "polars" if engine == "polars" else engines.ShardedEngine(2)
    columns = ", ".join(forks.columns)
    missing = "which is not in the table (columns: " + columns + ")."
    calls = {
        "by": lambda: paired.summarize_judged(
            forks, judge="judge", gold="gold", by="model", engine=runner
        ),
        "gold_strata": lambda: paired.summarize_judged(
            forks, judge="judge", gold="gold", gold_strata="model", engine=runner
        ),
        "by ": lambda: paired.judge_agreement(
            forks, judge="judge", gold="gold", by="model", engine=runner
        ),
    }
    for parameter, call in calls.items():
        message = f"forks: parameter `{parameter.strip()}` names column `model`, {missing}"
        with pytest.raises(ParameterError, match=re.escape(message)):
            call()
    without = ", ".join(c for c in forks.columns if c != "task_id")
    message = f"forks: missing required column `task_id`; found columns: {without}."
    with pytest.raises(SchemaError, match=re.escape(message)):
        paired.judge_agreement(forks.drop("task_id"), judge="judge", gold="gold", engine=runner)


# ---------------------------------------------------------------- command line


def _goal_tables(tmp_path: Path) -> list[str]:
    """Synthetic goal tables with a judge and gold on the episodes; return the CLI options."""
    from recoverylab import synth

    tables = synth.generate("goal", 60, seed=2)
    scored = goal.score(*tables.values()).collect()
    rng = np.random.default_rng(2)
    right = pl.Series(rng.random(scored.height) < 0.85)
    labelled = pl.Series(rng.random(scored.height) < 0.5)
    verdicts = scored.select(
        "episode_id",
        judge=pl.when(right).then(pl.col("success")).otherwise(~pl.col("success")),
        gold=pl.when(labelled).then(pl.col("success").cast(pl.Int8)),
    )
    tables["episodes"] = tables["episodes"].join(verdicts, on="episode_id")
    options = []
    for name, frame in tables.items():
        path = tmp_path / f"{name}.parquet"
        frame.write_parquet(path)
        options += [f"--{name}", str(path)]
    return options


def _one_line(err: str, command: str) -> list[str]:
    return [line for line in err.splitlines() if not line.startswith(f"[{command}")]


@pytest.mark.parametrize(("problem", "change", "template"), _BAD, ids=[b[0] for b in _BAD])
def test_cli_goal_bad_judged_input_is_one_line_exit_2_nothing_written(
    tmp_path: Path, cli: Callable, problem: str, change: pl.Expr, template: str
) -> None:
    options = _goal_tables(tmp_path)
    source = Path(options[options.index("--episodes") + 1])
    original = pl.read_parquet(source)
    message = _message(template, "episodes", original)
    _bad_table(original, change).write_parquet(source)
    out, judged = tmp_path / "summary.parquet", tmp_path / "judged.parquet"
    result = cli(
        "goal", *options, "--judge", "judge", "--gold", "gold", "--out", out, "--judged-out", judged
    )
    assert result.code == 2
    lines = _one_line(result.err, "goal")
    assert len(lines) == 1, result.err
    assert message in lines[0]
    assert not out.exists()
    assert not judged.exists()


@pytest.mark.parametrize(("problem", "change", "template"), _BAD, ids=[b[0] for b in _BAD])
def test_cli_paired_bad_judged_input_is_one_line_exit_2_nothing_written(
    forks: pl.DataFrame,
    tmp_path: Path,
    cli: Callable,
    problem: str,
    change: pl.Expr,
    template: str,
) -> None:
    source = tmp_path / "forks.parquet"
    _bad_table(forks, change).write_parquet(source)
    out, agreement = tmp_path / "judged.parquet", tmp_path / "judge.parquet"
    options = ("--judge", "judge", "--gold", "gold", "--out", out, "--judge-out", agreement)
    result = cli("paired", source, *options)
    assert result.code == 2
    lines = _one_line(result.err, "paired")
    assert len(lines) == 1, result.err
    assert _message(template, "forks", forks) in lines[0]
    assert not out.exists()
    assert not agreement.exists()


# ---------------------------------------------------------------- Spark


@pytest.mark.slow  # about 15 s (20 s more to start Spark)
def test_spark_gives_the_polars_judged_results(
    spark: object, forks: pl.DataFrame, episodes: pl.DataFrame
) -> None:
    for verb in ("summarize_judged", "judge_agreement"):
        run = _paired_verbs(forks)[verb]
        expected, said = _recorded(lambda run=run: run("polars"))
        got, said_spark = _recorded(lambda run=run: run(spark))
        assert_frame_equal(got, expected, check_exact=True)
        assert said_spark == said
    expected, said = _recorded(lambda: _judged("goal", episodes, "polars"))
    got, said_spark = _recorded(lambda: _judged("goal", episodes, spark))
    assert_frame_equal(got, expected, check_exact=True)
    assert said_spark == said
    # bad input: the whole table's counts, as on polars (not one partition's)
    _, change, template = _BAD[0]
    with pytest.raises(SchemaError, match=re.escape(_message(template, "forks", forks))):
        _judged("paired", _bad_table(forks, change), spark)


@pytest.mark.slow  # about 25 s
def test_cli_engine_spark_writes_the_polars_result(
    spark: object, forks: pl.DataFrame, tmp_path: Path, cli: Callable
) -> None:
    source = tmp_path / "forks.parquet"
    forks.write_parquet(source)
    written = {}
    for engine in ("polars", "spark"):
        out, agreement = tmp_path / f"{engine}.parquet", tmp_path / f"{engine}_judge.parquet"
        result = cli(
            "paired",
            source,
            "--judge",
            "judge",
            "--gold",
            "gold",
            "--engine",
            engine,
            "--out",
            out,
            "--judge-out",
            agreement,
            "--quiet",
        )
        assert result.code == 0, result.err
        written[engine] = (pl.read_parquet(out), pl.read_parquet(agreement))
    for spark_frame, polars_frame in zip(written["spark"], written["polars"], strict=True):
        assert_frame_equal(spark_frame, polars_frame, check_exact=True)
    corrected = {}
    for engine in ("polars", "spark"):
        out = tmp_path / f"rogan_gladen_{engine}.parquet"
        rates = ("--judge-sensitivity", "0.9", "--judge-specificity", "0.85")
        result = cli("paired", source, "--judge", "judge", *rates, "--engine", engine, "--out", out)
        assert result.code == 0, result.err
        corrected[engine] = pl.read_parquet(out)
    assert_frame_equal(corrected["spark"], corrected["polars"], check_exact=True)
    options = _goal_tables(tmp_path)
    goal_out = {}
    for engine in ("polars", "spark"):
        judged = tmp_path / f"goal_{engine}.parquet"
        result = cli(
            "goal",
            *options,
            "--judge",
            "judge",
            "--gold",
            "gold",
            "--engine",
            engine,
            "--judged-out",
            judged,
            "--resamples",
            "200",
            "--quiet",
        )
        assert result.code == 0, result.err
        goal_out[engine] = pl.read_parquet(judged)
    assert_frame_equal(goal_out["spark"], goal_out["polars"], check_exact=True)
