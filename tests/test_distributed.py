"""The Spark engine gives exactly the polars results (recoverylab.distributed, issue 9).

One local[2] SparkSession (a session-scoped fixture) serves every test. Every input is
written as several parquet files with its rows shuffled, so each cluster's rows are spread over
the files and Spark must bring them together; the polars path reads the same files. Results
are compared exactly (same seed: same intervals and p-values). Spark has no categorical type,
so a categorical extra column comes back as text: the polars result's categoricals are cast
before comparing. The last tests need no Spark: partial queries of shards of whole clusters
add up to the one-machine result.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from recoverylab import (
    InputError,
    MissingDependencyError,
    ParameterError,
    SchemaError,
    distributed,
    goal,
    paired,
    synth,
    takeover,
)
from recoverylab.distributed import _spark

_PANDAS_WARNING = "ignore:PySpark does not yet fully support pandas:FutureWarning"
pytestmark = pytest.mark.filterwarnings(_PANDAS_WARNING)

GOAL_TABLES = ("cases", "resources", "episodes", "steps", "citations")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession for the test session (starting one takes 10-40 s here)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip(
            "no Java runtime: Spark needs Java 17+ (Debian: apt-get install default-jre-headless)"
        )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        session = distributed.session(
            "local[2]",
            config={
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "4",
                "spark.default.parallelism": "2",
                "spark.driver.memory": "1g",
            },
        )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def spread(frame: pl.DataFrame, directory: Path, files: int = 3, seed: int = 0) -> str:
    """Write ``frame`` with its rows shuffled as ``files`` parquet files; return the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=seed)
    size = -(-shuffled.height // files)
    for i in range(files):
        shuffled.slice(i * size, size).write_parquet(directory / f"part-{i}.parquet")
    return str(directory)


def files_holding(directory: str, column: str, value: str) -> int:
    """Count the parquet files of ``directory`` that hold a row with ``column == value``."""
    return sum(
        pl.read_parquet(path).filter(pl.col(column).cast(pl.String) == value).height > 0
        for path in sorted(Path(directory).glob("*.parquet"))
    )


def same(polars_result: pl.DataFrame, spark_result: pl.DataFrame) -> None:
    """Assert exact equality; categorical columns of the polars result compared as text."""
    text = [
        pl.col(c).cast(pl.String)
        for c, dtype in polars_result.schema.items()
        if isinstance(dtype, (pl.Categorical, pl.Enum))
    ]
    assert_frame_equal(polars_result.with_columns(text), spark_result, check_exact=True)


# --------------------------------------------------------------------------------------------
# Engine selection and the missing extra (no Java needed)
# --------------------------------------------------------------------------------------------


def test_without_pyspark_the_engine_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    scored = pl.DataFrame(
        {
            "case_id": ["c1"],
            "regime": ["recoverable"],
            "success": [True],
            "gp": [True],
            "compliant": [True],
            "steps": [1],
            "reason": [None],
        }
    )
    with pytest.raises(MissingDependencyError, match=r"pip install 'recoverylab\[spark\]'"):
        goal.summarize(scored, engine="spark")
    with pytest.raises(MissingDependencyError, match="the Spark engine needs `pyspark`"):
        distributed.session()


def test_an_unknown_engine_is_a_parameter_error() -> None:
    message = "parameter `engine` is 'polar'; it must be 'polars', 'spark' or a SparkSession."
    with pytest.raises(ParameterError, match=message):
        takeover.summarize(pl.DataFrame(), pl.DataFrame(), engine="polar")
    assert distributed.resolve_engine("polars") is None


def test_errors_of_several_partitions_say_whose_counts_they_show() -> None:
    metas = [
        {"partition": 3, "rows": {}, "error": ["InputError", "forks: 2 rows are bad (t9)."]},
        {"partition": 1, "rows": {}, "error": ["SchemaError", "forks: 1 key appears twice."]},
        {"partition": 0, "rows": {}, "error": None},
    ]
    with pytest.raises(SchemaError) as caught:
        _spark._raise_errors(metas)
    assert str(caught.value) == (
        "forks: 1 key appears twice. [Spark: 2 of 3 partitions found problems; counts and keys "
        "above are partition 1's.]"
    )
    with pytest.raises(InputError, match=r"^forks: 2 rows are bad \(t9\)\.$"):
        _spark._raise_errors(metas[:1])


# --------------------------------------------------------------------------------------------
# Goal preservation
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def goal_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Synthetic goal tables (nulls, judged and extra columns, categorical keys), 3 files each."""
    tables = synth.generate("goal", 30, seed=4, repeats=2)
    tables["episodes"] = tables["episodes"].with_columns(
        pl.col("case_id", "model").cast(pl.Categorical),
        pl.when(pl.col("repeat") == 0).then(pl.lit("a")).alias("split"),  # null on repeat 1
    )
    root = tmp_path_factory.mktemp("goal")
    return {
        name: spread(frame, root / name, seed=i) for i, (name, frame) in enumerate(tables.items())
    }


def test_goal_score_and_summaries_equal_polars(spark: object, goal_files: dict[str, str]) -> None:
    sources = [goal_files[t] for t in GOAL_TABLES]
    first_episode = pl.read_parquet(goal_files["episodes"])["episode_id"].sort()[0]
    assert files_holding(goal_files["steps"], "episode_id", first_episode) == 3
    expected = goal.score(*sources).collect()
    scored = goal.score(*sources, engine=spark)
    got = pl.from_arrow(scored.toArrow())
    assert isinstance(got, pl.DataFrame)
    same(expected.sort("episode_id"), got.sort("episode_id"))
    for by, cluster, method in ((("model", "regime"), None, "percentile"), ((), "case_id", "bca")):
        settings = {"by": by, "cluster": cluster, "method": method, "n_resamples": 500, "seed": 3}
        same(goal.summarize(expected, **settings), goal.summarize(scored, engine=spark, **settings))
    same(
        goal.barrier_drop(expected, n_resamples=500),
        goal.barrier_drop(scored, n_resamples=500, engine=spark),
    )
    by_split = goal.summarize(expected, by=("split",), n_resamples=200)
    assert by_split["split"].null_count() == 1  # the null key is a group of its own
    same(by_split, goal.summarize(scored, by=("split",), n_resamples=200, engine=spark))


def test_goal_nested_form_equals_polars(spark: object, tmp_path: Path) -> None:
    tables = synth.generate("goal", 6, seed=2)
    steps = tables["steps"].sort("episode_id", "step")
    nested = (
        tables["episodes"]
        .join(
            steps.group_by("episode_id").agg(
                pl.col("resource_id").alias("visited"),
                pl.col("prohibited").alias("prohibited_steps"),
            ),
            on="episode_id",
            how="left",
        )
        .join(
            tables["citations"]
            .group_by("episode_id")
            .agg(pl.col("resource_id").alias("citations")),
            on="episode_id",
            how="left",
        )
        .with_columns(pl.col("visited", "citations").fill_null([]))
    )
    cases = spread(tables["cases"], tmp_path / "cases", 2)
    resources = spread(tables["resources"], tmp_path / "resources", 2)
    episodes = spread(nested, tmp_path / "episodes", 2)
    expected = goal.score(cases, resources, episodes).collect().sort("episode_id")
    got = pl.from_arrow(goal.score(cases, resources, episodes, engine=spark).toArrow())
    assert isinstance(got, pl.DataFrame)
    same(expected, got.sort("episode_id"))


def test_goal_errors_equal_polars(spark: object, tmp_path: Path) -> None:
    tables = synth.generate("goal", 6, seed=2)
    episodes = tables["episodes"]
    # An episode of an unknown case; a duplicated episode_id under two different cases.
    broken = {
        "of unknown cases": pl.concat(
            [
                episodes,
                episodes.head(1).with_columns(
                    pl.lit("e-new").alias("episode_id"), pl.lit("nowhere").alias("case_id")
                ),
            ]
        ),
        "more than once": pl.concat(
            [
                episodes,
                episodes.head(1).with_columns(pl.lit(episodes["case_id"][-1]).alias("case_id")),
            ]
        ),
        "the table is empty": episodes.clear(),
        "missing required column": episodes.drop("requested_user"),
    }
    for i, (label, frame) in enumerate(broken.items()):
        paths = {
            name: spread(tables[name] if name != "episodes" else frame, tmp_path / f"{i}" / name, 2)
            for name in GOAL_TABLES
        }
        sources = [paths[t] for t in GOAL_TABLES]
        with pytest.raises((SchemaError, InputError), match=label) as expected:
            goal.score(*sources)
        with pytest.raises(type(expected.value)) as got:
            goal.score(*sources, engine=spark)
        assert str(got.value) == str(expected.value), label


# --------------------------------------------------------------------------------------------
# Takeover
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def takeover_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Synthetic takeover tables (splits, rejected states, nulls, categorical agent), 3 files."""
    tables = synth.generate("takeover", 30, seed=2, splits=("a", "b"))
    states = tables["states"].with_columns(
        pl.when(pl.col("depth") > 0).then(pl.col("source_agent")).alias("source_agent"),
    )
    attempts = tables["attempts"].with_columns(
        pl.col("agent").cast(pl.Categorical),
        pl.when(pl.col("repeat") == 1).then(pl.col("cost")).alias("cost"),
    )
    root = tmp_path_factory.mktemp("takeover")
    return {
        "states": spread(states, root / "states", seed=1),
        "attempts": spread(attempts, root / "attempts", seed=2),
    }


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"common_states": True, "common_sample": True},
        {"by": ("agent", "depth", "split"), "common_sample": True, "ci_method": "bca"},
        {"by": ("agent",), "interval": "wilson", "common_states": True, "k": 2},
    ],
    ids=["default", "common", "split-bca", "wilson"],
)
def test_takeover_summary_equals_polars(
    spark: object, takeover_files: dict[str, str], settings: dict[str, object]
) -> None:
    states, attempts = takeover_files["states"], takeover_files["attempts"]
    first_state = pl.read_parquet(states)["state_id"].sort()[0]
    assert files_holding(attempts, "state_id", first_state) >= 2
    expected = takeover.summarize(states, attempts, n_resamples=300, seed=5, **settings)
    got = takeover.summarize(states, attempts, n_resamples=300, seed=5, engine=spark, **settings)
    same(expected, got)


