"""Goal preservation (AgentHeal, ARCHITECTURE §3.3) on Spark: scoring and summaries.

Scoring joins five tables on ``case_id`` (cases, resources, episodes) and ``episode_id``
(steps, citations). Steps and citations get their episode's case as the partition key (by a
Spark join), so every join of :func:`recoverylab.goal.score` - and every consistency check
between the tables - stays inside one partition, where the polars query runs unchanged. An
episode's key is the smallest case among its rows, so a duplicated ``episode_id`` lands in
one partition and its contract check sees both rows. Summaries repartition the scored episodes
by the resampling cluster (goal or case).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from recoverylab import goal
from recoverylab._errors import ParameterError, require_one_of
from recoverylab.distributed._spark import (
    Table,
    as_spark,
    check_session,
    column,
    empty_like,
    run,
    shard_contracts,
)
from recoverylab.distributed._spark import mapped as _mapped

__all__ = ["goal_barrier_drop", "goal_score", "goal_summarize"]

_TABLES = ("cases", "resources", "episodes", "steps", "citations")
Progress = Callable[[str], None] | None


def _score_frames(frames: dict[str, pl.DataFrame], checks: str) -> pl.LazyFrame:
    return goal.score(
        frames["cases"],
        frames["resources"],
        frames["episodes"],
        frames.get("steps"),
        frames.get("citations"),
        checks=checks,  # type: ignore[arg-type]
    )


def _check_shard(frames: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """Run every contract and consistency check of goal.score on one partition."""
    _score_frames(frames, "full")
    return {}


def _score_shard(frames: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """Score the episodes of one partition (the checks ran before)."""
    return {"scored": _score_frames(frames, "schema").collect(engine="streaming")}


def _keyed_tables(frames: dict[str, Any]) -> list[Table]:
    """Attach the partition key (the case) to every table."""
    functions = importlib.import_module("pyspark.sql.functions")
    window = importlib.import_module("pyspark.sql.window").Window
    tables = [
        Table(name, frames[name], column(frames[name], "case_id").cast("string"), name)
        for name in ("cases", "resources")
    ]
    episodes = frames["episodes"]
    episode_id = column(episodes, "episode_id").cast("string")
    # An episode's key is the smallest case among its rows: a duplicated episode_id lands in
    # one partition, whose contract check then reports it.
    smallest = functions.min(column(episodes, "case_id").cast("string"))
    keyed = episodes.withColumn("__case_key", smallest.over(window.partitionBy(episode_id)))
    key = functions.col("__case_key")
    tables.append(Table("episodes", keyed, key, "episodes", tuple(episodes.columns)))
    mapping = keyed.select(episode_id.alias("__episode_key"), key).distinct()
    for name in ("steps", "citations"):
        if name in frames:
            frame = frames[name]
            on = column(frame, "episode_id").cast("string") == mapping["__episode_key"]
            joined = frame.join(mapping, on, "left")
            tables.append(Table(name, joined, key, name, tuple(frame.columns)))
    return tables


def _prepare(spark: object, sources: dict[str, object], checks: str) -> list[Table]:
    session = check_session(spark)
    require_one_of("checks", checks, ("full", "schema"))
    if ("steps" in sources) != ("citations" in sources):
        raise ParameterError(
            "give both `steps` and `citations`, or neither (episodes in the nested form with "
            "list columns `visited` and `citations`)."
        )
    frames = {name: as_spark(session, source, name) for name, source in sources.items()}
    # Contract and column checks on the driver first: they need only the schemas.
    with shard_contracts():
        _score_frames({name: empty_like(frame) for name, frame in frames.items()}, "schema")
    return _keyed_tables(frames)


def goal_score(
    spark: object,
    cases: object,
    resources: object,
    episodes: object,
    steps: object | None = None,
    citations: object | None = None,
    *,
    checks: str = "full",
    partitions: int | None = None,
    progress: Progress = None,
) -> Any:
    """Score every episode on Spark, as :func:`recoverylab.goal.score` does with polars.

    The tables are co-partitioned by case (steps and citations through their episode); with
    ``checks="full"`` one Spark job runs every contract and consistency check of
    :func:`~recoverylab.goal.score` on each partition and raises the first problem, then the
    scoring query is returned lazily: one polars :func:`~recoverylab.goal.score` per partition.

    Parameters
    ----------
    spark
        The SparkSession.
    cases, resources, episodes, steps, citations
        The five tables: Spark DataFrames, parquet/CSV/NDJSON paths or globs, or in-memory
        tables. Omit ``steps`` and ``citations`` for episodes in the nested form.
    checks
        ``"full"`` or ``"schema"``, as in :func:`~recoverylab.goal.score`.
    partitions
        Partitions of the shuffle (default ``spark.sql.shuffle.partitions``).
    progress
        Optional callable receiving stage messages.

    Returns
    -------
    pyspark.sql.DataFrame
        Lazy; one row per episode with the columns of :func:`~recoverylab.goal.score`.

    Raises
    ------
    SchemaError, InputError, ParameterError
        As :func:`~recoverylab.goal.score`.

    Examples
    --------
    >>> scored = goal_score(spark, "cases/", "resources/", "episodes/", "steps/", "citations/")
    ... # doctest: +SKIP
    >>> scored.write.parquet("scored/")  # doctest: +SKIP
    """
    tables = _prepare(spark, _sources(cases, resources, episodes, steps, citations), checks)
    if checks == "full":
        run(tables, _check_shard, partitions=partitions, progress=progress, label="goal checks")
    return _mapped(tables, _score_shard, partitions=partitions)


def _sources(*tables: object) -> dict[str, object]:
    return {name: t for name, t in zip(_TABLES, tables, strict=True) if t is not None}


def _summary_shard(
    frames: dict[str, pl.DataFrame], *, by: Sequence[str], cluster: str, judged: Sequence[str]
) -> dict[str, pl.DataFrame]:
    lazy = frames["scored"].lazy()
    return {"partials": goal._summary_partials(lazy, by, cluster, judged).collect()}


def _drop_shard(
    frames: dict[str, pl.DataFrame], *, by: Sequence[str], cluster: str
) -> dict[str, pl.DataFrame]:
    return {"per_goal": goal._drop_partials(frames["scored"].lazy(), by, cluster).collect()}


def _scored_table(spark: Any, scored: object, cluster: str, needed: Sequence[str]) -> Table:
    frame = as_spark(spark, scored, "scored")
    frame = frame.select([column(frame, c) for c in dict.fromkeys(needed)])
    return Table("scored", frame, column(frame, cluster).cast("string"))


def goal_summarize(
    spark: object,
    scored: object,
    *,
    by: Sequence[str] = ("regime",),
    cluster: str | None = None,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    method: str = "percentile",
    seed: int = 0,
    partitions: int | None = None,
    progress: Progress = None,
) -> pl.DataFrame:
    """Summarise scored episodes on Spark, as :func:`recoverylab.goal.summarize` does.

    The scored episodes are repartitioned by the resampling cluster; each partition computes
    the per-(group, cluster) partials of :func:`~recoverylab.goal.summarize`, which are
    collected and finished on the driver (sums, TS interval): the same numbers.

    Parameters
    ----------
    spark
        The SparkSession.
    scored
        Scored episodes: the Spark DataFrame of :func:`goal_score`, parquet paths, or any table.
    by, cluster, n_resamples, confidence, method, seed
        As in :func:`~recoverylab.goal.summarize`.
    partitions, progress
        As in :func:`goal_score`.

    Returns
    -------
    pl.DataFrame
        The columns of :func:`~recoverylab.goal.summarize`.

    Raises
    ------
    ParameterError
        As :func:`~recoverylab.goal.summarize`.
    """
    session = check_session(spark)
    frame = as_spark(session, scored, "scored")
    schema = empty_like(frame).schema
    by_keys, cluster_key, judged = goal._summary_plan(schema, by, cluster, method)
    needed = [
        *by_keys,
        cluster_key,
        "success",
        "gp",
        "compliant",
        "steps",
        "reason",
        *judged,
    ]
    table = _scored_table(session, frame, cluster_key, needed)
    shard = functools.partial(_summary_shard, by=by_keys, cluster=cluster_key, judged=judged)
    result = run([table], shard, partitions=partitions, progress=progress, label="goal summary")
    return goal._summary_finish(
        result.parts["partials"],
        by_keys,
        cluster_key,
        judged,
        n_resamples=n_resamples,
        confidence=confidence,
        method=method,
        seed=seed,
    )


def goal_barrier_drop(
    spark: object,
    scored: object,
    *,
    by: Sequence[str] | None = None,
    cluster: str = "goal_id",
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    method: str = "percentile",
    seed: int = 0,
    partitions: int | None = None,
    progress: Progress = None,
) -> pl.DataFrame:
    """Compute :func:`recoverylab.goal.barrier_drop` with its per-goal partials on Spark.

    Parameters
    ----------
    spark
        The SparkSession.
    scored
        Scored episodes, as in :func:`goal_summarize`.
    by, cluster, n_resamples, confidence, method, seed
        As in :func:`~recoverylab.goal.barrier_drop`.
    partitions, progress
        As in :func:`goal_score`.

    Returns
    -------
    pl.DataFrame
        The columns of :func:`~recoverylab.goal.barrier_drop`.
    """
    session = check_session(spark)
    frame = as_spark(session, scored, "scored")
    by_keys = goal._drop_plan(empty_like(frame).schema, by, cluster, method)
    table = _scored_table(session, frame, cluster, [*by_keys, cluster, "regime", "success"])
    shard = functools.partial(_drop_shard, by=by_keys, cluster=cluster)
    result = run([table], shard, partitions=partitions, progress=progress, label="barrier drop")
    return goal._drop_finish(
        result.parts["per_goal"],
        by_keys,
        cluster,
        n_resamples=n_resamples,
        confidence=confidence,
        method=method,
        seed=seed,
    )
