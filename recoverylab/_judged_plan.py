"""Judged outcomes as a plan: check the judge and gold columns, judged partials per shard, finish.

ARCHITECTURE §7 and §10. A judged statistic (PPI++, the judge's error, Rogan–Gladen) is
additive: :func:`recoverylab.stats.judged_partials` sums units into one row per (cell,
cluster, stratum) and :func:`recoverylab.stats.judged_cells` (or
:func:`~recoverylab.stats.judge_error_cells`, :func:`~recoverylab.stats.rogan_gladen_cells`,
:func:`~recoverylab.stats.judged_paired_finish`) finishes the rows of every shard,
concatenated. :func:`judged_plan` builds that verb as a :class:`recoverylab.plan.Plan`, so
every engine (polars, ``ShardedEngine(k)``, Spark) computes the partials per shard of whole
clusters and the finish adds them: the results are those of the polars engine.

The plan has two passes over the data:

1. *checking the judge and gold columns* (no shuffle; only the checked input is read): the
   additive counts of :func:`recoverylab.stats.judged_unit_counts` per shard, summed, then
   :func:`recoverylab.stats.raise_judged_unit_counts` -- so a null verdict, gold outside
   {0, 1} or no gold at all is one error with the whole table's counts on every engine, raised
   before any partial query runs on bad values (a missing or string column is refused by the
   same check, on the schema);
2. the caller's earlier stages, if any (a design grid, ...), then *the judged partials*: the
   caller's per-shard query (``partials``), whose rows, concatenated over the shards, are
   handed to ``finish``.

Use (a verb with an ``engine=`` argument)::

    from recoverylab import _judged_plan, engines, plan

    p = _judged_plan.judged_plan(
        (plan.Input("attempts", attempts, key="workflow_id"),),
        table="attempts",
        judge="judge",
        gold="gold",  # None: only the judge is checked (Rogan–Gladen)
        partials=_judged_plan.unit_partials(units, by=[*cells, "workflow_id", *strata],
                                            judge="judge", gold="gold"),
        finish=functools.partial(stats.judged_cells, cells=cells, cluster="workflow_id",
                                 strata=strata),
    )
    return engines.run(engine, p)

``units`` is a module-level function (or a ``functools.partial`` of one: Spark pickles it to
its workers) from one shard's tables and the state of the earlier stages to the unit rows, a
LazyFrame; every input must be keyed by the cluster that ``by`` names (``plan.Input.key``), so
that a cluster's units are in one shard. A verb whose partials are not one judged mean (paired
rescue/harm/effect: :func:`recoverylab.stats.judged_paired_partials`) passes its own
``partials`` query, of the same form as :func:`unit_partials`' result.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import plan, stats
from recoverylab._errors import ParameterError, SchemaError

__all__ = ["judged_plan", "named_columns", "unit_partials"]

#: A per-shard query: (the tables of one shard, the state of the earlier stages) -> rows.
ShardQuery = Callable[[Mapping[str, pl.LazyFrame], Any], pl.LazyFrame]

_GOLD = "__recoverylab_gold_given"


def judged_plan(
    inputs: Sequence[plan.Input],
    *,
    table: str,
    judge: str,
    gold: str | None,
    partials: ShardQuery,
    finish: Callable[[pl.DataFrame], Any],
    verdicts: str | None = None,
    check_schema: Callable[[pl.Schema], None] | None = None,
    stages: Sequence[plan.Stage] = (),
    check: Callable[[], None] | None = None,
    state: Any = None,
    label: str = "judged partials",
) -> plan.Plan:
    """Return the plan of a judged verb: check the columns, judged partials per shard, finish.

    Parameters
    ----------
    inputs
        The plan's input tables, each keyed by the cluster (see the module docstring).
    table
        The input (name) whose ``judge`` and ``gold`` columns are checked; also the table named
        in the errors.
    judge, gold
        The judge's verdict column and the gold label column of ``table``. ``gold=None``: only
        the judge is checked (no gold labels: Rogan–Gladen).
    partials
        Per-shard query (picklable) returning the judged partial rows, e.g. :func:`unit_partials`.
    finish
        Turns the partial rows of every shard, concatenated (a DataFrame), into the result.
    verdicts
        When given, judge values other than 0 and 1 are refused too; the text says why (e.g.
        ``"a paired outcome is a verdict (true/false), not a probability."``).
    check_schema
        Checks of ``table``'s schema (picklable: columns the verb names, ...), run in the first
        pass before the counts, so every engine raises them before it shuffles by the cluster.
    stages
        Stages to run between the check and the partials (their state reaches ``partials``).
    check
        Parameter checks, run before any data is read.
    state
        The state the first of ``stages`` receives (and ``partials``, when there are none).
    label
        What the partials stage computes, for progress messages.

    Returns
    -------
    recoverylab.plan.Plan
        Run it with ``engines.run(engine, plan)``; it returns what ``finish`` returns.

    Raises
    ------
    SchemaError
        When run: a missing or non-numeric judge or gold column, a null or out-of-range
        verdict (or a fractional one with ``verdicts``), gold outside {0, 1}, no gold at all.
    """
    checked = functools.partial(
        _check_partial,
        table=table,
        judge=judge,
        gold=gold,
        verdicts=verdicts is not None,
        check_schema=check_schema,
    )
    combine = functools.partial(
        _check_combine, table=table, judge=judge, gold=gold, verdicts=verdicts
    )
    return plan.Plan(
        inputs=tuple(inputs),
        stages=(
            plan.Stage(
                f"checking the judge column `{judge}`",
                checked,
                combine,
                clustered=False,
                reads=(table,),
            ),
            *stages,
            plan.Stage(label, functools.partial(_partials, query=partials), _concat),
        ),
        finish=finish,
        check=check,
        state=state,
    )


def unit_partials(
    units: ShardQuery | str,
    *,
    by: Sequence[str],
    judge: str | pl.Expr,
    gold: str | pl.Expr,
) -> ShardQuery:
    """Return the per-shard query ``stats.judged_partials(units(tables, state), by=...)``.

    Parameters
    ----------
    units
        Module-level function (or ``functools.partial``) from one shard's tables and the state
        of the earlier stages to the unit rows (one row per judged unit), a LazyFrame; or the
        name of the input whose rows are the units.
    by, judge, gold
        As in :func:`recoverylab.stats.judged_partials` (``by``: cells, cluster, strata; a
        null-everywhere gold such as ``pl.lit(None, pl.Float64)`` for Rogan–Gladen).
    """
    query = functools.partial(_input, name=units) if isinstance(units, str) else units
    return functools.partial(_unit_partials, units=query, by=tuple(by), judge=judge, gold=gold)


def named_columns(
    table: str, required: Sequence[str] = (), **named: Sequence[str]
) -> Callable[[pl.Schema], None]:
    """Return a ``check_schema`` that refuses a column ``table`` lacks.

    ``required`` columns (the cluster, ...) missing: a :class:`~recoverylab.SchemaError` as the
    table contracts word it; a column a parameter names (``by=[...]``, ``gold_strata=[...]``)
    missing: a :class:`~recoverylab.ParameterError` naming the parameter, e.g. "forks:
    parameter `gold_strata` names column `site`, which is not in the table (columns: ...)."
    """
    return functools.partial(
        _named_columns,
        table=table,
        required=tuple(required),
        named={k: tuple(v) for k, v in named.items()},
    )


def _named_columns(
    schema: pl.Schema, *, table: str, required: tuple[str, ...], named: dict[str, tuple[str, ...]]
) -> None:
    found = ", ".join(schema.names())
    missing = [c for c in required if c not in schema]
    if missing:
        raise SchemaError(
            f"{table}: missing required column `{missing[0]}`; found columns: {found}."
        )
    for parameter, columns in named.items():
        missing = [c for c in columns if c not in schema]
        if missing:
            raise ParameterError(
                f"{table}: parameter `{parameter}` names column `{missing[0]}`, which is not in "
                f"the table (columns: {found})."
            )


def _input(frames: Mapping[str, pl.LazyFrame], state: Any, *, name: str) -> pl.LazyFrame:
    return frames[name]


def _unit_partials(
    frames: Mapping[str, pl.LazyFrame],
    state: Any,
    *,
    units: ShardQuery,
    by: tuple[str, ...],
    judge: str | pl.Expr,
    gold: str | pl.Expr,
) -> pl.LazyFrame:
    return stats.judged_partials(units(frames, state), by=by, judge=judge, gold=gold)


def _check_partial(
    frames: Mapping[str, pl.LazyFrame],
    state: Any,
    *,
    table: str,
    judge: str,
    gold: str | None,
    verdicts: bool,
    check_schema: Callable[[pl.Schema], None] | None,
) -> dict[str, pl.LazyFrame]:
    frame = frames[table]
    if check_schema is not None:
        check_schema(frame.collect_schema())
    if gold is None:
        frame = frame.with_columns(pl.lit(1, pl.Int8).alias(_GOLD))
    counts = stats.judged_unit_counts(frame, judge=judge, gold=gold or _GOLD, table=table)
    if verdicts:
        f = pl.col(judge).cast(pl.Float64)
        counts = pl.concat(
            [counts, frame.select(((f != 0) & (f != 1)).sum().cast(pl.Int64).alias("fraction"))],
            how="horizontal",
        )
    return {"counts": counts}


def _check_combine(
    parts: dict[str, pl.DataFrame],
    state: Any,
    *,
    table: str,
    judge: str,
    gold: str | None,
    verdicts: str | None,
) -> Any:
    """Raise on the summed counts of every shard; else hand the plan's state on."""
    counts = parts["counts"]
    stats.raise_judged_unit_counts(counts, judge=judge, gold=gold or _GOLD, table=table)
    fraction = int(counts.get_column("fraction").sum()) if verdicts is not None else 0
    if fraction:
        raise SchemaError(
            f"{table}: the judge column `{judge}` has {fraction} values other than 0 and 1; "
            f"{verdicts}"
        )
    return state


def _partials(
    frames: Mapping[str, pl.LazyFrame], state: Any, *, query: ShardQuery
) -> dict[str, pl.LazyFrame]:
    return {"partials": query(frames, state)}


def _concat(parts: dict[str, pl.DataFrame], state: Any) -> pl.DataFrame:
    return parts["partials"]
