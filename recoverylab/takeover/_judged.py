"""Takeover rates whose outcomes a judge decided: prediction-powered EAR and pass@1.

When an attempt's ``passed`` (or ``aware``) comes from an LLM judge, the protocol's rates carry
the judge's errors. With human (gold) labels on a random subset of attempts, PPI++
(:func:`recoverylab.stats.judged_cells`) corrects the rate of attempts per (agent, depth, *by*),
clustered by workflow; with only the judge's sensitivity and specificity known, the
Rogan–Gladen correction (:func:`recoverylab.stats.rogan_gladen_cells`).

The units are the protocol's own: :func:`~recoverylab.takeover.score` checks the tables and
decides which (state, agent) units are scored (replay and expected-state checks, the common
sample and common states when asked); their attempts are the judged units.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import _judged_plan, engines, plan, stats
from recoverylab._errors import ParameterError
from recoverylab.schema import column_names
from recoverylab.takeover import _stages

#: The attempt outcomes a judge may decide: ``passed`` (pass@1) and ``aware`` (EAR).
JUDGED_OUTCOMES = ("passed", "aware")


def _with_verdict(
    partial: Callable[..., Any],
    frames: Mapping[str, pl.LazyFrame],
    state: Any,
    *,
    judge: str,
    outcome: str,
) -> Any:
    """Run a takeover stage's ``partial`` on attempts whose ``outcome`` is the judge's verdict.

    The scoring checks read the attempts contract, whose outcome columns a judged table may
    lack (the judge decided them); the verdict (judge >= 0.5) stands in. Which units are scored
    never depends on it.
    """
    attempts = frames["attempts"].with_columns(
        (pl.col(judge).cast(pl.Float64) >= 0.5).alias(outcome)
    )
    return partial({**frames, "attempts": attempts}, state)


def judged_plan(
    states: object,
    attempts: object,
    *,
    judge: str,
    gold: str | None,
    outcome: str,
    by: Sequence[str],
    k: int,
    common_sample: bool,
    common_states: bool,
    partial: Callable[..., Any],
    finish: Callable[[pl.DataFrame], pl.DataFrame],
    check: Callable[[], None] | None = None,
) -> plan.Plan:
    """Return the plan of a judged takeover statistic: checks, takeover's stages, ``partial``.

    A :func:`recoverylab._judged_plan.judged_plan`: first the judge and gold columns of
    `attempts` are checked over the whole table (additive counts; ``gold=None``: the judge
    only), then the stages every takeover plan shares (the workflow is the cluster,
    :func:`~recoverylab.takeover._stages.workflow_stages`: the tables' checks and the
    whole-table restrictions), then ``partial`` (called as a takeover partial, with ``by``,
    ``k`` and the restrictions) returns one shard's judged partial rows; ``finish`` receives
    their concatenation. Every takeover stage reads the attempts with the judge's verdict as
    ``outcome`` (:func:`_with_verdict`).
    """
    stages = _stages.workflow_stages(
        tuple(by),
        k,
        "judged partials",
        partial,
        common_states=common_states,
        common_sample=common_sample,
    )
    wrapped = [
        functools.partial(_with_verdict, stage.partial, judge=judge, outcome=outcome)
        for stage in stages
    ]
    return _judged_plan.judged_plan(
        _stages.plan_inputs(states, attempts),
        table="attempts",
        judge=judge,
        gold=gold,
        partials=wrapped[-1],
        finish=finish,
        stages=tuple(
            dataclasses.replace(stage, partial=query)
            for stage, query in zip(stages[:-1], wrapped[:-1], strict=True)
        ),
        check=check,
        label="judged partials",
    )


def kept_units(
    frames: Mapping[str, pl.LazyFrame],
    state: Any,
    *,
    by: Sequence[str],
    k: int,
    common_states: bool,
    common_sample: bool,
) -> tuple[pl.LazyFrame, list[str]]:
    """Return one shard's scored units (keys, workflow, ``by``) and the unit key columns.

    :func:`~recoverylab.takeover.score`'s units (replay and expected-state checks, the common
    sample and common states when asked) with ``excluded`` null: the units a judged statistic
    reads, the same as the unjudged one's.
    """
    frame, inputs = _stages.scored_shard(
        frames, state, by=by, k=k, common_states=common_states, common_sample=common_sample
    )
    unit = ["state_id", *inputs.unit_keys]
    kept = frame.filter(pl.col("excluded").is_null()).select(
        *unit, "workflow_id", *(b for b in by if b not in unit)
    )
    return kept, unit


def _attempt_partial(
    frames: Mapping[str, pl.LazyFrame],
    state: Any,
    *,
    by: Sequence[str],
    k: int,
    common_states: bool,
    common_sample: bool,
    judge: str,
    gold: str | None,
    cells: Sequence[str],
    strata: Sequence[str],
) -> pl.LazyFrame:
    """One shard's judged partials of attempts: per (cells, workflow, strata)."""
    kept, unit = kept_units(
        frames, state, by=by, k=k, common_states=common_states, common_sample=common_sample
    )
    rows = frames["attempts"].join(kept, on=unit, how="inner", nulls_equal=True)
    gold_expr = pl.lit(None, pl.Float64) if gold is None else pl.col(gold)
    # order-free sums (fixed point for fractional verdicts): the same bits on every engine
    return stats.judged_partials(
        rows, by=[*cells, "workflow_id", *strata], judge=judge, gold=gold_expr
    )


