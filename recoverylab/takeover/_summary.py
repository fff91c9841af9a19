"""Cell summaries of takeover attempts: EAR, pass@1, pass@k and the repair funnel, with CIs.

Two phases (ARCHITECTURE §1.3): scored units are summed into per-(workflow × cell) partials in a
lazy query; only those partials are collected, then summed into cells and handed to
:mod:`recoverylab.stats` for workflow-clustered intervals and tests.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import plan, stats
from recoverylab._errors import ParameterError, format_keys
from recoverylab.schema import column_names
from recoverylab.takeover import _reliability
from recoverylab.takeover._inputs import (
    NOT_COMMON,
    REJECTED,
    Inputs,
    attempt_facts,
    check_k,
    check_roots,
    check_settings,
    checked_units,
    eligibility_counts,
    load,
    restrict,
    restriction_partials,
    scored_units,
    sort_keys,
)

#: Label of results that split attempts by an outcome observed after the run (seed: the authors'
#: aware/unaware pass rates are an association, not a randomised intervention).
INTERPRETATION = "association, not an effect"

#: (rate, numerator, denominator) of every rate in :func:`summarize`, in output order.
RATES = (
    ("ear", "n_aware", "attempts"),
    ("pass_at_1", "pass_at_1_sum", "attempted_states"),
    ("pass_at_k", "pass_at_k_sum", "attempted_states"),
    ("aware_rate", "n_aware", "attempts"),
    ("fixed_rate", "n_fixed", "attempts"),
    ("derived_rate", "n_derived", "attempts"),
    ("pass_rate", "n_passed", "attempts"),
    ("fixed_given_aware_rate", "aware_fixed", "n_aware"),
    ("derived_given_fixed_rate", "aware_fixed_derived", "aware_fixed"),
    ("pass_given_derived_rate", "aware_fixed_derived_passed", "aware_fixed_derived"),
)

#: Per-unit flags of the repair funnel, summed over a workflow's scored units.
_FUNNEL_COUNTS = (
    "n_aware",
    "n_fixed",
    "n_derived",
    "n_passed",
    "aware_fixed",
    "aware_fixed_derived",
    "aware_fixed_derived_passed",
    "off_funnel_fixed",
    "off_funnel_derived",
    "off_funnel_passed",
)
_COUNTS = (
    "attempted_states",
    "root_causes",
    "attempts",
    "excluded_attempts",
    "excluded_not_common_state",
    "excluded_not_common_sample",
    *_FUNNEL_COUNTS,
)
_SUMS = ("pass_at_1_sum", "pass_at_k_sum")
_STATE_COUNTS = (
    "eligible_states",
    "rejected_states",
    "rejected_replay_mismatch",
    "rejected_missing_expected",
)


#: Fixed-point scale of :func:`_stable_sum`: a float in [2**-8, 2**67) times 2**60 is an integer.
_FIXED_POINT = 2.0**60


def _stable_sum(expr: pl.Expr) -> pl.Expr:
    """Sum non-negative floats exactly, so the result never depends on row order.

    polars adds floats in whatever order its threads see them (and drops a ``sort`` before a plain
    ``sum``), so the last bits of a float sum could change with the input's row order. Each value is
    scaled by 2**60 to a 128-bit integer (exact for values of 2**-8 or more; smaller ones lose less
    than 2**-60) and the integers are added, which no order changes; the total is rounded to a float
    once. As fast as a plain sum, within a few times 2**-60 of the exact sum of the values.
    """
    return (expr * _FIXED_POINT).cast(pl.Int128).sum().cast(pl.Float64) / _FIXED_POINT


def _stable_mean(expr: pl.Expr) -> pl.Expr:
    """Mean of floats added in sorted order, so that row order cannot change its last bits.

    For the few per-agent rows of a macro cell, whose values (differences) may be negative,
    which :func:`_stable_sum` does not take.
    """
    return expr.sort().implode().list.mean()


def _rate(numerator: str, denominator: str) -> pl.Expr:
    """Divide two columns; null (never 0 or 1) where the denominator is 0."""
    return pl.when(pl.col(denominator) > 0).then(pl.col(numerator) / pl.col(denominator))


def _join(left: pl.DataFrame, right: pl.DataFrame, on: Sequence[str]) -> pl.DataFrame:
    """Left join on ``on`` with null keys matching; a cross join when there are no keys."""
    if not on:
        return left.join(right, how="cross")
    return left.join(right, on=list(on), how="left", nulls_equal=True)


def _cluster_keys(by: Sequence[str]) -> list[str]:
    """Keys of the partials: the cluster (workflow) and the cell, once each."""
    return ["workflow_id", *(c for c in by if c != "workflow_id")]


def _partials(frame: pl.LazyFrame, by: Sequence[str]) -> pl.LazyFrame:
    """Per (workflow_id, *by) additive partials of scored units, plus exclusion counts.

    Unscored units are zeroed (or nulled) before the group-by, so that every aggregation is a
    plain sum or count: a ``filter`` inside a group-by aggregation is several times slower.
    """
    scored = pl.col("excluded").is_null()
    masked = frame.select(
        *_cluster_keys(by),
        scored.cast(pl.Int64).alias("attempted_states"),
        pl.when(scored).then(pl.col("root_cause_id")).alias("__root"),
        pl.when(scored).then(pl.col("repeats")).otherwise(0).alias("attempts"),
        pl.when(pl.col("excluded").is_in(REJECTED))
        .then(pl.col("repeats"))
        .otherwise(0)
        .alias("excluded_attempts"),
        (pl.col("excluded") == NOT_COMMON[0]).fill_null(False).alias("excluded_not_common_state"),
        (pl.col("excluded") == NOT_COMMON[1]).fill_null(False).alias("excluded_not_common_sample"),
        *(pl.when(scored).then(pl.col(c)).otherwise(0).alias(c) for c in _FUNNEL_COUNTS),
        *(
            pl.when(scored).then(pl.col(c)).otherwise(0.0).alias(f"{c}_sum")
            for c in ("pass_at_1", "pass_at_k")
        ),
    )
    root = pl.col("__root")
    return masked.group_by(_cluster_keys(by)).agg(
        pl.col("attempted_states").sum().cast(pl.Int64),
        (root.n_unique() - (root.null_count() > 0).cast(pl.UInt32))
        .cast(pl.Int64)
        .alias("root_causes"),
        *(pl.col(c).sum().cast(pl.Int64) for c in _COUNTS[2:]),
        *(_stable_sum(pl.col(c)).alias(c) for c in _SUMS),
    )


def _bootstrap_intervals(
    partials: pl.DataFrame,
    cells: pl.DataFrame,
    by: Sequence[str],
    rates: Sequence[tuple[str, str, str]],
    *,
    confidence: float,
    n_resamples: int,
    ci_method: str,
    seed: int,
) -> pl.DataFrame:
    """Add ``<rate>_ci_low/_ci_high`` from a workflow-clustered bootstrap of every rate.

    Percentile: :func:`stats.cluster_bootstrap_ratios`; one resample of a cell's workflows serves
    all its rates and all cells with the same workflows (ARCHITECTURE §4: the same intervals for
    a fraction of the draws), and cells holding at least half of the workflows share one coupled
    stream, so adding a rate never moves an interval. BCa: :func:`stats.cluster_bootstrap` with
    cells (``*by``, rate). A workflow with attempts in a cell is a cluster of every rate (with
    0/0 for a conditional rate it does not inform: the number of informative workflows is part
    of the sampling variation).
    """
    metric = "__rate"
    clusters = partials.filter(pl.col("attempted_states") > 0)
    if ci_method == "percentile":
        boot = stats.cluster_bootstrap_ratios(
            clusters,
            cells=list(by),
            cluster="workflow_id",
            ratios=rates,
            n_resamples=n_resamples,
            confidence=confidence,
            seed=seed,
        ).rename({"ratio": metric})
    else:
        long = pl.concat(
            [
                clusters.select(
                    *by,
                    pl.lit(name).alias(metric),
                    pl.col(num).cast(pl.Float64).alias("__num"),
                    pl.col(den).cast(pl.Float64).alias("__den"),
                )
                for name, num, den in rates
            ]
        ).filter(pl.col("__den").sum().over([*by, metric]) > 0)
        boot = stats.cluster_bootstrap(
            long,
            cells=[*by, metric],
            values=["__num", "__den"],
            n_resamples=n_resamples,
            confidence=confidence,
            ci_method=ci_method,
            seed=seed,
        )
    for name, _, _ in rates:
        part = boot.filter(pl.col(metric) == name).select(
            *by,
            pl.col("ci_low").fill_nan(None).alias(f"{name}_ci_low"),
            pl.col("ci_high").fill_nan(None).alias(f"{name}_ci_high"),
        )
        cells = _join(cells, part, by)
    return cells


def summarize(
    states: object,
    attempts: object,
    *,
    by: Sequence[str] = ("agent", "depth"),
    k: int = 3,
    common_sample: bool = False,
    common_states: bool = False,
    interval: str = "bootstrap",
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    ci_method: str = "percentile",
    seed: int = 0,
    engine: object = "polars",
    reliability: bool = False,
) -> pl.DataFrame:
    """Summarise takeover attempts per (agent, depth, *by): EAR, pass@1, pass@k and the funnel.

    Each depth row carries its own denominators (ARCHITECTURE §3.4; seed: deeper depths have
    fewer eligible states, so depth rows are not the same sample unless ``common_sample``).
    States whose replay did not match, or whose expected values are missing, are rejected:
    counted in every row of their slice, never scored.

    Definitions, per row (a "unit" is a (state, agent) pair; "attempts" are its repeats):

    * ``ear`` (= ``aware_rate``): aware attempts / attempts.
    * ``pass_at_1``: mean over attempted states of (passed repeats / repeats).
    * ``pass_at_k``: mean over attempted states of 1 − C(n−c, k)/C(n, k), n repeats with c
      passes; with n = k exactly "any of the k repeats passed".
    * ``fixed_rate``, ``derived_rate``, ``pass_rate``: root cause fixed / derived state fixed /
      passed attempts, each over all attempts (``pass_rate`` is attempt-weighted; it equals
      ``pass_at_1`` when every unit has the same number of repeats).
    * The funnel, each layer conditional on the previous layer *holding*, i.e. on every earlier
      layer: ``fixed_given_aware_rate`` = #(aware ∧ fixed) / #aware,
      ``derived_given_fixed_rate`` = #(aware ∧ fixed ∧ derived) / #(aware ∧ fixed),
      ``pass_given_derived_rate`` = #(aware ∧ fixed ∧ derived ∧ passed) /
      #(aware ∧ fixed ∧ derived). Their denominators are the columns ``n_aware``,
      ``aware_fixed`` and ``aware_fixed_derived``. Seed: awareness, root-cause repair, derived
      state repair and the final verifier are scored separately.
    * Attempts annotated as reaching a layer while an earlier layer fails (root cause fixed
      without awareness, derived state fixed without the root cause, passed without the derived
      state) are outside the funnel. They are not dropped: ``off_funnel_fixed``,
      ``off_funnel_derived`` and ``off_funnel_passed`` count them, so that ``n_fixed =
      aware_fixed + off_funnel_fixed``, ``n_derived = aware_fixed_derived +
      off_funnel_derived`` and ``n_passed = aware_fixed_derived_passed + off_funnel_passed``.

    Parameters
    ----------
    states, attempts
        The `states` and `attempts` tables (ARCHITECTURE §3.4), in any form
        :func:`recoverylab.io.scan` reads. Extra columns may be used in ``by``.
    by
        Row keys; must include ``agent``. A column of `states` (depth, split, source_agent...)
        slices states; a column of `attempts` (e.g. budget) becomes part of the unit. For
        self-takeover denominators add ``source_agent``.
    k
        pass@k; every unit on an eligible state needs at least k repeats.
    common_sample
        Keep only root causes scored at every depth of their row group (the ``by`` keys without
        depth), so every depth row of a group is computed on the same root causes. Removed
        states are counted in ``excluded_not_common_sample``.
    common_states
        Keep only states attempted by every agent in the table (common-state comparison). Removed
        units are counted in ``excluded_not_common_state``. Applied before ``common_sample``.
    interval
        ``"bootstrap"``: cluster bootstrap over workflows (percentile or BCa, ``ci_method``);
        ``"wilson"``: Wilson score intervals, which treat the denominator as independent
        trials and so ignore the clustering of repeats and depths within a workflow.
    confidence, n_resamples, ci_method, seed
        Interval settings; the bootstrap is deterministic for a given seed.
    reliability
        Also add pass^k (all k repeats pass, C(c, k)/C(n, k)), the flip rate and the ICC of
        repeats with workflow-clustered intervals (:func:`recoverylab.takeover.reliability`),
        as the last columns, on the same engine.
    engine
        ``"polars"`` (default), or a SparkSession (or ``"spark"`` for the active one): the
        tables are co-partitioned by workflow and the per-workflow partials computed on Spark
        (see :mod:`recoverylab.engines`). The result is the same.

    Returns
    -------
    polars.DataFrame
        One row per ``by`` cell with at least one attempt, sorted by ``by``. Columns: the ``by``
        keys, ``k``; the slice's state counts ``eligible_states``, ``rejected_states``,
        ``rejected_replay_mismatch``, ``rejected_missing_expected`` (state-level, before the
        restrictions); ``attempted_states`` (denominator of pass@1 and pass@k),
        ``root_causes``, ``workflows`` (clusters), ``attempts`` (denominator of EAR and of the
        rates of attempts), ``excluded_attempts`` (attempts on rejected states),
        ``excluded_not_common_state``, ``excluded_not_common_sample``; ``ear``, ``pass_at_1``,
        ``pass_at_k``; the counts ``n_aware``, ``n_fixed``, ``n_derived``, ``n_passed``;
        ``aware_rate``, ``fixed_rate``, ``derived_rate``, ``pass_rate``; the funnel counts
        ``aware_fixed``, ``aware_fixed_derived``, ``aware_fixed_derived_passed``, the
        off-funnel counts ``off_funnel_fixed``, ``off_funnel_derived``, ``off_funnel_passed``
        and the conditional rates. Every rate is followed by ``<rate>_ci_low`` and
        ``<rate>_ci_high``. Rates with a zero denominator are null.

    Raises
    ------
    SchemaError
        A table breaks its contract (including a duplicate (state_id, agent, repeat)).
    InputError
        Attempts of unknown states, a root cause under two workflows, gaps in repeats.
    ParameterError
        A bad parameter, or units with fewer than k repeats (the message names them).

    Examples
    --------
    >>> from recoverylab import synth
    >>> tables = synth.generate("takeover", 20, seed=1)
    >>> out = summarize(tables["states"], tables["attempts"], n_resamples=200)
    >>> out.select("agent", "depth", "attempted_states", "pass_at_k").height > 0
    True
    """
    columns = column_names("by", by)
    flags: dict[str, Any] = {"common_states": common_states, "common_sample": common_sample}
    settings: dict[str, Any] = {
        "confidence": confidence,
        "n_resamples": n_resamples,
        "ci_method": ci_method,
        "seed": seed,
    }
    result = plan.run(
        engine,
        plan.Plan(
            inputs=_plan_inputs(states, attempts),
            stages=workflow_stages(columns, k, "takeover partials", _summary_partial, **flags),
            check=functools.partial(
                check_settings, k, confidence, n_resamples, seed, ci_method, interval
            ),
            finish=functools.partial(_finish_units, by=columns, k=k, interval=interval, **settings),
        ),
    )
    if not reliability:
        return result
    return _reliability.join_reliability(
        result, states, attempts, engine=engine, by=by, k=k, **flags, **settings
    )


def _group(by: Sequence[str]) -> list[str]:
    return [c for c in by if c != "depth"]


def _first_partial(
    frames: Mapping[str, pl.LazyFrame], state: Any, *, by: Sequence[str]
) -> dict[str, pl.LazyFrame | pl.DataFrame]:
    """Check a shard's contracts; return its root-cause pairs, first repeat and agents.

    `attempts` is read once (:func:`attempt_facts`); later stages' units find duplicate keys.
    """
    inputs = load(frames["states"], frames["attempts"], by, checks="schema")
    first, agents = attempt_facts(inputs)
    return {
        "roots": inputs.states.select("root_cause_id", "workflow_id").unique(),
        "first": first,
        "agents": agents,
    }


def _first_combine(parts: dict[str, pl.DataFrame], state: Any) -> dict[str, Any]:
    """Raise for a root cause under two workflows; keep the first repeat of the whole table."""
    check_roots(parts["roots"].lazy())
    return {"base": parts["first"].get_column("repeat").min(), "agents": None, "depths": None}


def _restriction_partial(
    frames: Mapping[str, pl.LazyFrame],
    state: dict[str, Any],
    *,
    by: Sequence[str],
    k: int,
    common_states: bool,
    name: str,
) -> dict[str, pl.LazyFrame]:
    """One shard's share of a whole-table restriction (``name``: agents or depths)."""
    frame, _ = scored_shard(
        frames, state, by=by, k=k, common_states=common_states, common_sample=False
    )
    return {name: restriction_partials(frame, _group(by))[name]}