def test_takeover_errors_equal_polars(spark: object, tmp_path: Path) -> None:
    tables = synth.generate("takeover", 6, seed=3)
    states, attempts = tables["states"], tables["attempts"]
    other = states["workflow_id"].unique().sort()[-1]
    broken: dict[str, tuple[pl.DataFrame, pl.DataFrame]] = {
        # a root cause under two workflows: found only by combining the partitions
        "under more than one workflow": (
            states.with_columns(
                pl.when(pl.col("state_id") == states["state_id"].sort()[0])
                .then(pl.lit(other))
                .otherwise(pl.col("workflow_id"))
                .alias("workflow_id")
            ),
            attempts,
        ),
        # repeats of one unit start at 1 while the table starts at 0: a gap
        "has gaps": (
            states,
            attempts.filter(
                ~(
                    (pl.col("repeat") == 0)
                    & (pl.col("agent") == "agent_a")
                    & (pl.col("state_id") == attempts["state_id"][0])
                )
            ),
        ),
        "not in `states`": (states.filter(pl.col("state_id") != attempts["state_id"][0]), attempts),
    }
    for i, (label, (s, a)) in enumerate(broken.items()):
        state_dir = spread(s, tmp_path / f"{i}" / "states", 2)
        attempt_dir = spread(a, tmp_path / f"{i}" / "attempts", 2)
        with pytest.raises((InputError, ParameterError), match=label) as expected:
            takeover.summarize(state_dir, attempt_dir, n_resamples=100)
        with pytest.raises(type(expected.value)) as got:
            takeover.summarize(state_dir, attempt_dir, n_resamples=100, engine=spark)
        assert str(got.value) == str(expected.value), label


