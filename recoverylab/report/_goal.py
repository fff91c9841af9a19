"""Charts of goal-preserving recovery (AgentHeal, ARCHITECTURE §3.3).

The functions take the output of :func:`recoverylab.goal.summarize` or
:func:`recoverylab.goal.barrier_drop` unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from recoverylab.goal import REASONS, REGIMES
from recoverylab.report._common import (
    HARM,
    RESCUE,
    altair,
    keys_before,
    label,
    ordered,
    pp,
    prepare,
    require_rows,
    slim,
    tip_key,
    tip_n,
    tip_pp,
    x_band,
    zero_axis,
)

if TYPE_CHECKING:
    import altair as alt

__all__ = ["barrier_drop", "failure_reasons", "ts_by_regime"]

_SUMMARY = ("regime", "n", "n_clusters", "successes", "ts", "ci_low", "ci_high")
#: Colours of the failure reasons, in :data:`recoverylab.goal.REASONS` order.
_REASON_COLOURS = (
    "#8c564b",
    "#d62728",
    "#ff7f0e",
    "#e377c2",
    "#bcbd22",
    "#9467bd",
    "#1f77b4",
    "#17becf",
    "#7f7f7f",
)


def _summary(summary: object, chart: str, columns: tuple[str, ...]) -> tuple[pl.DataFrame, list]:
    frame = prepare(summary, columns, chart, "recoverylab.goal.summarize grouped by regime")
    extra = [k for k in keys_before(frame, "n") if k != "regime"]
    return frame.with_columns(label(extra, "group")), extra


def ts_by_regime(summary: pl.DataFrame | pl.LazyFrame) -> alt.TopLevelMixin:
    """Task success (TS) by barrier regime with its cluster-bootstrap CI, per model if grouped.

    Parameters
    ----------
    summary
        The output of :func:`recoverylab.goal.summarize` with ``regime`` among ``by``; other
        ``by`` keys (``model``, ``category``...) become coloured series side by side.

    Returns
    -------
    altair.LayerChart
        Per row a point (``ts``) and a rule (``ci_low`` to ``ci_high``) in percentage points,
        regimes in protocol order; tooltips carry ``n`` (episodes), clusters and successes.

    Raises
    ------
    SchemaError
        When the frame lacks ``regime`` or a summary column.
    InputError
        When the frame has no rows.
    """
    alt = altair()
    data, extra = _summary(summary, "ts_by_regime", _SUMMARY)
    shown = ("ts", "ci_low", "ci_high")
    data = slim(
        data.with_columns(pp(c) for c in shown),
        ["regime", "group", *extra, *(f"{c}_pp" for c in shown), "successes", "n", "n_clusters"],
        ["regime", "group"],
    )
    encoding = {
        "x": x_band("regime", "regime", sort=ordered(data["regime"].to_list(), REGIMES)),
        "tooltip": [
            tip_key("regime"),
            *(tip_key(k) for k in extra),
            tip_pp("ts_pp", "TS"),
            tip_pp("ci_low_pp", "CI low"),
            tip_pp("ci_high_pp", "CI high"),
            tip_n("successes", "successes"),
            tip_n("n", "n (episodes)"),
            tip_n("n_clusters", "n (clusters)"),
        ],
    }
    if extra:
        encoding["xOffset"] = alt.XOffset("group:N")
        encoding["color"] = alt.Color("group:N", title=" · ".join(extra))
    base = alt.Chart(data).encode(**encoding)
    rules = base.mark_rule(strokeWidth=2).encode(
        y=alt.Y("ci_low_pp:Q", title="task success TS (pp), CI", scale=alt.Scale(domain=[0, 100])),
        y2="ci_high_pp:Q",
    )
    points = base.mark_point(filled=True, size=60).encode(y="ts_pp:Q")
    return alt.layer(rules, points).properties(
        width=360, height=220, title="Task success by barrier regime"
    )


def failure_reasons(summary: pl.DataFrame | pl.LazyFrame) -> alt.TopLevelMixin:
    """Failed episodes by first failure reason, stacked, per regime (and per other key).

    Each segment is the count of episodes failing first for that reason, as a share of the
    group's episodes ``n``; the stack's height is 100 − TS (reasons with no failure have no
    segment).

    Parameters
    ----------
    summary
        The output of :func:`recoverylab.goal.summarize` with ``regime`` among ``by`` (the
        ``fail_<reason>`` columns).

    Returns
    -------
    altair.Chart or altair.FacetChart
        Stacked bars by regime (one panel per value of the other keys, if any); tooltips carry
        the count and ``n`` (episodes).

    Raises
    ------
    SchemaError
        When the frame lacks ``regime``, ``n`` or a ``fail_<reason>`` column.
    InputError
        When no episode failed.
    """
    alt = altair()
    columns = ("regime", "n", *(f"fail_{r}" for r in REASONS))
    data, extra = _summary(summary, "failure_reasons", columns)
    long = pl.concat(
        [
            data.select(
                "regime",
                "group",
                "n",
                pl.lit(reason).alias("reason"),
                pl.lit(order).alias("order"),
                pl.col(f"fail_{reason}").alias("episodes"),
                (pl.col(f"fail_{reason}") / pl.col("n") * 100).alias("share_pp"),
            )
            for order, reason in enumerate(REASONS)
        ]
    ).filter(pl.col("episodes") > 0)
    require_rows(long, "failure_reasons")
    long = long.sort("group", "regime", "order")
    chart = (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=x_band("regime", "regime", sort=ordered(data["regime"].to_list(), REGIMES)),
            y=alt.Y("share_pp:Q", title="failed episodes (pp of n)", stack="zero"),
            color=alt.Color(
                "reason:N",
                title="first failure reason",
                scale=alt.Scale(domain=list(REASONS), range=list(_REASON_COLOURS)),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                tip_key("regime"),
                tip_key("group", " · ".join(extra) or "group"),
                tip_key("reason"),
                tip_n("episodes", "episodes"),
                tip_pp("share_pp", "share of episodes"),
                tip_n("n", "n (episodes)"),
            ],
        )
        .properties(width=alt.Step(90), height=220)
    )
    if extra:
        chart = chart.facet(column=alt.Column("group:N", title=" · ".join(extra)))
    return chart.properties(title="Why episodes failed (first failure reason)")


def barrier_drop(drop: pl.DataFrame | pl.LazyFrame) -> alt.TopLevelMixin:
    """TS without barriers, TS with barriers and their paired drop with its CI, per group.

    Parameters
    ----------
    drop
        The output of :func:`recoverylab.goal.barrier_drop`.

    Returns
    -------
    altair.HConcatChart
        Left: per group two points (TS without, TS with) joined by a rule; right: the drop
        (``drop`` with ``ci_low`` to ``ci_high``). Values in percentage points; tooltips carry
        ``n_without``, ``n_with`` (episodes) and the paired goals.

    Raises
    ------
    SchemaError
        When the frame lacks a column of the barrier drop.
    InputError
        When the frame has no rows.
    """
    alt = altair()
    columns = ("goals", "unpaired_goals", "n_without", "n_with", "ts_without", "ts_with", "drop")
    frame = prepare(
        drop, (*columns, "ci_low", "ci_high"), "barrier_drop", "recoverylab.goal.barrier_drop"
    )
    keys = keys_before(frame, "goals")
    group_title = " · ".join(keys) or "group"
    # the chart's fields, in data and tooltip order
    fields = [
        (tip_key, "group", group_title),
        (tip_pp, "ts_without_pp", "TS without barriers"),
        (tip_n, "n_without", "n (episodes without)"),
        (tip_pp, "ts_with_pp", "TS with barriers"),
        (tip_n, "n_with", "n (episodes with)"),
        (tip_pp, "drop_pp", "drop"),
        (tip_pp, "ci_low_pp", "CI low"),
        (tip_pp, "ci_high_pp", "CI high"),
        (tip_n, "goals", "n (paired goals)"),
        (tip_n, "unpaired_goals", "unpaired goals"),
    ]
    data = slim(
        frame.with_columns(
            label(keys, "group"),
            *(pp(c) for c in ("ts_without", "ts_with", "drop", "ci_low", "ci_high")),
        ),
        [field for _, field, _ in fields],
        ["group"],
    )
    tooltip = [tip(field, title) for tip, field, title in fields]
    base = alt.Chart(data).encode(y=alt.Y("group:N", title=group_title), tooltip=tooltip)
    span = base.mark_rule(color="#bbbbbb", strokeWidth=3).encode(
        x=alt.X("ts_with_pp:Q", title="TS (pp)", scale=alt.Scale(domain=[0, 100])),
        x2="ts_without_pp:Q",
    )
    without = base.mark_point(filled=True, size=70, color=RESCUE).encode(x="ts_without_pp:Q")
    with_ = base.mark_point(filled=True, size=70, color=HARM).encode(x="ts_with_pp:Q")
    levels = alt.layer(span, without, with_).properties(
        width=260, height=alt.Step(26), title="TS without (green) and with (orange) barriers"
    )
    drop_rules = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("ci_low_pp:Q", title="drop (pp), CI", axis=zero_axis()), x2="ci_high_pp:Q"
    )
    drop_points = base.mark_point(filled=True, size=60, color="black").encode(x="drop_pp:Q")
    drops = alt.layer(drop_rules, drop_points).properties(
        width=220, height=alt.Step(26), title="Barrier drop, paired by goal"
    )
    return alt.hconcat(levels, drops)
