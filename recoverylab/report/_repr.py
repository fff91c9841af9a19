"""HTML rendering of non-frame results (frozen dataclasses) for Jupyter."""

from __future__ import annotations

import dataclasses
import html

import numpy as np
import polars as pl

__all__ = ["result_html"]


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
        f"<td style='text-align:left'>{html.escape(_value(getattr(result, f.name)))}</td></tr>"
        for f in dataclasses.fields(result)
    )
    caption = html.escape(title or type(result).__name__)
    return f"<table><caption>{caption}</caption>{rows}</table>"
