"""The stages every takeover plan shares, and the order-free sums its partials use.

Every takeover verb clusters by workflow (:func:`plan_inputs`) and runs the same first stages
(:func:`workflow_stages`): the checks, then what no shard can know alone (the agents with a
scored unit for ``common_states``, the depths per group for ``common_sample``); its own partial
then reads :func:`scored_shard`. Sums of floats are exact (:func:`stable_sum`,
:func:`fixed_point_parts`), so no row order or split into shards changes a result.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from recoverylab import plan
from recoverylab.takeover._inputs import (
    Inputs,
    attempt_facts,
    check_roots,
    checked_units,
    load,
    restriction_partials,
    scored_units,
)

#: The state after the checks stage when an engine skipped it (``for_shards``): the first
#: stage on the whole tables checks them itself and finds the first repeat (:func:`scored_shard`).
_UNCHECKED: dict[str, Any] = {"base": None, "agents": None, "depths": None}

#: Fixed-point scale of :func:`stable_sum`: a float in [2**-8, 2**67) times 2**60 is an integer.
_FIXED_POINT = 2.0**60
#: The square root of the scale: :func:`fixed_point_parts` splits the integers there.
_HALF_POINT = 2.0**30


def stable_sum(expr: pl.Expr) -> pl.Expr:
    """Sum non-negative floats exactly, so the result never depends on row order.

    polars adds floats in whatever order its threads see them (and drops a ``sort`` before a plain
    ``sum``), so the last bits of a float sum could change with the input's row order. Each value is
    scaled by 2**60 to a 128-bit integer (exact for values of 2**-8 or more; smaller ones lose less
    than 2**-60) and the integers are added, which no order changes; the total is rounded to a float
    once. As fast as a plain sum, within a few times 2**-60 of the exact sum of the values.
    """
    return from_fixed_point(to_fixed_point(expr).sum())


def to_fixed_point(expr: pl.Expr) -> pl.Expr:
    """Return the 128-bit integers :func:`stable_sum` adds (for a column made before a group-by).

    A group-by sums a plain column faster than an expression it evaluates per group: make
    this column first, sum it, then :func:`from_fixed_point` (the same result as ``stable_sum``).
    """
    return (expr * _FIXED_POINT).cast(pl.Int128)


def from_fixed_point(expr: pl.Expr) -> pl.Expr:
    """Return the float of a sum of :func:`to_fixed_point` integers, rounded once."""
    return expr.cast(pl.Float64) / _FIXED_POINT


def fixed_point_parts(expr: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """Return :func:`to_fixed_point` of non-negative floats as two Int64 parts.

    The high part is ``floor(x * 2**30)``, the low part ``floor(frac(x * 2**30) * 2**30)``:
    every step is exact in floats (scaling by a power of two, taking the fraction), so
    ``high * 2**30 + low`` is the 128-bit integer of :func:`to_fixed_point`, and sums of the
    parts give its sums (:func:`from_fixed_point_parts`) without 128-bit columns, which not
    every engine carries. Exact while the values add up to less than 2**33 (pass@ rates of
    fewer than 8 billion units).
    """
    scaled = expr * _HALF_POINT
    high = scaled.floor()
    return high.cast(pl.Int64), ((scaled - high) * _HALF_POINT).floor().cast(pl.Int64)


def from_fixed_point_parts(high: pl.Expr, low: pl.Expr) -> pl.Expr:
    """Return the float of sums of :func:`fixed_point_parts`, rounded once."""
    whole = high.cast(pl.Int128) * pl.lit(1 << 30, dtype=pl.Int128) + low.cast(pl.Int128)
    return from_fixed_point(whole)


def stable_mean(expr: pl.Expr) -> pl.Expr:
    """Mean of floats added in sorted order, so that row order cannot change its last bits.

    For the few per-agent rows of a macro cell, whose values (differences) may be negative,
    which :func:`stable_sum` does not take.
    """
    return expr.sort().implode().list.mean()


def rate(numerator: str, denominator: str) -> pl.Expr:
    """Divide two columns; null (never 0 or 1) where the denominator is 0."""
    return pl.when(pl.col(denominator) > 0).then(pl.col(numerator) / pl.col(denominator))


def join_on(left: pl.DataFrame, right: pl.DataFrame, on: Sequence[str]) -> pl.DataFrame:
    """Left join on ``on`` with null keys matching; a cross join when there are no keys."""
    if not on:
        return left.join(right, how="cross")
    return left.join(right, on=list(on), how="left", nulls_equal=True)


def cluster_keys(by: Sequence[str]) -> list[str]:
    """Keys of the partials: the cluster (workflow) and the cell, once each."""
    return ["workflow_id", *(c for c in by if c != "workflow_id")]


def group_keys(by: Sequence[str]) -> list[str]:
    return [c for c in by if c != "depth"]


def first_partial(
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


def first_combine(parts: dict[str, pl.DataFrame], state: Any) -> dict[str, Any]:
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
    return {name: restriction_partials(frame, group_keys(by))[name]}


def _agents_combine(parts: dict[str, pl.DataFrame], state: dict[str, Any]) -> dict[str, Any]:
    return {**(state or _UNCHECKED), "agents": parts["agents"].get_column("agent").n_unique()}


def depths_combine(
    parts: dict[str, pl.DataFrame], state: dict[str, Any], *, by: Sequence[str]
) -> dict[str, Any]:
    group, distinct = group_keys(by), parts["depths"].unique()
    depths = (
        distinct.group_by(group).agg(pl.len().alias("__depths"))
        if group
        else distinct.select(pl.len().alias("__depths"))
    )
    return {**(state or _UNCHECKED), "depths": depths}


def scored_shard(
    frames: Mapping[str, pl.LazyFrame],
    state: dict[str, Any],
    *,
    by: Sequence[str],
    k: int,
    common_states: bool,
    common_sample: bool,
    codes: bool = False,
) -> tuple[pl.LazyFrame, Inputs]:
    """One shard's checked units under the whole-table restrictions in ``state`` (every stage).

    ``codes``: keep the integer workflow and root-cause codes (:data:`CODES`).
    """
    # The checks stage validated every row; the one pass of checked_units does the rest. On
    # the whole tables that stage is skipped (state None) and that pass also checks the rows.
    inputs = load(frames["states"], frames["attempts"], by, checks="schema")
    whole = state is None
    state = state or _UNCHECKED
    found = checked_units(inputs, k, base=state["base"], roots=False, codes=codes, row_checks=whole)
    frame = scored_units(
        inputs,
        common_sample=common_sample,
        common_states=common_states,
        agents=state["agents"],
        depths=state["depths"],
        found=found,
    )
    return frame, inputs


def plan_inputs(states: object, attempts: object) -> tuple[plan.Input, ...]:
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

    The workflow is the resampling cluster (:func:`plan_inputs`). What no shard can know is
    decided over all shards first: the root causes and the first repeat (no shuffle needed);
    for ``common_states`` the agents with a scored unit; for ``common_sample`` the depths with
    a scored unit per group.
    """
    stages = [
        plan.Stage(
            "takeover checks",
            functools.partial(first_partial, by=columns),
            first_combine,
            clustered=False,
            for_shards=True,
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
                functools.partial(depths_combine, by=columns),
            )
        )
    flags = {"common_states": common_states, "common_sample": common_sample}
    stages.append(plan.Stage(name, functools.partial(partial, by=columns, k=k, **flags)))
    return tuple(stages)
