"""Charts of recovery policies: a router and its baselines against never recovering (CIR §3.1-3.2).

The functions take the output of :func:`recoverylab.paired.evaluate_policy` (one policy) or of
:func:`recoverylab.router.compare` (several policies, with ``policy`` and ``reference``
columns) unchanged. The overall row (null ``condition``) is labelled ``all``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from recoverylab._errors import ParameterError
from recoverylab.report._common import (
    ALL,
    GREY,
    NEUTRAL,
    RESCUE,
    SEP,
    altair,
    facet_header,
    keys_before,
    ordered,
    pp,
    prepare,
    require_rows,
    slim,
    text,
    tip_key,
    tip_n,
    tip_p,
    tip_pp,
    x_band,
    zero_axis,
)

if TYPE_CHECKING:
    import altair as alt

__all__ = ["policy_gain", "policy_rates", "policy_success"]

#: The columns the charts draw (a policy evaluation has more; see POLICY_COLUMNS).
_COLUMNS = (
    "condition",
    "n",
    "base_rate",
    "policy_rate",
    "gain",
    "rescue",
    "harm",
    "interventions",
    "intervention_rate",
    "clean_touch_rate",
    "ci_low",
    "ci_high",
    "p_value",
)
_SOURCE = "recoverylab.paired.evaluate_policy or recoverylab.router.compare"
_NEVER = "never"


def _rows(evaluation: object, chart: str, reference: str) -> pl.DataFrame:
    """Return the rows of one reference, with ``policy`` (by keys folded in), ``cond`` labels."""
    frame = prepare(evaluation, _COLUMNS, chart, _SOURCE)
    defaults = {"policy": "policy", "reference": _NEVER}  # one policy against never
    frame = frame.with_columns(pl.lit(v).alias(k) for k, v in defaults.items() if k not in frame)
    extra = [k for k in keys_before(frame, "n") if k not in ("policy", "reference", "condition")]
    rows = frame.filter(pl.col("reference") == reference)
    if rows.height == 0:
        known = ", ".join(sorted(frame["reference"].unique().drop_nulls().to_list()))
        raise ParameterError(
            f"report.{chart}: parameter `reference` is {reference!r}, which has no rows; the "
            f"frame's references are: {known}."
        )
    if extra:
        rows = rows.with_columns(
            pl.concat_str(
                pl.col("policy"),
                *(text(k) for k in extra),
                separator=SEP,
            ).alias("policy")
        )
    return rows.with_columns(text("condition").alias("cond"))


def _condition_order(rows: pl.DataFrame) -> list[str]:
    conditions = sorted(c for c in rows["cond"].unique().to_list() if c != ALL)
    return ordered([*conditions, ALL], [*conditions, ALL])


def policy_success(evaluation: pl.DataFrame | pl.LazyFrame) -> alt.TopLevelMixin:
    """Success without and with each policy, per condition and overall.

    Parameters
    ----------
    evaluation
        The output of :func:`recoverylab.paired.evaluate_policy` or
        :func:`recoverylab.router.compare` (its rows against ``never``).

    Returns
    -------
    altair.FacetChart
        One panel per policy; per condition two bars, ``base_rate`` (never recovering) and
        ``policy_rate``, in percentage points, with ``n`` (episodes) in the tooltip.

    Raises
    ------
    SchemaError
        When the frame lacks a column of a policy evaluation.
    InputError
        When the frame has no rows.
    """
    alt = altair()
    rows = _rows(evaluation, "policy_success", _NEVER)
    series = [("never recovering", "base_rate"), ("with the policy", "policy_rate")]
    parts = [
        rows.with_columns(
            pl.lit(name).alias("series"), pl.lit(order).alias("order"), pp(column, "rate_pp")
        )
        for order, (name, column) in enumerate(series)
    ]
    fields = ["policy", "cond", "series", "order", "rate_pp", "n", "gain_pp", "rescue", "harm"]
    data = slim(pl.concat(parts).with_columns(pp("gain")), fields)
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=x_band("cond", "condition", sort=_condition_order(rows)),
            xOffset=alt.XOffset("series:N", sort=[name for name, _ in series]),
            y=alt.Y("rate_pp:Q", title="success rate (pp)", scale=alt.Scale(domain=[0, 100])),
            color=alt.Color(
                "series:N",
                title=None,
                sort=[name for name, _ in series],
                scale=alt.Scale(range=[GREY, RESCUE]),
            ),
            tooltip=[
                tip_key("policy"),
                tip_key("cond", "condition"),
                tip_key("series", "success"),
                tip_pp("rate_pp", "success rate"),
                tip_n("n", "n (episodes)"),
                tip_pp("gain_pp", "gain"),
                tip_n("rescue", "rescue"),
                tip_n("harm", "harm"),
            ],
        )
        .properties(width=alt.Step(18), height=200)
        .facet(
            # the panels are named by their policy; one policy's panel needs no name (the
            # chart's title says what it is), and "policy" above the names says nothing
            column=alt.Column(
                "policy:N",
                title=None,
                sort=_policy_order(rows),
                header=facet_header(labels=rows["policy"].n_unique() > 1),
            )
        )
        .properties(title="Success without and with each policy")
    )


def _policy_order(rows: pl.DataFrame) -> list[str]:
    return list(dict.fromkeys(rows["policy"].to_list()))


def policy_gain(
    evaluation: pl.DataFrame | pl.LazyFrame, *, reference: str = _NEVER
) -> alt.TopLevelMixin:
    """Draw the gain of each policy over a reference, per condition and overall, with its CI.

    Parameters
    ----------
    evaluation
        The output of :func:`recoverylab.paired.evaluate_policy` or
        :func:`recoverylab.router.compare`.
    reference
        ``"never"`` (default): each policy against never recovering; another policy's name
        draws the paired margins against it (rows of :func:`~recoverylab.router.compare`).

    Returns
    -------
    altair.LayerChart
        Per (policy, condition) a point (``gain``) and a rule (``ci_low`` to ``ci_high``), in
        percentage points; tooltips carry ``n`` (episodes), rescues, harms and the p-value.

    Raises
    ------
    SchemaError
        When the frame lacks a column of a policy evaluation.
    ParameterError
        When no row has this reference.
    """
    alt = altair()
    rates = ("gain", "ci_low", "ci_high", "base_rate", "policy_rate")
    rows = _rows(evaluation, "policy_gain", reference).with_columns(*(pp(c) for c in rates))
    keys = ("policy", "reference", "cond")
    rows = slim(rows, [*keys, *(f"{c}_pp" for c in rates), "n", "rescue", "harm", "p_value"])
    several = rows["policy"].n_unique() > 1  # one policy: no legend with a single entry
    encoding: dict[str, Any] = {"x": x_band("cond", "condition", sort=_condition_order(rows))}
    if several:
        encoding["xOffset"] = alt.XOffset("policy:N", sort=_policy_order(rows))
        encoding["color"] = alt.Color("policy:N", title="policy", sort=_policy_order(rows))
    else:
        encoding["color"] = alt.value(NEUTRAL)
    base = alt.Chart(rows).encode(
        **encoding,
        tooltip=[
            tip_key("policy"),
            tip_key("reference"),
            tip_key("cond", "condition"),
            tip_pp("gain_pp", "gain"),
            tip_pp("ci_low_pp", "CI low"),
            tip_pp("ci_high_pp", "CI high"),
            tip_pp("base_rate_pp", f"success, {reference}"),
            tip_pp("policy_rate_pp", "success, policy"),
            tip_n("n", "n (episodes)"),
            tip_n("rescue", "rescue"),
            tip_n("harm", "harm"),
            tip_p(),
        ],
    )
    title = (
        "Gain over never recovering, with its CI"
        if reference == _NEVER
        else f"Paired margin over {reference}, with its CI"
    )
    rules = base.mark_rule(strokeWidth=2).encode(
        y=alt.Y("ci_low_pp:Q", title="gain (pp), CI", axis=zero_axis()), y2="ci_high_pp:Q"
    )
    points = base.mark_point(filled=True, size=60).encode(y="gain_pp:Q")
    return alt.layer(rules, points).properties(width=420, height=220, title=title)


def policy_rates(evaluation: pl.DataFrame | pl.LazyFrame) -> alt.TopLevelMixin:
    """Intervention rate (all episodes) and clean-touch rate (clean episodes) of each policy.

    A good policy intervenes where recovery helps and leaves clean episodes alone: the two rates
    side by side show how often it acts, and how often on episodes where acting can only harm.

    Parameters
    ----------
    evaluation
        The output of :func:`recoverylab.paired.evaluate_policy` or
        :func:`recoverylab.router.compare`. The intervention rate is read from the overall row
        (its ``n``: every episode); the clean-touch rate from the clean row (the condition row
        that carries ``clean_touch_rate``; its ``n``: clean episodes).

    Returns
    -------
    altair.Chart
        Per policy up to two bars in percentage points, ``n`` and the number of interventions in
        the tooltip (a policy evaluated without clean episodes has no clean-touch bar).

    Raises
    ------
    SchemaError
        When the frame lacks a column of a policy evaluation.
    InputError
        When the frame has no overall row.
    """
    alt = altair()
    rows = _rows(evaluation, "policy_rates", _NEVER)
    fields = ("policy", "measure", "rate_pp", "n", "interventions", "order")
    overall = rows.filter(pl.col("condition").is_null()).with_columns(
        pl.lit("intervention rate (all episodes)").alias("measure"),
        pp("intervention_rate", "rate_pp"),
        pl.lit(0).alias("order"),
    )
    clean = rows.filter(
        pl.col("condition").is_not_null() & pl.col("clean_touch_rate").is_not_null()
    ).with_columns(
        pl.format("clean-touch rate ({} episodes)", "condition").alias("measure"),
        pp("clean_touch_rate", "rate_pp"),
        pl.lit(1).alias("order"),
    )
    data = pl.concat([overall.select(fields), clean.select(fields)])
    require_rows(overall, "policy_rates")
    measures = list(dict.fromkeys(data.sort("order")["measure"].to_list()))
    base = alt.Chart(data).encode(
        x=x_band("policy", None, sort=_policy_order(rows)),  # the ticks name the policies
        xOffset=alt.XOffset("measure:N", sort=measures),
        tooltip=[
            tip_key("policy"),
            tip_key("measure"),
            tip_pp("rate_pp", "rate"),
            tip_n("interventions", "interventions"),
            tip_n("n", "n (episodes)"),
        ],
    )
    # every bar carries its value, so a rate of zero (no bar to see) still reads "0.0"
    values = base.mark_text(baseline="bottom", dy=-2, fontSize=10).encode(
        y=alt.Y("rate_pp:Q"), text=alt.Text("rate_pp:Q", format=".1f")
    )
    bars = base.mark_bar().encode(
        y=alt.Y("rate_pp:Q", title="rate (pp)"),
        color=alt.Color(
            "measure:N",
            title="rate",
            sort=measures,
            scale=alt.Scale(range=[NEUTRAL, "#e7298a", "#66a61e", "#e6ab02"]),
        ),
    )
    return alt.layer(bars, values).properties(
        width=alt.Step(30), height=200, title="How often each policy intervenes"
    )
