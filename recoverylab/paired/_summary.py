"""Rescue/harm cells of paired forks (ARCHITECTURE §1.3, §3.1, §4).

:func:`summarize` is ``finish(partials(...))``, the two phases of ARCHITECTURE §1.3: additive
per-cell partials (counts, and the histogram of per-task *types* ``d`` = summed y1 - y0, ``n`` =
pairs), then per cell the exact sign-flip test and an interval over its types: by default one
that agrees with the test (Fay–Lumbard, or the cluster meld), on request the task-level cluster
bootstrap (a multinomial over types is exactly it). The counting takes the bit-set path
of :mod:`._bits` when it can (one group-by per task instead of a join), else the join of
:mod:`._pairs`; both give the same partials.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import engines, plan, stats
from recoverylab._errors import InputError, ParameterError
from recoverylab.paired import _bits, _breakeven, _budget, _shards
from recoverylab.paired import _rules as rules
from recoverylab.paired._pairs import (
    AFTER_END,
    OUTCOMES,
    Cohort,
    Design,
    Forks,
    Progress,
    apply_cohort,
    branch_rows,
    prepare,
    raise_after_end,
)
from recoverylab.schema import SPECS, check_unique_keys

__all__ = [
    "finish",
    "partials",
    "summarize",
]

#: Result columns: a ``by`` key with one of these names would be overwritten.
_RESULT_COLUMNS = (
    "n",
    "n_tasks",
    "rescue",
    "harm",
    "kept",
    "unchanged",
    "carried_forward",
    "base_rate",
    "recovery_rate",
    "effect",
    "ci_low",
    "ci_high",
    "p_value",
    "ci_method",
    "sparse",
    "p_adjusted",
    "unpaired",
    "prefix_mismatch",
    "test",
    "ci_inverts_test",
    "p_sign_flip",
)


def _check_statistics(**statistics: Any) -> None:
    """Validate the resampling parameters before any data is read."""
    stats.check_resampling(ci_methods=stats.PAIRED_CI_METHODS, **statistics)


def _check_by(by_keys: Sequence[str]) -> None:
    clash = [k for k in by_keys if k in _RESULT_COLUMNS]
    if clash:
        raise ParameterError(
            f"parameter `by` names `{clash[0]}`, which is also a result column. "
            "Hint: rename that column first."
        )


def _counts() -> list[pl.Expr]:
    """Per-group counts of pairs by outcome, and of the excluded recovery rows by reason."""
    valid = pl.col("reason").is_null()
    carried = pl.col("carried_forward")
    classes = rules.outcomes(valid & ~carried, valid & carried, pl.col("y0"), pl.col("y1"))

    def count(mask: pl.Expr, name: str) -> pl.Expr:
        return mask.sum().cast(pl.Int64).alias(name)

    return [
        count(valid, "n"),
        *(count(classes[name], name) for name in OUTCOMES),
        count(classes["carried_forward"], "carried_forward"),
        count(pl.col("reason") == "unpaired", "unpaired"),
        count(pl.col("reason") == "prefix_mismatch", "prefix_mismatch"),
        count(pl.col("reason") == AFTER_END, "__after_end"),
    ]


#: Additive count columns of the partials (besides the type columns ``d``, ``n``, ``count``).
PARTIAL_COUNTS = (
    "rescue",
    "harm",
    "kept",
    "unchanged",
    "carried_forward",
    "unpaired",
    "prefix_mismatch",
    "after_end",
)
_TYPE_COLUMNS = ("d", "n", "count")


def summary_query(
    table: Forks, design: Design, by_keys: Sequence[str], cohort: str
) -> tuple[pl.LazyFrame, bool, pl.LazyFrame]:
    """Build the lazy aggregation of :func:`summarize`; say if it is the fast path.

    Fast path (every pair_by key is a cell key): a task has at most one pair per cell, so each
    cell's outcome counts are its type histogram -- (+1, 1) rescue, (-1, 1) harm, (0, 1) kept or
    unchanged -- and the query is one group-by over cells. Otherwise the query groups to per-task
    partials (``d`` = summed y1 - y0, ``n_pairs``) and on to their types with counts: one row per
    (cell, d, n_pairs), carrying the summed outcome counts.
    """
    cells = ["condition", "delay", "method", *by_keys]
    rows = apply_cohort(branch_rows(table, design, carry=by_keys), table, cohort)
    if set(table.pair_by) <= set(by_keys):
        return rows.group_by(cells).agg(_counts()), True, rows
    valid = pl.col("reason").is_null()
    diff = pl.col("y1").cast(pl.Int64) - pl.col("y0").cast(pl.Int64)
    per_task = rows.group_by([*cells, "task_id"]).agg(
        pl.when(valid).then(diff).otherwise(0).sum().cast(pl.Int64).alias("d"),
        *_counts(),
    )
    types = per_task.group_by([*cells, "d", "n"]).agg(
        pl.len().cast(pl.Int64).alias("count"),
        *(pl.col(c).sum() for c in PARTIAL_COUNTS if c != "after_end"),
        pl.col("__after_end").sum(),
    )
    return types, False, rows


def _partials_from_counts(counts: pl.LazyFrame, cells: Sequence[str]) -> pl.LazyFrame:
    """Turn per-cell counts of the fast path into partials (see :func:`summary_query`).

    A task has one row per cell at most, so an excluded row is type (0, 0).
    """
    excluded = ("unpaired", "prefix_mismatch", "after_end")
    parts = [
        counts.select(
            *cells,
            pl.lit(d, dtype=pl.Int64).alias("d"),
            pl.lit(n, dtype=pl.Int64).alias("n"),
            pl.sum_horizontal(*(pl.col(c) for c in tasks)).cast(pl.Int64).alias("count"),
            *(
                (pl.col(c) if c in members else pl.lit(0)).cast(pl.Int64).alias(c)
                for c in PARTIAL_COUNTS
            ),
        )
        for d, n, tasks, members in (
            (1, 1, ("rescue",), ("rescue",)),
            (-1, 1, ("harm",), ("harm",)),
            (0, 1, ("kept", "unchanged"), ("kept", "unchanged", "carried_forward")),
            (0, 0, excluded, excluded),
        )
    ]
    return pl.concat(parts, how="vertical").filter(pl.col("count") > 0)


def _as_partials(collected: pl.LazyFrame, fast: bool, cells: Sequence[str]) -> pl.LazyFrame:
    """Turn the output of :func:`summary_query` (cell counts or task types) into partials."""
    collected = collected.rename({"__after_end": "after_end"})
    if fast:
        return _partials_from_counts(collected, cells)
    return collected.select(
        *cells, *(pl.col(c).cast(pl.Int64) for c in (*_TYPE_COLUMNS, *PARTIAL_COUNTS))
    )


def _partials(
    forks: object,
    *,
    by: str | Sequence[str] | None,
    pair_by: str | Sequence[str] | None,
    cohort: str,
    design: Design | None,
    progress: Progress,
    memory: float | None = None,
) -> tuple[pl.LazyFrame, Forks, Design, tuple[str, ...]]:
    """Build the partials; also return the table, the design and the by keys used."""
    table, by_keys = prepare(
        forks, pair_by=pair_by, by=by, cohort=cohort, progress=progress, checks="schema"
    )
    _check_by(by_keys)
    full_key = (*SPECS["forks"].key, *table.pair_by)
    if progress is not None:
        progress("checking forks, reading the design grid and pairing")
    cells = ["condition", "delay", "method", *by_keys]
    if set(table.pair_by) <= set(by_keys) and cohort == "full":
        budget = _budget.budget_bytes(memory)
        found, counted = _bits.bit_counts(table, by_keys, full_key, design, budget=budget)
        if progress is not None and counted is not None:
            progress("paired through per-task bit sets")
    else:
        found, counted = _bits.survey(table, full_key), None
    design = found.design if design is None else design
    if counted is None:
        check_unique_keys(table.lf, SPECS["forks"], full_key)
        query, fast, _ = summary_query(table, design, by_keys, cohort)
        if progress is not None:
            progress("pairing and counting per cell" if fast else "pairing and counting per task")
        return _as_partials(query, fast, cells), table, design, by_keys
    parts = [_partials_from_counts(counted.counts.lazy(), cells)]
    if counted.rest is not None and counted.rest.height:
        # tasks with an episode whose prefix hashes differ: paired row by row by the join
        clusters = ["task_id", *table.pair_by]
        rest = Forks(
            table.lf.join(counted.rest.lazy(), on=clusters, how="semi", nulls_equal=True),
            table.pair_by,
            table.columns,
        )
        query, _, _ = summary_query(rest, design, by_keys, cohort)
        parts.append(_as_partials(query, True, cells))
    return pl.concat(parts, how="vertical"), table, design, by_keys


def partials(
    forks: object,
    *,
    by: str | Sequence[str] | None = (),
    pair_by: str | Sequence[str] | None = (),
    cohort: Cohort = "full",
    design: Design | None = None,
    progress: Progress = None,
    memory: float | None = None,
) -> pl.LazyFrame:
    """Return the additive per-cell partials of :func:`summarize` (private, stable).

    Phase one of ARCHITECTURE §1.3: validates ``forks`` (the contract's data checks run inside
    the counting queries), pairs its branches and counts them per cell. Partials of shards that
    each hold whole tasks, concatenated, give :func:`finish` the result of one run over the
    whole table (equal rows add up) -- provided every shard is given the whole table's
    ``design``. Some work runs eagerly (contract checks, design grid, the fast path's per-task
    bit sets); the result is small (a few rows per cell), lazy only where the join path runs.

    Parameters
    ----------
    forks, by, pair_by, cohort, progress, memory
        As in :func:`summarize`.
    design
        The candidate recovery points of the whole table (``_pairs.design_grid`` of it, or the
        union of the shards' distinct (condition, *pair_by*, method, delay)); default: those
        of ``forks``. A shard needs the whole table's grid for its carried-forward points.

    Returns
    -------
    pl.LazyFrame
        One or more rows per cell: condition, delay, method, *by*, then the task type ``d``
        (summed y1 - y0 of the task's pairs in the cell), ``n`` (its pairs), ``count`` (tasks
        of this type), and the additive counts of those tasks: ``rescue``, ``harm``,
        ``kept``, ``unchanged``, ``carried_forward``, ``unpaired``, ``prefix_mismatch`` and
        ``after_end`` (recovery rows after the end of the run: an input error that
        :func:`finish` raises). Tasks whose rows in the cell were all excluded have type
        (0, 0). All Int64.

    Raises
    ------
    SchemaError, ParameterError
        As :func:`summarize` (duplicate keys included).

    Examples
    --------
    >>> import polars as pl
    >>> forks = pl.DataFrame({"task_id": ["t1", "t1", "t2", "t2"],
    ...                       "condition": ["stale2"] * 4,
    ...                       "method": ["none", "refresh"] * 2, "delay": [None, 0] * 2,
    ...                       "success": [False, True, True, True]})
    >>> part = partials(forks).collect().sort("d")
    >>> part.select("d", "n", "count", "rescue", "kept").rows()
    [(0, 1, 1, 0, 1), (1, 1, 1, 1, 0)]
    >>> finish(part)["effect"].item()
    0.5
    """
    _budget.budget_bytes(memory)  # a bad budget fails before any read
    return _partials(
        forks,
        by=by,
        pair_by=pair_by,
        cohort=cohort,
        design=design,
        progress=progress,
        memory=memory,
    )[0]


def finish(
    partials: pl.DataFrame | pl.LazyFrame,
    *,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    ci_method: str = "auto",
    progress: Progress = None,
    alternative: str = "two-sided",
    adjust: str | None = None,
) -> pl.DataFrame:
    """Turn partials into the cell summary of :func:`summarize` (private, stable).

    Phase two of ARCHITECTURE §1.3: equal partial rows (of several shards) add up, counts are
    summed per cell, and each cell gets its interval over its task types and its exact
    sign-flip p-value. The ``by`` keys are the columns besides the cell and partial columns.

    Parameters
    ----------
    partials
        Rows of :func:`partials`, from one run or concatenated from shards of whole tasks.
    confidence, n_resamples, seed, ci_method, progress, alternative, adjust
        As in :func:`summarize`.

    Returns
    -------
    pl.DataFrame
        As :func:`summarize`.

    Raises
    ------
    InputError
        When a partial counts recovery rows after the end of their run (``after_end``);
        :func:`summarize` names the rows first.
    ParameterError
        For bad statistics parameters.
    """
    statistics = statistics_options(confidence, n_resamples, seed, ci_method, alternative, adjust)
    _check_statistics(**statistics)
    frame = partials.lazy() if isinstance(partials, pl.DataFrame) else partials
    fixed = ("condition", "delay", "method", *_TYPE_COLUMNS, *PARTIAL_COUNTS)
    by_keys = [c for c in frame.collect_schema().names() if c not in fixed]
    cells = ["condition", "delay", "method", *by_keys]
    added = (
        frame.group_by([*cells, "d", "n"])
        .agg(pl.col(c).sum() for c in ("count", *PARTIAL_COUNTS))
        .collect()
    )
    after_end = int(added["after_end"].sum())
    if after_end:
        noun = "recovery row is" if after_end == 1 else "recovery rows are"
        raise InputError(
            f"forks: {after_end} {noun} at or after the end of the no-recovery run; a task "
            "that ended before the recovery point (perturb_action + delay >= end_action) is "
            "carried forward and must have no recovery row."
        )
    counts = added.group_by(cells).agg(
        (pl.col("n") * pl.col("count")).sum().alias("n"),
        *(pl.col(c).sum() for c in PARTIAL_COUNTS if c != "after_end"),
    )
    types = added.filter(pl.col("n") > 0).select(*cells, "d", "n", "count")
    if progress is not None:
        progress(
            f"{ci_method} intervals and sign-flip tests over {counts.height} cells "
            f"({types.height} task types: tasks alike in pairs and net rescues in a cell, "
            "computed once)"
        )
    tests = stats.paired_effect_cells(types, cells=cells, **statistics)
    result = counts.join(
        tests.rename({"n_clusters": "n_tasks"}), on=cells, how="left", nulls_equal=True
    )
    rescue, harm, kept = pl.col("rescue"), pl.col("harm"), pl.col("kept")
    return (
        result.with_columns(
            pl.col("n_tasks").fill_null(0).cast(pl.Int64),
            _rate(harm + kept, "base_rate"),
            _rate(rescue + kept, "recovery_rate"),
            _rate(rescue - harm, "effect"),
        )
        .select(*cells, *(c for c in _RESULT_COLUMNS if c != "p_adjusted" or adjust is not None))
        .sort(cells, nulls_last=False)
    )


def _rate(numerator: pl.Expr, name: str) -> pl.Expr:
    n = pl.col("n")
    return pl.when(n > 0).then(numerator / n).otherwise(None).alias(name)


def summarize(
    forks: object,
    *,
    by: str | Sequence[str] | None = (),
    pair_by: str | Sequence[str] | None = (),
    cohort: Cohort = "full",
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    ci_method: str = "auto",
    progress: Progress = None,
    engine: object = "polars",
    alternative: str = "two-sided",
    adjust: str | None = None,
    break_even: bool = False,
    memory: float | None = None,
) -> pl.DataFrame:
    """Count rescues and harms per (condition, delay, method, *by*), with honest uncertainty.

    Every paired recovery branch (see :func:`~recoverylab.paired.pairs`, carry-forward included)
    falls in one cell; the cell's ``effect = (rescue - harm) / n`` is the paired success
    difference of recovery over no recovery. The interval is computed over the cell's distinct
    per-task (difference, pairs) types, at a cost that does not grow with the number of tasks,
    and the ``ci_method`` column names what each cell got: by default an interval that inverts
    an exact test and draws no resamples (two-sided unless ``alternative`` says otherwise), on
    request a
    task-level cluster bootstrap (tasks resampled, never single branches). ``p_value`` is the
    p-value of the test the interval inverts (named in ``test``), so zero lies outside the
    interval exactly when ``p_value < 1 − confidence``; the sign-flip test has its own column
    ``p_sign_flip``. No bound is moved to agree with a p-value. Each cell has its own
    random stream (seed + cell key), so a cell's CI does not depend on which other cells exist.

    The aggregation runs lazily on polars' streaming engine; only the type table (a few rows per
    cell) is collected. When every ``pair_by`` key is also a ``by`` key (or there is none), a
    task has at most one pair per cell and the cell counts are the types: no per-task pass.

    Parameters
    ----------
    forks
        The ``forks`` table (any source :func:`recoverylab.io.scan` reads; eager or lazy).
    by
        Extra grouping columns (model, split, family, ``factual_success``...).
    pair_by
        Extra keys a pair must share (see :func:`~recoverylab.paired.pairs`).
    cohort
        ``"full"``, or ``"factual_success"`` for tasks whose factual run succeeded.
    confidence
        Interval confidence level.
    n_resamples
        Bootstrap resamples per cell (only the bootstrap ``ci_method`` values draw them).
    seed
        Resampling seed (combined with each cell key).
    ci_method
        ``"auto"`` (default): an interval that never contradicts the p-value and keeps its
        coverage in sparse cells -- Fay–Lumbard where each task has one pair in the cell,
        the cluster meld otherwise (see :func:`recoverylab.stats.paired_effect_cells`);
        ``"sign-flip"`` (exact test inversion only), or the bootstrap ``"percentile"`` /
        ``"bca"``. The ``ci_method`` column names what each cell got.
    progress
        Optional callable receiving stage messages.
    engine
        ``"polars"`` (default), or a SparkSession (or ``"spark"`` for the active one): the forks
        (a Spark DataFrame, parquet paths or any table) are repartitioned by task and the same
        partial query runs on each partition (see :mod:`recoverylab.engines`). The result
        is the same.
    alternative
        ``"two-sided"`` (default), ``"greater"`` (recovery helps) or ``"less"``: the sign-flip
        p-value and the interval are one-sided to match.
    adjust
        ``None``, ``"holm"`` or ``"bh"``: add ``p_adjusted``, adjusted over all cells of the
        result (the family is the result's rows).
    break_even
        Also append the break-even columns of :func:`recoverylab.paired.break_even` (p_fail,
        rescue_given_fail, harm_given_success, net_effect, break_even with its task-level
        interval) as the last columns.
    memory
        Memory budget in GB (10^9 bytes) for the per-task pass of the bit-set path; default
        a quarter of the machine's memory, at most 4 GB. An input whose per-task state would
        not fit is hash-partitioned by task into temporary files in the same single read of
        the input (results identical). The rest of the work is small beside it.

    Returns
    -------
    pl.DataFrame
        One row per cell with data, sorted by the keys: condition, delay, method, *by*, then
        ``n`` (pairs), ``n_tasks`` (task clusters with a pair), ``rescue``, ``harm``, ``kept``,
        ``unchanged``, ``carried_forward`` (pairs whose task ended before the point),
        ``base_rate`` (no-recovery success), ``recovery_rate``, ``effect``, ``ci_low``,
        ``ci_high`` (of the effect), ``p_value``, ``ci_method`` (what produced the interval),
        ``sparse`` (fewer than 10 tasks with a nonzero difference or fewer than 20 tasks: read
        the interval with care), ``p_adjusted`` (with ``adjust``), and the excluded recovery
        rows ``unpaired`` and ``prefix_mismatch``; then ``test`` (whose p-value ``p_value``
        is: ``fay-lumbard``, ``cluster-melded`` or ``sign-flip``), ``ci_inverts_test`` (the
        interval is that test's inversion; false for the bootstrap) and ``p_sign_flip`` (the
        exact sign-flip test of the task differences). A cell whose rows were all excluded has
        ``n = 0`` and null rates. Rates are fractions.

    Raises
    ------
    SchemaError, InputError
        As :func:`~recoverylab.paired.pairs`.
    ParameterError
        For an unknown cohort, CI method, a bad confidence or number of resamples, or a ``by``
        column that is not in the table.

    Examples
    --------
    >>> import polars as pl
    >>> forks = pl.DataFrame({"task_id": ["t1", "t1", "t2", "t2"],
    ...                       "condition": ["stale2"] * 4,
    ...                       "method": ["none", "refresh"] * 2, "delay": [None, 0] * 2,
    ...                       "success": [False, True, True, True]})
    >>> summarize(forks).select("n", "rescue", "effect").row(0)
    (2, 1, 0.5)
    """
    keys: dict[str, Any] = {"pair_by": pair_by, "by": by, "cohort": cohort}
    statistics = statistics_options(confidence, n_resamples, seed, ci_method, alternative, adjust)
    _budget.budget_bytes(memory)  # a bad budget fails before any read
    result = engines.run(
        engine,
        plan.Plan(
            inputs=(_shards.forks_input(forks),),
            check=functools.partial(_check_statistics, **statistics),
            stages=(
                # on the whole table the bit-set pass reads the grid itself: no separate read
                dataclasses.replace(design_stage(**keys), for_shards=True),
                plan.Stage(
                    "pairing and counting",
                    functools.partial(_summary_partial, memory=memory, **keys),
                ),
            ),
            finish=lambda parts: finish(parts["partials"], progress=progress, **statistics),
            progress=progress,
        ),
    )
    if not break_even:
        return result
    return _breakeven.join_break_even(
        result,
        forks,
        engine=engine,
        by=by,
        pair_by=pair_by,
        cohort=cohort,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        # p* is a ratio of rates: its interval is the bootstrap whatever the effect's method.
        ci_method=ci_method if ci_method in ("percentile", "bca") else "percentile",
    )


def design_stage(
    *,
    pair_by: str | Sequence[str] | None,
    by: str | Sequence[str] | None,
    cohort: str,
    combine: plan.Combine | None = None,
) -> plan.Stage:
    """Return :func:`._shards.design_stage` checking that no ``by`` key is a result column.

    ``combine`` (default: the grid, a Design) replaces the stage's combine: a verb's checks of
    the whole table's grid.
    """
    stage = _shards.design_stage(pair_by=pair_by, by=by, cohort=cohort, check_keys=_check_by)
    return stage if combine is None else dataclasses.replace(stage, combine=combine)


def _summary_partial(
    frames: Mapping[str, pl.LazyFrame],
    design: Design,
    *,
    by: str | Sequence[str] | None,
    pair_by: str | Sequence[str] | None,
    cohort: str,
    memory: float | None,
) -> dict[str, pl.DataFrame]:
    lazy, table, design, by_keys = _partials(
        frames["forks"],
        by=by,
        pair_by=pair_by,
        cohort=cohort,
        design=design,
        progress=None,
        memory=memory,
    )
    collected = lazy.collect(engine="streaming")
    if int(collected["after_end"].sum()):
        rows = apply_cohort(branch_rows(table, design, carry=by_keys), table, cohort)
        raise_after_end(rows, table)
    return {"partials": collected}


def statistics_options(
    confidence: float,
    n_resamples: int,
    seed: int,
    ci_method: str,
    alternative: str,
    adjust: str | None,
) -> dict[str, Any]:
    """Return the statistics keywords a paired plan hands to its check and its finish."""
    return {
        "confidence": confidence,
        "n_resamples": n_resamples,
        "seed": seed,
        "ci_method": ci_method,
        "alternative": alternative,
        "adjust": adjust,
    }