def _agents_combine(parts: dict[str, pl.DataFrame], state: dict[str, Any]) -> dict[str, Any]:
    return {**state, "agents": parts["agents"].get_column("agent").n_unique()}


def _depths_combine(
    parts: dict[str, pl.DataFrame], state: dict[str, Any], *, by: Sequence[str]
) -> dict[str, Any]:
    group, distinct = _group(by), parts["depths"].unique()
    depths = (
        distinct.group_by(group).agg(pl.len().alias("__depths"))
        if group
        else distinct.select(pl.len().alias("__depths"))
    )
    return {**state, "depths": depths}


def scored_shard(
    frames: Mapping[str, pl.LazyFrame],
    state: dict[str, Any],
    *,
    by: Sequence[str],
    k: int,
    common_states: bool,
    common_sample: bool,
) -> tuple[pl.LazyFrame, Inputs]:
    """One shard's checked units under the whole-table restrictions in ``state`` (every stage)."""
    # The checks stage validated every row; the one pass of checked_units does the rest.
    inputs = load(frames["states"], frames["attempts"], by, checks="schema")
    frame = scored_units(
        inputs,
        common_sample=common_sample,
        common_states=common_states,
        agents=state["agents"],
        depths=state["depths"],
        found=checked_units(inputs, k, base=state["base"], roots=False),
    )
    return frame, inputs


