"""Every engine gives exactly the polars results (recoverylab.engines; issues 9 and 14).

The generic test at the top runs every aggregating verb on the polars engine, the sharded
polars engine (k shards, hypothesis over k and the row order) and Spark.

One local[2] SparkSession (a session-scoped fixture) serves every test. Every input is
written as several parquet files with its rows shuffled, so each cluster's rows are spread over
the files and Spark must bring them together; the polars path reads the same files. Results
are compared exactly (same seed: same intervals and p-values). Spark has no categorical type,
so a categorical extra column comes back as text: the polars result's categoricals are cast
before comparing.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    engines,
    goal,
    paired,
    plan,
    router,
    synth,
    takeover,
)
from recoverylab.engines import PolarsEngine, ShardedEngine, SparkEngine, _spark

_PANDAS_WARNING = "ignore:PySpark does not yet fully support pandas:FutureWarning"
pytestmark = pytest.mark.filterwarnings(_PANDAS_WARNING)

GOAL_TABLES = ("cases", "resources", "episodes", "steps", "citations")


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
# Every aggregating verb, every engine
# --------------------------------------------------------------------------------------------


@functools.cache
def _tables() -> dict[str, pl.DataFrame]:
    """Small synthetic inputs of every protocol (with carry-forward, exclusions, rejections)."""
    forks = synth.generate(
        "forks", 40, seed=3, mismatch_rate=0.1, unpaired_rate=0.1, end_hazard=0.2
    )["forks"]
    digit = pl.col("task_id").str.slice(-1).cast(pl.Int64)
    forks = forks.with_columns((digit % 2).cast(pl.String).alias("model"))
    policy_forks = synth.generate("forks", 40, seed=4)["forks"].with_columns(
        (digit % 2).cast(pl.String).alias("model")
    )
    shared_none = policy_forks.filter((pl.col("method") == "none") & pl.col("delay").is_null())
    decisions = shared_none.select(
        "task_id", "condition", pl.when(digit < 5).then(pl.lit(1)).alias("delay")
    )
    reference = shared_none.select(
        "task_id", "condition", pl.when(digit % 3 == 0).then(pl.lit(1)).alias("delay")
    )
    goal_tables = synth.generate("goal", 10, seed=4, repeats=2)
    scored = goal.score(*(goal_tables[t] for t in GOAL_TABLES)).collect()
    takeover_tables = synth.generate("takeover", 10, seed=2, missing_unit_rate=0.2)
    trials = takeover_tables["attempts"].join(
        takeover_tables["states"].select("state_id", "workflow_id", "depth"), on="state_id"
    )
    held_out = synth.generate("decision_points", 120, seed=2, prefix="b")
    return {
        "trials": trials,
        "points": held_out["decision_points"],
        "point_forks": held_out["forks"],
        "forks": forks,
        "decisions": decisions,
        "reference": reference,
        "policy_forks": policy_forks,
        **goal_tables,
        "scored": scored,
        "states": takeover_tables["states"],
        "attempts": takeover_tables["attempts"],
    }


@functools.cache
def _fitted_router() -> router.Router:
    """A router fitted on tasks other than the held-out ones of :func:`_tables`."""
    train = synth.generate("decision_points", 200, seed=1, prefix="a")
    features = ["repetition", "noops", "obs_novelty", "consistency", "progress"]
    return router.Router().fit(train["decision_points"], train["forks"], features=features)


def _router_compare(t: dict[str, pl.DataFrame], engine: object) -> object:
    policies = {"router": _fitted_router(), "never": router.Never()}
    return router.compare(policies, t["points"], t["point_forks"], engine=engine, **STATISTICS)


def _router_uplift(t: dict[str, pl.DataFrame], engine: object) -> object:
    scores = {"router": _fitted_router(), "never": router.Never(), "progress": "progress"}
    res = router.uplift(scores, t["points"], t["point_forks"], engine=engine, **STATISTICS)
    return pl.concat([res.metrics, res.curves], how="diagonal")


def _goal_score(t: dict[str, pl.DataFrame], engine: object) -> object:
    return goal.score(*(t[name] for name in GOAL_TABLES), engine=engine)


STATISTICS: dict[str, Any] = {"n_resamples": 200, "seed": 7}

#: Every aggregating verb (and goal.score, row-level), as (tables, engine) -> result.
VERBS: dict[str, Callable[[dict[str, pl.DataFrame], object], object]] = {
    "paired.summarize": lambda t, e: paired.summarize(t["forks"], engine=e, **STATISTICS),
    "paired.summarize[pair_by,by]": lambda t, e: paired.summarize(
        t["forks"], pair_by="model", by="model", ci_method="bca", engine=e, **STATISTICS
    ),
    "paired.summarize[pair_by]": lambda t, e: paired.summarize(
        t["forks"], pair_by="model", engine=e, **STATISTICS
    ),
    "paired.contrast": lambda t, e: paired.contrast(
        t["forks"], "stale2", "clean", by="model", engine=e, **STATISTICS
    ),
    "paired.evaluate_policy": lambda t, e: paired.evaluate_policy(
        t["decisions"], t["policy_forks"], method="refresh", by="model", engine=e, **STATISTICS
    ),
    "paired.evaluate_policy[reference]": lambda t, e: paired.evaluate_policy(
        t["decisions"],
        t["policy_forks"],
        reference=t["reference"],
        method="refresh",
        engine=e,
        **STATISTICS,
    ),
    "paired.rescue_overlap": lambda t, e: paired.rescue_overlap(
        t["forks"], "refresh", "replan_only", by="model", engine=e
    ),
    "paired.break_even": lambda t, e: paired.break_even(
        t["forks"], by=["model"], engine=e, **STATISTICS
    ),
    "paired.pilot_rates": lambda t, e: paired.pilot_rates(
        t["forks"], by=["model", "method"], engine=e, **STATISTICS
    ),
    "goal.score": _goal_score,
    "goal.summarize": lambda t, e: goal.summarize(
        t["scored"], by=("model",), engine=e, **STATISTICS
    ),
    "goal.barrier_drop": lambda t, e: goal.barrier_drop(t["scored"], engine=e, **STATISTICS),
    "takeover.summarize": lambda t, e: takeover.summarize(
        t["states"], t["attempts"], k=2, engine=e, **STATISTICS
    ),
    "takeover.summarize[common]": lambda t, e: takeover.summarize(
        t["states"],
        t["attempts"],
        k=2,
        common_states=True,
        common_sample=True,
        engine=e,
        **STATISTICS,
    ),
    "takeover.compare_agents": lambda t, e: takeover.compare_agents(
        t["states"],
        t["attempts"],
        "agent_a",
        "agent_b",
        by=("depth",),
        k=2,
        engine=e,
        **STATISTICS,
    ),
    "takeover.compare_agents[common]": lambda t, e: takeover.compare_agents(
        t["states"],
        t["attempts"],
        "agent_a",
        "agent_b",
        k=2,
        common_sample=True,
        engine=e,
        **STATISTICS,
    ),
    "takeover.reliability": lambda t, e: takeover.reliability(
        t["states"], t["attempts"], k=2, common_sample=True, engine=e, **STATISTICS
    ),
    "takeover.repeats_reliability": lambda t, e: takeover.repeats_reliability(
        t["trials"],
        unit=["state_id", "agent"],
        cluster="workflow_id",
        by=["agent", "depth"],
        k=1,
        engine=e,
        **STATISTICS,
    ),
    "router.compare": _router_compare,
    "router.uplift": _router_uplift,
    "takeover.awareness_split": lambda t, e: takeover.awareness_split(
        t["states"], t["attempts"], by=("agent", "depth"), common_sample=True, engine=e
    ),
}


def _result(verb: str, engine: object, order: int | None = None) -> pl.DataFrame:
    """Run ``verb`` on ``engine`` (inputs' rows shuffled by ``order``); return a sorted frame."""
    tables = _tables()
    if order is not None:
        tables = {n: f.sample(fraction=1.0, shuffle=True, seed=order) for n, f in tables.items()}
    out = VERBS[verb](tables, engine)
    if isinstance(out, pl.LazyFrame):
        out = out.collect()
    elif not isinstance(out, pl.DataFrame):  # a Spark DataFrame (row-level goal.score)
        out = pl.from_arrow(out.toArrow())  # type: ignore[attr-defined]
    assert isinstance(out, pl.DataFrame)
    return out.sort("episode_id") if verb == "goal.score" else out


@pytest.mark.parametrize("verb", VERBS)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(k=1, order=0)
@example(k=3, order=1)
@example(k=7, order=2)
@given(k=st.integers(1, 9), order=st.integers(0, 2**16))
def test_every_engine_gives_the_polars_result(verb: str, k: int, order: int) -> None:
    expected = _result(verb, "polars")
    assert expected.height > 0
    same(expected, _result(verb, ShardedEngine(k=k, seed=order), order))


@pytest.mark.parametrize("verb", VERBS)
def test_spark_gives_the_polars_result(spark: object, verb: str) -> None:
    same(_result(verb, "polars"), _result(verb, spark, order=5))


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
        engines.session()


def test_an_unknown_engine_is_a_parameter_error() -> None:
    message = (
        "parameter `engine` is 'polar'; it must be 'polars', 'spark', a SparkSession or an "
        "engine (recoverylab.engines)."
    )
    with pytest.raises(ParameterError, match=re.escape(message)):
        takeover.summarize(pl.DataFrame(), pl.DataFrame(), engine="polar")
    assert engines.resolve("polars") == PolarsEngine()
    engine = ShardedEngine(k=2)
    assert engines.resolve(engine) is engine
    with pytest.raises(ParameterError, match=r"parameter `k` is 0; it must be an integer >= 1\."):
        ShardedEngine(k=0)


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
        settings = {
            "by": by,
            "cluster": cluster,
            "ci_method": method,
            "n_resamples": 500,
            "seed": 3,
        }
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


def test_the_spark_engine_takes_a_session(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="parameter `spark` is str; it must be a SparkSession"):
        takeover.summarize("states/", "attempts/", engine=SparkEngine("local[2]"))


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


def test_the_caller_chooses_the_engine_not_the_plan() -> None:
    """engines.run resolves an ``engine=`` name; plan.run takes only an engine object."""
    keys = ["task_id", "condition", "model", "method", "delay"]
    pairing = paired.pairs_plan(_tables()["forks"])
    expected = plan.run(PolarsEngine(), pairing).sort(keys)
    assert_frame_equal(engines.run("polars", pairing).sort(keys), expected, check_exact=True)
    got = engines.rows("polars", pairing).collect().sort(keys)
    assert_frame_equal(got, expected, check_exact=True)
    for verb in (plan.run, plan.rows):
        with pytest.raises(ParameterError, match=r"^parameter `engine` is 'polars'; plan\.r"):
            verb("polars", pairing)
    with pytest.raises(ParameterError, match="parameter `engine` is 3; it must be 'polars'"):
        engines.run(3, pairing)


def _stage_plan(table: pl.DataFrame) -> plan.Plan:
    """Two stages: the row count per shard (for shards only), then the rows and that state."""

    def count(frames: Any, state: Any) -> dict[str, pl.LazyFrame]:
        return {"n": frames["t"].select(pl.len().cast(pl.Int64).alias("n"))}

    def rows(frames: Any, state: Any) -> dict[str, pl.LazyFrame]:
        total = frames["t"].select(pl.len()).collect().item() if state is None else state
        return {"out": frames["t"].select(pl.len().cast(pl.Int64).alias("rows"), n=total)}

    return plan.Plan(
        inputs=(plan.Input("t", table, key="k"),),
        stages=(
            plan.Stage("count", count, lambda p, _: int(p["n"]["n"].sum()), for_shards=True),
            plan.Stage("rows", rows, lambda p, _: p["out"]),
        ),
        finish=lambda out: (int(out["rows"].sum()), out["n"].to_list()),
    )


def test_a_stage_for_shards_runs_on_shards_and_is_skipped_on_the_whole_table() -> None:
    table = pl.DataFrame({"k": ["a", "b", "c", "d", "e"], "v": [1, 2, 3, 4, 5]})
    seen: list[str] = []
    staged = dataclasses.replace(_stage_plan(table), progress=seen.append)
    assert plan.run(PolarsEngine(), staged) == (5, [5])  # the rows stage counted itself
    assert seen == ["rows"]
    rows, totals = plan.run(ShardedEngine(k=3, seed=1), staged)
    assert rows == 5
    assert set(totals) == {5}  # every shard got the whole table's count from the first stage
    assert len(totals) > 1
    assert seen[1:] == ["count", "rows"]


@settings(max_examples=5, deadline=None)
@example(k=7, order=0, pair_by=())
@given(k=st.integers(1, 9), order=st.integers(0, 2**16), pair_by=st.sampled_from([(), ("model",)]))
def test_the_pairs_plan_gives_the_pairs_on_every_shard_count(
    k: int, order: int, pair_by: tuple[str, ...]
) -> None:
    forks = _tables()["forks"]
    keys = ["task_id", "condition", "model", "method", "delay"]
    expected = paired.pairs(forks, pair_by=pair_by).collect().sort(keys)
    assert expected["carried_forward"].any()
    pairing = paired.pairs_plan(
        forks.sample(fraction=1.0, shuffle=True, seed=order), pair_by=pair_by
    )
    engine = ShardedEngine(k=k, seed=order)
    assert_frame_equal(plan.rows(engine, pairing).collect().sort(keys), expected, check_exact=True)
    assert_frame_equal(plan.run(engine, pairing).sort(keys), expected, check_exact=True)
    with pytest.raises(ParameterError, match="parameter `cohort`"):  # before any data is read
        plan.run(engine, paired.pairs_plan("no/such/forks/", cohort="all"))


def test_many_small_partitions_give_the_same_cells(spark: object, forks_dir: str) -> None:
    # a few tasks per partition: some partitions lack recovery points their tasks reach
    expected = paired.summarize(forks_dir, by="model", n_resamples=200, seed=6)
    engine = SparkEngine(spark, partitions=40)
    got = paired.summarize(forks_dir, by="model", n_resamples=200, seed=6, engine=engine)
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
    same(goal.barrier_drop(expected, by=("model",), n_resamples=100), pl.read_parquet(drop))


def test_spark_episodes_out_is_byte_stable_across_row_order_and_file_split(
    spark: object, cli: Callable[..., Any], tmp_path: Path
) -> None:
    tables = synth.generate("goal", 20, seed=7)
    written: list[dict[str, bytes]] = []
    for run, files in enumerate((2, 3)):
        sources = [
            f"--{name}={spread(tables[name], tmp_path / f'in{run}' / name, files, seed=run)}"
            for name in GOAL_TABLES
        ]
        episodes = tmp_path / f"scored{run}"
        options = ["--resamples", "20", "--engine", "spark", "--episodes-out", episodes]
        result = cli("goal", *sources, *options, "--out", tmp_path / f"s{run}.parquet")
        assert result.code == 0, result.err
        written.append({p.name: p.read_bytes() for p in episodes.iterdir()})
    assert written[0] == written[1]
    assert "part-00000.parquet" in written[0]
    scored = pl.read_parquet(tmp_path / "scored0" / "part-00000.parquet")
    assert scored["episode_id"].to_list() == sorted(scored["episode_id"].to_list())


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