def _attempt_finish(
    part: pl.DataFrame,
    *,
    cells: Sequence[str],
    strata: Sequence[str],
    rates: tuple[float | None, float | None],
    ci_method: str,
    confidence: float,
) -> pl.DataFrame:
    """PPI++ (:func:`recoverylab.stats.judged_cells`) or Rogan–Gladen of the partials."""
    if rates == (None, None):
        return stats.judged_cells(
            part,
            cells=cells,
            cluster="workflow_id",
            strata=strata,
            ci_method=ci_method,
            confidence=confidence,
        )
    return stats.rogan_gladen_cells(
        part,
        cells=cells,
        cluster="workflow_id",
        sensitivity=rates[0],  # type: ignore[arg-type]
        specificity=rates[1],  # type: ignore[arg-type]
        confidence=confidence,
    )


def summarize_judged(
    states: object,
    attempts: object,
    *,
    judge: str,
    gold: str | None = None,
    outcome: str = "passed",
    by: str | Sequence[str] = ("agent", "depth"),
    gold_strata: str | Sequence[str] | None = (),
    judge_sensitivity: float | None = None,
    judge_specificity: float | None = None,
    common_sample: bool = False,
    common_states: bool = False,
    ci_method: str = "auto",
    confidence: float = 0.95,
    engine: object = "polars",
) -> pl.DataFrame:
    """Judged pass@1 (or EAR) per (agent, depth, *by*): PPI++ or Rogan–Gladen.

    Parameters
    ----------
    states, attempts
        The takeover tables (ARCHITECTURE §3.4); ``attempts`` has the judge's verdict (0/1 or a
        probability in [0, 1], never null) and, for PPI++, the gold label (null where not
        labelled).
    judge, gold
        Column names of ``attempts``. Without ``gold``, give ``judge_sensitivity`` and
        ``judge_specificity`` for the Rogan–Gladen correction.
    outcome
        Which attempt outcome the judge decided: ``"passed"`` (pass@1) or ``"aware"`` (EAR).
    by
        Result keys (must include ``agent``), as in :func:`~recoverylab.takeover.summarize`.
    gold_strata
        Columns within which gold labels were drawn at random (stratified PPI).
    judge_sensitivity, judge_specificity
        The judge's known error rates (Rogan–Gladen; only without ``gold``).
    common_sample, common_states
        As in :func:`~recoverylab.takeover.summarize`.
    ci_method, confidence
        As in :func:`recoverylab.stats.judged_cells`.
    engine
        ``"polars"`` (default), a SparkSession (or ``"spark"``) or an engine object (see
        :mod:`recoverylab.engines`); the result is the same.

    Returns
    -------
    pl.DataFrame
        One row per cell: the ``by`` columns and :data:`recoverylab.stats.JUDGED_COLUMNS`
        (PPI++; ``n`` counts attempts, clusters are workflows), or the columns of
        :func:`recoverylab.stats.rogan_gladen_cells`.

    Raises
    ------
    SchemaError
        A judge with nulls or outside [0, 1], gold outside {0, 1} or no gold at all.
    ParameterError
        Neither gold nor both error rates, both, or a bad ``outcome``.
    """
    by_keys = column_names("by", by)
    strata = column_names("gold_strata", gold_strata)
    rates_given = (judge_sensitivity, judge_specificity)
    check_rates_or_gold(gold, rates_given)
    if outcome not in JUDGED_OUTCOMES:
        raise ParameterError(
            f"parameter `outcome` is {outcome!r}; a judge decides one of "
            f"{', '.join(JUDGED_OUTCOMES)}."
        )
    cells: dict[str, Any] = {"cells": by_keys, "strata": strata if gold is not None else ()}
    return engines.run(
        engine,
        judged_plan(
            states,
            attempts,
            judge=judge,
            gold=gold,
            outcome=outcome,
            by=[*by_keys, *(s for s in strata if s not in by_keys)],
            k=1,
            common_sample=common_sample,
            common_states=common_states,
            partial=functools.partial(_attempt_partial, judge=judge, gold=gold, **cells),
            finish=functools.partial(
                _attempt_finish,
                **cells,
                rates=rates_given,
                ci_method=ci_method,
                confidence=confidence,
            ),
        ),
    )


def check_rates_or_gold(gold: str | None, rates: tuple[float | None, float | None]) -> None:
    """Raise unless exactly one of ``gold`` and both of the judge's error rates is given."""
    if gold is None and None in rates:
        raise ParameterError(
            "a judged takeover rate needs `gold` (human labels on a random subset) or both "
            "`judge_sensitivity` and `judge_specificity` (the Rogan–Gladen correction)."
        )
    if gold is not None and rates != (None, None):
        raise ParameterError(
            "give `gold` or the judge's sensitivity and specificity, not both: with gold labels "
            "the judge's error rates are estimated (PPI++)."
        )