def _summary_partial(
    frames: Mapping[str, pl.LazyFrame],
    state: dict[str, Any],
    **options: Any,
) -> dict[str, pl.LazyFrame]:
    frame, inputs = scored_shard(frames, state, **options)
    return {
        "partials": _partials(frame, list(inputs.by)),
        "slices": eligibility_counts(inputs.states, inputs.state_keys),
    }


def _plan_inputs(states: object, attempts: object) -> tuple[plan.Input, ...]:
    """Return both tables as plan inputs, clustered by workflow (an attempt by its state's).

    A state is keyed by the smallest workflow among the rows of its ``state_id``, so a
    duplicated state lands in one shard.
    """
    return (
        plan.Input("states", states, "workflow_id", "states", via=("states", "state_id")),
        plan.Input("attempts", attempts, "workflow_id", "attempts", via=("states", "state_id")),
    )


def workflow_stages(
    columns: tuple[str, ...],
    k: int,
    name: str,
    partial: Callable[..., dict[str, pl.LazyFrame]],
    *,
    common_states: bool,
    common_sample: bool,
) -> tuple[plan.Stage, ...]:
    """Return the stages: checks, common agents, common depths, then ``partial`` (``name``).

    The workflow is the resampling cluster (:func:`_plan_inputs`). What no shard can know is
    decided over all shards first: the root causes and the first repeat (no shuffle needed);
    for ``common_states`` the agents with a scored unit; for ``common_sample`` the depths with
    a scored unit per group.
    """
    stages = [
        plan.Stage(
            "takeover checks",
            functools.partial(_first_partial, by=columns),
            _first_combine,
            clustered=False,
        )
    ]
    if common_states:
        stages.append(
            plan.Stage(
                "agents with scored units",
                functools.partial(
                    _restriction_partial, by=columns, k=k, common_states=False, name="agents"
                ),
                _agents_combine,
            )
        )
    if common_sample:
        stages.append(
            plan.Stage(
                "depths with scored units",
                functools.partial(
                    _restriction_partial,
                    by=columns,
                    k=k,
                    common_states=common_states,
                    name="depths",
                ),
                functools.partial(_depths_combine, by=columns),
            )
        )
    flags = {"common_states": common_states, "common_sample": common_sample}
    stages.append(plan.Stage(name, functools.partial(partial, by=columns, k=k, **flags)))
    return tuple(stages)


