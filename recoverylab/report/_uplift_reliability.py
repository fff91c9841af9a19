"""Charts and sections of the router's uplift (TOC, RATE) and of takeover reliability (pass^k)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import polars as pl

from recoverylab.report._common import (
    altair,
    as_frame,
    keys_before,
    label,
    pp,
    prepare,
    tip_key,
    tip_n,
    tip_pp,
    x_band,
)
from recoverylab.report._html import Provenance, Section
from recoverylab.report._methods import Methods, level
from recoverylab.report._registry import ROUTER, TAKEOVER
from recoverylab.report._tables import Count, Key, Rate, leveled_table

if TYPE_CHECKING:
    import altair as alt

__all__ = ["pass_hat_k_by_depth", "reliability_section", "toc_curves", "toc_section"]

_UPLIFT = "recoverylab.router.uplift"
_RELIABILITY = "recoverylab.takeover.reliability"


def toc_curves(curves: pl.DataFrame | pl.LazyFrame) -> alt.TopLevelMixin:
    """TOC curve of every policy: extra effect of refreshing its top q of points, with a CI band.

    Parameters
    ----------
    curves
        :attr:`recoverylab.router.Uplift.curves` (policy, q, toc, toc_ci_low, toc_ci_high...).

    Returns
    -------
    altair.LayerChart
        Per policy a line of TOC(q) in percentage points over the share q of points refreshed,
        its 95% task-clustered band, and the zero line (a ranking no better than random).
    """
    alt = altair()
    needed = ("policy", "q", "toc", "toc_ci_low", "toc_ci_high", "qini")
    frame = prepare(curves, needed, "toc_curves", _UPLIFT)
    data = frame.select(
        "policy",
        (pl.col("q") * 100).alias("q_pct"),
        pp("toc", "toc_pp"),
        pp("toc_ci_low", "low_pp"),
        pp("toc_ci_high", "high_pp"),
        pp("qini", "qini_pp"),
    )
    # the legend's swatches at full strength (the bands' 15% would make them near white);
    # dashes tell apart lines drawn on top of each other (see coinciding_policies)
    legend = alt.Legend(symbolOpacity=1, symbolType="stroke", symbolStrokeWidth=3)
    base = alt.Chart(data).encode(
        x=alt.X("q_pct:Q", title="share of decision points refreshed, by score (%)"),
        color=alt.Color("policy:N", title="policy", legend=legend),
        tooltip=[
            tip_key("policy"),
            alt.Tooltip("q_pct:Q", title="top q (%)", format=".0f"),
            tip_pp("toc_pp", "TOC"),
            tip_pp("low_pp", "CI low"),
            tip_pp("high_pp", "CI high"),
            tip_pp("qini_pp", "Qini (q·TOC)"),
        ],
    )
    band = base.mark_area(opacity=0.15).encode(
        y=alt.Y("low_pp:Q", title="TOC: effect in the top q minus the average (pp)"),
        y2="high_pp:Q",
    )
    line = base.mark_line(point=True).encode(
        y="toc_pp:Q", strokeDash=alt.StrokeDash("policy:N", legend=None)
    )
    zero = alt.Chart(pl.DataFrame({"zero": [0.0]})).mark_rule(color="black").encode(y="zero:Q")
    return alt.layer(band, line, zero).properties(
        width=420, height=240, title="Targeting operator characteristic (TOC) by policy"
    )


def coinciding_policies(curves: pl.DataFrame) -> list[list[str]]:
    """Return the groups of policies whose TOC curves are identical (drawn as one line).

    Two policies that rank the points alike have the same curve and band at every q; the chart
    draws one over the other, so the section says so in words.
    """
    shape = [
        pl.col(c).cast(pl.String).fill_null("") for c in ("q", "toc", "toc_ci_low", "toc_ci_high")
    ]
    per_policy = (
        curves.sort("policy", "q")
        .group_by("policy", maintain_order=True)
        .agg(pl.concat_str(shape, separator=":").str.join(";").alias("curve"))
    )
    groups = (
        per_policy.group_by("curve", maintain_order=True)
        .agg(pl.col("policy").sort())
        .filter(pl.col("policy").list.len() > 1)
    )
    return groups["policy"].to_list()


def _coinciding_note(curves: pl.DataFrame) -> str:
    groups = coinciding_policies(curves)
    if not groups:
        return ""
    said = "; ".join(" and ".join(group) for group in groups)
    return (
        f'<p class="chart-note">Drawn on top of each other (identical curves, one visible '
        f"line): {html.escape(said)}.</p>"
    )


def toc_section(
    curves: pl.DataFrame | pl.LazyFrame,
    metrics: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    key: str = "router-uplift",
    title: str = "How well each policy ranks the points where a refresh helps (TOC, RATE)",
) -> Section:
    """Section of :func:`recoverylab.router.uplift`: TOC curves and the RATE table."""
    table_frame = as_frame(metrics, "toc_curves").with_columns(pl.col("reference").fill_null("—"))
    methods = Methods.of(table_frame, "tasks")
    table = leveled_table(
        table_frame,
        [
            Key("policy"),
            Key("reference", "minus"),
            Key("metric"),
            Rate(
                "estimate",
                "points",
                "estimate",
                "n (points)",
                ci=("ci_low", "ci_high"),
                signed=True,
            ),
            Count("tasks", "tasks (clusters)"),
        ],
        level=level(provenance),
    )
    return Section(
        key=key,
        group=ROUTER,
        title=title,
        reading=(
            "Paired forks give the effect of a refresh at every decision point (+1 rescue, −1 "
            "harm). The TOC curve shows how much better the points a policy ranks first fare "
            "than all points; RATE summarises it (AUTOC weights the top of the ranking, QINI "
            "the whole curve) and uplift@k is the mean effect in the top 10%. Bands and "
            "intervals resample tasks; rows with a 'minus' policy are paired RATE differences."
        ),
        table=_coinciding_note(as_frame(curves, "toc_curves")) + table,
        chart=toc_curves(curves),
        provenance=methods.provenance(provenance),
    )


def pass_hat_k_by_depth(reliability: pl.DataFrame | pl.LazyFrame) -> alt.TopLevelMixin:
    """pass^k by depth per agent (or other keys), with workflow-clustered intervals.

    Parameters
    ----------
    reliability
        The output of :func:`recoverylab.takeover.reliability` with ``depth`` among ``by``.

    Returns
    -------
    altair.LayerChart
        Per (series, depth) a point with its CI rule, joined by a line per series, in pp.
    """
    alt = altair()
    needed = ("depth", "k", "attempted_states", "pass_hat_k", "pass_hat_k_ci_low",
              "pass_hat_k_ci_high", "flip_rate")  # fmt: skip
    frame = prepare(reliability, needed, "pass_hat_k_by_depth", _RELIABILITY)
    series = [c for c in keys_before(frame, "k") if c != "depth"]
    k = int(frame["k"].max())  # type: ignore[arg-type]
    data = frame.select(
        label(series, "series"),
        "depth",
        "attempted_states",
        pp("pass_hat_k", "rate_pp"),
        pp("pass_hat_k_ci_low", "low_pp"),
        pp("pass_hat_k_ci_high", "high_pp"),
        pp("flip_rate", "flip_pp"),
    )
    base = alt.Chart(data).encode(
        x=x_band("depth", "depth (steps after the root cause)"),
        color=alt.Color("series:N", title=" · ".join(series) or "series"),
        tooltip=[
            tip_key("series"),
            tip_key("depth"),
            tip_pp("rate_pp", f"pass^{k}"),
            tip_pp("low_pp", "CI low"),
            tip_pp("high_pp", "CI high"),
            tip_pp("flip_pp", "flip rate"),
            tip_n("attempted_states", "n (attempted states)"),
        ],
    )
    y = alt.Y("low_pp:Q", title=f"pass^{k} (pp): all {k} repeats pass, CI")
    lines = base.mark_line(opacity=0.6).encode(xOffset="series:N", y=alt.Y("rate_pp:Q"))
    rules = base.mark_rule(strokeWidth=2).encode(xOffset="series:N", y=y, y2="high_pp:Q")
    points = base.mark_point(filled=True, size=55).encode(xOffset="series:N", y="rate_pp:Q")
    return alt.layer(lines, rules, points).properties(
        width=420, height=220, title=f"pass^{k} by depth (reliability across repeats)"
    )


def reliability_section(
    reliability: pl.DataFrame | pl.LazyFrame,
    provenance: Provenance,
    *,
    key: str = "takeover-pass-hat-k",
    title: str = "Reliability: pass^k, flip rate and ICC of repeats by depth",
) -> Section:
    """Section of :func:`recoverylab.takeover.reliability` by agent and depth."""
    frame = as_frame(reliability, "pass_hat_k_by_depth")
    table = leveled_table(
        frame,
        [
            *(Key(c) for c in keys_before(frame, "k")),
            Count("attempted_states", "attempted states"),
            Rate(
                "pass_hat_k",
                "attempted_states",
                "pass^k",
                "n (states)",
                ci=("pass_hat_k_ci_low", "pass_hat_k_ci_high"),
            ),
            Rate(
                "flip_rate",
                "attempted_states",
                "flip rate",
                "n (states)",
                ci=("flip_rate_ci_low", "flip_rate_ci_high"),
            ),
            Count("repeat_icc", "ICC of repeats", digits=2),
        ],
        level=level(provenance),
    )
    return Section(
        key=key,
        group=TAKEOVER,
        title=title,
        reading=(
            "pass^k is the chance that all k repeats of an agent on a state pass, C(c, k) / "
            "C(n, k) with c passes in n repeats (pass@k asks for any one). The flip rate is "
            "the share of states whose repeats disagree, and the ICC how much more alike "
            "repeats of one state are than different states. Intervals resample workflows."
        ),
        table=table,
        chart=pass_hat_k_by_depth(frame),
        provenance=Methods.of(frame, "workflows").provenance(provenance),
    )
