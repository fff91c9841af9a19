"""Takeover evaluation (CUA-Recovery, ARCHITECTURE §3.4) on Spark: the cell summary.

The workflow is the resampling cluster, so `states` and `attempts` are co-partitioned by it
(an attempt gets its state's workflow by a Spark join; a state's key is the smallest workflow
among the rows of its ``state_id``, so a duplicated state lands in one partition). Within a
partition the polars queries of :mod:`recoverylab.takeover` run unchanged. What no single
partition can know is decided first, over all partitions, and passed in:

1. without a shuffle: every shard's contract checks, its distinct (root_cause_id, workflow_id)
   pairs (a root cause under two workflows is an input error) and its first repeat number;
2. for ``common_states``: the agents with a scored unit anywhere;
3. for ``common_sample``: the depths with a scored unit per row group;
4. the per-(workflow × cell) partials and per-slice state counts, finished on the driver by
   :mod:`recoverylab.takeover`'s own combine and statistics.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from recoverylab.distributed._spark import (
    Table,
    as_spark,
    check_session,
    column,
    empty_like,
    run,
    shard_contracts,
)
from recoverylab.schema import SPECS
from recoverylab.takeover import _inputs, _summary

__all__ = ["takeover_summarize"]

Progress = Callable[[str], None] | None


def _first_shard(frames: dict[str, pl.DataFrame], *, by: Sequence[str]) -> dict[str, pl.DataFrame]:
    """Check one shard's contracts; return its root-cause pairs and first repeat."""
    inputs = _inputs.load(frames["states"], frames["attempts"], by)
    roots, first = pl.collect_all(
        [
            inputs.states.select("root_cause_id", "workflow_id").unique(),
            inputs.attempts.select(pl.col("repeat").min()),
        ]
    )
    return {"roots": roots, "first": first}


def _units(
    frames: dict[str, pl.DataFrame], by: Sequence[str], k: int, base: int
) -> tuple[_inputs.Inputs, pl.LazyFrame]:
    inputs = _inputs.load(frames["states"], frames["attempts"], by)
    _inputs.check_consistency(inputs, k, base=base, roots=False)
    return inputs, _inputs.units(inputs, k)


def _group(by: Sequence[str]) -> list[str]:
    return [c for c in by if c != "depth"]


def _agents_shard(
    frames: dict[str, pl.DataFrame], *, by: Sequence[str], k: int, base: int
) -> dict[str, pl.DataFrame]:
    _, units = _units(frames, by, k, base)
    parts = _inputs.restriction_partials(units, _group(by))
    return {"agents": parts["agents"].collect()}


def _depths_shard(
    frames: dict[str, pl.DataFrame],
    *,
    by: Sequence[str],
    k: int,
    base: int,
    common_states: bool,
    agents: int | None,
) -> dict[str, pl.DataFrame]:
    inputs, units = _units(frames, by, k, base)
    units = _inputs.restrict(
        units,
        group=_group(by),
        pair=["state_id", *inputs.unit_keys[1:]],
        common_states=common_states,
        common_sample=False,
        agents=agents,
    )
    return {"depths": _inputs.restriction_partials(units, _group(by))["depths"].collect()}


def _summary_shard(
    frames: dict[str, pl.DataFrame],
    *,
    by: Sequence[str],
    k: int,
    base: int,
    common_states: bool,
    common_sample: bool,
    agents: int | None,
    depths: pl.DataFrame | None,
) -> dict[str, pl.DataFrame]:
    inputs = _inputs.load(frames["states"], frames["attempts"], by)
    _inputs.check_consistency(inputs, k, base=base, roots=False)
    frame = _inputs.scored_units(
        inputs,
        k,
        common_sample=common_sample,
        common_states=common_states,
        agents=agents,
        depths=depths,
    )
    partials, slices = pl.collect_all(
        [
            _summary._partials(frame, list(inputs.by)),
            _inputs.eligibility_counts(inputs.states, inputs.state_keys),
        ]
    )
    return {"partials": partials, "slices": slices}


def _shipped(frame: Any, table: str, by: Sequence[str]) -> tuple[str, ...]:
    """Return the contract columns of ``table`` and the grouping keys (all the summary reads)."""
    contract = {c.name for c in SPECS[table].columns}
    return tuple(c for c in frame.columns if c in contract or c in by)