def _finish_units(
    parts: dict[str, pl.DataFrame],
    *,
    by: Sequence[str],
    k: int,
    interval: str,
    confidence: float,
    n_resamples: int,
    ci_method: str,
    seed: int,
) -> pl.DataFrame:
    """Sum per-workflow partials into cells, join the slice counts, add rates and intervals.

    ``slices`` may hold a row per slice and shard (their counts are added); ``partials`` holds
    each (workflow, cell) once: a workflow is never split between shards.
    """
    partials, slices, by = parts["partials"], parts["slices"], list(by)
    state_keys = [c for c in by if c in slices.columns]
    counts = [pl.col(c).sum() for c in _STATE_COUNTS]
    slices = slices.group_by(list(state_keys)).agg(counts) if state_keys else slices.select(counts)
    cells = partials.group_by(by).agg(
        *(pl.col(c).sum() for c in _COUNTS),
        *(_stable_sum(pl.col(c)).alias(c) for c in _SUMS),
        (pl.col("attempted_states") > 0).sum().cast(pl.Int64).alias("workflows"),
    )
    cells = _join(cells, slices.select(*state_keys, *_STATE_COUNTS), state_keys)
    cells = cells.with_columns(
        pl.lit(k, dtype=pl.Int64).alias("k"),
        *(_rate(num, den).alias(name) for name, num, den in RATES if name != "aware_rate"),
    ).with_columns(pl.col("ear").alias("aware_rate"))
    with_ci = [r for r in RATES if r[0] != "aware_rate"]
    if interval == "wilson":
        cis = {name: stats.wilson_exprs(num, den, confidence) for name, num, den in with_ci}
        cells = cells.with_columns(
            *(ci.low.alias(f"{name}_ci_low") for name, ci in cis.items()),
            *(ci.high.alias(f"{name}_ci_high") for name, ci in cis.items()),
        )
    else:
        cells = _bootstrap_intervals(
            partials,
            cells,
            by,
            with_ci,
            confidence=confidence,
            n_resamples=n_resamples,
            ci_method=ci_method,
            seed=seed,
        )
    cells = cells.with_columns(
        pl.col("ear_ci_low").alias("aware_rate_ci_low"),
        pl.col("ear_ci_high").alias("aware_rate_ci_high"),
    )
    return cells.select(_summary_columns(by)).sort(sort_keys(cells.schema, by), nulls_last=False)


