"""Charts of paired counterfactual recovery (CIR, ARCHITECTURE §3.1).

Each function takes a frame returned by :mod:`recoverylab.paired` unchanged and returns an Altair
chart. Nothing is recomputed: bars and points are the frame's counts and rates, shown in
percentage points with the denominator of every rate in the tooltip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from recoverylab.report._common import (
    GREY,
    HARM,
    NEUTRAL,
    RESCUE,
    SEP,
    altair,
    facet_header,
    keys_before,
    label,
    positive_zero,
    pp,
    prepare,
    require_rows,
    series_color,
    slim,
    tip_key,
    tip_n,
    tip_p,
    tip_pp,
    x_band,
    zero_axis,
)

if TYPE_CHECKING:
    import altair as alt

__all__ = ["contrast", "effect", "rescue_harm", "rescue_overlap"]

_CELL = ("condition", "delay", "method")
_SUMMARY = (*_CELL, "n", "n_tasks", "rescue", "harm", "effect", "ci_low", "ci_high", "p_value")
_SUMMARIZE = "recoverylab.paired.summarize"
#: Chart fields of a summary cell: the effect and its interval in pp, and the tooltip counts.
_PP = ("effect_pp", "ci_low_pp", "ci_high_pp")
_TIPS = ("n_tasks", "rescue", "harm", "p_value")


def _cells(summary: object, chart: str, name: str) -> tuple[pl.DataFrame, list[str]]:
    """Cells with pairs (``n > 0``) with :data:`_PP`; method and extra ``by`` keys as ``name``."""
    frame = prepare(summary, _SUMMARY, chart, _SUMMARIZE)
    extra = [k for k in keys_before(frame, "n") if k not in _CELL]
    # A cell whose recovery rows were all excluded has n = 0 and null rates: nothing to draw
    # (its exclusions are in the table and the provenance block).
    cells = frame.filter(pl.col("n") > 0)
    require_rows(cells, chart)
    # the label reads as its values ("refresh · full"), as in every other legend; the key
    # names are in the legend's or the facet's title
    effect = (pp(c) for c in ("effect", "ci_low", "ci_high"))
    return cells.with_columns(*effect, label(["method", *extra], name)), extra


def _cell_tooltip() -> list[alt.Tooltip]:
    return [
        tip_key("condition"),
        tip_key("delay"),
        tip_key("method"),
        tip_pp("effect_pp", "effect"),
        tip_pp("ci_low_pp", "CI low"),
        tip_pp("ci_high_pp", "CI high"),
        tip_n("n", "n (pairs)"),
        tip_n("n_tasks", "n (tasks)"),
        tip_n("rescue", "rescue"),
        tip_n("harm", "harm"),
        tip_p(),
    ]


def rescue_harm(summary: pl.DataFrame | pl.LazyFrame) -> alt.TopLevelMixin:
    """Diverging bars of rescues (up) and harms (down) by condition × delay × method.

    The two directions an average success rate hides, side by side: each bar is a count as a
    share of the cell's pairs ``n`` (so bars of cells with different ``n`` compare), and the
    black tick is the cell's ``effect`` = rescue share − harm share.

    Parameters
    ----------
    summary
        The output of :func:`recoverylab.paired.summarize` (eager or lazy). Cells with no pairs
        (``n = 0``) are not drawn; extra ``by`` keys become rows of panels.

    Returns
    -------
    altair.FacetChart
        One panel per condition (columns) and per method (rows), delays on the x axis: per cell
        two bars (rescue, harm) and one tick (effect); tooltips carry the counts and ``n``.

    Raises
    ------
    SchemaError
        When the frame lacks a column of the summary.
    InputError
        When no cell has pairs.

    Examples
    --------
    >>> from recoverylab import paired, report
    >>> summary = paired.summarize("data_samples/paired/main_forks.parquet", n_resamples=200)
    >>> chart = report.rescue_harm(summary)  # doctest: +SKIP
    """
    alt = altair()
    data, extra = _rescue_harm_data(summary)
    x = x_band("delay", "delay (actions)")
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=x,
            y=alt.Y("share_pp:Q", title="share of pairs (pp)", axis=zero_axis()),
            color=alt.Color(
                "outcome:N",
                scale=alt.Scale(domain=["rescue", "harm"], range=[RESCUE, HARM]),
                title="outcome",
            ),
            tooltip=[
                tip_key("condition"),
                tip_key("delay"),
                tip_key("method"),
                tip_key("outcome"),
                tip_n("count", "episodes"),
                tip_n("n", "n (pairs)"),
                tip_pp("share_pp", "share of pairs"),
            ],
        )
    )
    ticks = (
        alt.Chart()
        .transform_filter(alt.datum.outcome == "rescue")
        .mark_tick(color="black", thickness=2)
        .encode(x=x, y=alt.Y("effect_pp:Q"), tooltip=_cell_tooltip())
    )
    facet = {"column": alt.Column("condition:N", title="condition", header=facet_header())}
    if data["panel"].n_unique() > 1:
        facet["row"] = alt.Row(
            "panel:N", title=SEP.join(["method", *extra]), header=facet_header(row=True)
        )
    return (
        alt.layer(bars, ticks, data=data)
        .properties(width=160, height=180)
        .facet(**facet)
        .resolve_scale(x="independent", xOffset="independent")
        .properties(title="Rescue (up) and harm (down) per cell; tick = effect")
    )


def _rescue_harm_data(summary: pl.DataFrame | pl.LazyFrame) -> tuple[pl.DataFrame, list[str]]:
    """Rescue and harm shares of pairs, one row per cell × outcome; and the extra keys."""
    cells, extra = _cells(summary, "rescue_harm", "panel")
    shares = [
        cells.with_columns(
            pl.lit(outcome).alias("outcome"),
            pl.col(outcome).alias("count"),
            positive_zero(sign * pl.col(outcome) / pl.col("n") * 100).alias("share_pp"),
        )
        for outcome, sign in (("rescue", 1), ("harm", -1))
    ]
    fields = [*_CELL, "panel", "outcome", "count", "n", "share_pp", *_PP, *_TIPS]
    data = slim(pl.concat(shares), fields, [*_CELL, "panel", "outcome"])
    return data, extra


def effect(summary: pl.DataFrame | pl.LazyFrame) -> alt.TopLevelMixin:
    """Draw the recovery effect of every cell with its confidence interval, by delay.

    Parameters
    ----------
    summary
        The output of :func:`recoverylab.paired.summarize`. Cells with no pairs are not drawn;
        extra ``by`` keys join the method in the colour legend.

    Returns
    -------
    altair.FacetChart
        One panel per condition; per cell a point (``effect``) and a rule (``ci_low`` to
        ``ci_high``), methods side by side at each delay, in percentage points.

    Raises
    ------
    SchemaError
        When the frame lacks a column of the summary.
    InputError
        When no cell has pairs.
    """
    alt = altair()
    cells, extra = _cells(summary, "effect", "series")
    data = slim(cells, [*_CELL, "series", *_PP, "n", *_TIPS], [*_CELL, "series"])
    base = _series_base(alt.Chart(), data, extra, _cell_tooltip())
    return (
        alt.layer(*_with_interval(base, "effect_pp", "effect (pp), CI", 60), data=data)
        .properties(width=200, height=200)
        .facet(column=alt.Column("condition:N", title="condition", header=facet_header()))
        .resolve_scale(x="independent", xOffset="independent")
        .properties(title="Effect of recovery (recovery − no recovery) with its CI")
    )


def _series_base(
    chart: alt.Chart, data: pl.DataFrame, extra: list[str], tooltip: list[alt.Tooltip]
) -> alt.Chart:
    """Encode delays on x with the ``series`` (method and extra keys) side by side."""
    return chart.encode(
        x=x_band("delay", "delay (actions)"),
        xOffset=altair().XOffset("series:N"),
        color=series_color(data, SEP.join(["method", *extra])),
        tooltip=tooltip,
    )


def _with_interval(base: alt.Chart, value: str, title: str, size: int) -> list[alt.Chart]:
    """Return the interval rule (``ci_low_pp`` to ``ci_high_pp``) and a point at ``value``."""
    y = altair().Y("ci_low_pp:Q", title=title, axis=zero_axis())
    rules = base.mark_rule(strokeWidth=2).encode(y=y, y2="ci_high_pp:Q")
    return [rules, base.mark_point(filled=True, size=size).encode(y=f"{value}:Q")]


def contrast(frame: pl.DataFrame | pl.LazyFrame) -> alt.TopLevelMixin:
    """Draw a contrast of two conditions (e.g. stale2 − clean) across delays, with its CI.

    Parameters
    ----------
    frame
        The output of :func:`recoverylab.paired.contrast`; extra ``by`` keys join the method in
        the colour legend.

    Returns
    -------
    altair.LayerChart
        Per row a point (``difference``) and a rule (``ci_low`` to ``ci_high``) at its delay,
        methods side by side, in percentage points; tooltips carry both effects, ``n_a``,
        ``n_b``, ``n_tasks`` and the p-value.

    Raises
    ------
    SchemaError
        When the frame lacks a column of the contrast.
    InputError
        When the frame has no rows.
    """
    alt = altair()
    columns = ("a", "b", "delay", "method", "n_tasks", "n_a", "n_b", "effect_a", "effect_b")
    data = prepare(
        frame,
        (*columns, "difference", "ci_low", "ci_high", "p_value"),
        "contrast",
        "recoverylab.paired.contrast",
    )
    extra = [k for k in keys_before(data, "n_tasks") if k not in ("a", "b", "delay", "method")]
    data = slim(
        data.with_columns(
            *(pp(c) for c in ("difference", "ci_low", "ci_high", "effect_a", "effect_b")),
            label(["method", *extra], "series"),
            pl.concat_str(pl.col("a"), pl.lit(" − "), pl.col("b")).alias("contrast"),
        ),
        [
            "contrast",
            "delay",
            "method",
            "series",
            "difference_pp",
            "ci_low_pp",
            "ci_high_pp",
            "effect_a_pp",
            "n_a",
            "effect_b_pp",
            "n_b",
            "n_tasks",
            "p_value",
        ],
        ["contrast", "delay", "series"],
    )
    titles = data["contrast"].unique().sort().to_list()
    tooltip = [
        tip_key("contrast"),
        tip_key("delay"),
        tip_key("method"),
        tip_pp("difference_pp", "difference"),
        tip_pp("ci_low_pp", "CI low"),
        tip_pp("ci_high_pp", "CI high"),
        tip_pp("effect_a_pp", "effect a"),
        tip_n("n_a", "n (pairs, a)"),
        tip_pp("effect_b_pp", "effect b"),
        tip_n("n_b", "n (pairs, b)"),
        tip_n("n_tasks", "n (tasks)"),
        tip_p(),
    ]
    base = _series_base(alt.Chart(data), data, extra, tooltip)
    title = "difference of effects (pp), CI"
    return alt.layer(*_with_interval(base, "difference_pp", title, 70)).properties(
        width=320, height=220, title=f"Contrast of effects: {', '.join(titles)}"
    )


def _overlap_data(frame: pl.DataFrame | pl.LazyFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Overlap segments (only a, both, only b) per cell; and the compared pair's label."""
    columns = ("a", "b", "condition", "delay", "n_a", "n_b", "n_both")
    data = prepare(
        frame,
        (*columns, "rescue_a", "rescue_b", "rescue_both"),
        "rescue_overlap",
        "recoverylab.paired.rescue_overlap",
    )
    fixed = ("a", "b", "condition", "delay")
    extra = [k for k in keys_before(data, "n_a") if k not in fixed]
    data = data.with_columns(
        pl.concat_str(
            pl.col("condition"),
            pl.concat_str(pl.lit("delay "), pl.col("delay").cast(pl.String)),
            *(pl.concat_str(pl.lit(f"{k}="), pl.col(k).cast(pl.String)) for k in extra),
            separator=SEP,
        ).alias("cell")
    )
    both = pl.col("rescue_both")
    segments = [
        (pl.concat_str(pl.lit("only "), pl.col("a")), pl.col("rescue_a") - both),
        (pl.lit("both"), both),
        (pl.concat_str(pl.lit("only "), pl.col("b")), pl.col("rescue_b") - both),
    ]
    parts = [
        data.with_columns(
            name.alias("segment"), pl.lit(order).alias("order"), episodes.alias("episodes")
        )
        for order, (name, episodes) in enumerate(segments)
    ]
    long = slim(
        pl.concat(parts).filter(pl.col("episodes") > 0),
        [
            "cell",
            "segment",
            "order",
            "episodes",
            "rescue_a",
            "rescue_b",
            "rescue_both",
            "n_a",
            "n_b",
            "n_both",
        ],
        ["cell", "order"],
    )
    require_rows(long, "rescue_overlap")
    pair = data.select(pl.concat_str("a", pl.lit(" and "), "b")).to_series()
    return long, pair


