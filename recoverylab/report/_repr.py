"""HTML rendering of result frames for Jupyter (:func:`show`); dataclasses use stats.result_html."""

from __future__ import annotations

import dataclasses
import html

import polars as pl

from recoverylab._display import shown_columns
from recoverylab.report._tables import _escape

__all__ = ["ResultTable", "show"]


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
        cells = [
            pl.concat_str(
                pl.lit(f'<td class="{"key" if c.key else "value"}">'),
                _escape(c.cells),
                pl.lit("</td>"),
            )
            for c in shown
        ]
        rows = (
            self.frame.select(
                pl.concat_str([pl.lit("<tr>"), *cells, pl.lit("</tr>")]).str.join("")
            ).item()
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
    return ResultTable(frame.collect() if isinstance(frame, pl.LazyFrame) else frame, wide=wide)