def _summary_columns(by: Sequence[str]) -> list[str]:
    """Output order: keys, counts, then each rate (with its interval) after its counts."""

    def rates(first: int, stop: int) -> list[str]:
        return [f"{r}{end}" for r, _, _ in RATES[first:stop] for end in ("", "_ci_low", "_ci_high")]

    return [
        *by,
        "k",
        *_STATE_COUNTS,
        *_COUNTS[:2],
        "workflows",
        *_COUNTS[2:6],
        *rates(0, 3),
        *_FUNNEL_COUNTS[:4],
        *rates(3, 7),
        *_FUNNEL_COUNTS[4:],
        *rates(7, 10),
    ]


def compare_agents(
    states: object,
    attempts: object,
    a: str,
    b: str,
    *,
    by: Sequence[str] = (),
    k: int = 3,
    common_sample: bool = False,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    ci_method: str = "percentile",
    seed: int = 0,
    engine: object = "polars",
    alternative: str = "two-sided",
    adjust: str | None = None,
    **deprecated: Any,
) -> pl.DataFrame:
    """Compare two agents' pass@k on the states both attempted, paired and workflow-clustered.

    The seed's warning: self-takeover columns are not a common-pool ranking; a fair comparison
    pairs the same root cause, prefix and state. Here only eligible states attempted by both
    agents (with at least k repeats each) are compared. Per workflow, the partials are the sums
    of each agent's per-state pass@k and the number of paired states; the interval is a cluster
    bootstrap of the difference of the two means (one draw of workflows serves both agents) and
    the p-value a two-sided sign-flip test of the per-workflow summed differences (exact when
    the differences are integers, i.e. when every unit has exactly k repeats).

    Parameters
    ----------
    states, attempts
        The `states` and `attempts` tables.
    a, b
        The two values of ``agent`` to compare; ``difference`` is a − b.
    by
        Extra row keys (e.g. ``("depth",)``); ``agent`` may not be one of them.
    k
        pass@k.
    common_sample
        Within each row group (``by`` without depth), keep only root causes with paired states
        at every depth.
    confidence, n_resamples, ci_method
        Bootstrap settings. The sign-flip test is exact when the differences are integers;
        otherwise it draws 100,000 Monte Carlo sign flips, as :func:`recoverylab.paired.contrast`
        does (the deprecated ``n_permutations`` keyword still sets that count for one release).
    seed
        Seed of the bootstrap and of any Monte Carlo test.
    engine
        As in :func:`summarize`.
    alternative
        ``"two-sided"`` (default), ``"greater"`` (a is better) or ``"less"``: the sign-flip
        p-value is one-sided and the interval too (one bound of the 2·confidence − 1
        bootstrap interval, the other ±1).
    adjust
        ``None``, ``"holm"`` or ``"bh"``: add ``p_adjusted`` over the rows of the result.

    Returns
    -------
    polars.DataFrame
        One row per ``by`` cell where either agent attempted an eligible state, sorted: the ``by``
        keys, ``a``, ``b`` (the two agents), ``k``, ``common_states`` (paired states: the
        denominator), ``root_causes``, ``workflows`` (clusters), ``only_a_states``,
        ``only_b_states`` (unpaired, excluded), ``excluded_not_common_sample``, ``pass_at_k_a``,
        ``pass_at_k_b``, ``difference``, ``ci_low``, ``ci_high``, ``a_better_states``,
        ``b_better_states`` (states where a's pass@k is higher / lower), ``p_value``, ``p_method``
        (and ``p_adjusted`` with ``adjust``). Statistics are null for a cell without paired states.

    Raises
    ------
    ParameterError
        ``a`` or ``b`` not an agent of `attempts`, ``a == b``, ``agent`` in ``by``, bad
        settings, or units with fewer than k repeats.
    SchemaError, InputError
        As in :func:`summarize`.

    Warns
    -----
    DeprecationWarning
        When ``n_permutations`` is given.

    Examples
    --------
    >>> from recoverylab import synth
    >>> tables = synth.generate("takeover", 20, seed=1)
    >>> out = compare_agents(tables["states"], tables["attempts"], "agent_a", "agent_b",
    ...                      n_resamples=200)
    >>> out.select("common_states", "difference", "p_value").height
    1
    """
    k = check_k(k)
    stats.check_resampling(
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        ci_method=ci_method,
        alternative=alternative,
        adjust=adjust,
    )
    if alternative != "two-sided" and confidence <= 0.5:
        raise ParameterError(
            f"parameter `confidence` is {confidence!r}; a one-sided interval needs a confidence "
            "above 0.5."
        )
    cells = list(column_names("by", by))
    _check_agents(cells, a, b)
    options: dict[str, Any] = {"by": cells, "k": k, "a": a, "b": b}
    statistics: dict[str, Any] = {
        "confidence": confidence,
        "n_resamples": n_resamples,
        "ci_method": ci_method,
        "sign_flips": _sign_flips(deprecated),
        "seed": seed,
        "alternative": alternative,
        "adjust": adjust,
    }
    return plan.run(
        engine,
        plan.Plan(
            inputs=_plan_inputs(states, attempts),
            stages=_compare_stages(options, common_sample=common_sample),
            finish=functools.partial(_compare_finish, **options, **statistics),
        ),
    )