def rescue_overlap(frame: pl.DataFrame | pl.LazyFrame) -> alt.TopLevelMixin:
    """Which episodes two methods rescue: only the first, both, only the second.

    Parameters
    ----------
    frame
        The output of :func:`recoverylab.paired.rescue_overlap`.

    Returns
    -------
    altair.Chart
        One stacked horizontal bar per (condition, delay, *by*) with up to three segments
        (segments of zero episodes are not drawn); tooltips carry ``n_a``, ``n_b`` and
        ``n_both`` (episodes paired under each method and under both).

    Raises
    ------
    SchemaError
        When the frame lacks a column of the overlap.
    InputError
        When the frame has no rows.
    """
    alt = altair()
    long, pair = _overlap_data(frame)
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("cell:N", title=None),
            x=alt.X("episodes:Q", title="rescued episodes", stack="zero"),
            color=alt.Color(
                "segment:N",
                title="rescued by",
                sort=alt.EncodingSortField("order"),
                scale=alt.Scale(range=[RESCUE, NEUTRAL, GREY]),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                tip_key("cell", "cell"),
                tip_key("segment", "rescued by"),
                tip_n("episodes", "episodes"),
                tip_n("rescue_a", "rescued by a"),
                tip_n("rescue_b", "rescued by b"),
                tip_n("rescue_both", "rescued by both"),
                tip_n("n_a", "n (pairs, a)"),
                tip_n("n_b", "n (pairs, b)"),
                tip_n("n_both", "n (episodes paired under both)"),
            ],
        )
        .properties(
            width=360,
            height=alt.Step(28),
            title=f"Rescue overlap of {', '.join(pair.unique().sort().to_list())}",
        )
    )
