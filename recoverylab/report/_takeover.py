"""Charts of takeover from replayed error states (CUA-Recovery, ARCHITECTURE §3.4).

The functions take the output of :func:`recoverylab.takeover.summarize` unchanged. Depth slices
are not the same sample (deeper slices have fewer eligible states), so every depth chart shows
its own denominator under the rates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from recoverylab._errors import ParameterError
from recoverylab.report._common import (
    GREY,
    altair,
    keys_before,
    label,
    pp,
    prepare,
    slim,
    tip_key,
    tip_n,
    tip_pp,
    x_band,
)
from recoverylab.takeover import RATES

if TYPE_CHECKING:
    import altair as alt

__all__ = ["depth_rates", "repair_funnel"]

_SUMMARIZE = "recoverylab.takeover.summarize"
_STATES = ("eligible_states", "rejected_replay_mismatch", "rejected_missing_expected")
#: Denominator of every rate of the summary, and how a tooltip names it.
_DENOMINATOR = {rate: denominator for rate, _, denominator in RATES}
_NUMERATOR = {rate: numerator for rate, numerator, _ in RATES}
_N_TITLE = {
    "attempts": "n (attempts)",
    "attempted_states": "n (attempted states)",
    "n_aware": "n (aware attempts)",
    "aware_fixed": "n (aware, root cause fixed)",
    "aware_fixed_derived": "n (aware, fixed, derived fixed)",
}


def _metric_title(metric: str, k: int | None) -> str:
    if metric == "ear":
        return "EAR (error-aware rate)"
    if metric == "pass_at_k":
        return f"pass@{k}" if k is not None else "pass@k"
    return metric.replace("_", " ")


def _rows(summary: object, chart: str, columns: Sequence[str]) -> tuple[pl.DataFrame, list[str]]:
    frame = prepare(summary, ("agent", "k", *columns), chart, _SUMMARIZE)
    return frame, keys_before(frame, "k")


def depth_rates(
    summary: pl.DataFrame | pl.LazyFrame, *, metrics: Sequence[str] = ("ear", "pass_at_k")
) -> alt.TopLevelMixin:
    """EAR and pass@k by depth per agent, with the eligible-state denominator of every depth.

    Parameters
    ----------
    summary
        The output of :func:`recoverylab.takeover.summarize` with ``depth`` among ``by``; keys
        other than ``depth`` (``agent``, ``split``...) make the coloured series.
    metrics
        Rates to draw, each in its own column (default EAR and pass@k); any rate of
        :data:`recoverylab.takeover.RATES`.

    Returns
    -------
    altair.HConcatChart
        Per metric: on top, per (series, depth) a point and its CI rule joined by a line per
        series, in percentage points, tooltips with the rate's own ``n`` (attempts or attempted
        states); below, the eligible states of every depth as labelled bars (rejected states by
        reason in the tooltip).

    Raises
    ------
    SchemaError
        When the frame lacks ``depth`` or a summary column.
    ParameterError
        For an unknown metric.
    """
    alt = altair()
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    unknown = [m for m in metrics if m not in _DENOMINATOR]
    if unknown or not metrics:
        raise ParameterError(
            f"report.depth_rates: parameter `metrics` is {metrics!r}; each must be one of "
            f"{', '.join(_DENOMINATOR)}."
        )
    needed = {
        "depth",
        *_STATES,
        "rejected_states",
        "attempted_states",
        "attempts",
        *(c for m in metrics for c in (m, f"{m}_ci_low", f"{m}_ci_high", _DENOMINATOR[m])),
    }
    frame, keys = _rows(summary, "depth_rates", sorted(needed))
    series_keys = [k for k in keys if k != "depth"]
    series_title = " · ".join(series_keys) or "series"
    data = frame.with_columns(label(series_keys, "series"))
    k_values = data["k"].unique().to_list()
    k = k_values[0] if len(k_values) == 1 else None
    depth_x = x_band("depth", "depth (steps after the root cause)")
    columns = [_metric_column(data, m, k, depth_x, series_title) for m in metrics]
    return alt.hconcat(*columns).properties(
        title="By depth; the bars below give each depth's own eligible-state denominator"
    )


def _metric_column(
    data: pl.DataFrame, metric: str, k: int | None, depth_x: object, series_title: str
) -> alt.VConcatChart:
    """One metric by depth (rates with intervals) above the depth denominators."""
    alt = altair()
    denominator = _DENOMINATOR[metric]
    shown = slim(
        data.with_columns(
            pp(metric, "rate_pp"),
            pp(f"{metric}_ci_low", "low_pp"),
            pp(f"{metric}_ci_high", "high_pp"),
            pl.col(denominator).alias("denominator"),
        ),
        [
            "series",
            "depth",
            "rate_pp",
            "low_pp",
            "high_pp",
            "denominator",
            "attempted_states",
            "eligible_states",
        ],
        ["series", "depth"],
    )
    title = _metric_title(metric, k)
    base = alt.Chart(shown).encode(
        x=depth_x,
        color=alt.Color("series:N", title=series_title),
        tooltip=[
            tip_key("series", series_title),
            tip_key("depth"),
            tip_pp("rate_pp", title),
            tip_pp("low_pp", "CI low"),
            tip_pp("high_pp", "CI high"),
            tip_n("denominator", _N_TITLE.get(denominator, f"n ({denominator})")),
            tip_n("attempted_states", "attempted states"),
            tip_n("eligible_states", "eligible states"),
        ],
    )
    y = alt.Y("low_pp:Q", title="rate (pp), CI")
    lines = base.mark_line(strokeWidth=1.5, opacity=0.6).encode(
        xOffset="series:N", y=alt.Y("rate_pp:Q")
    )
    rules = base.mark_rule(strokeWidth=2).encode(xOffset="series:N", y=y, y2="high_pp:Q")
    points = base.mark_point(filled=True, size=55).encode(xOffset="series:N", y=alt.Y("rate_pp:Q"))
    top = alt.layer(lines, rules, points).properties(width=300, height=200, title=title)
    return alt.vconcat(top, _denominators(data, depth_x, series_title))


def _denominators(data: pl.DataFrame, depth_x: object, series_title: str) -> alt.LayerChart:
    """Labelled bars of eligible states per depth (per series only where they differ)."""
    alt = altair()
    per_depth = data.select("depth", *_STATES, "rejected_states").unique()
    shared = per_depth.height == data["depth"].n_unique()
    states = per_depth if shared else data.select("series", "depth", *_STATES, "rejected_states")
    states = states.sort(states.columns[: 2 - shared])
    tooltip = [
        tip_key("depth"),
        tip_n("eligible_states", "n (eligible states)"),
        tip_n("rejected_states", "rejected states"),
        tip_n("rejected_replay_mismatch", "rejected: replay mismatch"),
        tip_n("rejected_missing_expected", "rejected: missing expected"),
    ]
    encoding: dict[str, object] = {"x": depth_x, "tooltip": tooltip}
    if not shared:
        encoding["xOffset"] = alt.XOffset("series:N")
        tooltip.insert(0, tip_key("series", series_title))
    base = alt.Chart(states).encode(**encoding)
    bars = base.mark_bar(color=GREY, opacity=0.5).encode(
        y=alt.Y("eligible_states:Q", title="eligible states", axis=alt.Axis(tickCount=2))
    )
    labels = base.mark_text(baseline="bottom", dy=-2, fontSize=10).encode(
        y="eligible_states:Q", text=alt.Text("eligible_states:Q", format=",d")
    )
    return alt.layer(bars, labels).properties(width=300, height=60)


#: The nested funnel: (layer, count of attempts that reached it); each a share of attempts.
_NESTED_STAGES = (
    ("aware", "n_aware"),
    ("+ root cause fixed", "aware_fixed"),
    ("+ derived fixed", "aware_fixed_derived"),
    ("+ passed", "aware_fixed_derived_passed"),
)
#: The same layers, each given the previous one: (layer and its denominator, rate).
_CONDITIONAL_STAGES = (
    ("aware, of attempts", "aware_rate"),
    ("root cause fixed, of aware", "fixed_given_aware_rate"),
    ("derived fixed, of fixed", "derived_given_fixed_rate"),
    ("passed, of derived fixed", "pass_given_derived_rate"),
)


def repair_funnel(summary: pl.DataFrame | pl.LazyFrame) -> alt.TopLevelMixin:
    """Draw the repair funnel aware → root cause fixed → derived state fixed → passed.

    The funnel is nested: a layer counts the attempts that also reached every layer above it,
    so it never widens. Two readings side by side: each nested layer as a share of all
    attempts, and each layer conditional on the previous one, whose denominator is the
    previous layer (named under each bar group; the counts are in the tooltips).

    Parameters
    ----------
    summary
        The output of :func:`recoverylab.takeover.summarize`; every row (agent and the other
        keys, e.g. pooled over depths with ``by=("agent",)``) is one coloured series.

    Returns
    -------
    altair.HConcatChart
        Left, per (layer, series) a bar: the nested count over ``attempts`` in percentage
        points; right, per (layer, series) a bar and its CI rule; tooltips carry each layer's
        count and its ``n``.

    Raises
    ------
    SchemaError
        When the frame lacks a funnel column.
    """
    alt = altair()
    needed = {
        "attempts",
        *(count for _, count in _NESTED_STAGES),
        *(
            c
            for _, rate in _CONDITIONAL_STAGES
            for c in (rate, f"{rate}_ci_low", f"{rate}_ci_high", _NUMERATOR[rate])
        ),
        *(_DENOMINATOR[rate] for _, rate in _CONDITIONAL_STAGES),
    }
    frame, keys = _rows(summary, "repair_funnel", sorted(needed))
    series_title = " · ".join(keys)
    data = frame.with_columns(label(keys, "series"))
    nested = pl.concat(
        [
            data.select(
                "series",
                pl.lit(stage).alias("stage"),
                # display arithmetic on the result's own counts: count / attempts, in pp
                (pl.col(count) / pl.col("attempts") * 100).alias("rate_pp"),
                pl.lit(None, pl.Float64).alias("low_pp"),
                pl.lit(None, pl.Float64).alias("high_pp"),
                pl.col(count).alias("count"),
                pl.col("attempts").alias("n"),
                pl.lit(_N_TITLE["attempts"]).alias("n_of"),
            )
            for stage, count in _NESTED_STAGES
        ]
    )
    conditional = pl.concat(
        [
            data.select(
                "series",
                pl.lit(stage).alias("stage"),
                pp(rate, "rate_pp"),
                pp(f"{rate}_ci_low", "low_pp"),
                pp(f"{rate}_ci_high", "high_pp"),
                pl.col(_NUMERATOR[rate]).alias("count"),
                pl.col(_DENOMINATOR[rate]).alias("n"),
                pl.lit(_N_TITLE[_DENOMINATOR[rate]]).alias("n_of"),
            )
            for stage, rate in _CONDITIONAL_STAGES
        ]
    )
    panels = [
        _funnel_panel(
            nested.sort("series", maintain_order=True),
            [stage for stage, _ in _NESTED_STAGES],
            "Nested layers, each a share of all attempts",
            "share of attempts (pp)",
            series_title,
        ),
        _funnel_panel(
            conditional.sort("series", maintain_order=True),
            [stage for stage, _ in _CONDITIONAL_STAGES],
            "Each layer given the previous one",
            "rate given the previous layer (pp), CI",
            series_title,
        ),
    ]
    return alt.hconcat(*panels).properties(
        title="Repair funnel: aware → root cause fixed → derived state fixed → passed"
    )


def _funnel_panel(
    long: pl.DataFrame, order: list[str], title: str, y_title: str, series_title: str
) -> alt.LayerChart:
    """One funnel panel: per (layer, series) a bar, and its CI rule where it has one."""
    alt = altair()
    has_ci = bool(long["low_pp"].is_not_null().any())
    ci_tips = [tip_pp("low_pp", "CI low"), tip_pp("high_pp", "CI high")] if has_ci else []
    base = alt.Chart(long).encode(
        x=alt.X(
            "stage:N",
            title=None,
            sort=order,
            scale=alt.Scale(type="band", paddingInner=0.25),
            axis=alt.Axis(labelAngle=0, labelLimit=200, labelExpr="split(datum.label, ', ')"),
        ),
        xOffset=alt.XOffset("series:N"),
        color=alt.Color("series:N", title=series_title),
        tooltip=[
            tip_key("series", series_title),
            tip_key("stage", "layer"),
            tip_pp("rate_pp", "rate"),
            *ci_tips,
            tip_n("count", "attempts in this layer"),
            tip_n("n", "n (denominator)"),
            tip_key("n_of", "denominator"),
        ],
    )
    bars = base.mark_bar(opacity=0.85).encode(
        y=alt.Y("rate_pp:Q", title=y_title, scale=alt.Scale(domain=[0, 100]))
    )
    layers = [bars]
    if has_ci:
        layers.append(base.mark_rule(color="black").encode(y="low_pp:Q", y2="high_pp:Q"))
    return alt.layer(*layers).properties(width=340, height=220, title=title)
