"""Pass rates of aware and unaware attempts, per agent and macro-averaged (an association).

Awareness is observed after the run, so :func:`awareness_split` describes, never estimates an
effect: every row is labelled with :data:`INTERPRETATION`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import engines, plan, stats
from recoverylab.schema import column_names
from recoverylab.takeover._inputs import (
    sort_keys,
)
from recoverylab.takeover._stages import (
    cluster_keys,
    plan_inputs,
    rate,
    scored_shard,
    stable_mean,
    workflow_stages,
)

#: Label of results that split attempts by an outcome observed after the run (seed: the authors'
#: aware/unaware pass rates are an association, not a randomised intervention).
INTERPRETATION = "association, not an effect"


def awareness_split(
    states: object,
    attempts: object,
    *,
    by: Sequence[str] = ("agent",),
    common_sample: bool = False,
    common_states: bool = False,
    confidence: float = 0.95,
    engine: object = "polars",
) -> pl.DataFrame:
    """Pass rates of aware and of unaware attempts, per agent and macro-averaged over agents.

    This is an **association, not an effect** (seed: the authors group runs by whether the agent
    noticed the error *after* the run; awareness was not randomised, so the gap is not the gain
    of prompting an agent to notice). Every row says so in ``interpretation``.

    Parameters
    ----------
    states, attempts
        The `states` and `attempts` tables; only scored attempts (eligible states, after the
        restrictions) count.
    by
        Row keys; must include ``agent``. Macro rows average over agents within the other keys.
    common_sample, common_states
        As in :func:`summarize`.
    confidence
        Level of the per-agent rates' intervals: Korn–Graubard over workflows
        (:func:`recoverylab.stats.rate_cells`; attempts of one workflow are not independent).
    engine
        As in :func:`summarize`.

    Returns
    -------
    polars.DataFrame
        Per-agent rows (``scope = "agent"``) and, per combination of the other ``by`` keys, one
        macro row (``scope = "macro"``, ``agent`` null). Columns: ``scope``, the ``by`` keys,
        ``agents`` (agents averaged: 1 on agent rows; on macro rows the agents that have both aware
        and unaware attempts), ``aware_attempts``, ``aware_passed``, ``aware_pass_rate`` (+
        ``_ci_low``/``_ci_high``), ``unaware_attempts``, ``unaware_passed``, ``unaware_pass_rate``
        (+ CIs), ``difference`` (aware − unaware; on macro rows the mean of the per-agent
        differences), ``ci_method`` and ``test`` (``korn-graubard`` / ``exact-binomial`` on
        agent rows), ``interpretation``. Macro rows have null intervals, methods and tests.

    Raises
    ------
    SchemaError, InputError, ParameterError
        As in :func:`summarize`.

    Examples
    --------
    >>> from recoverylab import synth
    >>> tables = synth.generate("takeover", 20, seed=1)
    >>> out = awareness_split(tables["states"], tables["attempts"])
    >>> out.filter(pl.col("scope") == "macro")["interpretation"].to_list()
    ['association, not an effect']
    """
    columns = column_names("by", by)
    flags: dict[str, Any] = {"common_states": common_states, "common_sample": common_sample}
    return engines.run(
        engine,
        plan.Plan(
            inputs=plan_inputs(states, attempts),
            stages=workflow_stages(
                columns, 1, "aware and unaware attempts", _awareness_partial, **flags
            ),
            check=functools.partial(
                stats.check_resampling, confidence=confidence, n_resamples=1, seed=0
            ),
            finish=functools.partial(_awareness_finish, by=columns, confidence=confidence),
        ),
    )


_SIDES = ("aware", "unaware")


_AWARENESS_COUNTS = ("aware_attempts", "aware_passed", "unaware_attempts", "unaware_passed")


def _awareness_partial(
    frames: Mapping[str, pl.LazyFrame],
    state: dict[str, Any],
    *,
    by: Sequence[str],
    k: int,
    common_states: bool,
    common_sample: bool,
) -> dict[str, pl.LazyFrame]:
    """Aware and unaware attempts and passes per (workflow, ``by`` cell), the clusters."""
    frame, _ = scored_shard(
        frames, state, by=by, k=k, common_states=common_states, common_sample=common_sample
    )
    counts = (
        frame.filter(pl.col("excluded").is_null())
        .group_by(cluster_keys(by))
        .agg(
            pl.col("n_aware").sum().alias("aware_attempts"),
            pl.col("aware_passed").sum().alias("aware_passed"),
            (pl.col("repeats") - pl.col("n_aware")).sum().alias("unaware_attempts"),
            pl.col("unaware_passed").sum().alias("unaware_passed"),
        )
    )
    return {"counts": counts}


def _awareness_finish(
    parts: dict[str, pl.DataFrame], *, by: Sequence[str], confidence: float
) -> pl.DataFrame:
    keys = list(by)
    rest = [c for c in keys if c != "agent"]
    # a workflow's partials may come from several shards only if the engine split it: add them
    per_workflow = (
        parts["counts"].group_by(cluster_keys(keys)).agg(pl.col(c).sum() for c in _AWARENESS_COUNTS)
    )
    per_agent = (
        per_workflow.group_by(keys)
        .agg(pl.col(c).sum() for c in _AWARENESS_COUNTS)
        .with_columns(rate(f"{s}_passed", f"{s}_attempts").alias(f"{s}_pass_rate") for s in _SIDES)
        .with_columns((pl.col("aware_pass_rate") - pl.col("unaware_pass_rate")).alias("difference"))
    )
    agent_rows = per_agent.join(
        _side_intervals(per_workflow, keys, confidence), on=keys, how="left", nulls_equal=True
    ).with_columns(
        pl.lit("agent").alias("scope"),
        pl.lit(1, dtype=pl.Int64).alias("agents"),
    )
    both = per_agent.filter(pl.col("difference").is_not_null())
    macro_aggs = [
        pl.len().cast(pl.Int64).alias("agents"),
        *(pl.col(c).sum() for c in _AWARENESS_COUNTS),
        *(
            stable_mean(pl.col(c)).alias(c)
            for c in ("aware_pass_rate", "unaware_pass_rate", "difference")
        ),
    ]
    macro = both.group_by(rest).agg(macro_aggs) if rest else both.select(macro_aggs)
    macro = macro.filter(pl.col("agents") > 0).with_columns(
        pl.lit("macro").alias("scope"),
        pl.lit(None, dtype=pl.String).alias("agent"),
        *(
            pl.lit(None, dtype=pl.Float64).alias(f"{s}_pass_rate_ci_{end}")
            for s in _SIDES
            for end in ("low", "high")
        ),
        pl.lit(None, dtype=pl.String).alias("ci_method"),
        pl.lit(None, dtype=pl.String).alias("test"),
    )
    order = [
        "scope",
        *keys,
        "agents",
        *(
            f"{s}_{column}"
            for s in _SIDES
            for column in (
                "attempts",
                "passed",
                "pass_rate",
                "pass_rate_ci_low",
                "pass_rate_ci_high",
            )
        ),
        "difference",
        "ci_method",
        "test",
    ]
    schema = agent_rows.collect_schema()
    return (
        pl.concat(
            [
                agent_rows.select(order),
                macro.select(order).cast({"agent": schema["agent"]}),
            ]
        )
        .with_columns(pl.lit(INTERPRETATION).alias("interpretation"))
        .sort([*sort_keys(schema, rest), "scope", *sort_keys(schema, ["agent"])], nulls_last=True)
    )


def _side_intervals(per_workflow: pl.DataFrame, keys: list[str], confidence: float) -> pl.DataFrame:
    """Workflow-clustered intervals of the aware and unaware pass rates of every agent row.

    :func:`stats.rate_cells` in its Korn–Graubard form (no resampling: the verb takes no
    seed), one method for both sides of a row; a side without attempts has a null interval.
    """
    long = stats.rate_cells(
        per_workflow,
        cells=keys,
        numerator=[f"{s}_passed" for s in _SIDES],
        denominator=[f"{s}_attempts" for s in _SIDES],
        names=list(_SIDES),
        ci_method="korn-graubard",
        confidence=confidence,
    )
    wide = long.group_by(keys).agg(pl.col("ci_method").first(), pl.col("test").first())
    for side in _SIDES:
        part = long.filter(pl.col("rate") == side).select(
            *keys,
            pl.col("ci_low").alias(f"{side}_pass_rate_ci_low"),
            pl.col("ci_high").alias(f"{side}_pass_rate_ci_high"),
        )
        wide = wide.join(part, on=keys, how="left", nulls_equal=True)
    return wide