def _compare_stages(options: dict[str, Any], *, common_sample: bool) -> tuple[plan.Stage, ...]:
    """List the stages: checks (agents named), depths with paired states, workflow partials."""
    cells, a, b = options["by"], options["a"], options["b"]
    checks = plan.Stage(
        "takeover checks",
        functools.partial(_first_partial, by=("agent", *cells)),
        functools.partial(_compare_first, a=a, b=b),
        clustered=False,
    )
    depths = plan.Stage(
        "depths with paired states",
        functools.partial(_paired_depths_partial, **options),
        functools.partial(_depths_combine, by=cells),
    )
    partials = plan.Stage(
        "paired pass@k per workflow",
        functools.partial(_compare_partial, common_sample=common_sample, **options),
    )
    return (checks, depths, partials) if common_sample else (checks, partials)


def _sign_flips(deprecated: dict[str, Any]) -> int:
    """Monte Carlo sign flips: the deprecated ``n_permutations`` keyword, else the default."""
    unknown = [k for k in deprecated if k != "n_permutations"]
    if unknown:
        raise TypeError(f"compare_agents() got an unexpected keyword argument {unknown[0]!r}")
    if "n_permutations" not in deprecated:
        return SIGN_FLIPS
    warnings.warn(
        "compare_agents: parameter `n_permutations` is deprecated and will be removed in the "
        "next release; the Monte Carlo sign-flip test then draws 100,000 flips, as "
        "paired.contrast does (`n_resamples` sets the bootstrap).",
        DeprecationWarning,
        stacklevel=3,
    )
    return int(deprecated["n_permutations"])