def _keyed(states: Any, attempts: Any, by: Sequence[str]) -> list[Table]:
    """Key both tables by workflow (an attempt by its state's)."""
    functions = importlib.import_module("pyspark.sql.functions")
    window = importlib.import_module("pyspark.sql.window").Window
    state_id = column(states, "state_id").cast("string")
    smallest = functions.min(column(states, "workflow_id").cast("string"))
    keyed = states.withColumn("__workflow_key", smallest.over(window.partitionBy(state_id)))
    key = functions.col("__workflow_key")
    mapping = keyed.select(state_id.alias("__state_key"), key).distinct()
    joined = attempts.join(
        mapping, column(attempts, "state_id").cast("string") == mapping["__state_key"], "left"
    )
    return [
        Table("states", keyed, key, "states", _shipped(states, "states", by)),
        Table("attempts", joined, key, "attempts", _shipped(attempts, "attempts", by)),
    ]


def takeover_summarize(
    spark: object,
    states: object,
    attempts: object,
    *,
    by: Sequence[str] = ("agent", "depth"),
    k: int = 3,
    common_sample: bool = False,
    common_states: bool = False,
    interval: str = "bootstrap",
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    ci_method: str = "percentile",
    seed: int = 0,
    partitions: int | None = None,
    progress: Progress = None,
) -> pl.DataFrame:
    """Summarise takeover attempts on Spark, as :func:`recoverylab.takeover.summarize` does.

    Parameters
    ----------
    spark
        The SparkSession.
    states, attempts
        The two tables: Spark DataFrames, parquet/CSV/NDJSON paths or globs, or in-memory
        tables.
    by, k, common_sample, common_states, interval, confidence, n_resamples, ci_method, seed
        As in :func:`~recoverylab.takeover.summarize`.
    partitions
        Partitions of the shuffle (default ``spark.sql.shuffle.partitions``).
    progress
        Optional callable receiving stage messages.

    Returns
    -------
    pl.DataFrame
        The columns of :func:`~recoverylab.takeover.summarize`, with the same values.

    Raises
    ------
    SchemaError, InputError, ParameterError
        As :func:`~recoverylab.takeover.summarize`.

    Examples
    --------
    >>> takeover_summarize(spark, "runs/states/", "runs/attempts/", k=3)  # doctest: +SKIP
    """
    session = check_session(spark)
    k = _inputs.check_k(k)
    _summary._check_statistics(interval, confidence, n_resamples, seed)
    state_frame = as_spark(session, states, "states")
    attempt_frame = as_spark(session, attempts, "attempts")
    with shard_contracts():  # parameter and schema checks on the driver, before any job
        inputs = _inputs.load(empty_like(state_frame), empty_like(attempt_frame), by)
    by_keys = list(inputs.by)
    unshuffled = [
        Table(name, frame, None, name, _shipped(frame, name, by_keys))
        for name, frame in (("states", state_frame), ("attempts", attempt_frame))
    ]
    first = run(
        unshuffled,
        functools.partial(_first_shard, by=by_keys),
        shuffle=False,
        progress=progress,
        label="takeover checks",
    )
    _inputs.check_roots(first.parts["roots"].lazy())
    base = int(first.parts["first"].get_column("repeat").min())  # type: ignore[arg-type]
    tables = _keyed(state_frame, attempt_frame, by_keys)
    options = {"partitions": partitions, "progress": progress}
    agents = None
    if common_states:
        found = run(
            tables,
            functools.partial(_agents_shard, by=by_keys, k=k, base=base),
            label="agents with scored units",
            **options,  # type: ignore[arg-type]
        )
        agents = found.parts["agents"].get_column("agent").n_unique()
    depths = None
    if common_sample:
        found = run(
            tables,
            functools.partial(
                _depths_shard,
                by=by_keys,
                k=k,
                base=base,
                common_states=common_states,
                agents=agents,
            ),
            label="depths with scored units",
            **options,  # type: ignore[arg-type]
        )
        group = _group(by_keys)
        distinct = found.parts["depths"].unique()
        depths = (
            distinct.group_by(group).agg(pl.len().alias("__depths"))
            if group
            else distinct.select(pl.len().alias("__depths"))
        )
    result = run(
        tables,
        functools.partial(
            _summary_shard,
            by=by_keys,
            k=k,
            base=base,
            common_states=common_states,
            common_sample=common_sample,
            agents=agents,
            depths=depths,
        ),
        label="takeover partials",
        **options,  # type: ignore[arg-type]
    )
    return _summary._finish_units(
        result.parts["partials"],
        result.parts["slices"],
        by_keys,
        inputs.state_keys,
        k,
        interval=interval,
        confidence=confidence,
        n_resamples=n_resamples,
        ci_method=ci_method,
        seed=seed,
    )
