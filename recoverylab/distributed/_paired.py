"""Paired counterfactual recovery (CIR, ARCHITECTURE §3.1) on Spark.

The task is the cluster: every join of the pairing (recovery row ⋈ `none` row, carry-forward,
decision ⋈ fork) is within one task, so the forks - and a policy's decisions - are
repartitioned by ``task_id`` and each partition runs the polars pairing and aggregation of
:mod:`recoverylab.paired` unchanged, down to the per-cell type tables. Only those small tables
travel to the driver, where :mod:`recoverylab.paired`'s own combine, bootstrap and sign-flip
test finish. One thing no partition can know is read first, without a shuffle: the design
grid (distinct condition, *pair_by*, method, delay), which decides the carried-forward points.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from recoverylab.distributed._spark import (
    Partials,
    Table,
    as_spark,
    check_session,
    column,
    empty_like,
    run,
    shard_contracts,
)
from recoverylab.paired import _pairs, _policy, _summary
from recoverylab.schema import validate

__all__ = ["evaluate_policy", "paired_contrast", "paired_summarize"]

Progress = Callable[[str], None] | None
_DESIGN_KEYS = ("condition", "method", "delay")


def _design(
    spark: Any,
    forks: Any,
    pair_by: str | Sequence[str] | None,
    by: str | Sequence[str] | None,
    cohort: _pairs.Cohort,
    progress: Progress,
) -> tuple[_pairs.Forks, tuple[str, ...], _pairs.Design]:
    """Check parameters and schema on the driver, then read the design grid over all files."""
    with shard_contracts():
        empty, by_keys = _pairs.prepare(empty_like(forks), pair_by=pair_by, by=by, cohort=cohort)
    keys = ["condition", *empty.pair_by, "method", "delay"]
    if progress is not None:
        progress("spark: design grid (distinct condition, pair_by, method, delay)")
    # The distinct design keys are a plain Spark distinct of four columns (pruned, aggregated
    # before the shuffle); design_grid then reads them exactly as it reads the whole table.
    arrow = forks.select([column(forks, k) for k in keys]).distinct().toArrow()
    validated = empty.lf.collect_schema()
    distinct = pl.DataFrame(pl.from_arrow(arrow)).select(pl.col(k).cast(validated[k]) for k in keys)
    if distinct.height == 0:
        validate(empty_like(forks), "forks")  # raises "forks: the table is empty"
    design = _pairs.design_grid(_pairs.Forks(distinct.lazy(), empty.pair_by, empty.columns))
    return empty, by_keys, design


def _by_task(forks: Any, needed: Sequence[str]) -> Table:
    """Key the forks by task; ship only the contract columns and the grouping keys."""
    shipped = tuple(c for c in forks.columns if c in _pairs._CONTRACT or c in needed)
    return Table("forks", forks, column(forks, "task_id").cast("string"), "forks", shipped)


def _summary_shard(
    frames: dict[str, pl.DataFrame],
    *,
    pair_by: Sequence[str],
    by: Sequence[str],
    cohort: _pairs.Cohort,
    design: _pairs.Design,
) -> dict[str, pl.DataFrame]:
    forks = frames["forks"]
    # paired's own phase one, given the whole table's design grid (summarize does the same).
    lazy = _summary.partials(forks, by=by, pair_by=pair_by, cohort=cohort, design=design)
    collected = lazy.collect(engine="streaming")
    if int(collected["after_end"].sum()):
        table, by_keys = _pairs.prepare(forks, pair_by=pair_by, by=by, cohort=cohort)
        rows = _pairs.branch_rows(table, design, carry=by_keys)
        _pairs.raise_after_end(_pairs.apply_cohort(rows, table, cohort), table)
    return {"partials": collected}


def paired_summarize(
    spark: object,
    forks: object,
    *,
    by: str | Sequence[str] | None = None,
    pair_by: str | Sequence[str] | None = (),
    cohort: _pairs.Cohort = "full",
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    ci_method: str = "auto",
    partitions: int | None = None,
    progress: Progress = None,
    alternative: str = "two-sided",
    adjust: str | None = None,
) -> pl.DataFrame:
    """Rescue/harm cells on Spark, as :func:`recoverylab.paired.summarize` computes them.

    The forks are repartitioned by task; each partition computes the additive per-cell partials
    of :func:`~recoverylab.paired.summarize` (counts and per-task types, paired's own phase
    one, given the design grid of the whole table); the driver adds them up and runs the
    bootstrap and the exact sign-flip test (paired's own phase two). Same seed, same result.

    Parameters
    ----------
    spark
        The SparkSession.
    forks
        The forks table: a Spark DataFrame, parquet/CSV/NDJSON paths or globs (read by Spark),
        or an in-memory table.
    by, pair_by, cohort, confidence, n_resamples, seed, ci_method,
    alternative, adjust
        As in :func:`~recoverylab.paired.summarize`.
    partitions
        Partitions of the shuffle (default ``spark.sql.shuffle.partitions``).
    progress
        Optional callable receiving stage messages (including how many partial rows were
        collected from how many partitions).

    Returns
    -------
    pl.DataFrame
        The columns of :func:`~recoverylab.paired.summarize`.

    Raises
    ------
    SchemaError, InputError, ParameterError
        As :func:`~recoverylab.paired.summarize`.

    Examples
    --------
    >>> paired_summarize(spark, "runs/forks/", by="model")  # doctest: +SKIP
    """
    session = check_session(spark)
    _summary._check_statistics(confidence, n_resamples, seed, ci_method, alternative, adjust)
    frame = as_spark(session, forks, "forks")
    empty, by_keys, design = _design(session, frame, pair_by, by, cohort, progress)
    _summary._check_by(by_keys)
    shard = functools.partial(
        _summary_shard, pair_by=empty.pair_by, by=by_keys, cohort=cohort, design=design
    )
    keyed = _by_task(frame, (*empty.pair_by, *by_keys))
    label = "pairing and counting"
    result = run([keyed], shard, partitions=partitions, progress=progress, label=label)
    return _summary.finish(
        result.parts["partials"],
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        ci_method=ci_method,
        progress=progress,
        alternative=alternative,
        adjust=adjust,
    )


def _contrast_shard(
    frames: dict[str, pl.DataFrame],
    *,
    pair_by: Sequence[str],
    by: Sequence[str],
    cohort: _pairs.Cohort,
    design: _pairs.Design,
    a: str,
    b: str,
) -> dict[str, pl.DataFrame]:
    table, by_keys = _pairs.prepare(frames["forks"], pair_by=pair_by, by=by, cohort=cohort)
    query, rows = _summary.contrast_query(table, design, by_keys, cohort, a, b)
    types = query.collect(engine="streaming")
    if int(types["__after_end"].sum()):
        _pairs.raise_after_end(rows, table)
    return {"types": types}


def paired_contrast(
    spark: object,
    forks: object,
    a: str,
    b: str,
    *,
    by: str | Sequence[str] | None = None,
    pair_by: str | Sequence[str] | None = (),
    cohort: _pairs.Cohort = "full",
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    ci_method: str = "auto",
    partitions: int | None = None,
    progress: Progress = None,
    alternative: str = "two-sided",
    adjust: str | None = None,
) -> pl.DataFrame:
    """Contrast two conditions on Spark, as :func:`recoverylab.paired.contrast` does.

    Parameters
    ----------
    spark
        The SparkSession.
    forks
        The forks table (as in :func:`paired_summarize`).
    a, b, by, pair_by, cohort, confidence, n_resamples, seed, ci_method,
    alternative, adjust
        As in :func:`~recoverylab.paired.contrast`.
    partitions, progress
        As in :func:`paired_summarize`.

    Returns
    -------
    pl.DataFrame
        The columns of :func:`~recoverylab.paired.contrast`.

    Raises
    ------
    SchemaError, InputError, ParameterError
        As :func:`~recoverylab.paired.contrast`.
    """
    session = check_session(spark)
    _summary._check_statistics(confidence, n_resamples, seed, ci_method, alternative, adjust)
    _summary.check_contrast(a, b)
    frame = as_spark(session, forks, "forks")
    empty, by_keys, design = _design(session, frame, pair_by, by, cohort, progress)
    _summary._check_by(by_keys)
    _summary.check_conditions(design, a, b)
    shard = functools.partial(
        _contrast_shard,
        pair_by=empty.pair_by,
        by=by_keys,
        cohort=cohort,
        design=design,
        a=a,
        b=b,
    )
    result = run(
        [_by_task(frame, (*empty.pair_by, *by_keys))],
        shard,
        partitions=partitions,
        progress=progress,
        label=f"pairing {a} and {b} and counting per task",
    )
    return _summary.contrast_finish(
        result.parts["types"],
        by_keys,
        a,
        b,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        ci_method=ci_method,
        progress=progress,
        alternative=alternative,
        adjust=adjust,
    )


def _policy_shard(
    frames: dict[str, pl.DataFrame],
    *,
    pair_by: Sequence[str],
    by: Sequence[str],
    design: _pairs.Design,
    method: str,
    clean_label: str,
) -> dict[str, pl.DataFrame]:
    # A partition may hold forks of tasks without decisions: the "table is empty" rule of
    # `decisions` is checked over the whole table on the driver.
    contract = dataclasses.replace(_policy.DECISIONS, allow_empty=True)
    table, by_keys, chosen = _policy.policy_inputs(
        frames["decisions"], frames["forks"], pair_by=pair_by, by=by, contract=contract
    )
    counts, types = _policy.policy_queries(chosen, table, design, method, by_keys, clean_label)
    cell_counts, type_table = pl.collect_all([counts, types], engine="streaming")
    return {"counts": cell_counts, "types": type_table}


def evaluate_policy(
    spark: object,
    decisions: object,
    forks: object,
    *,
    pair_by: str | Sequence[str] | None = (),
    by: str | Sequence[str] | None = None,
    method: str | None = None,
    clean_label: str = "clean",
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    ci_method: str = "auto",
    partitions: int | None = None,
    progress: Progress = None,
    alternative: str = "two-sided",
    adjust: str | None = None,
) -> pl.DataFrame:
    """Score a policy's decisions on Spark, as :func:`recoverylab.paired.evaluate_policy` does.

    Decisions and forks are co-partitioned by task, so each decision meets its forks in one
    partition; the per-condition counts and per-task gain types come back to the driver.

    Parameters
    ----------
    spark
        The SparkSession.
    decisions, forks
        The two tables (Spark DataFrames, paths or in-memory tables).
    pair_by, by, method, clean_label, confidence, n_resamples, seed, ci_method,
    alternative, adjust
        As in :func:`~recoverylab.paired.evaluate_policy`.
    partitions, progress
        As in :func:`paired_summarize`.

    Returns
    -------
    pl.DataFrame
        The columns of :func:`~recoverylab.paired.evaluate_policy`.

    Raises
    ------
    SchemaError, InputError, ParameterError
        As :func:`~recoverylab.paired.evaluate_policy`.
    """
    session = check_session(spark)
    _policy.check_policy(confidence, n_resamples, seed, ci_method, clean_label, alternative, adjust)
    forks_frame = as_spark(session, forks, "forks")
    decision_frame = as_spark(session, decisions, "decisions")
    with shard_contracts():  # parameter and schema checks of both tables, on the driver
        _policy.policy_inputs(
            empty_like(decision_frame),
            empty_like(forks_frame),
            pair_by=pair_by,
            by=by,
            contract=dataclasses.replace(_policy.DECISIONS, allow_empty=True),
        )
    empty, by_keys, design = _design(session, forks_frame, pair_by, by, "full", progress)
    chosen_method = _policy._recovery_method(design, method)
    tables = [
        Table(
            "decisions",
            decision_frame,
            column(decision_frame, "task_id").cast("string"),
            _policy.DECISIONS,
        ),
        _by_task(forks_frame, (*empty.pair_by, *by_keys)),
    ]
    shard = functools.partial(
        _policy_shard,
        pair_by=empty.pair_by,
        by=by_keys,
        design=design,
        method=chosen_method,
        clean_label=clean_label,
    )
    result: Partials = run(
        tables, shard, partitions=partitions, progress=progress, label="scoring decisions"
    )
    return _policy.policy_finish(
        result.parts["counts"],
        result.parts["types"],
        list(by_keys),
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        ci_method=ci_method,
        progress=progress,
        alternative=alternative,
        adjust=adjust,
    )