def _check_agents(cells: Sequence[str], a: object, b: object) -> None:
    if "agent" in cells:
        raise ParameterError(
            "parameter `by` contains `agent`; compare_agents compares two agents within each "
            "cell, so `agent` cannot be a cell key."
        )
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, str):
            raise ParameterError(f"parameter `{name}` is {value!r}; it must be an agent name.")
    if a == b:
        raise ParameterError(f"parameters `a` and `b` are both {a!r}; compare two agents.")


def _compare_first(parts: dict[str, pl.DataFrame], state: Any, *, a: str, b: str) -> dict[str, Any]:
    """As :func:`_first_combine`; then ``a`` and ``b`` must be agents of `attempts`."""
    found = _first_combine(parts, state)
    known = parts["agents"].get_column("agent").unique().sort().to_list()
    for name, value in (("a", a), ("b", b)):
        if value not in known:
            raise ParameterError(
                f"parameter `{name}` is {value!r}, which is not an agent in `attempts` "
                f"(agents: {format_keys(known, len(known))})."
            )
    return found


def _per_state(
    frames: Mapping[str, pl.LazyFrame],
    state: dict[str, Any],
    by: Sequence[str],
    k: int,
    a: str,
    b: str,
) -> tuple[pl.LazyFrame, list[str]]:
    """Each eligible state's pass@k of ``a`` and of ``b``; unpaired states marked excluded."""
    inputs = load(frames["states"], frames["attempts"], ("agent", *by), checks="schema")
    pair = ["state_id", *inputs.unit_keys[1:]]
    state_cols = ["workflow_id", "root_cause_id", "depth"]
    carried = [c for c in inputs.state_keys if c not in state_cols]
    per_state = (
        checked_units(inputs, k, base=state["base"], roots=False)
        .filter(pl.col("excluded").is_null() & pl.col("agent").is_in([a, b]))
        .group_by([*pair, *state_cols, *carried])
        .agg(
            pl.col("pass_at_k").filter(pl.col("agent") == a).first().alias("pass_at_k_a"),
            pl.col("pass_at_k").filter(pl.col("agent") == b).first().alias("pass_at_k_b"),
        )
        .with_columns(
            pl.when(pl.col("pass_at_k_b").is_null())
            .then(pl.lit("only_a"))
            .when(pl.col("pass_at_k_a").is_null())
            .then(pl.lit("only_b"))
            .otherwise(pl.lit(None, dtype=pl.String))
            .alias("excluded")
        )
    )
    return per_state, pair


def _paired_depths_partial(
    frames: Mapping[str, pl.LazyFrame],
    state: dict[str, Any],
    *,
    by: Sequence[str],
    k: int,
    a: str,
    b: str,
) -> dict[str, pl.LazyFrame]:
    per_state, _ = _per_state(frames, state, by, k, a, b)
    return {"depths": restriction_partials(per_state, _group(by))["depths"]}


def _compare_partial(
    frames: Mapping[str, pl.LazyFrame],
    state: dict[str, Any],
    *,
    by: Sequence[str],
    k: int,
    a: str,
    b: str,
    common_sample: bool,
) -> dict[str, pl.LazyFrame]:
    """Per (workflow × cell): paired states, each agent's summed pass@k, exclusions."""
    per_state, pair = _per_state(frames, state, by, k, a, b)
    per_state = restrict(
        per_state,
        group=_group(by),
        pair=pair,
        common_states=False,
        common_sample=common_sample,
        depths=state.get("depths"),
    )
    paired = pl.col("excluded").is_null()
    d = pl.col("pass_at_k_a") - pl.col("pass_at_k_b")
    partials = (
        per_state.group_by(_cluster_keys(list(by)))
        .agg(
            paired.sum().cast(pl.Int64).alias("common_states"),
            pl.col("root_cause_id").filter(paired).n_unique().cast(pl.Int64).alias("root_causes"),
            (pl.col("excluded") == "only_a").sum().cast(pl.Int64).alias("only_a_states"),
            (pl.col("excluded") == "only_b").sum().cast(pl.Int64).alias("only_b_states"),
            (pl.col("excluded") == NOT_COMMON[1])
            .sum()
            .cast(pl.Int64)
            .alias("excluded_not_common_sample"),
            _stable_sum(pl.col("pass_at_k_a").filter(paired)).alias("sum_a"),
            _stable_sum(pl.col("pass_at_k_b").filter(paired)).alias("sum_b"),
            (d.filter(paired) > 0).sum().cast(pl.Int64).alias("a_better_states"),
            (d.filter(paired) < 0).sum().cast(pl.Int64).alias("b_better_states"),
        )
        .with_columns((pl.col("sum_a") - pl.col("sum_b")).alias("diff"))
    )
    return {"partials": partials}


#: Monte Carlo draws of the sign-flip test when it is not exact (stats.sign_flip_cells' default).
SIGN_FLIPS = 100_000

_COMPARE_COUNTS = (
    "common_states",
    "root_causes",
    "only_a_states",
    "only_b_states",
    "excluded_not_common_sample",
    "a_better_states",
    "b_better_states",
)
_COMPARE_COLUMNS = (
    *_COMPARE_COUNTS[:2],
    "workflows",
    *_COMPARE_COUNTS[2:5],
    "pass_at_k_a",
    "pass_at_k_b",
    "difference",
    "ci_low",
    "ci_high",
    *_COMPARE_COUNTS[5:],
    "p_value",
    "p_method",
)