def test_distributed_functions_take_a_session(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="parameter `spark` is str; it must be a SparkSession"):
        distributed.takeover_summarize("local[2]", "states/", "attempts/")


# --------------------------------------------------------------------------------------------
# Paired forks
# --------------------------------------------------------------------------------------------


def _forks(tasks: int, seed: int, **options: float) -> pl.DataFrame:
    """Synthetic forks with a categorical extra key and some null prefix hashes."""
    forks = synth.generate("forks", tasks, seed=seed, **options)["forks"]
    digit = pl.col("task_id").str.slice(-1).cast(pl.Int64)
    return forks.with_columns(
        (digit % 2).cast(pl.String).cast(pl.Categorical).alias("model"),
        pl.when(digit == 3).then(None).otherwise(pl.col("prefix_hash")).alias("prefix_hash"),
        pl.lit("run-1").alias("note"),
    )


@pytest.fixture(scope="module")
def forks_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Forks with carry-forward, unpaired and prefix-mismatch rows, spread over 3 files."""
    forks = _forks(150, 3, mismatch_rate=0.05, unpaired_rate=0.05)
    return spread(forks, tmp_path_factory.mktemp("forks") / "forks")


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"pair_by": "model"},
        {"by": "model", "cohort": "factual_success", "ci_method": "bca"},
    ],
    ids=["per-cell", "per-task", "cohort-bca"],
)
def test_paired_summary_equals_polars(
    spark: object, forks_dir: str, settings: dict[str, object]
) -> None:
    assert files_holding(forks_dir, "task_id", "t0000000") == 3
    expected = paired.summarize(forks_dir, n_resamples=300, seed=2, **settings)
    assert expected["carried_forward"].sum() > 0
    assert expected["unpaired"].sum() > 0
    assert expected["prefix_mismatch"].sum() > 0
    got = paired.summarize(forks_dir, n_resamples=300, seed=2, engine=spark, **settings)
    same(expected, got)


def test_many_small_partitions_give_the_same_cells(spark: object, forks_dir: str) -> None:
    # a few tasks per partition: some partitions lack recovery points their tasks reach
    expected = paired.summarize(forks_dir, by="model", n_resamples=200, seed=6)
    got = distributed.paired_summarize(
        spark, forks_dir, by="model", n_resamples=200, seed=6, partitions=40
    )
    same(expected, got)


def test_paired_contrast_equals_polars(spark: object, forks_dir: str) -> None:
    settings = {"pair_by": "model", "by": "model", "n_resamples": 300, "seed": 1}
    expected = paired.contrast(forks_dir, "stale2", "clean", **settings)
    same(expected, paired.contrast(forks_dir, "stale2", "clean", engine=spark, **settings))


def test_policy_evaluation_equals_polars(spark: object, tmp_path: Path) -> None:
    forks = _forks(150, 4)
    shared_none = forks.filter((pl.col("method") == "none") & pl.col("delay").is_null())
    early = pl.col("task_id").str.slice(-1) < "5"
    decisions = shared_none.select(
        "task_id", "condition", "model", pl.when(early).then(pl.lit(1)).alias("delay")
    )
    forks_path = spread(forks, tmp_path / "forks")
    decisions_path = spread(decisions, tmp_path / "decisions", seed=7)
    settings = {"pair_by": "model", "method": "refresh", "n_resamples": 300, "seed": 4}
    expected = paired.evaluate_policy(decisions_path, forks_path, **settings)
    assert expected["interventions"].sum() > 0
    got = paired.evaluate_policy(decisions_path, forks_path, engine=spark, **settings)
    same(expected, got)


def test_paired_errors_equal_polars(spark: object, tmp_path: Path) -> None:
    forks = _forks(12, 5)
    recovery = forks.filter(pl.col("method") != "none")
    broken = {
        # the same branch twice, the copies in different files
        "more than once": pl.concat([forks, recovery.head(1)]),
        # a recovery row at a point after its task ended: an input error, not a carry-forward
        "at or after the end": forks.with_columns(
            pl.when((pl.col("method") == "none") & (pl.col("task_id") == "t0000002"))
            .then(pl.lit(0))
            .otherwise(pl.col("end_action"))
            .alias("end_action"),
            pl.when(pl.col("task_id") == "t0000002")
            .then(pl.lit(1))
            .otherwise(pl.col("perturb_action"))
            .alias("perturb_action"),
        ),
        "missing required column": forks.drop("success"),
    }
    for i, (label, frame) in enumerate(broken.items()):
        path = spread(frame, tmp_path / f"{i}", seed=i)
        with pytest.raises((SchemaError, InputError), match=label) as expected:
            paired.summarize(path, n_resamples=50)
        with pytest.raises(type(expected.value)) as got:
            paired.summarize(path, n_resamples=50, engine=spark)
        assert str(got.value) == str(expected.value), label
    decisions = forks.filter(pl.col("method") == "none").select("task_id", "condition").clear()
    decisions = decisions.with_columns(pl.lit(None, dtype=pl.Int64).alias("delay"))
    forks_path = spread(forks, tmp_path / "policy-forks")
    decisions_path = spread(decisions, tmp_path / "policy-decisions", files=1)
    with pytest.raises(SchemaError, match=r"^decisions: the table is empty"):
        paired.evaluate_policy(decisions_path, forks_path, method="refresh", engine=spark)
    with pytest.raises(ParameterError, match="parameter `method` is 'reboot'"):
        paired.evaluate_policy(decisions_path, forks_path, method="reboot", engine=spark)


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def test_cli_engine_spark_writes_the_polars_results(
    spark: object,
    cli: Callable[..., Any],
    tmp_path: Path,
    forks_dir: str,
    takeover_files: dict[str, str],
) -> None:
    stats = ["--resamples", "200", "--seed", "3", "--quiet"]
    out = tmp_path / "paired.parquet"
    result = cli(
        "paired", forks_dir, "--pair-by", "model", *stats, "--engine", "spark", "--out", out
    )
    assert result.code == 0, result.err
    expected = paired.summarize(forks_dir, pair_by="model", n_resamples=200, seed=3)
    same(expected, pl.read_parquet(out))
    tables = ["--states", takeover_files["states"], "--attempts", takeover_files["attempts"]]
    result = cli("takeover", *tables, *stats, "--engine", "spark", "--out-dir", tmp_path / "t")
    assert result.code == 0, result.err
    expected = takeover.summarize(*takeover_files.values(), n_resamples=200, seed=3)
    same(expected, pl.read_parquet(tmp_path / "t" / "summary.parquet"))


def test_cli_goal_on_spark_writes_scored_episodes_as_a_directory(
    spark: object, cli: Callable[..., Any], tmp_path: Path, goal_files: dict[str, str]
) -> None:
    episodes, summary, drop = tmp_path / "scored", tmp_path / "summary.parquet", tmp_path / "d"
    tables = [f"--{t}={goal_files[t]}" for t in GOAL_TABLES]
    options = ["--by", "model,regime", "--resamples", "100", "--engine", "spark"]
    outputs = ["--out", summary, "--episodes-out", episodes, "--drop-out", drop]
    result = cli("goal", *tables, *options, *outputs)
    assert result.code == 0, result.err
    assert f"wrote {episodes}/ (" in result.err
    expected = goal.score(*(goal_files[t] for t in GOAL_TABLES)).collect()
    assert pl.read_parquet(episodes / "*.parquet").height == expected.height
    by = ("model", "regime")
    same(goal.summarize(expected, by=by, n_resamples=100), pl.read_parquet(summary))
    same(goal.barrier_drop(expected, n_resamples=100), pl.read_parquet(drop))


def test_cli_engine_options_are_checked(
    spark: object, cli: Callable[..., Any], forks_dir: str
) -> None:
    result = cli("paired", forks_dir, "--spark-master", "local[2]")
    assert result.code == 2
    assert "`--spark-master` needs `--engine spark`." in result.err
    result = cli("paired", forks_dir, "--engine", "spark", "--overlap", "refresh,replan_only")
    assert result.code == 2
    assert (
        "`--overlap` is not available with `--engine spark`. Hint: run them with --engine polars."
        in result.err
    )


# --------------------------------------------------------------------------------------------
# Shards without Spark: the partial queries of whole clusters add up to the one-machine result
# --------------------------------------------------------------------------------------------

SHARDS = settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _in_shards(
    frames: dict[str, pl.DataFrame], key: dict[str, pl.Series], shards: int, seed: int
) -> list[dict[str, pl.DataFrame]]:
    """Split tables into shards of whole clusters (``key``: each table's cluster per row)."""
    distinct = pl.concat(list(key.values())).unique().sort()
    drawn = np.random.default_rng(seed).integers(0, shards, distinct.len()).tolist()
    lookup = dict(zip(distinct.to_list(), drawn, strict=True))
    return [
        {
            name: frame.filter(key[name].replace_strict(lookup, return_dtype=pl.Int64) == shard)
            for name, frame in frames.items()
        }
        for shard in range(shards)
    ]


def _combine(results: list[dict[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    names = results[0].keys()
    return {name: pl.concat([r[name] for r in results]) for name in names}


@SHARDS
@example(seed=0, shards=12, pair_by=False, by_model=True)
@given(
    seed=st.integers(0, 2**16),
    shards=st.integers(1, 12),
    pair_by=st.booleans(),
    by_model=st.booleans(),
)
def test_paired_partials_of_task_shards_add_up(
    seed: int, shards: int, pair_by: bool, by_model: bool
) -> None:
    # Up to one task per shard: a shard may lack recovery points that its tasks are carried
    # forward to (every task of it ended before them).
    from recoverylab.distributed import _paired
    from recoverylab.paired import _pairs, _summary

    forks = _forks(12, seed, mismatch_rate=0.1, unpaired_rate=0.1, end_hazard=0.2).drop("note")
    forks = forks.with_columns(pl.col("model").cast(pl.String))
    model = ("model",)
    keys = {"pair_by": model if pair_by else (), "by": model if by_model else (), "cohort": "full"}
    table, by_keys = _pairs.prepare(forks, **keys)
    design = _pairs.design_grid(table)
    parts = [
        _paired._summary_shard(
            shard, pair_by=table.pair_by, by=by_keys, cohort="full", design=design
        )
        for shard in _in_shards({"forks": forks}, {"forks": forks["task_id"]}, shards, seed)
        if shard["forks"].height
    ]
    got = _summary.finish(_combine(parts)["partials"], confidence=0.9, n_resamples=200, seed=seed)
    expected = paired.summarize(forks, confidence=0.9, n_resamples=200, seed=seed, **keys)
    assert_frame_equal(expected, got, check_exact=True)


@SHARDS
@given(seed=st.integers(0, 2**16), shards=st.integers(1, 4))
def test_goal_partials_of_case_shards_add_up(seed: int, shards: int) -> None:
    from recoverylab.distributed import _goal

    tables = synth.generate("goal", 8, seed=seed, repeats=2)
    episodes = tables["episodes"]
    case_of = dict(zip(episodes["episode_id"], episodes["case_id"], strict=True))
    key = {
        name: frame["case_id"]
        if "case_id" in frame.columns
        else frame["episode_id"].replace_strict(case_of, return_dtype=pl.String)
        for name, frame in tables.items()
    }
    parts = _in_shards(tables, key, shards, seed)
    scored = pl.concat([_goal._score_shard(p)["scored"] for p in parts if p["cases"].height])
    expected = goal.score(*(tables[t] for t in GOAL_TABLES)).collect()
    assert_frame_equal(expected.sort("episode_id"), scored.sort("episode_id"), check_exact=True)
    by, cluster, judged = goal._summary_plan(scored.schema, ("model",), None, "percentile")
    shares = _in_shards({"scored": scored}, {"scored": scored[cluster]}, shards, seed + 1)
    partials = pl.concat(
        [goal._summary_partials(s["scored"].lazy(), by, cluster, judged).collect() for s in shares]
    )
    got = goal._summary_finish(
        partials,
        by,
        cluster,
        judged,
        n_resamples=200,
        confidence=0.95,
        method="percentile",
        seed=seed,
    )
    assert_frame_equal(goal.summarize(expected, by=("model",), n_resamples=200, seed=seed), got)


@SHARDS
@given(
    seed=st.integers(0, 2**16),
    shards=st.integers(1, 4),
    common_states=st.booleans(),
    common_sample=st.booleans(),
)
def test_takeover_partials_of_workflow_shards_add_up(
    seed: int, shards: int, common_states: bool, common_sample: bool
) -> None:
    from recoverylab.distributed import _takeover
    from recoverylab.takeover import _summary

    tables = synth.generate("takeover", 8, seed=seed, missing_unit_rate=0.2)
    states, attempts = tables["states"], tables["attempts"]
    workflow_of = dict(zip(states["state_id"], states["workflow_id"], strict=True))
    key = {
        "states": states["workflow_id"],
        "attempts": attempts["state_id"].replace_strict(workflow_of, return_dtype=pl.String),
    }
    parts = _in_shards({"states": states, "attempts": attempts}, key, shards, seed)
    parts = [p for p in parts if p["states"].height]
    by = ["agent", "depth"]
    base = int(attempts["repeat"].min())  # type: ignore[arg-type]
    options = {"by": by, "k": 2, "base": base}
    agents = None
    if common_states:
        found = [_takeover._agents_shard(p, **options)["agents"] for p in parts]
        agents = pl.concat(found)["agent"].n_unique()
    depths = None
    if common_sample:
        found = [
            _takeover._depths_shard(p, **options, common_states=common_states, agents=agents)
            for p in parts
        ]
        distinct = pl.concat([f["depths"] for f in found]).unique()
        depths = distinct.group_by("agent").agg(pl.len().alias("__depths"))
    results = _combine(
        [
            _takeover._summary_shard(
                p,
                **options,
                common_states=common_states,
                common_sample=common_sample,
                agents=agents,
                depths=depths,
            )
            for p in parts
        ]
    )
    got = _summary._finish_units(
        results["partials"],
        results["slices"],
        by,
        ("depth",),
        2,
        interval="bootstrap",
        confidence=0.95,
        n_resamples=200,
        ci_method="percentile",
        seed=seed,
    )
    expected = takeover.summarize(
        states,
        attempts,
        k=2,
        common_states=common_states,
        common_sample=common_sample,
        n_resamples=200,
        seed=seed,
    )
    assert_frame_equal(expected, got, check_exact=True)


def test_a_worker_without_the_packages_is_told_what_to_install() -> None:
    failure = RuntimeError("  File worker.py\nModuleNotFoundError: No module named 'pyarrow'")
    error = _spark.worker_import_error(failure)
    assert isinstance(error, MissingDependencyError)
    assert str(error) == (
        "Spark's Python workers cannot import `pyarrow`. Hint: install 'recoverylab[spark]' in "
        "the workers' Python environment and point Spark at that interpreter "
        "(spark.pyspark.python or PYSPARK_PYTHON)."
    )
    assert _spark.worker_import_error(RuntimeError("division by zero")) is None
