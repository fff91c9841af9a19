"""Judged units in, judged cells out: the checks of judge and gold columns, paired outcomes.

:func:`check_judged_units` gives one clear error for judge and gold columns that PPI cannot use
(every protocol calls it before reading data); :func:`judged_paired_cells` turns pairs of judged
branches into PPI++ rescue, harm and effect (``stats._judged`` holds the estimator).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import polars as pl

from recoverylab._errors import ParameterError, SchemaError, format_keys
from recoverylab.stats._cells import _column_names
from recoverylab.stats._checks import _check_confidence
from recoverylab.stats._judged import (
    _check_partial_columns,
    _collect_rows,
    _empty,
    _warn,
    check_judged_parameters,
    columns_frame,
    judged_columns,
    judged_fit,
    judged_partials,
)
from recoverylab.stats._judged_mover import MOVER_METHOD, mover_effect


def judged_unit_counts(
    units: pl.DataFrame | pl.LazyFrame, *, judge: str, gold: str, table: str = "units"
) -> pl.LazyFrame:
    """Check the judge and gold columns' types; count what :func:`check_judged_units` refuses.

    The counts are additive, so an engine computes them per shard and
    :func:`raise_judged_unit_counts` decides on their sum: the error names the whole table's
    counts on every engine.

    Returns
    -------
    polars.LazyFrame
        One row: ``judge_null``, ``judge_out`` (outside [0, 1] or NaN), ``gold_out`` (gold
        outside {0, 1}), ``gold_given``, ``rows`` (Int64) and ``gold_values_out`` (the distinct
        gold values outside {0, 1}, a list).

    Raises
    ------
    SchemaError
        A missing judge or gold column, or one that is neither numeric nor boolean.
    """
    frame = units.lazy() if isinstance(units, pl.DataFrame) else units
    schema = frame.collect_schema()
    for role, column in (("judge", judge), ("gold", gold)):
        if column not in schema:
            raise SchemaError(
                f"{table}: the {role} column `{column}` is not in the table "
                f"(columns: {', '.join(schema.names())})."
            )
        if not (schema[column].is_numeric() or schema[column] == pl.Boolean):
            raise SchemaError(
                f"{table}: the {role} column `{column}` has type {schema[column]}; it must be "
                "numeric or boolean."
            )
    f = pl.col(judge).cast(pl.Float64)
    y = pl.col(gold).cast(pl.Float64)
    gold_bad = (y != 0) & (y != 1)
    return frame.select(
        f.is_null().sum().cast(pl.Int64).alias("judge_null"),
        ((f < 0) | (f > 1) | f.is_nan()).sum().cast(pl.Int64).alias("judge_out"),
        gold_bad.sum().cast(pl.Int64).alias("gold_out"),
        y.is_not_null().sum().cast(pl.Int64).alias("gold_given"),
        pl.len().cast(pl.Int64).alias("rows"),
        pl.col(gold).filter(gold_bad).unique().implode().alias("gold_values_out"),
    )


def raise_judged_unit_counts(
    counts: pl.DataFrame, *, judge: str, gold: str, table: str = "units"
) -> None:
    """Raise :func:`check_judged_units`' error from :func:`judged_unit_counts` rows.

    ``counts`` may hold one row per shard: the counts are added and the values pooled first.

    Raises
    ------
    SchemaError
        A null or out-of-range judge verdict, a gold label outside {0, 1}, or no gold label at
        all (on a table with rows).
    """
    totals = ("judge_null", "judge_out", "gold_out", "gold_given", "rows")
    row = counts.select(pl.col(totals).sum()).row(0, named=True)
    if row["judge_null"]:
        raise SchemaError(
            f"{table}: the judge column `{judge}` has {row['judge_null']} nulls; the judge must "
            "score every unit (gold labels may be missing, verdicts may not)."
        )
    if row["judge_out"]:
        raise SchemaError(
            f"{table}: the judge column `{judge}` has {row['judge_out']} values outside [0, 1]; "
            "a verdict is 0/1 or a probability."
        )
    if row["gold_out"]:
        bad = sorted(set(counts.get_column("gold_values_out").explode().drop_nulls().to_list()))
        raise SchemaError(
            f"{table}: the gold column `{gold}` has {row['gold_out']} values outside {{0, 1}} "
            f"({format_keys(bad, total=len(bad))}); a gold label "
            "is 0/1, true/false, or null where not labelled."
        )
    if row["rows"] and not row["gold_given"]:
        raise SchemaError(
            f"{table}: the gold column `{gold}` is null on all {row['rows']} rows; PPI needs human "
            "labels on a random subset. Hint: without gold labels, give the judge's sensitivity "
            "and specificity for a Rogan–Gladen correction."
        )


def check_judged_units(
    units: pl.DataFrame | pl.LazyFrame, *, judge: str, gold: str, table: str = "units"
) -> None:
    """Raise one clear error for judge and gold columns a judged outcome cannot use.

    The judge must be in [0, 1] and never null (it scores every unit); gold must be 0/1 (or
    true/false) where given, and given somewhere. One pass over ``units``
    (:func:`judged_unit_counts`, then :func:`raise_judged_unit_counts`: an engine runs the two
    apart).

    Raises
    ------
    SchemaError
        A missing column, a null or out-of-range judge verdict, a gold label outside {0, 1}, or
        no gold label at all.
    """
    counts = judged_unit_counts(units, judge=judge, gold=gold, table=table).collect()
    raise_judged_unit_counts(counts, judge=judge, gold=gold, table=table)


#: The outcomes of a judged paired comparison (:func:`judged_paired_cells`), in row order.
PAIRED_OUTCOMES = ("rescue", "harm", "effect")


def judged_paired_cells(
    pairs: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    cluster: str,
    judge: tuple[str, str],
    gold: tuple[str, str],
    strata: Sequence[str] = (),
    lam: float | None = None,
    ci_method: str = "auto",
    confidence: float = 0.95,
) -> pl.DataFrame:
    """PPI++ rescue, harm and effect of paired branches judged on both sides, per cell.

    Each row of ``pairs`` is one pair (the no-recovery branch ``a`` and the recovery branch
    ``b``, forked from the same state). Per pair: rescue = (1 − y_a)·y_b, harm = y_a·(1 − y_b),
    effect = y_b − y_a (= rescue − harm), with the judge's verdicts ``f`` in place of ``y`` for
    the judge's version. A pair is labelled when both branches have gold; a pair with one gold
    branch counts as unlabelled (its gold difference is unknown). Each outcome is a judged mean
    (:func:`judged_cells`; the effect with ``value_range=(-1, 1)`` and a p-value of effect 0).
    The two phases are :func:`judged_paired_partials` (additive, per shard) and
    :func:`judged_paired_finish`.

    Parameters
    ----------
    pairs
        One row per pair: cells, cluster, strata and the four judge/gold columns.
    cells, cluster, strata, lam, ci_method, confidence
        As in :func:`judged_cells`.
    judge, gold
        ``(a, b)`` column names of the judge's verdicts (never null) and the gold labels (null
        where not labelled) of the two branches.

    Returns
    -------
    polars.DataFrame
        :func:`judged_cells`' columns (with ``p_value``) and an ``outcome`` column after the
        cells (rescue, harm, effect); rescue and harm's p-value is that of a rate of 0.
    """
    partials = judged_paired_partials(
        pairs, cells=cells, cluster=cluster, judge=judge, gold=gold, strata=strata
    )
    return judged_paired_finish(
        partials,
        cells=cells,
        cluster=cluster,
        strata=strata,
        lam=lam,
        ci_method=ci_method,
        confidence=confidence,
    )


def _paired_cells(cells: Sequence[str]) -> list[str]:
    cells_l = _column_names("cells", cells)
    if "outcome" in cells_l:
        raise ParameterError(
            "parameter `cells` names `outcome`, the column of the result's outcomes. Hint: "
            "rename it first."
        )
    return cells_l


def judged_paired_partials(
    pairs: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    cluster: str,
    judge: tuple[str, str],
    gold: tuple[str, str],
    strata: Sequence[str] = (),
) -> pl.LazyFrame:
    """Build the additive partials of :func:`judged_paired_cells`: rescue, harm, effect per pair.

    A polars query (lazy in, lazy out) that an engine runs per shard of whole clusters; the
    rows of several shards, concatenated, go to :func:`judged_paired_finish`.

    Returns
    -------
    polars.LazyFrame
        One row per (cell, ``outcome``, cluster, stratum): the cells, cluster and strata
        columns, ``outcome`` (rescue, harm, effect) and :data:`JUDGED_VALUES`.
    """
    cells_l = _paired_cells(cells)
    strata_l = _column_names("strata", strata)
    frame = pairs.lazy() if isinstance(pairs, pl.DataFrame) else pairs
    fa, fb = (pl.col(c).cast(pl.Float64) for c in judge)
    ya, yb = (pl.col(c).cast(pl.Float64) for c in gold)
    both = ya.is_not_null() & yb.is_not_null()
    values = {
        "rescue": ((1.0 - fa) * fb, (1.0 - ya) * yb),
        "harm": (fa * (1.0 - fb), ya * (1.0 - yb)),
        "effect": (fb - fa, yb - ya),
    }
    by = [*cells_l, cluster, *strata_l]
    parts = []
    for outcome in PAIRED_OUTCOMES:
        f, y = values[outcome]
        judged = frame.select(*by, f.alias("__f"), pl.when(both).then(y).alias("__y"))
        parts.append(
            judged_partials(judged, by=by, judge="__f", gold="__y").with_columns(
                pl.lit(outcome).alias("outcome")
            )
        )
    return pl.concat(parts, how="vertical")


def judged_paired_finish(
    partials: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    cluster: str,
    strata: Sequence[str] = (),
    lam: float | None = None,
    ci_method: str = "auto",
    confidence: float = 0.95,
) -> pl.DataFrame:
    """Turn :func:`judged_paired_partials` (of one or more shards) into the judged cells.

    Returns and parameters as :func:`judged_paired_cells`.
    """
    cells_l = _paired_cells(cells)
    strata_l = _column_names("strata", strata)
    check_judged_parameters(ci_method, lam)
    confidence = _check_confidence(confidence)
    if isinstance(partials, pl.LazyFrame):  # one pass over the pairs' query, not one per outcome
        schema = partials.collect_schema()
        _check_partial_columns(schema, cells_l, cluster, strata_l)
        if "outcome" not in schema:
            raise ParameterError(
                "partials: column `outcome` is missing; build them with "
                "stats.judged_paired_partials."
            )
        partials = partials.collect(engine="streaming")
    frame = partials.lazy() if isinstance(partials, pl.DataFrame) else partials
    collected = {
        outcome: _collect_rows(
            frame.filter(pl.col("outcome") == outcome).drop("outcome"),
            cells_l,
            cluster,
            strata_l,
        )
        for outcome in PAIRED_OUTCOMES
    }
    keys, rows = collected["rescue"]
    for outcome in ("harm", "effect"):  # one pair frame: the same (cell, cluster, stratum) rows
        other = collected[outcome][1]
        if not all(np.array_equal(rows[k], other[k]) for k in ("c", "g", "h")):
            raise SchemaError(
                "partials: the rescue, harm and effect rows do not share their cells, clusters "
                "and strata; build them with stats.judged_paired_partials."
            )
    if rows["c"].size == 0:
        empty = _empty(keys, True).with_columns(pl.lit(None, pl.String).alias("outcome"))
        return empty.select(*cells_l, "outcome", pl.exclude([*cells_l, "outcome"]))
    fits = {
        outcome: judged_fit(
            collected[outcome][1],
            lam,
            ci_method,
            confidence,
            (-1.0, 1.0) if outcome == "effect" else (0.0, 1.0),
        )
        for outcome in PAIRED_OUTCOMES
    }
    columns = {outcome: judged_columns(fits[outcome], 0.0, strata_l) for outcome in PAIRED_OUTCOMES}
    for outcome in ("rescue", "harm"):
        # the cells a warning names carry their outcome (rescue and harm warn apart)
        small = fits[outcome].small
        named = pl.concat(
            [keys, pl.DataFrame({"outcome": [outcome] * small.size})], how="horizontal"
        )
        _warn(named, [*cells_l, "outcome"], small, fits[outcome].fit, strata_l)
    effect = columns["effect"]
    effect |= mover_effect(fits["rescue"], fits["harm"], columns["rescue"], columns["harm"])
    undefined = fits["effect"].fit["undefined"]
    effect |= {
        "lam": np.full(undefined.size, math.nan),
        **{
            name: np.where(undefined, np.array(None, dtype=object), MOVER_METHOD)
            for name in ("ci_method", "test", "gold_ci_method")
        },
    }
    out = [
        columns_frame(keys, columns[outcome], cells_l).with_columns(
            pl.lit(outcome).alias("outcome")
        )
        for outcome in PAIRED_OUTCOMES
    ]
    order = {name: i for i, name in enumerate(PAIRED_OUTCOMES)}
    result = pl.concat(out, how="vertical_relaxed")
    result = result.with_columns(pl.col("outcome").replace_strict(order).alias("__o"))
    result = result.sort([*cells_l, "__o"], nulls_last=False).drop("__o")
    return result.select(*cells_l, "outcome", pl.exclude([*cells_l, "outcome"]))
