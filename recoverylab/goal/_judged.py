"""Goal success decided by a judge: prediction-powered task success (TS) per group.

When an episode's success (GP, or a judged outcome such as a recovery or help-request verdict)
comes from an LLM judge rather than the seed's rules, TS = mean success carries the judge's
errors. With human (gold) labels on a random subset of episodes, PPI++
(:func:`recoverylab.stats.judged_cells`) corrects it per group, clustered like
:func:`~recoverylab.goal.summarize` (``goal_id`` when present, else ``case_id``); with only
the judge's sensitivity and specificity known, Rogan–Gladen
(:func:`recoverylab.stats.rogan_gladen_cells`).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from recoverylab import io, stats
from recoverylab._errors import ParameterError
from recoverylab.schema import column_names


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
    by_keys = column_names("by", by)
    strata = column_names("gold_strata", gold_strata)
    lazy = episodes if isinstance(episodes, pl.LazyFrame) else io.scan(episodes)
    names = lazy.collect_schema().names()
    cluster = cluster or ("goal_id" if "goal_id" in names else "case_id")
    missing = [c for c in (*by_keys, cluster, *strata) if c not in names]
    if missing:
        raise ParameterError(
            f"episodes: column `{missing[0]}` (named by `by`, `cluster` or `gold_strata`) is not "
            f"in the table (columns: {', '.join(names)})."
        )
    rates_given = (judge_sensitivity, judge_specificity)
    if (gold is None) == (rates_given == (None, None)) or (gold is None and None in rates_given):
        raise ParameterError(
            "a judged goal rate needs `gold` (human labels on a random subset) or both "
            "`judge_sensitivity` and `judge_specificity` (Rogan–Gladen), not both."
        )
    if gold is None:
        stats.check_judged_units(
            lazy.with_columns(pl.lit(1, pl.Int8).alias("__gold")),
            judge=judge,
            gold="__gold",
            table="episodes",
        )
        part = stats.judged_partials(
            lazy, by=[*by_keys, cluster], judge=judge, gold=pl.lit(None, pl.Float64)
        )
        return stats.rogan_gladen_cells(
            part,
            cells=by_keys,
            cluster=cluster,
            sensitivity=judge_sensitivity,  # type: ignore[arg-type]
            specificity=judge_specificity,  # type: ignore[arg-type]
            confidence=confidence,
        )
    stats.check_judged_units(lazy, judge=judge, gold=gold, table="episodes")
    part = stats.judged_partials(lazy, by=[*by_keys, cluster, *strata], judge=judge, gold=gold)
    return stats.judged_cells(
        part,
        cells=by_keys,
        cluster=cluster,
        strata=strata,
        ci_method=ci_method,
        confidence=confidence,
    )
