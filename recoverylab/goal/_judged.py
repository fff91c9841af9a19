"""Goal success decided by a judge: prediction-powered task success (TS) per group.

When an episode's success (GP, or a judged outcome such as a recovery or help-request verdict)
comes from an LLM judge rather than the seed's rules, TS = mean success carries the judge's
errors. With human (gold) labels on a random subset of episodes, PPI++
(:func:`recoverylab.stats.judged_cells`) corrects it per group, clustered like
:func:`~recoverylab.goal.summarize` (``goal_id`` when present, else ``case_id``); with only
the judge's sensitivity and specificity known, Rogan–Gladen
(:func:`recoverylab.stats.rogan_gladen_cells`). It is a plan (:mod:`recoverylab._judged_plan`):
the judge and gold columns are checked with additive counts, the judged partials summed per
shard of whole clusters on the engine the caller names, and finished once.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import _judged_plan, engines, plan, stats
from recoverylab._errors import ParameterError
from recoverylab.goal._summary import _default_cluster
from recoverylab.schema import column_names

#: The cluster column of the unit rows (the ``cluster`` named, or the default picked per table).
_CLUSTER = "__recoverylab_cluster"


def _check_columns(
    schema: pl.Schema, *, by: Sequence[str], cluster: str | None, strata: Sequence[str]
) -> None:
    """Raise for a ``by``, cluster or stratum column that the episodes lack."""
    names = schema.names()
    missing = [c for c in (*by, cluster or _default_cluster(schema), *strata) if c not in names]
    if missing:
        raise ParameterError(
            f"episodes: column `{missing[0]}` (named by `by`, `cluster` or `gold_strata`) is not "
            f"in the table (columns: {', '.join(names)})."
        )


def _units(frames: Mapping[str, pl.LazyFrame], state: Any, *, cluster: str | None) -> pl.LazyFrame:
    """Return one shard's episodes, with their cluster, as the judged units."""
    lazy = frames["episodes"]
    column = cluster or _default_cluster(lazy.collect_schema())
    return lazy.with_columns(pl.col(column).alias(_CLUSTER))


def summarize_judged(
    episodes: object,
    *,
    judge: str,
    gold: str | None = None,
    by: str | Sequence[str] = ("regime",),
    cluster: str | None = None,
    gold_strata: str | Sequence[str] | None = (),
    judge_sensitivity: float | None = None,
    judge_specificity: float | None = None,
    ci_method: str = "auto",
    confidence: float = 0.95,
    engine: object = "polars",
) -> pl.DataFrame:
    """Judged task success per group: PPI++ from a gold subset, or Rogan–Gladen.

    Parameters
    ----------
    episodes
        One row per episode (scored episodes of :func:`~recoverylab.goal.score`, or episodes
        joined to their cases) with the ``by`` columns, the cluster, the judge's verdict (0/1
        or a probability in [0, 1], never null) and, for PPI++, the gold label (null where not
        labelled).
    judge, gold
        Column names. Without ``gold``, give both ``judge_sensitivity`` and
        ``judge_specificity`` (Rogan–Gladen).
    by
        Group columns (default ``regime``).
    cluster
        The cluster column; default ``goal_id`` when present, else ``case_id``.
    gold_strata
        Columns within which gold labels were drawn at random (stratified PPI).
    judge_sensitivity, judge_specificity
        The judge's known error rates (only without ``gold``).
    ci_method, confidence
        As in :func:`recoverylab.stats.judged_cells`.
    engine
        ``"polars"`` (default), a SparkSession (or ``"spark"`` for the active one) or an engine
        of :mod:`recoverylab.engines`: the judge and gold columns are checked and the judged
        partials summed per shard of whole clusters; the result is the same on every engine.

    Returns
    -------
    pl.DataFrame
        One row per group: the ``by`` columns and :data:`recoverylab.stats.JUDGED_COLUMNS`
        (``estimate`` is the judged TS), or :func:`recoverylab.stats.rogan_gladen_cells`' columns.

    Raises
    ------
    SchemaError
        A judge with nulls or outside [0, 1], gold outside {0, 1} or no gold at all.
    ParameterError
        A missing column; neither gold nor both error rates, or both.
    """
    by_keys = list(column_names("by", by))
    strata = list(column_names("gold_strata", gold_strata))
    rates_given = (judge_sensitivity, judge_specificity)
    if (gold is None) == (rates_given == (None, None)) or (gold is None and None in rates_given):
        raise ParameterError(
            "a judged goal rate needs `gold` (human labels on a random subset) or both "
            "`judge_sensitivity` and `judge_specificity` (Rogan–Gladen), not both."
        )
    units = functools.partial(_units, cluster=cluster)
    if gold is None:
        partials = _judged_plan.unit_partials(
            units, by=[*by_keys, _CLUSTER], judge=judge, gold=pl.lit(None, pl.Float64)
        )
        finish = functools.partial(
            stats.rogan_gladen_cells,
            cells=by_keys,
            cluster=_CLUSTER,
            sensitivity=judge_sensitivity,  # type: ignore[arg-type]
            specificity=judge_specificity,  # type: ignore[arg-type]
            confidence=confidence,
        )
    else:
        partials = _judged_plan.unit_partials(
            units, by=[*by_keys, _CLUSTER, *strata], judge=judge, gold=gold
        )
        finish = functools.partial(
            stats.judged_cells,
            cells=by_keys,
            cluster=_CLUSTER,
            strata=strata,
            ci_method=ci_method,
            confidence=confidence,
        )
    judged = _judged_plan.judged_plan(
        (plan.Input("episodes", episodes, key=cluster or _default_cluster),),
        table="episodes",
        judge=judge,
        gold=gold,
        partials=partials,
        finish=finish,
        check_schema=functools.partial(_check_columns, by=by_keys, cluster=cluster, strata=strata),
    )
    return engines.run(engine, judged)
