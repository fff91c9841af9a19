"""Paired cells whose outcomes a judge decided: prediction-powered rescue, harm and effect.

When ``success`` is an LLM judge's verdict, the rescue and harm counts of :func:`summarize`
carry the judge's errors, and by different amounts (a judge that misses failures inflates both
branches). With human (gold) labels on a random subset of branches, PPI++
(:func:`recoverylab.stats.judged_paired_cells`) corrects them: per pair, rescue, harm and the
outcome difference from the judge on every pair plus the gold pairs, cluster-aware over tasks.

Pairing is the protocol's own (:func:`~recoverylab.paired.pairs`: the ``none`` branch matched by
task, condition and *pair_by*, delay-specific replays, carry-forward), run once on the judge's
verdicts, once on the gold labels and once on whether a branch is labelled, and joined by the
pair's key: a carried-forward pair takes both outcomes, judged and gold, from its ``none``
branch, as the protocol says. A pair is labelled when both its branches are.

:func:`summarize_judged` and :func:`judge_agreement` are plans (:mod:`recoverylab._judged_plan`)
run on the engine the caller names: the judge and gold columns checked with additive counts,
then (for the summary) the whole table's design grid, then each shard of whole tasks paired
against that grid and summed into judged partials, finished once; :func:`judged_pairs` is the
same pairing on the whole table, lazily.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import _judged_plan, engines, io, plan, stats
from recoverylab._errors import SchemaError
from recoverylab.paired._pairs import Cohort, Design, pairs
from recoverylab.paired._shards import design_stage, forks_input, shard_pairs
from recoverylab.paired._summary import summarize
from recoverylab.schema import column_names as key_names

#: The columns of a judged pair after the pair key (see :func:`judged_pairs`).
_PAIR_KEY = ("task_id", "condition", "method", "delay")

#: Why a paired judge must give verdicts (the error for a fractional one).
_VERDICTS = "a paired outcome is a verdict (true/false), not a probability."


def _forks_frame(forks: object, judge: str, gold: str) -> pl.LazyFrame:
    """Read ``forks`` and check its judge and gold columns (one clear error each)."""
    lazy = forks if isinstance(forks, pl.LazyFrame) else io.scan(forks)
    stats.check_judged_units(lazy, judge=judge, gold=gold, table="forks")
    verdict = pl.col(judge).cast(pl.Float64)
    bad = lazy.select(((verdict != 0) & (verdict != 1)).sum()).collect().item()
    if bad:
        raise SchemaError(
            f"forks: the judge column `{judge}` has {bad} values other than 0 and 1; {_VERDICTS}"
        )
    return lazy


def _verdict(judge: str) -> pl.Expr:
    """Return the judge's verdict as the protocol's ``success`` (the outcome pairing reads)."""
    return (pl.col(judge).cast(pl.Float64) == 1).alias("success")


def _join_variants(
    lazy: pl.LazyFrame,
    *,
    judge: str,
    gold: str,
    pair_by: str | Sequence[str] | None,
    pair: Callable[[pl.LazyFrame], pl.LazyFrame],
) -> pl.LazyFrame:
    """Pair ``lazy`` three times (judge, gold, labelled) with ``pair``; join by the pair key."""
    keys = [*_PAIR_KEY[:2], *key_names("pair_by", pair_by), *_PAIR_KEY[2:]]
    y = pl.col(gold).cast(pl.Float64)
    variants = {
        "f": _verdict(judge),
        "v": y.fill_null(0.0) == 1,
        "l": y.is_not_null(),
    }
    drop = [judge, gold]
    frames = {
        name: pair(lazy.with_columns(value.alias("success"))).drop(drop, strict=False)
        for name, value in variants.items()
    }
    judged = frames["f"].rename({"y0": "f0", "y1": "f1"}).drop("outcome")
    for name in ("v", "l"):
        judged = judged.join(
            frames[name].select(
                *keys, pl.col("y0").alias(f"{name}0"), pl.col("y1").alias(f"{name}1")
            ),
            on=keys,
            how="left",
            nulls_equal=True,
        )
    return judged.with_columns(
        pl.col("f0", "f1").cast(pl.Float64),
        pl.when(pl.col("l0")).then(pl.col("v0").cast(pl.Float64)).alias("g0"),
        pl.when(pl.col("l1")).then(pl.col("v1").cast(pl.Float64)).alias("g1"),
    ).drop("v0", "v1", "l0", "l1")


def judged_pairs(
    forks: object,
    *,
    judge: str,
    gold: str,
    pair_by: str | Sequence[str] | None = (),
    cohort: Cohort = "full",
) -> pl.LazyFrame:
    """Return one row per pair with both branches' judge verdicts and gold labels.

    Parameters
    ----------
    forks
        The ``forks`` table with a judge column (every branch) and a gold column (null where
        no human labelled the branch); ``success`` is not read (the judge's verdict takes its
        place).
    judge, gold
        Column names.
    pair_by, cohort
        As in :func:`~recoverylab.paired.pairs`.

    Returns
    -------
    pl.LazyFrame
        The pair key (task_id, condition, *pair_by*, method, delay), ``f0``/``f1`` (judge, no
        recovery / recovery), ``g0``/``g1`` (gold, null where not labelled),
        ``carried_forward`` and the recovery row's other columns.
    """
    lazy = _forks_frame(forks, judge, gold)
    pair = functools.partial(pairs, pair_by=pair_by, cohort=cohort)
    return _join_variants(lazy, judge=judge, gold=gold, pair_by=pair_by, pair=pair)


def _shard_partials(
    frames: Mapping[str, pl.LazyFrame],
    design: Design,
    *,
    judge: str,
    gold: str,
    pair_by: str | Sequence[str] | None,
    cohort: str,
    cells: Sequence[str],
    strata: Sequence[str],
) -> pl.LazyFrame:
    """Return the judged paired partials of one shard (whole tasks), paired on the whole grid."""
    keys = (*_PAIR_KEY, *key_names("pair_by", pair_by))
    carry = [c for c in dict.fromkeys((*cells, *strata)) if c not in keys]  # the recovery row's
    pair = functools.partial(
        shard_pairs, design=design, pair_by=pair_by or (), cohort=cohort, carry=carry
    )
    judged = _join_variants(frames["forks"], judge=judge, gold=gold, pair_by=pair_by, pair=pair)
    return stats.judged_paired_partials(
        judged, cells=cells, cluster="task_id", judge=("f0", "f1"), gold=("g0", "g1"), strata=strata
    )


def _with_verdicts(
    frames: Mapping[str, pl.LazyFrame], state: Any, *, partial: Any, judge: str
) -> Any:
    """Run a forks stage's partial with the judge's verdict as ``success``."""
    return partial({**frames, "forks": frames["forks"].with_columns(_verdict(judge))}, state)


def summarize_judged(
    forks: object,
    *,
    judge: str,
    gold: str,
    by: str | Sequence[str] | None = (),
    pair_by: str | Sequence[str] | None = (),
    cohort: Cohort = "full",
    gold_strata: str | Sequence[str] | None = (),
    lam: float | None = None,
    ci_method: str = "auto",
    confidence: float = 0.95,
    engine: object = "polars",
) -> pl.DataFrame:
    """Prediction-powered rescue, harm and effect per (condition, delay, method, *by*).

    The judged counterpart of :func:`~recoverylab.paired.summarize`: the judge's verdict on
    every branch, human labels on a random subset, PPI++ per cell on the per-pair outcomes
    (module docstring), intervals clustered by task. Beside each estimate: the judge-only and
    gold-only estimates and the labelled share.

    Parameters
    ----------
    forks
        The ``forks`` table (any source) with the judge and gold columns.
    judge, gold
        The judge's verdict (true/false or 0/1, never null) and the human label (0/1, null where
        not labelled).
    by, pair_by, cohort
        As in :func:`~recoverylab.paired.summarize`.
    gold_strata
        Columns within which gold labels were drawn at random (stratified PPI when the labelled
        share differs by stratum); the pair's (recovery row's) values.
    lam, ci_method, confidence
        As in :func:`recoverylab.stats.judged_cells` (``auto``: PPI++ on the logit scale).
    engine
        ``"polars"`` (default), a SparkSession (or ``"spark"`` for the active one) or an engine
        of :mod:`recoverylab.engines`: the judge and gold columns are checked, the design grid
        read and the per-task partials (:func:`recoverylab.stats.judged_paired_partials`)
        computed per shard of whole tasks; the result is the same on every engine.

    Returns
    -------
    pl.DataFrame
        One row per cell × outcome (rescue, harm, effect), sorted: condition, delay, method,
        *by*, ``outcome``, then :data:`recoverylab.stats.JUDGED_COLUMNS` with ``p_value`` (of
        0) after ``std_error``. ``n`` counts pairs.

    Raises
    ------
    SchemaError
        A judge column with nulls or values other than 0/1, gold outside {0, 1}, or no gold.
    """
    cells = ["condition", "delay", "method", *key_names("by", by)]
    strata = list(key_names("gold_strata", gold_strata))
    grid = design_stage(pair_by=pair_by, by=by, cohort=cohort)
    grid = dataclasses.replace(
        grid, partial=functools.partial(_with_verdicts, partial=grid.partial, judge=judge)
    )
    partials = functools.partial(
        _shard_partials,
        judge=judge,
        gold=gold,
        pair_by=pair_by,
        cohort=cohort,
        cells=cells,
        strata=strata,
    )
    finish = functools.partial(
        stats.judged_paired_finish,
        cells=cells,
        cluster="task_id",
        strata=strata,
        lam=lam,
        ci_method=ci_method,
        confidence=confidence,
    )
    judged = _judged_plan.judged_plan(
        (forks_input(forks),),
        table="forks",
        judge=judge,
        gold=gold,
        partials=partials,
        finish=finish,
        verdicts=_VERDICTS,
        check_schema=_judged_plan.named_columns(
            "forks", by=key_names("by", by), gold_strata=strata
        ),
        stages=(grid,),
        label="judged pairs per task",
    )
    return engines.run(engine, judged)


def judge_agreement(
    forks: object,
    *,
    judge: str,
    gold: str,
    by: str | Sequence[str] | None = ("condition", "method"),
    confidence: float = 0.95,
    engine: object = "polars",
) -> pl.DataFrame:
    """Measure the judge's sensitivity, specificity and agreement with the gold labels, per cell.

    Over the labelled branches (each branch one unit, clustered by task); ``by=()`` gives the
    overall rows. See :func:`recoverylab.stats.judge_error_cells`. ``engine`` as in
    :func:`summarize_judged` (the partials are summed per shard of whole tasks).

    Returns
    -------
    pl.DataFrame
        The ``by`` columns, ``measure``, ``estimate``, ``ci_low``, ``ci_high``, ``n``,
        ``n_clusters``, ``ci_method``, ``test``.
    """
    cells = list(key_names("by", by))
    agreement = _judged_plan.judged_plan(
        (plan.Input("forks", forks, key="task_id"),),
        table="forks",
        judge=judge,
        gold=gold,
        partials=_judged_plan.unit_partials(
            "forks", by=[*cells, "task_id"], judge=judge, gold=gold
        ),
        finish=functools.partial(
            stats.judge_error_cells, cells=cells, cluster="task_id", confidence=confidence
        ),
        verdicts=_VERDICTS,
        check_schema=_judged_plan.named_columns("forks", ["task_id"], by=cells),
    )
    return engines.run(engine, agreement)


def rogan_gladen_effect(
    forks: object,
    *,
    judge: str,
    sensitivity: float,
    specificity: float,
    by: str | Sequence[str] | None = (),
    pair_by: str | Sequence[str] | None = (),
    cohort: Cohort = "full",
    confidence: float = 0.95,
    engine: object = "polars",
) -> pl.DataFrame:
    """Correct the paired effect for a judge of known sensitivity and specificity.

    With the same error rates on both branches, E[f1 − f0] = (se + sp − 1)·(θ1 − θ0): the
    judge's paired effect, divided by se + sp − 1, is the true effect (Rogan & Gladen 1978
    applied to a difference). Its interval is :func:`~recoverylab.paired.summarize`'s interval
    of the judge's effect (each cell's own method, its p-value unchanged: the test of zero is
    the same test) mapped by that same division. Rescue and harm alone cannot be corrected
    without a joint error model and are not reported.

    Parameters
    ----------
    forks
        The ``forks`` table with the judge column (0/1, never null).
    judge
        The judge's verdict column (``success`` is not read).
    sensitivity, specificity
        The judge's known error rates, in (0, 1] with a sum above 1.
    by, pair_by, cohort, confidence, engine
        As in :func:`~recoverylab.paired.summarize` (``forks``: a source the polars resolver
        reads; the judge's paired effect is summarised on ``engine``).

    Returns
    -------
    pl.DataFrame
        condition, delay, method, *by*, ``n``, ``estimate`` (corrected effect), ``ci_low``,
        ``ci_high``, ``p_value``, ``judge_estimate`` (the judge's effect), ``sensitivity``,
        ``specificity``, ``outside_range`` (estimate or a bound outside [−1, 1], shown as
        computed), ``ci_method`` (``rogan-gladen``), ``test`` (the judge effect's test).
    """
    se, sp = stats.check_judge_error_rates(sensitivity, specificity)
    lazy = forks if isinstance(forks, pl.LazyFrame) else io.scan(forks)
    stats.check_judged_units(
        lazy.with_columns(pl.lit(1, pl.Int8).alias("__gold")),
        judge=judge,
        gold="__gold",
        table="forks",
    )
    verdicts = lazy.with_columns(_verdict(judge))
    cells = summarize(
        verdicts, by=by, pair_by=pair_by, cohort=cohort, confidence=confidence, engine=engine
    )
    keys = ["condition", "delay", "method", *key_names("by", by)]
    scale = se + sp - 1.0
    out = cells.select(
        *keys,
        "n",
        (pl.col("effect") / scale).alias("estimate"),
        (pl.col("ci_low") / scale).alias("ci_low"),
        (pl.col("ci_high") / scale).alias("ci_high"),
        "p_value",
        pl.col("effect").alias("judge_estimate"),
        pl.lit(se).alias("sensitivity"),
        pl.lit(sp).alias("specificity"),
        pl.lit("rogan-gladen").alias("ci_method"),
        "test",
    )
    outside = (pl.col("ci_low") < -1) | (pl.col("ci_high") > 1) | (pl.col("estimate").abs() > 1)
    return out.with_columns(outside.alias("outside_range"))
