"""HTML rendering of results for Jupyter: result frames (:func:`show`) and result dataclasses."""

from __future__ import annotations

import dataclasses
import html

import numpy as np
import polars as pl

from recoverylab._display import p_str, shown_columns

__all__ = ["ResultTable", "result_html", "show"]


def _value(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, float | np.floating):
        return f"{float(value):.6g}"
    if isinstance(value, np.ndarray):
        if value.size <= 6:
            return ", ".join(_value(v) for v in value.ravel().tolist())
        return f"array of {value.size:,} values ({value.dtype})"
    if isinstance(value, pl.DataFrame):
        return f"DataFrame: {value.height:,} rows × {value.width} columns"
    if isinstance(value, pl.LazyFrame):
        return f"LazyFrame: {len(value.collect_schema())} columns (not collected)"
    return str(value)


def _field(name: str, value: object) -> str:
    if name == "p_value" and isinstance(value, float | np.floating):
        return p_str(float(value))  # as in every table: two significant digits, < 0.001
    return _value(value)


def result_html(result: object, *, title: str | None = None) -> str:
    """Render a result dataclass as a small two-column HTML table (field, value).

    Arrays (e.g. a bootstrap distribution) and frames are summarised by their size, never
    printed in full, so a result displays instantly in Jupyter. This is what the ``_repr_html_``
    of result objects can return.

    Parameters
    ----------
    result
        A dataclass instance (e.g. :class:`recoverylab.stats.BootstrapResult`).
    title
        Caption; defaults to the class name.

    Returns
    -------
    str
        An HTML ``<table>``.

    Raises
    ------
    TypeError
        When ``result`` is not a dataclass instance.

    Examples
    --------
    >>> from recoverylab.goal import GoalTables
    >>> import polars as pl
    >>> frame = pl.DataFrame({"a": [1]})
    >>> "GoalTables" in result_html(GoalTables(frame, frame, frame))
    True
    """
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        raise TypeError(f"result_html expects a dataclass instance, got {type(result).__name__}.")
    rows = "".join(
        f"<tr><th style='text-align:left'>{html.escape(f.name)}</th>"
        f"<td style='text-align:left'>{html.escape(_field(f.name, getattr(result, f.name)))}"
        "</td></tr>"
        for f in dataclasses.fields(result)
    )
    caption = html.escape(title or type(result).__name__)
    return f"<table><caption>{caption}</caption>{rows}</table>"


_TABLE_STYLE = (
    "<style>"
    ".recoverylab-table{border-collapse:collapse;font-variant-numeric:tabular-nums;"
    "max-width:100%}"
    ".recoverylab-table th{white-space:normal;vertical-align:bottom;text-align:right;"
    "padding:2px 8px;border-bottom:1px solid #999;max-width:9em}"
    ".recoverylab-table td{white-space:nowrap;text-align:right;padding:2px 8px}"
    ".recoverylab-table .key{text-align:left}"
    "</style>"
)


@dataclasses.dataclass(frozen=True)
class ResultTable:
    """A result frame shown for reading: the main columns, rates in pp with ``n``, p rounded.

    Jupyter displays it with :meth:`_repr_html_`; ``frame`` is the result, unchanged. The
    columns, labels and number formats are the command line's (``recoverylab paired`` ...):
    row keys, denominators, rates in percentage points with their intervals, p to two
    significant digits; a null group key reads ``all``. Headers wrap, so the table fits the
    notebook's width.

    Attributes
    ----------
    frame
        The result frame.
    wide
        Show every column instead of the main ones.
    """

    frame: pl.DataFrame
    wide: bool = False

    def to_html(self) -> str:
        """Render the table as HTML (a ``<table class="recoverylab-table">``)."""
        shown = shown_columns(self.frame, wide=self.wide)
        escaped = [_escape(c.cells).alias(str(i)) for i, c in enumerate(shown)]
        cells = [
            pl.concat_str(
                pl.lit(f'<td class="{"key" if c.key else "value"}">'),
                pl.col(str(i)),
                pl.lit("</td>"),
            )
            for i, c in enumerate(shown)
        ]
        rows = (
            self.frame.select(escaped)
            .select(pl.concat_str([pl.lit("<tr>"), *cells, pl.lit("</tr>")]).str.join(""))
            .item()
            if self.frame.height
            else ""
        )
        head = "".join(
            f'<th class="{"key" if c.key else "value"}">{html.escape(c.header)}</th>' for c in shown
        )
        note = (
            ""
            if self.wide or len(shown) == len(shown_columns(self.frame, wide=True))
            else "; main columns (<code>report.show(frame, wide=True)</code> shows every one)"
        )
        rows_text = "1 row" if self.frame.height == 1 else f"{self.frame.height:,} rows"
        return (
            f'{_TABLE_STYLE}<div style="max-width:100%;overflow-x:auto">'
            f'<table class="recoverylab-table"><thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table><small>{rows_text}{note}</small></div>"
        )

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr__(self) -> str:
        return f"ResultTable({self.frame.height} rows × {self.frame.width} columns)"


def _escape(expr: pl.Expr) -> pl.Expr:
    for old, new in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;")):
        expr = expr.str.replace_all(old, new, literal=True)
    return expr


def show(frame: pl.DataFrame | pl.LazyFrame, *, wide: bool = False) -> ResultTable:
    """Show a result frame in a notebook: rates in pp with their ``n``, fitting the page.

    Parameters
    ----------
    frame
        A result frame of a protocol function (collected if lazy).
    wide
        Every column instead of the main ones (keys, denominators, rates, p).

    Returns
    -------
    ResultTable
        Displays as an HTML table in Jupyter; its ``frame`` is ``frame`` unchanged.

    Examples
    --------
    >>> import polars as pl
    >>> table = show(pl.DataFrame({"condition": [None], "n": [300], "gain": [0.03]}))
    >>> ">all</td>" in table.to_html() and "+3.0" in table.to_html()
    True
    """
    eager = frame.collect() if isinstance(frame, pl.LazyFrame) else frame
    return ResultTable(eager, wide=wide)
