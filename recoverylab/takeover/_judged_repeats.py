"""Takeover pass@k and pass^k whose attempts a judge decided: prediction-powered, per unit.

Estimand. The protocol's own pass@k and pass^k (ARCHITECTURE §3.4): per (state, agent) unit
with n attempts of which c passed, the unbiased pass@k 1 − C(n−c, k)/C(n, k)
(:func:`~recoverylab.takeover.pass_at_k_expr`) and pass^k C(c, k)/C(n, k)
(:func:`~recoverylab.takeover.pass_hat_k_expr`), averaged over the scored units of a cell
(agent, depth, *by*). Both are means of unit values in [0, 1], so PPI++ applies to them as to a
rate (:func:`recoverylab.stats.judged_cells` with ``value_range=(0, 1)``).

Construction. A unit's *judge value* is the estimator applied to the judge's verdicts,
g(f₁..fₙ) = g(n, Σf): with 0/1 verdicts, the unit's pass@k (pass^k) as the judge scored it; with
probabilities, the same formula at the expected number of passes (a prediction in [0, 1]; PPI
stays unbiased for any prediction, a better one only narrows the interval). A unit's *gold
value* is the estimator applied to its gold labels, g(n, Σy), and is defined only where every
attempt of the unit has a gold label: a unit labelled in part counts as unlabelled (its judge
value is used, its gold labels are not), and a :class:`~recoverylab.RecoveryLabWarning` says
how many units that concerns. The units' values then go through
:func:`recoverylab.stats.judged_partials` per (cell, workflow, gold stratum) and
:func:`recoverylab.stats.judged_cells`, clustered by workflow: ``n`` counts units,
``n_labelled`` fully labelled units.

Units are those of :func:`~recoverylab.takeover.score` (rejected states and the common-sample
and common-state restrictions removed), and a unit on an eligible state with fewer than k
attempts is refused with the same error as the unjudged pass@k and pass^k. Gold labels are
assumed missing at random by unit within the strata given (a unit is labelled whole or its
labels are not used); the gold subset may be drawn by workflow or by unit (``gold_drawn_by``
says which the data show). Gold drawn by attempt leaves a unit whole with a chance that depends
on its number of attempts only: the whole units are then still a random subset where every unit
has the same number of attempts, but not otherwise (units with fewer attempts are whole more
often), so label whole units.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import engines, stats
from recoverylab._errors import (
    InputError,
    ParameterError,
    RecoveryLabWarning,
    format_keys,
    require_one_of,
)
from recoverylab.schema import column_names
from recoverylab.takeover import _stages
from recoverylab.takeover._inputs import check_k, pass_at_k_expr
from recoverylab.takeover._judged import (
    judged_plan,
    kept_units,
)
from recoverylab.takeover._reliability import pass_hat_k_expr

#: The judged repeat metrics, by name: pass@k (any of k passes) and pass^k (all k pass).
JUDGED_METRICS = {"pass@k": pass_at_k_expr, "pass^k": pass_hat_k_expr}

_N, _F, _L, _Y = "__attempts", "__judge_sum", "__labelled", "__gold_sum"
_JUDGE, _GOLD = "__judge_value", "__gold_value"
_PARTLY, _PARTLY_KEY = "__partly", "__partly_key"


def check_metrics(metrics: object) -> tuple[str, ...]:
    """Return ``metrics`` as a tuple of names of :data:`JUDGED_METRICS`, or raise."""
    names = column_names("metrics", metrics)
    bad = [m for m in names if m not in JUDGED_METRICS]
    if bad or not names:
        raise ParameterError(
            f"parameter `metrics` is {metrics!r}; it must name one or more of "
            f"{', '.join(JUDGED_METRICS)}."
        )
    return tuple(dict.fromkeys(names))


def _check_settings(lam: object, ci_method: object) -> None:
    """Check the settings :func:`recoverylab.stats.judged_cells` reads, before any data."""
    require_one_of("ci_method", ci_method, stats.JUDGED_CI_METHODS)
    if lam is not None and (
        isinstance(lam, bool) or not isinstance(lam, int | float) or not 0.0 <= lam <= 1.0
    ):
        raise ParameterError(f"parameter `lam` is {lam!r}; it must be None or a number in [0, 1].")


def unit_values(
    kept: pl.LazyFrame,
    attempts: pl.LazyFrame,
    *,
    unit: Sequence[str],
    judge: str,
    gold: str,
    k: int,
    metrics: Sequence[str],
) -> pl.LazyFrame:
    """Return one row per (kept unit, metric): its judge value and gold value (module docstring).

    The gold value is null for a unit with an attempt without a gold label. ``__labelled`` and
    ``__attempts`` are kept so the caller can count units labelled in part.
    """
    f, y = pl.col(judge).cast(pl.Float64), pl.col(gold).cast(pl.Float64)
    sums = attempts.group_by(list(unit)).agg(
        pl.len().cast(pl.Int64).alias(_N),
        _stages.stable_sum(f).alias(_F),  # exact: the same on every engine and shard
        y.is_not_null().sum().cast(pl.Int64).alias(_L),
        y.sum().alias(_Y),
    )
    units = kept.join(sums, on=list(unit), how="inner", nulls_equal=True)
    whole = pl.col(_L) == pl.col(_N)
    return pl.concat(
        [
            units.with_columns(
                pl.lit(name, pl.String).alias("metric"),
                JUDGED_METRICS[name](_N, _F, k).alias(_JUDGE),
                pl.when(whole).then(JUDGED_METRICS[name](_N, _Y, k)).alias(_GOLD),
            )
            for name in metrics
        ]
    )


def _partial(
    frames: Mapping[str, pl.LazyFrame],
    state: Any,
    *,
    by: Sequence[str],
    k: int,
    common_states: bool,
    common_sample: bool,
    judge: str,
    gold: str,
    cells: Sequence[str],
    strata: Sequence[str],
    metrics: Sequence[str],
) -> pl.LazyFrame:
    """One shard's judged partials of unit values, with its units labelled in part.

    Beside :data:`recoverylab.stats.JUDGED_VALUES`, each row of the first metric counts the
    units of its (cell, workflow, stratum) labelled in part (``__partly``) and names the first
    of them (``__partly_key``, state/agent...), for the warning of :func:`_finish`.
    """
    kept, unit = kept_units(
        frames, state, by=by, k=k, common_states=common_states, common_sample=common_sample
    )
    values = unit_values(
        kept, frames["attempts"], unit=unit, judge=judge, gold=gold, k=k, metrics=metrics
    )
    keys = [*cells, "metric", "workflow_id", *strata]
    part = stats.judged_partials(values, by=keys, judge=_JUDGE, gold=pl.col(_GOLD))
    key = pl.concat_str([pl.col(c).cast(pl.String) for c in unit], separator="/")
    partly = (
        values.filter(
            (pl.col("metric") == metrics[0]) & (pl.col(_L) > 0) & (pl.col(_L) < pl.col(_N))
        )
        .group_by(keys)
        .agg(pl.len().cast(pl.Int64).alias(_PARTLY), key.min().alias(_PARTLY_KEY))
    )
    return part.join(partly, on=keys, how="left", nulls_equal=True).with_columns(
        pl.col(_PARTLY).fill_null(0)
    )


def _finish(
    part: pl.DataFrame,
    *,
    cells: Sequence[str],
    strata: Sequence[str],
    unit: str,
    k: int,
    lam: float | None,
    ci_method: str,
    confidence: float,
) -> pl.DataFrame:
    """Warn for units labelled in part, refuse a table with no unit labelled whole, then PPI++."""
    partly = int(part[_PARTLY].sum())
    if partly:
        keys = part[_PARTLY_KEY].drop_nulls().sort().head(5)
        warnings.warn(
            f"attempts: {partly} {unit} unit{'' if partly == 1 else 's'} "
            f"{'has' if partly == 1 else 'have'} gold labels on some attempts only "
            f"({format_keys(keys, partly)}); a unit's gold pass@k and pass^k need a gold label "
            "on every attempt, so these count as unlabelled (their judge value is used, their "
            "gold labels are not). Hint: label every attempt of a unit, or none.",
            RecoveryLabWarning,
            stacklevel=2,
        )
    if part.height and not part["n_labelled"].sum():
        raise InputError(
            f"attempts: no {unit} unit has a gold label on every attempt; a judged pass@k or "
            "pass^k needs the gold value of whole units on a random subset. Hint: label every "
            "attempt of the units you label."
        )
    out = stats.judged_cells(
        part.drop(_PARTLY, _PARTLY_KEY),
        cells=[*cells, "metric"],
        cluster="workflow_id",
        strata=strata,
        lam=lam,
        ci_method=ci_method,
        confidence=confidence,
        value_range=(0.0, 1.0),
    )
    return out.select(*cells, "metric", pl.lit(k, pl.Int64).alias("k"), *stats.JUDGED_COLUMNS)


def reliability_judged(
    states: object,
    attempts: object,
    *,
    judge: str,
    gold: str,
    k: int = 3,
    metrics: str | Sequence[str] = ("pass@k", "pass^k"),
    by: str | Sequence[str] = ("agent", "depth"),
    gold_strata: str | Sequence[str] | None = (),
    common_sample: bool = False,
    common_states: bool = False,
    lam: float | None = None,
    ci_method: str = "auto",
    confidence: float = 0.95,
    engine: object = "polars",
) -> pl.DataFrame:
    """Judged pass@k and pass^k per (agent, depth, *by*): PPI++ on per-unit values.

    When an LLM judge decided each attempt's ``passed`` and humans labelled a random subset of
    units, the judge's pass@k and pass^k are biased by its errors and the gold units alone are
    few; PPI++ corrects the judge's unit values with the gold ones (module docstring).

    Parameters
    ----------
    states, attempts
        The takeover tables (ARCHITECTURE §3.4); ``attempts`` has the judge's verdict on
        ``passed`` (0/1 or a probability in [0, 1], never null) and the gold label (null where
        not labelled; a unit counts as labelled only where every attempt is).
    judge, gold
        Column names of ``attempts``.
    k
        The k of pass@k and pass^k; every scored unit needs at least k attempts (as in
        :func:`~recoverylab.takeover.summarize` and :func:`~recoverylab.takeover.reliability`).
    metrics
        ``"pass@k"``, ``"pass^k"`` or both (default).
    by
        Result keys (must include ``agent``), as in :func:`~recoverylab.takeover.summarize`.
    gold_strata
        Columns within which gold labels were drawn at random (stratified PPI); constant
        within a unit.
    common_sample, common_states
        As in :func:`~recoverylab.takeover.summarize`.
    lam
        A fixed power-tuning weight (0: gold only, 1: plain PPI); ``None`` (default) tunes it,
        as in :func:`recoverylab.stats.judged_cells`.
    ci_method, confidence
        As in :func:`recoverylab.stats.judged_cells`.
    engine
        ``"polars"`` (default), a SparkSession (or ``"spark"``) or an engine object (see
        :mod:`recoverylab.engines`); the result is the same.

    Returns
    -------
    polars.DataFrame
        One row per cell and metric: the ``by`` columns, ``metric`` (``pass@k`` or ``pass^k``),
        ``k`` and :data:`recoverylab.stats.JUDGED_COLUMNS` (``n`` counts units,
        ``n_labelled`` units labelled on every attempt; clusters are workflows;
        ``judge_estimate`` is the judge-only pass@k or pass^k, ``gold_estimate`` the gold-only
        one).

    Raises
    ------
    SchemaError
        A judge with nulls or outside [0, 1], gold outside {0, 1} or no gold at all.
    InputError
        No unit labelled on every attempt.
    ParameterError
        A bad ``k``, ``metrics`` or ``by``, or a scored unit with fewer than k attempts.

    Warns
    -----
    RecoveryLabWarning
        Units labelled on some attempts only (they count as unlabelled), and the fallbacks of
        :func:`recoverylab.stats.judged_cells`.

    Examples
    --------
    >>> import polars as pl
    >>> from recoverylab import synth
    >>> tables = synth.generate("takeover", 60, seed=5)
    >>> attempts = tables["attempts"].with_columns(
    ...     judge=pl.col("passed") | (pl.col("repeat") == 0),  # a lenient judge of first tries
    ...     gold=pl.col("passed"))  # every attempt labelled here: PPI++ is the gold mean
    >>> out = reliability_judged(
    ...     tables["states"], attempts, judge="judge", gold="gold", k=2, by="agent")
    >>> out.select("agent", "metric", "estimate", "judge_estimate").head(2).rows()
    [('agent_a', 'pass@k', 0.24427..., 0.74726...), ('agent_a', 'pass^k', 0.04477..., 0.10995...)]
    """
    by_keys = column_names("by", by)
    strata = column_names("gold_strata", gold_strata)
    k = check_k(k)
    names = check_metrics(metrics)
    _check_settings(lam, ci_method)
    settings: dict[str, Any] = {"cells": by_keys, "strata": strata}
    return engines.run(
        engine,
        judged_plan(
            states,
            attempts,
            judge=judge,
            gold=gold,
            outcome="passed",
            by=[*by_keys, *(s for s in strata if s not in by_keys)],
            k=k,
            common_sample=common_sample,
            common_states=common_states,
            partial=functools.partial(_partial, judge=judge, gold=gold, metrics=names, **settings),
            finish=functools.partial(
                _finish,
                **settings,
                unit="(state, agent)",
                k=k,
                lam=lam,
                ci_method=ci_method,
                confidence=confidence,
            ),
        ),
    )
