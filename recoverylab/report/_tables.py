"""HTML tables of result frames: rates in percentage points, with ``n`` beside every rate.

The cells are built with polars expressions (no loop over rows): each column becomes a string
expression, a row is their concatenation, the table body is the join of the rows.

Every shown value sits in an element whose ``data-column`` names the frame column it shows (a
key cell, a count, a p-value, a rate and each bound of its interval, a denominator), so a reader
or a test can check every number against the result it came from. A denominator looked up on
another row of the same result (the clean episodes of a policy's overall row) says which row
with ``data-row-<key>="<value>"``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from recoverylab._display import MISSING, decimal_text, p_text
from recoverylab._errors import SchemaError
from recoverylab.report._common import ALL

__all__ = ["Count", "Key", "PValue", "Rate", "RowLookupRate", "leveled_table", "table_html"]


@dataclass(frozen=True)
class Key:
    """A grouping column shown as text (null as ``all``)."""

    column: str
    title: str | None = None


@dataclass(frozen=True)
class Count:
    """An integer (or plain number) column shown as is."""

    column: str
    title: str | None = None
    digits: int = 0
    """Decimals shown (0 for counts; 1 for other decimals, e.g. mean steps)."""


@dataclass(frozen=True)
class Rate:
    """A fraction column shown in percentage points, its interval after it, its ``n`` beside.

    Attributes
    ----------
    column
        The rate (a fraction).
    n
        The column holding its denominator.
    title
        Header of the rate.
    n_title
        Header of the denominator (default ``n``).
    ci
        ``(low, high)`` columns of its interval, if any.
    signed
        Show a ``+`` on positive values (differences, gains, effects).
    """

    column: str
    n: str
    title: str | None = None
    n_title: str = "n"
    ci: tuple[str, str] | None = None
    signed: bool = False


@dataclass(frozen=True)
class PValue:
    """A p-value: two significant digits, ``< 0.001`` below (as everywhere in recoverylab)."""

    column: str = "p_value"
    title: str = "p"


Column = Key | Count | Rate | PValue


def _escape(expr: pl.Expr) -> pl.Expr:
    for old, new in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;")):
        expr = expr.str.replace_all(old, new, literal=True)
    return expr


def _attribute(name: str) -> str:
    return html.escape(name, quote=True)


def _cell(content: pl.Expr, css: str, column: str) -> pl.Expr:
    """Return a ``<td>`` showing one value of ``column`` (``—`` when it is null)."""
    return pl.concat_str(
        pl.lit(f'<td class="{css}" data-column="{_attribute(column)}">'),
        content.fill_null(MISSING),
        pl.lit("</td>"),
    )


def _value(content: pl.Expr, column: str) -> pl.Expr:
    """Return a ``<span>`` showing one value of ``column``; null when the value is null."""
    return pl.concat_str(
        pl.lit(f'<span data-column="{_attribute(column)}">'), content, pl.lit("</span>")
    )


def _rate_cell(column: Rate) -> pl.Expr:
    """Return the rate cell: the rate in pp and its interval, each value in its own element."""
    shown = decimal_text(column.column, 1, scale=100, signed=column.signed).fill_null(MISSING)
    rate = _value(shown, column.column)
    if column.ci is not None:
        low, high = (_value(decimal_text(c, 1, scale=100), c) for c in column.ci)
        interval = pl.concat_str(
            pl.lit(' <span class="ci">['), low, pl.lit(", "), high, pl.lit("]</span>")
        )
        rate = pl.concat_str(rate, interval.fill_null(""))
    return pl.concat_str(pl.lit('<td class="rate">'), rate, pl.lit("</td>"))


def _n_cell(column: Rate) -> pl.Expr:
    if not isinstance(column, RowLookupRate):
        return _cell(decimal_text(column.n, 0), "n", column.n)
    # the denominator is the value of `source` on another row of the result: say which (a
    # row without that other row has no denominator to show, and no value to point to)
    key = _escape(pl.col(column.row_key[1]).cast(pl.String))
    looked_up = pl.concat_str(
        pl.lit(f'<td class="n" data-column="{_attribute(column.source)}" '),
        pl.lit(f'data-row-{_attribute(column.row_key[0])}="'),
        key,
        pl.lit('">'),
        decimal_text(column.n, 0),
        pl.lit("</td>"),
    )
    return looked_up.fill_null(pl.lit(f'<td class="n">{MISSING}</td>'))


def _cells(column: Column | _RateOnly) -> list[pl.Expr]:
    if isinstance(column, _RateOnly):
        return _cells(column.rate)[:1]
    if isinstance(column, Key):
        text = _escape(pl.col(column.column).cast(pl.String).fill_null(ALL))
        return [_cell(text, "key", column.column)]
    if isinstance(column, Count):
        return [_cell(decimal_text(column.column, column.digits), "count", column.column)]
    if isinstance(column, PValue):
        return [_cell(_escape(p_text(column.column)), "count", column.column)]
    return [_rate_cell(column), _n_cell(column)]


def _th(text: str, css: str) -> str:
    return f'<th class="{css}" scope="col">{html.escape(text)}</th>'


def _headers(column: Column | _RateOnly, level: str) -> str:
    if isinstance(column, _RateOnly):
        return _headers(column.rate, level).rsplit("<th", 1)[0]
    if isinstance(column, Key):
        return _th(column.title or column.column, "key")
    if isinstance(column, Count | PValue):
        return _th(column.title or column.column, "count")
    title = f"{column.title or column.column}, pp"
    if column.ci is not None:
        title += f" [{level} CI]" if level else " [CI]"
    return _th(title, "rate") + _th(column.n_title, "n")


def _share_denominators(columns: Sequence[Column]) -> list[Column | _RateOnly]:
    """Each denominator once: after the last of the first run of rates over it.

    ``base rate | policy rate | gain | n`` reads as three rates of one denominator and keeps
    a wide table narrow; a rate whose neighbour has another denominator keeps its own ``n``,
    and a later rate over a denominator already shown does not repeat it (one label, one
    column: a header row never names the same ``n`` twice).
    """
    shown: list[Column | _RateOnly] = []
    seen: set[tuple[str, str]] = set()
    for column, following in zip(columns, [*columns[1:], None], strict=True):
        if not isinstance(column, Rate):
            shown.append(column)
            continue
        denominator = (column.n, column.n_title)
        shares = isinstance(following, Rate) and (following.n, following.n_title) == denominator
        if shares or denominator in seen:
            shown.append(_RateOnly(column))
        else:
            shown.append(column)
            seen.add(denominator)
    return shown


@dataclass(frozen=True)
class RowLookupRate(Rate):
    """A rate whose denominator is a value on another row of the same result.

    A policy's overall row carries the clean-touch rate of all its clean episodes; their number
    is the ``n`` of the clean condition's row. The frame holds that value in ``n`` (a display
    column joined from that row); the cell names where it comes from: the column ``source`` of
    the row whose key ``row_key[0]`` has the value held in the frame column ``row_key[1]``.
    """

    source: str = "n"
    row_key: tuple[str, str] = ("condition", "condition")


@dataclass(frozen=True)
class _RateOnly:
    """A rate shown without its ``n`` (the next rate, of the same ``n``, shows it)."""

    rate: Rate


def _needed(column: Column) -> list[str]:
    if isinstance(column, RowLookupRate):
        return [column.column, column.n, column.row_key[1], *(column.ci or ())]
    if isinstance(column, Rate):
        return [column.column, column.n, *(column.ci or ())]
    return [column.column]


def table_html(
    frame: pl.DataFrame | pl.LazyFrame,
    columns: Sequence[Column],
    *,
    caption: str | None = None,
) -> str:
    """Render a result frame as an HTML table: rates in pp, each followed by its ``n`` column.

    Parameters
    ----------
    frame
        A result frame (collected if lazy); its row order is kept.
    columns
        What to show, in order: :class:`Key` (text), :class:`Count` (numbers) and
        :class:`Rate` (a fraction in percentage points with its interval, then its ``n``).
    caption
        Optional table caption.

    Returns
    -------
    str
        A ``<table class="result">`` element; nulls show as ``—`` (a null key as ``all``). An
        interval's header says ``[CI]``: the frame does not say its level (a section's table
        names it, from its provenance).

    Raises
    ------
    SchemaError
        When the frame lacks a column named in ``columns``.

    Examples
    --------
    >>> import polars as pl
    >>> frame = pl.DataFrame({"regime": ["recoverable"], "ts": [0.525], "n": [200]})
    >>> html = table_html(frame, [Key("regime"), Rate("ts", "n", "TS")])
    >>> "52.5" in html and ">200<" in html
    True
    """
    return leveled_table(frame, columns, caption=caption)


def leveled_table(
    frame: pl.DataFrame | pl.LazyFrame,
    columns: Sequence[Column],
    *,
    caption: str | None = None,
    level: str = "",
) -> str:
    """Render as :func:`table_html`, the intervals' headers naming their ``level`` ("95%")."""
    eager = frame.collect() if isinstance(frame, pl.LazyFrame) else frame
    missing = [c for column in columns for c in _needed(column) if c not in eager.columns]
    if missing:
        raise SchemaError(
            f"report table: the frame has no column {', '.join(f'`{c}`' for c in missing)}; "
            f"its columns are: {', '.join(eager.columns)}."
        )
    shown = _share_denominators(columns)
    head = "".join(_headers(column, level) for column in shown)
    cells = [cell for column in shown for cell in _cells(column)]
    if eager.height:
        rows = eager.select(
            pl.concat_str([pl.lit("<tr>"), *cells, pl.lit("</tr>")]).str.join("")
        ).item()
    else:
        rows = f'<tr><td colspan="{len(cells)}" class="empty">no rows</td></tr>'
    caption_html = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return (
        f'<table class="result">{caption_html}<thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )
