"""Rescue/harm cells, condition contrasts and rescue overlap (ARCHITECTURE §1.3, §3.1, §4).

:func:`summarize` is ``finish(partials(...))``, the two phases of ARCHITECTURE §1.3: additive
per-cell partials (counts, and the histogram of per-task *types* ``d`` = summed y1 - y0, ``n`` =
pairs), then a bootstrap of each cell over its types (a multinomial over types is exactly the
task-level cluster bootstrap) and the exact sign-flip test. The counting takes the bit-set path
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
from recoverylab._errors import InputError, ParameterError, renamed
from recoverylab.paired import _bits, _breakeven, _shards
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
    design_of,
    key_names,
    prepare,
    raise_after_end,
)
from recoverylab.schema import SPECS, check_unique_keys

__all__ = [
    "contrast",
    "finish",
    "partials",
    "rescue_overlap",
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
        found, counted = _bits.bit_counts(table, by_keys, full_key, design)
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
    forks, by, pair_by, cohort, progress
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
    return _partials(
        forks, by=by, pair_by=pair_by, cohort=cohort, design=design, progress=progress
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
        progress(f"bootstrap and sign-flip over {counts.height} cells ({types.height} task types)")
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
) -> pl.DataFrame:
    """Count rescues and harms per (condition, delay, method, *by*), with honest uncertainty.

    Every paired recovery branch (see :func:`~recoverylab.paired.pairs`, carry-forward included)
    falls in one cell; the cell's ``effect = (rescue - harm) / n`` is the paired success
    difference of recovery over no recovery. The interval is a task-level cluster bootstrap:
    tasks are resampled, never single branches, computed over the cell's distinct per-task
    (difference, pairs) types -- exactly the same distribution, at a cost that does not grow
    with the number of tasks. The p-value is the two-sided sign-flip test of the per-task summed
    differences (exact). Each cell has its own random stream (seed + cell key), so a cell's CI
    does not depend on which other cells exist.

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
        Bootstrap resamples per cell.
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
        rows ``unpaired`` and ``prefix_mismatch``. A cell whose rows were all excluded has
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
    result = engines.run(
        engine,
        plan.Plan(
            inputs=(_shards.forks_input(forks),),
            check=functools.partial(_check_statistics, **statistics),
            stages=(
                design_stage(**keys),
                plan.Stage("pairing and counting", functools.partial(_summary_partial, **keys)),
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
) -> dict[str, pl.DataFrame]:
    lazy, table, design, by_keys = _partials(
        frames["forks"], by=by, pair_by=pair_by, cohort=cohort, design=design, progress=None
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


def contrast(
    forks: object,
    a: str,
    b: str,
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
) -> pl.DataFrame:
    """Compare the recovery effect of condition ``a`` with that of ``b`` at each point.

    At every (delay, method, *by*) the difference ``effect_a - effect_b`` answers "is the same
    recovery more useful under this information state?" (e.g. ``stale2 - clean``). Each task's
    partials for both conditions travel together, so one bootstrap draw of tasks serves both
    effects (joint types (d_a, n_a, d_b, n_b) with counts; a task with no pair in one condition
    contributes zeros there).

    The p-value is a sign-flip test of the per-task difference of effects,
    ``δ_i = d_a,i / n_a,i - d_b,i / n_b,i`` (d = summed y1 - y0, n = pairs of the task in that
    condition), over the tasks paired in *both* conditions: under the null that the condition
    labels are exchangeable within a task, δ_i is symmetric about zero. With one pair per task
    and condition (no pair_by, or pair_by within by) δ_i = d_a,i - d_b,i is an integer in
    [-2, 2] and the test is exact.

    Parameters
    ----------
    forks
        The ``forks`` table.
    a, b
        The two conditions (labels of the ``condition`` column), e.g. ``"stale2"``, ``"clean"``.
    by, pair_by, cohort, confidence, n_resamples, seed, progress, engine, alternative, adjust
        As in :func:`summarize`.
    ci_method
        The difference of two effects (non-integer per-task differences) has no exact
        interval here: ``"auto"`` and the test-based names use the joint ``"percentile"``
        bootstrap; ``"bca"`` is available.

    Returns
    -------
    pl.DataFrame
        One row per (delay, method, *by*) where both conditions have pairs: ``a``, ``b`` (the
        labels), delay, method, *by*, ``n_tasks`` (tasks resampled: with a pair in either
        condition), ``n_a``, ``n_b`` (pairs), ``effect_a``, ``effect_b``, ``difference``,
        ``ci_low``, ``ci_high`` (of the difference), ``p_value``, ``ci_method``, ``sparse``
        (fewer than 10 tasks with a nonzero difference or fewer than 20 tasks) and
        ``p_adjusted`` (with ``adjust``).

    Raises
    ------
    ParameterError
        When ``a`` equals ``b`` or either has no recovery rows in ``forks``; otherwise as
        :func:`summarize`.

    Examples
    --------
    >>> import polars as pl
    >>> forks = pl.DataFrame({"task_id": ["t1"] * 4, "condition": ["stale2"] * 2 + ["clean"] * 2,
    ...                       "method": ["none", "refresh"] * 2, "delay": [None, 0] * 2,
    ...                       "success": [False, True, True, False]})
    >>> contrast(forks, "stale2", "clean")["difference"].item()
    2.0
    """
    keys: dict[str, Any] = {"pair_by": pair_by, "by": by, "cohort": cohort}
    statistics = statistics_options(confidence, n_resamples, seed, ci_method, alternative, adjust)
    checked = functools.partial(_labelled_design, a=a, b=b, column="condition")
    return engines.run(
        engine,
        plan.Plan(
            inputs=(_shards.forks_input(forks),),
            check=functools.partial(_contrast_check, a, b, **statistics),
            stages=(
                design_stage(**keys, combine=checked),
                plan.Stage(
                    f"pairing {a} and {b} and counting per task",
                    functools.partial(_contrast_partial, a=a, b=b, **keys),
                ),
            ),
            finish=functools.partial(
                _contrast_finish, by=by, a=a, b=b, progress=progress, **statistics
            ),
            progress=progress,
        ),
    )


def _contrast_check(a: object, b: object, **statistics: Any) -> None:
    """Check the parameters of :func:`contrast` (before any data is read)."""
    _check_statistics(**statistics)
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, str):
            raise ParameterError(f"parameter `{name}` is {value!r}; it must be a condition label.")
    if a == b:
        raise ParameterError(f"parameters `a` and `b` are both {a!r}; contrast two conditions.")


def _labelled_design(
    parts: dict[str, pl.DataFrame], state: Any, *, a: str, b: str, column: str
) -> Design:
    """Read the design grid; check that ``a`` and ``b`` are conditions/methods of its points."""
    design = design_of(parts["points"])
    known = design.conditions if column == "condition" else design.methods
    rows, empty = ("recovery rows", "none") if column == "condition" else ("rows", "")
    for name, value in (("a", a), ("b", b)):
        if value not in known:
            raise ParameterError(
                f"parameter `{name}` is {value!r}; forks has no {rows} with that {column} "
                f"({column}s: {', '.join(known) or empty})."
            )
    return design


#: Per-task partials of :func:`contrast`: summed y1 - y0 and pairs, in condition a and b.
_JOINT = ("d_a", "n_a", "d_b", "n_b")


def _contrast_partial(
    frames: Mapping[str, pl.LazyFrame],
    design: Design,
    *,
    pair_by: str | Sequence[str] | None,
    by: str | Sequence[str] | None,
    cohort: str,
    a: str,
    b: str,
) -> dict[str, pl.DataFrame]:
    """Count one shard's tasks by joint type (d_a, n_a, d_b, n_b) per (delay, method, *by*)."""
    table, by_keys = prepare(frames["forks"], pair_by=pair_by, by=by, cohort=cohort)
    cells = ["delay", "method", *by_keys]
    rows = apply_cohort(branch_rows(table, design, carry=by_keys), table, cohort).filter(
        pl.col("condition").is_in([a, b])
    )
    valid = pl.col("reason").is_null()
    diff = pl.col("y1").cast(pl.Int64) - pl.col("y0").cast(pl.Int64)
    partial = []
    for suffix, label in (("a", a), ("b", b)):
        mine = valid & (pl.col("condition") == label)
        partial += [
            pl.when(mine).then(diff).otherwise(0).sum().cast(pl.Int64).alias(f"d_{suffix}"),
            mine.sum().cast(pl.Int64).alias(f"n_{suffix}"),
        ]
    types = (
        rows.group_by([*cells, "task_id"])
        .agg(*partial, (pl.col("reason") == AFTER_END).sum().alias("__after_end"))
        .group_by([*cells, *_JOINT])
        .agg(pl.len().cast(pl.Int64).alias("count"), pl.col("__after_end").sum())
        .collect(engine="streaming")
    )
    if int(types["__after_end"].sum()):
        raise_after_end(rows, table)
    return {"types": types}


def _contrast_finish(
    parts: dict[str, pl.DataFrame],
    *,
    by: str | Sequence[str] | None,
    a: str,
    b: str,
    confidence: float,
    n_resamples: int,
    seed: int,
    ci_method: str,
    progress: Progress = None,
    alternative: str = "two-sided",
    adjust: str | None = None,
) -> pl.DataFrame:
    """Turn the joint types into the contrast rows (equal types of several shards add up)."""
    cells = ["delay", "method", *key_names("by", by)]
    types = (
        parts["types"]
        .group_by([*cells, *_JOINT])
        .agg(pl.col("count").sum())
        .filter((pl.col("n_a") + pl.col("n_b")) > 0)
    )
    weighted = [(pl.col(v) * pl.col("count")).sum().alias(v) for v in _JOINT]
    counts = (
        types.group_by(cells)
        .agg(*weighted, pl.col("count").sum().alias("n_tasks"))
        .filter((pl.col("n_a") > 0) & (pl.col("n_b") > 0))
    )
    types = types.join(counts.select(cells), on=cells, how="semi", nulls_equal=True)
    if progress is not None:
        progress(f"joint bootstrap over {counts.height} cells")
    method = ci_method if ci_method in ("percentile", "bca") else "percentile"
    boot = stats.cluster_bootstrap(
        types,
        cells=cells,
        values=list(_JOINT),
        count="count",
        statistic=stats.ratio_difference,
        n_resamples=n_resamples,
        confidence=confidence if alternative == "two-sided" else 2 * confidence - 1,
        ci_method=method,
        seed=seed,
    ).select(
        *cells,
        pl.lit(-2.0).alias("ci_low") if alternative == "less" else "ci_low",
        pl.lit(2.0).alias("ci_high") if alternative == "greater" else "ci_high",
        pl.lit(method).alias("ci_method"),
    )
    effect_a = pl.col("d_a") / pl.col("n_a")
    effect_b = pl.col("d_b") / pl.col("n_b")
    result = (
        counts.join(boot, on=cells, how="left", nulls_equal=True)
        .join(
            _contrast_test(types, cells, seed, alternative), on=cells, how="left", nulls_equal=True
        )
        .select(
            pl.lit(a).alias("a"),
            pl.lit(b).alias("b"),
            *cells,
            "n_tasks",
            "n_a",
            "n_b",
            effect_a.alias("effect_a"),
            effect_b.alias("effect_b"),
            (effect_a - effect_b).alias("difference"),
            "ci_low",
            "ci_high",
            "p_value",
            "ci_method",
            pl.col("sparse").fill_null(True),
        )
        .sort(cells, nulls_last=False)
    )
    if adjust is not None:
        adjusted = stats.adjust_p_values(result["p_value"].to_numpy(), adjust)
        result = result.with_columns(pl.Series("p_adjusted", adjusted, dtype=pl.Float64))
    return result


def _contrast_test(
    types: pl.DataFrame, cells: list[str], seed: int, alternative: str
) -> pl.DataFrame:
    """Per cell: the sign-flip p-value over tasks paired in both conditions, and ``sparse``."""
    both = types.filter((pl.col("n_a") > 0) & (pl.col("n_b") > 0)).with_columns(
        (pl.col("d_a") / pl.col("n_a") - pl.col("d_b") / pl.col("n_b")).alias("delta")
    )
    flip = stats.sign_flip_cells(
        both, cells=cells, difference="delta", count="count", seed=seed, alternative=alternative
    ).select(*cells, "p_value")
    sparse = both.group_by(cells).agg(
        (
            (pl.col("count").filter(pl.col("delta") != 0).sum() < stats.SPARSE_NONZERO_CLUSTERS)
            | (pl.col("count").sum() < stats.SPARSE_CLUSTERS)
        ).alias("sparse")
    )
    return flip.join(sparse, on=cells, how="full", coalesce=True, nulls_equal=True)


def rescue_overlap(
    forks: object,
    a: str | None = None,
    b: str | None = None,
    *,
    by: str | Sequence[str] | None = (),
    pair_by: str | Sequence[str] | None = (),
    cohort: Cohort = "full",
    engine: object = "polars",
    **deprecated: Any,
) -> pl.DataFrame:
    """Count the episodes two recovery methods rescue, and how many both rescue.

    Shows whether two operations work through the same runs: e.g. whether the rescues of a
    full refresh survive when the refreshed content is hidden (seed: 8 of refresh's 10 rescues
    are shared with the content-ablated variant). An episode is (task_id, condition, *pair_by*)
    at one delay; carried-forward pairs are never rescues.

    Parameters
    ----------
    forks
        The ``forks`` table.
    a, b
        Two recovery methods present in ``forks`` (``method_a``/``method_b``: deprecated
        aliases).
    by, pair_by, cohort, engine
        As in :func:`summarize`.

    Returns
    -------
    pl.DataFrame
        One row per (condition, delay, *by*) where either method has pairs: ``a``,
        ``b`` (the two methods), condition, delay, *by*, ``n_a``, ``n_b`` (pairs), ``n_both``
        (episodes paired under both), ``rescue_a``, ``rescue_b``, ``rescue_both``.

    Raises
    ------
    ParameterError
        When the methods are equal, ``none``, or absent from ``forks``; otherwise as
        :func:`~recoverylab.paired.pairs`.

    Examples
    --------
    >>> import polars as pl
    >>> forks = pl.DataFrame({"task_id": ["t1"] * 3, "condition": ["stale2"] * 3,
    ...                       "method": ["none", "refresh", "replan_only"],
    ...                       "delay": [None, 4, 4], "success": [False, True, True]})
    >>> rescue_overlap(forks, "refresh", "replan_only")["rescue_both"].item()
    1
    """
    names = renamed("rescue_overlap", deprecated, {"method_a": "a", "method_b": "b"})
    method_a: Any = names.get("a", a)
    method_b: Any = names.get("b", b)
    keys: dict[str, Any] = {"pair_by": pair_by, "by": by, "cohort": cohort}
    checked = functools.partial(_labelled_design, a=method_a, b=method_b, column="method")
    return engines.run(
        engine,
        plan.Plan(
            inputs=(_shards.forks_input(forks),),
            check=functools.partial(_check_methods, method_a, method_b),
            stages=(
                design_stage(**keys, combine=checked),
                plan.Stage(
                    "rescues per episode",
                    functools.partial(_overlap_partial, a=method_a, b=method_b, **keys),
                ),
            ),
            finish=functools.partial(_overlap_finish, by=by, a=method_a, b=method_b),
        ),
    )


def _check_methods(a: object, b: object) -> None:
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, str) or value == "none":
            raise ParameterError(
                f"parameter `{name}` is {value!r}; it must be a recovery method (not 'none')."
            )
    if a == b:
        raise ParameterError(f"parameters `a` and `b` are both {a!r}; compare two methods.")


_OVERLAP_COUNTS = ("n_a", "n_b", "n_both", "rescue_a", "rescue_b", "rescue_both")


def _overlap_partial(
    frames: Mapping[str, pl.LazyFrame],
    design: Design,
    *,
    pair_by: str | Sequence[str] | None,
    by: str | Sequence[str] | None,
    cohort: str,
    a: str,
    b: str,
) -> dict[str, pl.DataFrame]:
    """Per-episode rescues of both methods, counted per (condition, delay, *by*)."""
    table, by_keys = prepare(frames["forks"], pair_by=pair_by, by=by, cohort=cohort)
    rows = apply_cohort(branch_rows(table, design, carry=by_keys), table, cohort).filter(
        pl.col("method").is_in([a, b])
    )
    valid = pl.col("reason").is_null()
    rescue = valid & ~pl.col("y0") & pl.col("y1")
    is_a, is_b = pl.col("method") == a, pl.col("method") == b
    episode = [*table.episode, *(k for k in by_keys if k not in table.pair_by), "delay"]
    per_episode = rows.group_by(episode).agg(
        (valid & is_a).any().alias("__a"),
        (valid & is_b).any().alias("__b"),
        (rescue & is_a).any().alias("__ra"),
        (rescue & is_b).any().alias("__rb"),
        (pl.col("reason") == AFTER_END).sum().alias("__after_end"),
    )
    total = [
        pl.col("__a").sum().cast(pl.Int64).alias("n_a"),
        pl.col("__b").sum().cast(pl.Int64).alias("n_b"),
        (pl.col("__a") & pl.col("__b")).sum().cast(pl.Int64).alias("n_both"),
        pl.col("__ra").sum().cast(pl.Int64).alias("rescue_a"),
        pl.col("__rb").sum().cast(pl.Int64).alias("rescue_b"),
        (pl.col("__ra") & pl.col("__rb")).sum().cast(pl.Int64).alias("rescue_both"),
        pl.col("__after_end").sum().alias("__after_end"),
    ]
    cells = ["condition", "delay", *by_keys]
    counts = per_episode.group_by(cells).agg(total).collect(engine="streaming")
    if int(counts["__after_end"].sum()):
        raise_after_end(rows, table)
    return {"counts": counts.drop("__after_end")}


def _overlap_finish(
    parts: dict[str, pl.DataFrame], *, by: str | Sequence[str] | None, a: str, b: str
) -> pl.DataFrame:
    cells = ["condition", "delay", *key_names("by", by)]
    counts = parts["counts"].group_by(cells).agg(pl.col(c).sum() for c in _OVERLAP_COUNTS)
    return (
        counts.filter((pl.col("n_a") + pl.col("n_b")) > 0)
        .select(pl.lit(a).alias("a"), pl.lit(b).alias("b"), *cells, *_OVERLAP_COUNTS)
        .sort(cells, nulls_last=False)
    )
