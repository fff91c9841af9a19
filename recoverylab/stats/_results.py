"""Result objects of the statistics and their display (Jupyter HTML and a readable repr).

Non-frame results are frozen dataclasses with named fields (STYLE §6): the bootstrap's estimate,
interval and distribution, a sign-flip test's statistic, p-value and method, an interval's two
bounds. :class:`ResultHtml` gives them, and the protocols' own result classes, one rendering:
arrays and frames summarised by size, p-values as in every table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from html import escape
from typing import ClassVar

import numpy as np
import polars as pl

from recoverylab._display import p_str


def _html_value(value: object, name: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, float | np.floating):
        # a p-value as in every table: two significant digits, < 0.001
        return p_str(float(value)) if name == "p_value" else f"{float(value):.6g}"
    if isinstance(value, np.ndarray):
        if value.size <= 6:
            return ", ".join(_html_value(v) for v in value.ravel().tolist())
        return f"array of {value.size:,} values ({value.dtype})"
    if isinstance(value, pl.DataFrame):
        return f"DataFrame: {value.height:,} rows × {value.width} columns"
    if isinstance(value, pl.LazyFrame):
        names = ", ".join(value.collect_schema().names())
        return f"LazyFrame with columns {names} (not collected)"
    return str(value)


def result_html(result: object, *, title: str | None = None) -> str:
    """Render a result dataclass as a small two-column HTML table (field, value).

    The one HTML renderer of recoverylab's non-frame results. Arrays (e.g. a bootstrap
    distribution) and frames are summarised by size, so a result displays instantly in Jupyter.

    Parameters
    ----------
    result
        A dataclass instance (e.g. :class:`BootstrapResult`).
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
    >>> "<caption>Interval</caption>" in result_html(Interval(0.1, 0.2))
    True
    """
    if not is_dataclass(result) or isinstance(result, type):
        raise TypeError(f"result_html expects a dataclass instance, got {type(result).__name__}.")
    rows = "".join(
        f"<tr><th style='text-align:left'>{escape(f.name)}</th>"
        f"<td style='text-align:left'>{escape(_html_value(getattr(result, f.name), f.name))}"
        "</td></tr>"
        for f in fields(result)
    )
    caption = escape(title or type(result).__name__)
    return f"<table><caption>{caption}</caption>{rows}</table>"


class ResultHtml:
    """Mixin: show a result dataclass readably (arrays and frames summarised, p rounded).

    Protocol modules use it for their non-frame results: a small table in Jupyter, and a
    one-line repr where a p-value reads as in every table (two significant digits,
    ``< 0.001``). Result classes set ``repr=False`` on their ``@dataclass`` to use this repr.
    """

    def _repr_html_(self) -> str:
        return result_html(self)

    def __repr__(self) -> str:
        parts = ", ".join(
            f"{item.name}={_repr_text(item.name, getattr(self, item.name))}"
            for item in fields(self)  # type: ignore[arg-type]
            if item.repr  # the repr leaves out e.g. the distribution
        )
        return f"{type(self).__name__}({parts})"


def _repr_text(name: str, value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"array of {value.size:,} values"
    if isinstance(value, (pl.DataFrame, pl.LazyFrame)):
        return f"{type(value).__name__} with columns {', '.join(value.collect_schema().names())}"
    if isinstance(value, float):
        return p_str(value) if name == "p_value" else f"{value:.6g}"
    return repr(value)


@dataclass(frozen=True, repr=False)
class BootstrapResult(ResultHtml):
    """A cluster-bootstrap estimate with its confidence interval and resampling distribution.

    Attributes
    ----------
    estimate
        The statistic on the observed clusters.
    ci_low, ci_high
        The confidence interval; NaN when it cannot be computed (e.g. every resample is NaN).
    confidence
        The confidence level, e.g. 0.95.
    method
        ``"percentile"`` or ``"bca"``.
    n_resamples
        Number of bootstrap resamples.
    n_clusters
        Number of clusters K (the sum of the type counts).
    distribution
        The resampled statistics, length ``n_resamples`` (read-only; NaN where undefined).
        Equality of results compares the other fields, not this array.
    """

    estimate: float
    ci_low: float
    ci_high: float
    confidence: float
    method: str
    n_resamples: int
    n_clusters: int
    distribution: np.ndarray = field(repr=False, compare=False)


@dataclass(frozen=True, repr=False)
class SignFlipResult(ResultHtml):
    """The result of a paired sign-flip (permutation) test.

    Attributes
    ----------
    statistic
        The observed sum of per-cluster differences, T = Σ dᵢ.
    p_value
        Under random independent signs (Monte Carlo: with the +1 correction): P(|T*| ≥ |T|)
        two-sided, P(T* ≥ T) for ``"greater"``, P(T* ≤ T) for ``"less"``.
    method
        ``"exact-convolution"``, ``"exact-enumeration"`` or ``"monte-carlo"``.
    n_clusters
        Number of clusters, zero differences included.
    n_resamples
        Monte Carlo resamples, or None for the exact methods.
    alternative
        ``"two-sided"``, ``"greater"`` or ``"less"``.
    """

    statistic: float
    p_value: float
    method: str
    n_clusters: int
    n_resamples: int | None
    alternative: str = "two-sided"


@dataclass(frozen=True, repr=False)
class TestResult(ResultHtml):
    """The result of a classical test.

    Attributes
    ----------
    statistic
        The test statistic (documented by the function that returns it).
    p_value
        The p-value.
    method
        How the p-value was computed, e.g. ``"exact-binomial"``.
    """

    __test__: ClassVar[bool] = False  # keep pytest from collecting this class as a test

    statistic: float
    p_value: float
    method: str


@dataclass(frozen=True, repr=False)
class Interval(ResultHtml):
    """Lower and upper bounds of an interval (arrays when computed for arrays of inputs)."""

    low: np.ndarray | float
    high: np.ndarray | float


@dataclass(frozen=True)
class IntervalExprs:
    """Polars expressions for the bounds of an interval, named ``ci_low`` and ``ci_high``.

    Unpacks like a pair: ``frame.with_columns(*wilson_exprs("k", "n"))``.
    """

    low: pl.Expr
    high: pl.Expr

    def __iter__(self) -> Iterator[pl.Expr]:
        return iter((self.low, self.high))