def _compare_finish(
    parts: dict[str, pl.DataFrame],
    *,
    by: Sequence[str],
    k: int,
    a: str,
    b: str,
    confidence: float,
    n_resamples: int,
    ci_method: str,
    sign_flips: int,
    seed: int,
    alternative: str = "two-sided",
    adjust: str | None = None,
) -> pl.DataFrame:
    """Sum the workflow partials into cells; add the joint bootstrap and the sign-flip test."""
    cells = list(by)
    partials = parts["partials"]
    aggregates = [
        *(pl.col(c).sum() for c in _COMPARE_COUNTS),
        *(_stable_sum(pl.col(c)).alias(c) for c in ("sum_a", "sum_b")),
        (pl.col("common_states") > 0).sum().cast(pl.Int64).alias("workflows"),
    ]
    table = partials.group_by(cells).agg(aggregates) if cells else partials.select(aggregates)
    # stats needs at least one cell column; a constant one stands for "the whole table".
    stat_cells = cells or ["__all"]
    table = table.with_columns(
        _rate("sum_a", "common_states").alias("pass_at_k_a"),
        _rate("sum_b", "common_states").alias("pass_at_k_b"),
        pl.lit(0).alias("__all"),
    ).with_columns((pl.col("pass_at_k_a") - pl.col("pass_at_k_b")).alias("difference"))
    clusters = partials.filter(pl.col("common_states") > 0).with_columns(
        pl.col("common_states").cast(pl.Float64).alias("n_a"),
        pl.col("common_states").cast(pl.Float64).alias("n_b"),
        pl.lit(0).alias("__all"),
    )
    boot = stats.cluster_bootstrap(
        clusters,
        cells=stat_cells,
        values=["sum_a", "n_a", "sum_b", "n_b"],
        statistic=stats.ratio_difference,
        n_resamples=n_resamples,
        confidence=confidence if alternative == "two-sided" else 2 * confidence - 1,
        ci_method=ci_method,
        seed=seed,
    ).select(
        *stat_cells,
        pl.lit(-1.0).alias("ci_low") if alternative == "less" else pl.col("ci_low").fill_nan(None),
        pl.lit(1.0).alias("ci_high")
        if alternative == "greater"
        else pl.col("ci_high").fill_nan(None),
    )
    tests = stats.sign_flip_cells(
        clusters,
        cells=stat_cells,
        difference="diff",
        n_resamples=sign_flips,
        seed=seed,
        alternative=alternative,
    ).select(*stat_cells, "p_value", "p_method")
    table = _join(_join(table, boot, stat_cells), tests, stat_cells)
    labels = [
        pl.lit(a).alias("a"),
        pl.lit(b).alias("b"),
        pl.lit(k, dtype=pl.Int64).alias("k"),
    ]
    result = table.select(*cells, *labels, *_COMPARE_COLUMNS).sort(
        sort_keys(table.schema, cells), nulls_last=False
    )
    if adjust is None:
        return result
    adjusted = stats.adjust_p_values(result["p_value"].fill_null(float("nan")).to_numpy(), adjust)
    return result.with_columns(pl.Series("p_adjusted", adjusted, dtype=pl.Float64).fill_nan(None))


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
        Level of the Wilson intervals of the per-agent rates (attempts as independent trials).
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
        differences), ``interpretation``. Macro rows have null intervals.

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
    return plan.run(
        engine,
        plan.Plan(
            inputs=_plan_inputs(states, attempts),
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
    """Aware and unaware attempts and passes per ``by`` cell (additive over workflows)."""
    frame, _ = scored_shard(
        frames, state, by=by, k=k, common_states=common_states, common_sample=common_sample
    )
    counts = (
        frame.filter(pl.col("excluded").is_null())
        .group_by(list(by))
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
    per_agent = (
        parts["counts"]
        .group_by(keys)
        .agg(pl.col(c).sum() for c in _AWARENESS_COUNTS)
        .with_columns(_rate(f"{s}_passed", f"{s}_attempts").alias(f"{s}_pass_rate") for s in _SIDES)
        .with_columns((pl.col("aware_pass_rate") - pl.col("unaware_pass_rate")).alias("difference"))
    )
    cis = {s: stats.wilson_exprs(f"{s}_passed", f"{s}_attempts", confidence) for s in _SIDES}
    agent_rows = per_agent.with_columns(
        pl.lit("agent").alias("scope"),
        pl.lit(1, dtype=pl.Int64).alias("agents"),
        *(ci.low.alias(f"{s}_pass_rate_ci_low") for s, ci in cis.items()),
        *(ci.high.alias(f"{s}_pass_rate_ci_high") for s, ci in cis.items()),
    )
    both = per_agent.filter(pl.col("difference").is_not_null())
    macro_aggs = [
        pl.len().cast(pl.Int64).alias("agents"),
        *(pl.col(c).sum() for c in _AWARENESS_COUNTS),
        *(
            _stable_mean(pl.col(c)).alias(c)
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
