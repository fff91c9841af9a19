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

from collections.abc import Sequence

import polars as pl

from recoverylab import io, stats
from recoverylab._errors import ParameterError
from recoverylab.schema import column_names
from recoverylab.takeover._inputs import score

#: The attempt outcomes a judge may decide: ``passed`` (pass@1) and ``aware`` (EAR).
JUDGED_OUTCOMES = ("passed", "aware")


def _judged_attempts(
    states: object,
    attempts: object,
    *,
    judge: str,
    gold: str | None,
    outcome: str,
    by: Sequence[str],
    common_sample: bool,
    common_states: bool,
) -> pl.LazyFrame:
    """Return the attempts of scored units with their workflow and the state-level ``by``."""
    if outcome not in JUDGED_OUTCOMES:
        raise ParameterError(
            f"parameter `outcome` is {outcome!r}; a judge decides one of "
            f"{', '.join(JUDGED_OUTCOMES)}."
        )
    lazy = attempts if isinstance(attempts, pl.LazyFrame) else io.scan(attempts)
    if gold is not None:
        stats.check_judged_units(lazy, judge=judge, gold=gold, table="attempts")
    else:
        stats.check_judged_units(
            lazy.with_columns(pl.lit(1, pl.Int8).alias("__gold")),
            judge=judge,
            gold="__gold",
            table="attempts",
        )
    verdict = lazy.with_columns((pl.col(judge).cast(pl.Float64) >= 0.5).alias(outcome))
    units = score(
        states, verdict, by=by, k=1, common_sample=common_sample, common_states=common_states
    )
    names = lazy.collect_schema().names()
    unit_keys = ["state_id", "agent", *(b for b in by if b in names and b != "agent")]
    kept = units.filter(pl.col("excluded").is_null()).select(
        *unit_keys, "workflow_id", *(b for b in by if b not in unit_keys)
    )
    return lazy.join(kept, on=unit_keys, how="inner", nulls_equal=True)


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
    if gold is None and None in rates_given:
        raise ParameterError(
            "a judged takeover rate needs `gold` (human labels on a random subset) or both "
            "`judge_sensitivity` and `judge_specificity` (the Rogan–Gladen correction)."
        )
    if gold is not None and rates_given != (None, None):
        raise ParameterError(
            "give `gold` or the judge's sensitivity and specificity, not both: with gold labels "
            "the judge's error rates are estimated (PPI++)."
        )
    units = _judged_attempts(
        states,
        attempts,
        judge=judge,
        gold=gold,
        outcome=outcome,
        by=[*by_keys, *(s for s in strata if s not in by_keys)],
        common_sample=common_sample,
        common_states=common_states,
    )
    if gold is None:
        part = stats.judged_partials(
            units, by=[*by_keys, "workflow_id"], judge=judge, gold=pl.lit(None, pl.Float64)
        )
        return stats.rogan_gladen_cells(
            part,
            cells=by_keys,
            cluster="workflow_id",
            sensitivity=judge_sensitivity,  # type: ignore[arg-type]
            specificity=judge_specificity,  # type: ignore[arg-type]
            confidence=confidence,
        )
    part = stats.judged_partials(
        units, by=[*by_keys, "workflow_id", *strata], judge=judge, gold=gold
    )
    return stats.judged_cells(
        part,
        cells=by_keys,
        cluster="workflow_id",
        strata=strata,
        ci_method=ci_method,
        confidence=confidence,
    )
