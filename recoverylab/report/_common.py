"""What every chart shares: input checks, display columns in percentage points, tooltips.

Charts draw the frames the protocol functions return; they never recompute a metric. The only
derived columns are for display: a rate in percentage points (``<rate>_pp`` = rate × 100), a
label joining grouping keys, or a long form of several rate columns. Every mark that shows a rate
carries its denominator in the tooltip, titled ``n (...)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl
import polars.selectors as cs

from recoverylab._errors import InputError, ParameterError, SchemaError
from recoverylab.report._deps import altair

#: Colours shared by all charts (colour-blind safe).
RESCUE = "#1b9e77"
HARM = "#d95f02"
NEUTRAL = "#7570b3"
GREY = "#9e9e9e"
#: Label of an overall row (a null condition in policy evaluations).
ALL = "all"
#: Separator of joined key values in labels.
SEP = " · "


def as_frame(frame: object, chart: str) -> pl.DataFrame:
    """Collect a result frame (results are small); refuse anything that is not a polars frame."""
    if isinstance(frame, pl.LazyFrame):
        return frame.collect()
    if isinstance(frame, pl.DataFrame):
        return frame
    raise ParameterError(
        f"report.{chart}: expected a polars DataFrame or LazyFrame, got {type(frame).__name__}."
    )


def require_columns(frame: pl.DataFrame, columns: Sequence[str], chart: str, source: str) -> None:
    """Raise :class:`SchemaError` naming the columns a chart needs and the frame lacks."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        shown = ", ".join(f"`{c}`" for c in missing)
        raise SchemaError(
            f"report.{chart}: the frame has no column {shown}; it must be the output of "
            f"{source}. Hint: pass that function's result unchanged."
        )


def require_rows(frame: pl.DataFrame, chart: str) -> None:
    """Raise :class:`InputError` for a frame with no rows (there is nothing to draw)."""
    if frame.height == 0:
        raise InputError(f"report.{chart}: the frame has no rows; there is nothing to chart.")


def prepare(frame: object, columns: Sequence[str], chart: str, source: str) -> pl.DataFrame:
    """Collect, check the columns and refuse an empty frame; NaN shows as missing (null)."""
    eager = as_frame(frame, chart)
    require_columns(eager, columns, chart, source)
    require_rows(eager, chart)
    return eager.with_columns(cs.float().fill_nan(None))


def keys_before(frame: pl.DataFrame, first_result: str) -> list[str]:
    """Return the grouping keys: the columns before the first result column."""
    return frame.columns[: frame.columns.index(first_result)]


def text(column: str) -> pl.Expr:
    """Return a column as display text (null as ``all``)."""
    return pl.col(column).cast(pl.String).fill_null(ALL)


def label(columns: Sequence[str], name: str, *, named: bool = False) -> pl.Expr:
    """Join several key columns into one display label (``a · b``), ``all`` for none."""
    if not columns:
        return pl.lit(ALL).alias(name)
    parts = [pl.concat_str(pl.lit(f"{c}="), text(c)) if named else text(c) for c in columns]
    return pl.concat_str(parts, separator=SEP).alias(name)


def positive_zero(expr: pl.Expr) -> pl.Expr:
    """Return ``expr`` with a negative zero as zero, so "-0.0" never shows."""
    return pl.when(expr == 0).then(pl.lit(0.0)).otherwise(expr)


def pp(column: str, name: str | None = None) -> pl.Expr:
    """Return a fraction column in percentage points, for display (``<column>_pp``)."""
    return positive_zero(pl.col(column) * 100).alias(name or f"{column}_pp")


def tip_key(field: str, title: str | None = None) -> Any:
    """Return a tooltip entry for a key."""
    return altair().Tooltip(f"{field}:N", title=title or field)


def tip_n(field: str, title: str) -> Any:
    """Return a tooltip entry for a count; a denominator's title starts with ``n (``."""
    return altair().Tooltip(f"{field}:Q", title=title, format=",d")


def tip_pp(field: str, title: str) -> Any:
    """Return a tooltip entry for a value in percentage points."""
    return altair().Tooltip(f"{field}:Q", title=f"{title} (pp)", format=".1f")


def tip_p(field: str = "p_value", title: str = "p") -> Any:
    """Return a tooltip entry for a p-value (the result's ``p_value``: its interval's test)."""
    return altair().Tooltip(f"{field}:Q", title=title, format=".2g")  # as in the tables


def ordered(values: Sequence[str], known: Sequence[str]) -> list[str]:
    """Return ``values`` with the ``known`` order first (e.g. regimes), then the others."""
    present = list(dict.fromkeys(values))
    return [v for v in known if v in present] + [v for v in present if v not in known]


def zero_axis(title: str | None = None) -> Any:
    """Return a value axis whose zero grid line is drawn dark (a baseline without extra marks)."""
    alt = altair()
    return alt.Axis(
        gridColor=alt.condition("datum.value === 0", alt.value("#555555"), alt.value("#e6e6e6")),
        title=alt.Undefined if title is None else title,
    )


def series_color(data: pl.DataFrame, title: str, field: str = "series") -> Any:
    """Return the colour of a series; a single series gets no legend (it would have one entry)."""
    alt = altair()
    legend = {} if data[field].n_unique() > 1 else {"legend": None}
    return alt.Color(f"{field}:N", title=title, **legend)


def facet_header(*, row: bool = False, labels: bool = True) -> Any:
    """Return a facet header with legible, horizontal labels (row labels left of their row)."""
    alt = altair()
    options: dict[str, Any] = {"labelFontSize": 13, "titleFontSize": 13, "labelLimit": 240}
    if not labels:
        options["labels"] = False
    if row:
        options.update(labelAngle=0, labelAlign="left", labelOrient="left", titleOrient="top")
        options.update(titleAngle=0, titleAlign="left")
    return alt.Header(**options)


def x_band(field: str, title: str | None, *, sort: Sequence[str] | None = None) -> Any:
    """Return an ordinal x encoding on a band scale, so ``xOffset`` can set series side by side."""
    alt = altair()
    return alt.X(
        f"{field}:O",
        title=title,
        scale=alt.Scale(type="band", paddingInner=0.25),
        axis=alt.Axis(labelAngle=0),
        sort=list(sort) if sort is not None else "ascending",
    )


def slim(frame: pl.DataFrame, fields: Sequence[str], order: Sequence[str] = ()) -> pl.DataFrame:
    """Keep only the columns a chart uses (the data is inlined in the chart), sorted by ``order``.

    Sorting makes the chart independent of the input's row order (the same results give the
    same specification, byte for byte).
    """
    data = frame.select(list(dict.fromkeys(fields)))
    return data.sort(list(order), nulls_last=True, maintain_order=True) if order else data
