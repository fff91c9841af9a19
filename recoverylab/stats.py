"""The statistics engine: cluster bootstrap, sign-flip tests and Wilson intervals.

Every metric in recoverylab is first computed as additive per-cluster partials (ARCHITECTURE §3,
principle 3), and the statistics here work on those partials, so that confidence intervals and
tests respect clustering (a task, a workflow, a case) and cost what the number of clusters costs,
never rows × resamples.

The central idea (ARCHITECTURE §4): resampling K clusters with replacement is the same as drawing
multinomial counts over the distinct cluster *types* (distinct rows of partial values) with
probabilities ``count / K``. The engine therefore takes types with counts, and a cell with a
million tasks but three types costs about three numbers per resample. Polars appears only in the
frame-facing wrappers (:func:`cluster_bootstrap`, :func:`sign_flip_cells`, :func:`wilson_exprs`).

Randomness is explicit and per cell: :func:`cell_rng` derives a generator from the seed and a
stable hash of the cell key, so a cell's interval or p-value does not depend on which other cells
exist, on their order, or on the machine.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from html import escape
from typing import Any, ClassVar

import numpy as np
import polars as pl
from scipy import special

from recoverylab._display import p_str
from recoverylab._errors import ParameterError, SchemaError, format_keys, require_one_of

__all__ = [
    "CI_METHODS",
    "BootstrapResult",
    "Interval",
    "IntervalExprs",
    "ResultHtml",
    "SignFlipResult",
    "TestResult",
    "bootstrap_types",
    "cell_rng",
    "check_resampling",
    "cluster_bootstrap",
    "icc_oneway",
    "mcnemar_exact",
    "paired_effect_cells",
    "ratio",
    "ratio_difference",
    "result_html",
    "sign_flip_cells",
    "sign_flip_test",
    "wilson_exprs",
    "wilson_interval",
]

Statistic = Callable[[np.ndarray], np.ndarray]
"""A statistic maps column sums of shape ``(..., V)`` to values of shape ``(...)``."""

#: Upper bound on the elements of one resampling batch (resamples × types), to bound memory.
_MAX_BATCH_ELEMENTS = 5_000_000
#: Largest number of nonzero clusters whose 2**n sign vectors are enumerated exactly.
_MAX_ENUMERATION = 20
#: Largest lattice (support of the summed null distribution) built for the exact convolution.
_MAX_LATTICE = 2**23
#: Below this product of lengths np.convolve is exact and cheap; above it, FFT convolution.
_DIRECT_CONVOLVE_MAX = 4_000_000
#: Largest number of nonzero clusters sent to ``scipy.stats.permutation_test`` for Monte Carlo.
#: scipy materialises every resample × cluster; above this the per-type draws are much faster.
_SCIPY_MC_MAX_CLUSTERS = 1_000
#: Relative tolerance for float ties in sign-flip tests (scipy uses the same 100 eps).
_TIE_RTOL = 100 * float(np.finfo(np.float64).eps)
#: Integers above this are not exactly representable as float64.
_MAX_EXACT_INT = 2.0**53

_BOOTSTRAP_METHODS = ("percentile", "bca")
_SIGN_FLIP_METHODS = ("auto", "exact", "monte-carlo")
_BOOTSTRAP_COLUMNS = ("estimate", "ci_low", "ci_high", "n_clusters")
_SIGN_FLIP_COLUMNS = ("statistic", "p_value", "p_method")
_N = "__recoverylab_n"
_BAD = "__recoverylab_bad"


# --------------------------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------------------------


def _html_value(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, float | np.floating):
        return f"{float(value):.6g}"
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
    distribution) and frames are summarised by their size, never printed in full, so a result
    displays instantly in Jupyter.

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
        f"<td style='text-align:left'>{escape(_field_text(f.name, getattr(result, f.name)))}"
        "</td></tr>"
        for f in fields(result)
    )
    caption = escape(title or type(result).__name__)
    return f"<table><caption>{caption}</caption>{rows}</table>"


def _field_text(name: str, value: object) -> str:
    if name == "p_value" and isinstance(value, float | np.floating):
        return p_str(float(value))  # as in every table: two significant digits, < 0.001
    return _html_value(value)


class ResultHtml:
    """Mixin: show a result dataclass readably (arrays and frames summarised, p rounded).

    Protocol modules use it for their own non-frame results, so every result displays well:
    as a small table in Jupyter, and as a one-line repr in which a p-value reads as it does in
    every table (two significant digits, ``< 0.001``). Result classes set ``repr=False`` on
    their ``@dataclass`` so this repr is used.
    """

    def _shown(self, *, every: bool = True) -> list[tuple[str, str]]:
        shown = []
        for item in fields(self):  # type: ignore[arg-type]
            if not (every or item.repr):  # the repr leaves out e.g. the distribution
                continue
            value = getattr(self, item.name)
            if isinstance(value, np.ndarray):
                text = f"array of {value.size:,} values"
            elif isinstance(value, (pl.DataFrame, pl.LazyFrame)):
                columns = ", ".join(value.collect_schema().names())
                text = f"{type(value).__name__} with columns {columns}"
            elif isinstance(value, float) and item.name == "p_value":
                text = p_str(value)
            elif isinstance(value, float):
                text = f"{value:.6g}"
            elif not every:  # the repr: strings quoted, None as None
                text = repr(value)
            else:
                text = "—" if value is None else str(value)
            shown.append((item.name, text))
        return shown

    def _repr_html_(self) -> str:
        return result_html(self)

    def __repr__(self) -> str:
        parts = ", ".join(f"{name}={text}" for name, text in self._shown(every=False))
        return f"{type(self).__name__}({parts})"


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
    """The result of a two-sided paired sign-flip (permutation) test.

    Attributes
    ----------
    statistic
        The observed sum of per-cluster differences, T = Σ dᵢ.
    p_value
        P(|T*| ≥ |T|) under random independent signs (Monte Carlo: with the +1 correction).
    method
        ``"exact-convolution"``, ``"exact-enumeration"`` or ``"monte-carlo"``.
    n_clusters
        Number of clusters, zero differences included.
    n_resamples
        Monte Carlo resamples, or None for the exact methods.
    """

    statistic: float
    p_value: float
    method: str
    n_clusters: int
    n_resamples: int | None


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


# --------------------------------------------------------------------------------------------
# Randomness
# --------------------------------------------------------------------------------------------


def cell_rng(seed: int, key: tuple) -> np.random.Generator:
    """Return a random generator derived from a seed and a cell's key values.

    The interval or p-value of one cell must not depend on which other cells exist, on their
    order, or on the process or machine. The key is rendered to a canonical text (type and
    ``repr`` of each value, so ``1`` and ``1.0`` and ``"1"`` are different keys), hashed with
    SHA-256, and the digest joins the seed in a :class:`numpy.random.SeedSequence`. Python's
    ``hash()`` is never used: it is salted per process for strings.

    Parameters
    ----------
    seed
        A non-negative integer.
    key
        The cell's key values, e.g. ``("stale2", 4, "refresh")``; ``None`` is a valid value.

    Returns
    -------
    numpy.random.Generator
        A fresh generator; the same (seed, key) always gives the same stream.

    Raises
    ------
    ParameterError
        If ``seed`` is not a non-negative integer or ``key`` is not a tuple.

    Examples
    --------
    >>> a = cell_rng(0, ("clean", 1)).random()
    >>> b = cell_rng(0, ("clean", 1)).random()
    >>> a == b
    True
    """
    seed = _check_seed("seed", seed)
    if not isinstance(key, tuple):
        raise ParameterError(
            f"parameter `key` is a {type(key).__name__}; it must be a tuple of key values. "
            f"Hint: write ({key!r},) for a one-column key."
        )
    digest = hashlib.sha256(_canonical(key).encode("utf-8")).digest()
    words = tuple(int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4))
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=words))


def _canonical(value: object) -> str:
    """Render a key value as text that is identical across processes and machines."""
    if value is None:
        return "None"
    if isinstance(value, tuple):
        return "(" + ",".join(_canonical(v) for v in value) + ",)"
    if isinstance(value, np.generic):
        value = value.item()
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}:{value!r}"


def _as_generator(rng: object) -> np.random.Generator:
    """Turn ``rng`` (None, a Generator or a seed) into a Generator; None means seed 0."""
    if rng is None:
        # STYLE §7: the default is fixed so that two runs agree.
        return np.random.default_rng(0)
    if isinstance(rng, np.random.Generator):
        return rng
    if _is_int(rng) and int(rng) >= 0:  # type: ignore[call-overload]
        return np.random.default_rng(int(rng))  # type: ignore[call-overload]
    raise ParameterError(
        f"parameter `rng` is {rng!r}; it must be None, a numpy Generator or a non-negative "
        "integer seed."
    )


# --------------------------------------------------------------------------------------------
# Parameter checks
# --------------------------------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def _check_seed(name: str, value: object) -> int:
    if not _is_int(value) or int(value) < 0:  # type: ignore[call-overload]
        raise ParameterError(f"parameter `{name}` is {value!r}; it must be a non-negative integer.")
    return int(value)  # type: ignore[call-overload]


def _check_n_resamples(value: object) -> int:
    if not _is_int(value) or int(value) < 1:  # type: ignore[call-overload]
        raise ParameterError(f"parameter `n_resamples` is {value!r}; it must be an integer >= 1.")
    return int(value)  # type: ignore[call-overload]


def _check_confidence(value: object) -> float:
    ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )
    if not ok or not 0.0 < float(value) < 1.0:  # type: ignore[arg-type]
        raise ParameterError(
            f"parameter `confidence` is {value!r}; it must be a number strictly between 0 and 1, "
            "e.g. 0.95."
        )
    return float(value)  # type: ignore[arg-type]


#: Interval methods of the cluster bootstrap (``ci_method`` of every protocol).
CI_METHODS = ("percentile", "bca")


def check_resampling(
    *, confidence: object, n_resamples: object, seed: object, ci_method: object = "percentile"
) -> None:
    """Check the resampling parameters every protocol shares, before any data is read.

    The one parameter-validation helper of recoverylab (ARCHITECTURE §4): the same names and
    the same messages in every protocol.

    Raises
    ------
    ParameterError
        For a ``confidence`` outside (0, 1), ``n_resamples`` < 1, a negative or non-integer
        ``seed``, or a ``ci_method`` that is not ``"percentile"`` or ``"bca"``.

    Examples
    --------
    >>> check_resampling(confidence=0.95, n_resamples=1000, seed=0, ci_method="bca")
    """
    require_one_of("ci_method", ci_method, CI_METHODS)
    _check_confidence(confidence)
    _check_n_resamples(n_resamples)
    _check_seed("seed", seed)


def _check_statistic(statistic: object) -> Statistic:
    if not callable(statistic):
        raise ParameterError(
            f"parameter `statistic` is {statistic!r}; it must be a function of column sums, "
            "e.g. recoverylab.stats.ratio."
        )
    return statistic


def _numeric_array(name: str, data: object) -> np.ndarray:
    array = np.asarray(data)
    if array.dtype.kind not in "biuf":
        raise ParameterError(
            f"parameter `{name}` has dtype {array.dtype}; it must hold numbers (int or float)."
        )
    return array


def _check_counts(counts: object, length: int, rows: str) -> np.ndarray:
    """Check that ``counts`` holds one positive integer per type and return it as int64."""
    array = _numeric_array("counts", counts)
    if array.ndim != 1 or array.shape[0] != length:
        raise ParameterError(
            f"parameter `counts` has shape {array.shape} but there are {length} {rows}; give one "
            "count per type."
        )
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(array) | (array < 1) | (array != np.round(array))
    if bad.any():
        where = np.flatnonzero(bad)
        shown = format_keys((f"row {i}: {array[i]}" for i in where), total=where.size)
        raise ParameterError(
            f"parameter `counts` has {where.size} entries that are not positive integers "
            f"({shown}); each count is a number of clusters >= 1."
        )
    return array.astype(np.int64)


def _merge_types(values: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge identical rows and sort them, so results depend on the multiset of clusters only."""
    # Adding 0.0 turns -0.0 into 0.0, so the two zeros are one type.
    values = values + 0.0
    # lexsort's last key is the primary one: sort by column 0, then 1, ... (np.unique(axis=0)
    # sorts a void view and is ~50x slower on a million rows).
    order = np.lexsort(values.T[::-1])
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate([[True], (ordered[1:] != ordered[:-1]).any(axis=1)]))
    return ordered[starts], np.add.reduceat(counts[order], starts)


# --------------------------------------------------------------------------------------------
# Statistics of column sums
# --------------------------------------------------------------------------------------------


def ratio(sums: np.ndarray) -> np.ndarray:
    """Return the ratio of the first two column sums, numerator / denominator.

    A zero denominator gives NaN (an undefined rate), never a warning or an infinity.

    Parameters
    ----------
    sums
        Array of shape ``(..., V)`` with V >= 2: column 0 the numerator, column 1 the denominator.

    Returns
    -------
    numpy.ndarray
        Array of shape ``(...)``.

    Examples
    --------
    >>> ratio(np.array([[3.0, 4.0], [1.0, 0.0]]))
    array([0.75,  nan])
    """
    sums = np.asarray(sums, dtype=np.float64)
    return _safe_divide(sums[..., 0], sums[..., 1])


def ratio_difference(sums: np.ndarray) -> np.ndarray:
    """Return the difference of two ratios, ``sums[0]/sums[1] - sums[2]/sums[3]``.

    Used for contrasts of two cells resampled jointly: each cluster's row carries the partials of
    both cells (zeros where the cluster is absent from one), so the same cluster draws serve both
    (ARCHITECTURE §4).

    Parameters
    ----------
    sums
        Array of shape ``(..., V)`` with V >= 4.

    Returns
    -------
    numpy.ndarray
        Array of shape ``(...)``; NaN where either denominator is zero.

    Examples
    --------
    >>> ratio_difference(np.array([3.0, 4.0, 1.0, 2.0]))
    array(0.25)
    """
    sums = np.asarray(sums, dtype=np.float64)
    return np.asarray(
        _safe_divide(sums[..., 0], sums[..., 1]) - _safe_divide(sums[..., 2], sums[..., 3])
    )


ICC_COLUMNS = ("sum_sq_over_m", "sum", "sum_sq", "m", "m_sq", "one")
"""Per-cluster partials :func:`icc_oneway` expects, in order: S²/m, S, Q, m, m², 1."""


def icc_oneway(sums: np.ndarray) -> np.ndarray:
    """Return the one-way ANOVA intra-class correlation from column sums of cluster partials.

    Each cluster i with mᵢ observations xᵢⱼ contributes Sᵢ²/mᵢ, Sᵢ = Σⱼ xᵢⱼ, Qᵢ = Σⱼ xᵢⱼ²,
    mᵢ, mᵢ² and 1 (:data:`ICC_COLUMNS`), so the ICC is a statistic of column sums and the
    cluster bootstrap (:func:`bootstrap_types`) gives its interval at the cost of the cluster
    types. With N = Σmᵢ and K clusters: MSB = (ΣSᵢ²/mᵢ − (ΣSᵢ)²/N)/(K − 1), MSW = (ΣQᵢ −
    ΣSᵢ²/mᵢ)/(N − K), m₀ = (N − Σmᵢ²/N)/(K − 1) and ICC = (MSB − MSW)/(MSB + (m₀ − 1)·MSW)
    (the unbalanced one-way estimator; it may be negative). NaN when undefined: fewer than two
    clusters, no cluster with two observations, or no variation at all.

    Parameters
    ----------
    sums
        Array of shape ``(..., 6)``.

    Returns
    -------
    numpy.ndarray
        Array of shape ``(...)``.

    Examples
    --------
    Two clusters, each with two equal values (perfect agreement within clusters):

    >>> rows = np.array([[0.0, 0, 0, 2, 4, 1], [2.0, 2, 2, 2, 4, 1]])
    >>> float(icc_oneway(rows.sum(axis=0)))
    1.0
    """
    sums = np.asarray(sums, dtype=np.float64)
    s2m, s, q, n, n2, k = (sums[..., i] for i in range(6))
    with np.errstate(divide="ignore", invalid="ignore"):
        msb = (s2m - s * s / n) / (k - 1)
        msw = (q - s2m) / (n - k)
        m0 = (n - n2 / n) / (k - 1)
        denominator = msb + (m0 - 1) * msw
        out = np.asarray((msb - msw) / denominator, dtype=np.float64)
    undefined = (k < 2) | (n - k < 1) | ~(np.abs(denominator) > 1e-12 * (1 + np.abs(msb)))
    return np.where(undefined, np.nan, out)


def _safe_divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.asarray(numerator / denominator, dtype=np.float64)
    return np.where(denominator == 0, np.nan, out)


# --------------------------------------------------------------------------------------------
# Cluster bootstrap on types
# --------------------------------------------------------------------------------------------


def bootstrap_types(
    values: np.ndarray | Sequence[Sequence[float]],
    counts: np.ndarray | Sequence[int],
    statistic: Statistic = ratio,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    method: str = "percentile",
    rng: np.random.Generator | int | None = None,
) -> BootstrapResult:
    """Bootstrap a statistic of column sums by resampling clusters, given as types with counts.

    Resampling K clusters with replacement equals drawing multinomial counts over the distinct
    cluster types with probabilities ``counts / K`` (ARCHITECTURE §4), so the cost per resample is
    the number of types, not clusters. Each resample draws ``M ~ Multinomial(K, counts / K)``,
    sums ``M @ values`` and applies ``statistic``. Types are merged and sorted first, so the
    result depends only on the multiset of clusters (and the generator), not on row order or on
    whether clusters are given one per row or grouped.

    Parameters
    ----------
    values
        Array of shape (T, V): one row per distinct cluster type, holding that cluster's partial
        sums (e.g. numerator, denominator).
    counts
        Array of shape (T,): how many clusters have each type (positive integers).
    statistic
        Maps column sums of shape ``(..., V)`` to ``(...)``; default :func:`ratio`.
        :func:`ratio_difference` serves contrasts of two cells with joint types.
    n_resamples
        Number of bootstrap resamples (>= 1).
    confidence
        Confidence level in (0, 1).
    method
        ``"percentile"`` (quantiles (1-c)/2 and (1+c)/2 of the distribution, NaN resamples
        ignored) or ``"bca"`` (bias-corrected and accelerated; the acceleration comes from the
        jackknife over clusters, computed once per type and weighted by counts).
    rng
        A numpy Generator, an integer seed, or None for seed 0.

    Returns
    -------
    BootstrapResult
        Estimate, interval, and the resampled distribution.

    Raises
    ------
    ParameterError
        For a bad shape, non-finite values, counts that are not positive integers, a confidence
        outside (0, 1), fewer than one resample, an unknown method, or a statistic that does not
        fit the value columns.

    Notes
    -----
    Degenerate cases give no warnings: when every resample is equal the BCa interval is
    ``[estimate, estimate]``; when all resamples are NaN the interval is NaN. With a single
    cluster (K = 1) the jackknife is undefined and the acceleration is taken as 0. If the
    estimate lies outside every resample, the BCa bias correction is capped at the
    ``1 / (2 n_resamples)`` quantile instead of becoming infinite.

    Examples
    --------
    Two clusters, one with 1 success in 1 trial and one with 0 in 1:

    >>> res = bootstrap_types([[1, 1], [0, 1]], [1, 1], n_resamples=2000, rng=1)
    >>> res.estimate, res.n_clusters
    (0.5, 2)
    >>> float(res.ci_low), float(res.ci_high)
    (0.0, 1.0)
    """
    values_a, counts_a, statistic, n_resamples, confidence, method, gen = _bootstrap_iv(
        values, counts, statistic, n_resamples, confidence, method, rng
    )
    n_clusters = int(counts_a.sum())
    total = counts_a.astype(np.float64) @ values_a
    estimate = float(_apply_statistic(statistic, total[np.newaxis, :], values_a.shape[1])[0])

    distribution = np.empty(n_resamples, dtype=np.float64)
    probabilities = counts_a / n_clusters
    batch = max(1, _MAX_BATCH_ELEMENTS // values_a.shape[0])
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        draws = gen.multinomial(n_clusters, probabilities, size=size)
        sums = draws.astype(np.float64) @ values_a
        distribution[start : start + size] = _apply_statistic(statistic, sums, values_a.shape[1])

    if method == "bca":
        low, high = _bca_interval(distribution, estimate, values_a, counts_a, statistic, confidence)
    else:
        low, high = _percentile_interval(distribution, confidence)
    distribution.setflags(write=False)
    return BootstrapResult(
        estimate=estimate,
        ci_low=float(low),
        ci_high=float(high),
        confidence=confidence,
        method=method,
        n_resamples=n_resamples,
        n_clusters=n_clusters,
        distribution=distribution,
    )


def _bootstrap_iv(
    values: object,
    counts: object,
    statistic: object,
    n_resamples: object,
    confidence: object,
    method: object,
    rng: object,
) -> tuple[np.ndarray, np.ndarray, Statistic, int, float, str, np.random.Generator]:
    """Validate and standardise the inputs of :func:`bootstrap_types` (one place, like scipy)."""
    values_a = _numeric_array("values", values)
    if values_a.ndim != 2 or values_a.shape[0] == 0 or values_a.shape[1] == 0:
        raise ParameterError(
            f"parameter `values` has shape {values_a.shape}; it must be a non-empty 2-D array "
            "(one row per cluster type, one column per partial sum)."
        )
    values_a = values_a.astype(np.float64)
    finite = np.isfinite(values_a).all(axis=1)
    if not finite.all():
        where = np.flatnonzero(~finite)
        shown = format_keys((f"row {i}" for i in where), total=where.size)
        raise ParameterError(
            f"parameter `values` has {where.size} rows with NaN or infinite entries ({shown}); "
            "partial sums must be finite."
        )
    counts_a = _check_counts(counts, values_a.shape[0], "rows in `values`")
    statistic = _check_statistic(statistic)
    n_resamples = _check_n_resamples(n_resamples)
    confidence = _check_confidence(confidence)
    require_one_of("method", method, _BOOTSTRAP_METHODS)
    gen = _as_generator(rng)
    values_a, counts_a = _merge_types(values_a, counts_a)
    return values_a, counts_a, statistic, n_resamples, confidence, str(method), gen


def _apply_statistic(statistic: Statistic, sums: np.ndarray, n_columns: int) -> np.ndarray:
    """Apply ``statistic`` to a batch of sums, checking that it returns one value per row."""
    try:
        # Undefined resamples (a zero denominator) become NaN and are handled by the intervals.
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.asarray(statistic(sums), dtype=np.float64)
    except IndexError as exc:
        raise ParameterError(
            f"parameter `statistic` cannot be applied to sums with {n_columns} value columns "
            f"({exc}). Hint: ratio needs 2 columns (numerator, denominator), ratio_difference 4."
        ) from exc
    if out.shape != sums.shape[:-1]:
        raise ParameterError(
            f"parameter `statistic` returned shape {out.shape} for sums of shape {sums.shape}; it "
            "must reduce the last axis only, returning one value per row."
        )
    return out


def _percentile_interval(distribution: np.ndarray, confidence: float) -> tuple[float, float]:
    kept = distribution[~np.isnan(distribution)]
    if kept.size == 0:
        return math.nan, math.nan
    low, high = np.quantile(kept, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def _bca_interval(
    distribution: np.ndarray,
    estimate: float,
    values: np.ndarray,
    counts: np.ndarray,
    statistic: Statistic,
    confidence: float,
) -> tuple[float, float]:
    """Return the BCa interval (Efron & Tibshirani 1993, §14.3 and Eq. 14.15)."""
    kept = distribution[~np.isnan(distribution)]
    if kept.size == 0 or math.isnan(estimate):
        return math.nan, math.nan
    if kept.min() == kept.max():
        return estimate, estimate
    levels = _bca_levels(kept, estimate, _acceleration(values, counts, statistic), confidence)
    low, high = np.quantile(kept, levels)
    return float(low), float(high)


def _bca_levels(
    kept: np.ndarray, estimate: float, acceleration: float, confidence: float
) -> np.ndarray:
    """Return the two quantile levels of the BCa interval given the bias and acceleration."""
    size = kept.size
    # Fraction of resamples below the estimate, ties counted half (as scipy does).
    ranks = np.count_nonzero(kept < estimate) + np.count_nonzero(kept <= estimate)
    below = min(max(ranks / (2 * size), 0.5 / size), 1 - 0.5 / size)
    z0 = float(special.ndtri(below))
    z = special.ndtri(np.array([(1 - confidence) / 2, (1 + confidence) / 2]))
    shifted = z0 + z
    with np.errstate(divide="ignore", invalid="ignore"):
        levels = special.ndtr(z0 + shifted / (1 - acceleration * shifted))
    return np.nan_to_num(levels, nan=0.5)


def _acceleration(values: np.ndarray, counts: np.ndarray, statistic: Statistic) -> float:
    """Return the jackknife acceleration over clusters, one leave-one-out value per type.

    Leaving out any one cluster of type t gives the same value θ₍ₜ₎, so the jackknife over K
    clusters is the count-weighted jackknife over types: a = Σ cₜ Uₜ³ / (6 (Σ cₜ Uₜ²)^{3/2}),
    Uₜ = θ̄ − θ₍ₜ₎. Leave-one-out values that are undefined (NaN) are left out.
    """
    n_clusters = int(counts.sum())
    if n_clusters < 2:
        return 0.0
    total = counts.astype(np.float64) @ values
    leave_one_out = _apply_statistic(statistic, total[np.newaxis, :] - values, values.shape[1])
    kept = ~np.isnan(leave_one_out)
    weights = counts[kept].astype(np.float64)
    if weights.sum() == 0:
        return 0.0
    theta = leave_one_out[kept]
    deviation = weights @ theta / weights.sum() - theta
    spread = float(weights @ deviation**2)
    if spread == 0.0 or not math.isfinite(spread):
        return 0.0
    return float(weights @ deviation**3) / (6.0 * spread**1.5)


# --------------------------------------------------------------------------------------------
# Frame-facing wrappers
# --------------------------------------------------------------------------------------------


def cluster_bootstrap(
    partials: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    values: Sequence[str],
    count: str | None = None,
    statistic: Statistic = ratio,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    method: str = "percentile",
    seed: int = 0,
) -> pl.DataFrame:
    """Bootstrap a statistic of per-cluster partials separately in every cell of a frame.

    The frame is grouped to distinct (cell, values) types in polars, so only the type table is
    collected; then each cell is bootstrapped with :func:`bootstrap_types` and its own generator
    ``cell_rng(seed, cell_key)``, so one cell's interval does not change when other cells are
    added or removed, nor with row order.

    Parameters
    ----------
    partials
        One row per cluster × cell (or per type, when ``count`` names a multiplicity column),
        with the cell key columns and the value columns. Eager or lazy.
    cells
        Key columns that define a cell (may be empty: one cell for the whole table). Null key
        values are valid keys.
    values
        Value columns, in the order ``statistic`` expects (for :func:`ratio`: numerator,
        denominator).
    count
        Optional column of positive integer multiplicities (clusters per row).
    statistic, n_resamples, confidence, method
        As in :func:`bootstrap_types`.
    seed
        Non-negative integer; combined with each cell key by :func:`cell_rng`.

    Returns
    -------
    polars.DataFrame
        One row per cell, sorted by the cell columns (nulls first): the cell columns, then
        ``estimate``, ``ci_low``, ``ci_high`` (Float64) and ``n_clusters`` (Int64). An empty input
        gives an empty frame with that schema.

    Raises
    ------
    ParameterError
        For a bad parameter or a column name that is not in ``partials``.
    SchemaError
        For a value column that is not numeric or holds nulls / non-finite numbers, or a
        ``count`` column that is not integer or holds values below 1.

    Examples
    --------
    >>> frame = pl.DataFrame(
    ...     {"method": ["a", "a", "a", "b"], "k": [1, 0, 1, 2], "n": [1, 1, 2, 2]}
    ... )
    >>> out = cluster_bootstrap(frame, cells=["method"], values=["k", "n"], n_resamples=200)
    >>> out.columns
    ['method', 'estimate', 'ci_low', 'ci_high', 'n_clusters']
    >>> out["estimate"].to_list()
    [0.5, 1.0]
    """
    cells_l = _column_names("cells", cells)
    values_l = _column_names("values", values, nonempty=True)
    statistic = _check_statistic(statistic)
    n_resamples = _check_n_resamples(n_resamples)
    confidence = _check_confidence(confidence)
    require_one_of("method", method, _BOOTSTRAP_METHODS)
    seed = _check_seed("seed", seed)

    keys, groups = _cell_types(partials, cells_l, values_l, count, _BOOTSTRAP_COLUMNS)
    results = [
        bootstrap_types(
            cell_values,
            cell_counts,
            statistic,
            n_resamples=n_resamples,
            confidence=confidence,
            method=method,
            rng=cell_rng(seed, key),
        )
        for key, cell_values, cell_counts in groups
    ]
    return pl.DataFrame(
        [
            *keys.get_columns(),
            pl.Series("estimate", [r.estimate for r in results], dtype=pl.Float64),
            pl.Series("ci_low", [r.ci_low for r in results], dtype=pl.Float64),
            pl.Series("ci_high", [r.ci_high for r in results], dtype=pl.Float64),
            pl.Series("n_clusters", [r.n_clusters for r in results], dtype=pl.Int64),
        ]
    )


def sign_flip_cells(
    partials: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    difference: str,
    count: str | None = None,
    n_resamples: int = 100_000,
    seed: int = 0,
) -> pl.DataFrame:
    """Run the paired sign-flip test of per-cluster differences separately in every cell.

    Parameters
    ----------
    partials
        One row per cluster × cell (or per type, when ``count`` names a multiplicity column),
        with the cell key columns and the difference column. Eager or lazy.
    cells
        Key columns that define a cell (may be empty). Null key values are valid keys.
    difference
        Column of per-cluster differences (e.g. recovery successes minus no-recovery successes).
    count
        Optional column of positive integer multiplicities.
    n_resamples
        Monte Carlo resamples, used only where no exact method applies (see
        :func:`sign_flip_test`).
    seed
        Non-negative integer; combined with each cell key by :func:`cell_rng`, exactly as in
        :func:`cluster_bootstrap`.

    Returns
    -------
    polars.DataFrame
        One row per cell, sorted by the cell columns: the cell columns, ``statistic`` (Float64,
        the sum of differences), ``p_value`` (Float64) and ``p_method`` (String:
        ``exact-convolution``, ``exact-enumeration`` or ``monte-carlo``).

    Raises
    ------
    ParameterError
        For a bad parameter or a column name that is not in ``partials``.
    SchemaError
        For a difference column that is not numeric or holds nulls / non-finite numbers, or a bad
        ``count`` column.

    Examples
    --------
    >>> frame = pl.DataFrame({"cell": ["x"] * 6, "d": [1, 1, 1, 1, 1, 0]})
    >>> sign_flip_cells(frame, cells=["cell"], difference="d").row(0)
    ('x', 5.0, 0.0625, 'exact-convolution')
    """
    cells_l = _column_names("cells", cells)
    if not isinstance(difference, str):
        raise ParameterError(
            f"parameter `difference` is {difference!r}; it must be the name of one column."
        )
    n_resamples = _check_n_resamples(n_resamples)
    seed = _check_seed("seed", seed)

    keys, groups = _cell_types(
        partials, cells_l, [difference], count, _SIGN_FLIP_COLUMNS, role="difference"
    )
    results = [
        sign_flip_test(
            cell_values[:, 0], cell_counts, n_resamples=n_resamples, rng=cell_rng(seed, key)
        )
        for key, cell_values, cell_counts in groups
    ]
    return pl.DataFrame(
        [
            *keys.get_columns(),
            pl.Series("statistic", [r.statistic for r in results], dtype=pl.Float64),
            pl.Series("p_value", [r.p_value for r in results], dtype=pl.Float64),
            pl.Series("p_method", [r.method for r in results], dtype=pl.String),
        ]
    )


def paired_effect_cells(
    types: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    difference: str = "d",
    n: str = "n",
    count: str | None = "count",
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    method: str = "percentile",
    seed: int = 0,
) -> pl.DataFrame:
    """Interval and p-value of a paired effect Σd / Σn per cell, from per-cluster types.

    The shared last step of every paired comparison (rescue minus harm per pair, a policy's gain
    over never recovering, one policy's margin over another): a cluster is a task with ``d`` =
    its summed outcome differences over ``n`` pairs. The interval is :func:`cluster_bootstrap`
    of the ratio; the p-value is :func:`sign_flip_cells` of the per-cluster ``d`` (exact for
    integer differences). Both draw per cell from :func:`cell_rng`, so a cell's result does not
    depend on the other cells.

    Parameters
    ----------
    types
        One row per cluster, or per distinct (cells, d, n) type with multiplicity ``count``.
    cells, difference, n, count
        Column names: cell keys, per-cluster summed difference, per-cluster pairs, multiplicity
        (``None`` when every row is one cluster).
    n_resamples, confidence, method, seed
        As :func:`cluster_bootstrap`.

    Returns
    -------
    pl.DataFrame
        One row per cell: cell columns, ``ci_low``, ``ci_high``, ``n_clusters``, ``p_value``.

    Examples
    --------
    >>> types = pl.DataFrame({"cell": ["x", "x"], "d": [1, 0], "n": [1, 1], "count": [6, 4]})
    >>> paired_effect_cells(types, cells=["cell"], n_resamples=200)["p_value"].item()
    0.03125
    """
    cells_l = _column_names("cells", cells)
    boot = cluster_bootstrap(
        types,
        cells=cells_l,
        values=[difference, n],
        count=count,
        n_resamples=n_resamples,
        confidence=confidence,
        method=method,
        seed=seed,
    ).select(*cells_l, "ci_low", "ci_high", "n_clusters")
    flip = sign_flip_cells(
        types, cells=cells_l, difference=difference, count=count, seed=seed
    ).select(*cells_l, "p_value")
    if not cells_l:
        return boot.hstack(flip)
    return boot.join(flip, on=cells_l, how="left", nulls_equal=True, maintain_order="left")


def _column_names(name: str, names: object, *, nonempty: bool = False) -> list[str]:
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, Sequence) or not all(isinstance(n, str) for n in names):
        raise ParameterError(f"parameter `{name}` is {names!r}; it must be a list of column names.")
    if nonempty and not names:
        raise ParameterError(f"parameter `{name}` is empty; name at least one column.")
    if len(set(names)) != len(names):
        raise ParameterError(f"parameter `{name}` names a column twice: {list(names)}.")
    return list(names)


def _cell_types(
    partials: object,
    cells: list[str],
    values: list[str],
    count: str | None,
    reserved: Sequence[str],
    role: str = "values",
) -> tuple[pl.DataFrame, list[tuple[tuple[Any, ...], np.ndarray, np.ndarray]]]:
    """Group ``partials`` to distinct (cell, values) types and split them by cell.

    Returns the cell keys (one row per cell, sorted, original dtypes) and, per cell, the key
    tuple, the (T, V) float64 value matrix and the (T,) int64 counts. Only the type table is
    collected.
    """
    if isinstance(partials, pl.DataFrame):
        frame = partials.lazy()
    elif isinstance(partials, pl.LazyFrame):
        frame = partials
    else:
        raise ParameterError(
            f"parameter `partials` is a {type(partials).__name__}; it must be a polars DataFrame "
            "or LazyFrame. Hint: recoverylab.io.scan() reads any table source as a LazyFrame."
        )
    schema = frame.collect_schema()
    named = [("cells", c) for c in cells] + [(role, v) for v in values]
    if count is not None:
        if not isinstance(count, str):
            raise ParameterError(f"parameter `count` is {count!r}; it must be a column name.")
        named.append(("count", count))
    for parameter, column in named:
        if column not in schema:
            available = ", ".join(schema.names())
            raise ParameterError(
                f"partials: parameter `{parameter}` names column `{column}`, which is not in the "
                f"table (columns: {available})."
            )
    used = [column for _, column in named]
    if len(set(used)) != len(used):
        raise ParameterError(
            f"partials: a column is named in more than one of `cells`, `{role}` and `count` "
            f"({', '.join(used)}); each column has one role."
        )
    clash = [c for c in cells if c in reserved]
    if clash:
        raise ParameterError(
            f"partials: cell column `{clash[0]}` has the name of a result column "
            f"({', '.join(reserved)}). Hint: rename it first."
        )
    for column in values:
        dtype = schema[column]
        if not (dtype.is_numeric() or dtype == pl.Boolean):
            raise SchemaError(
                f"partials: column `{column}` has type {dtype}; value columns must be numeric."
            )
    if count is not None and not schema[count].is_integer():
        raise SchemaError(
            f"partials: column `{count}` has type {schema[count]}; a count column must hold "
            "integers."
        )

    if count is None:
        aggregates = [pl.len().cast(pl.Int64).alias(_N)]
    else:
        weight = pl.col(count)
        aggregates = [
            weight.sum().cast(pl.Int64).alias(_N),
            (weight.is_null() | (weight < 1)).sum().alias(_BAD),
        ]
    # Only the type table is materialised; the streaming engine keeps big inputs out of memory.
    types = frame.group_by([*cells, *values]).agg(aggregates).collect(engine="streaming")
    _check_type_table(types, cells, values, count)

    types = types.sort([*cells, *values], nulls_last=False)
    if types.height == 0:
        return types.select(cells), []
    if cells:
        run = types.select(pl.struct(cells).rle_id()).to_series().to_numpy()
        starts = np.flatnonzero(np.diff(run, prepend=-1))
    else:
        starts = np.array([0])
    # A frame without columns has no rows, so the no-cells case cannot gather its one key row.
    keys = types.select(cells)[starts] if cells else pl.DataFrame()
    matrix = types.select(pl.col(v).cast(pl.Float64) for v in values).to_numpy()
    counts = types[_N].to_numpy()
    bounds = [*starts.tolist(), types.height]
    key_rows = keys.rows() if cells else [()]
    groups = [
        (key, matrix[lo:hi], counts[lo:hi])
        for key, lo, hi in zip(key_rows, bounds[:-1], bounds[1:], strict=True)
    ]
    return keys, groups


def _check_type_table(
    types: pl.DataFrame, cells: list[str], values: list[str], count: str | None
) -> None:
    """Raise SchemaError, with a few offending cell keys, for missing values or bad counts."""

    def offending(mask: pl.Expr) -> tuple[int, str]:
        hits = types.filter(mask)
        clusters = int(hits[_N].sum())
        if not cells:
            return clusters, "the whole table"
        keys = hits.select(cells).unique().sort(cells, nulls_last=False)
        return clusters, "cell " + format_keys(keys.rows(), total=keys.height)

    for column in values:
        missing = pl.col(column).is_null()
        if types.schema[column].is_float():
            missing = missing | ~pl.col(column).is_finite()
        if types.select(missing.any()).item():
            clusters, where = offending(missing)
            raise SchemaError(
                f"partials: column `{column}` has {clusters} null or non-finite values ({where}); "
                "partial sums must be finite numbers."
            )
    if count is not None and types.select((pl.col(_BAD) > 0).any()).item():
        bad_rows = int(types[_BAD].sum())
        _, where = offending(pl.col(_BAD) > 0)
        raise SchemaError(
            f"partials: column `{count}` has {bad_rows} values that are null or below 1 ({where});"
            " multiplicities must be positive integers."
        )


# --------------------------------------------------------------------------------------------
# Sign-flip test
# --------------------------------------------------------------------------------------------


def sign_flip_test(
    differences: np.ndarray | Sequence[float],
    counts: np.ndarray | Sequence[int] | None = None,
    *,
    method: str = "auto",
    n_resamples: int = 100_000,
    rng: np.random.Generator | int | None = None,
) -> SignFlipResult:
    """Test whether paired per-cluster differences are symmetric about zero, by flipping signs.

    Two-sided paired permutation test: T = Σ dᵢ, and under H0 each difference is equally likely
    to have either sign, T* = Σ sᵢ dᵢ with independent random signs. The p-value is
    P(|T*| ≥ |T|). For float differences, values of |T*| within 100 machine epsilons of |T| count
    as ties, like scipy; the tolerance is relative to Σ|dᵢ| (the largest possible |T*|) rather than
    to |T|, so that rounding is absorbed even when T is near 0 by cancellation. Integer
    differences need no tolerance: their lattice is exact.

    How it is computed (``method="auto"``):

    * integer differences, any number of clusters: exact, by convolution. Grouping by absolute
      value a with multiplicity mₐ, T* = Σₐ a·(2·Binomial(mₐ, ½) − mₐ); each piece's pmf is built
      on the lattice of the gcd of the |values| and the pieces are convolved (directly when
      small, by FFT when large). With a single distinct |value| the binomial tails are used
      directly (this equals :func:`mcnemar_exact` on ±1 data).
    * otherwise, with at most 20 nonzero clusters: exact enumeration of all 2ⁿ sign vectors.
    * otherwise Monte Carlo with R resamples and the +1 correction,
      p = (1 + #{|T*| ≥ |T|}) / (1 + R): through ``scipy.stats.permutation_test`` for up to
      1,000 nonzero clusters, above that by drawing v·(2·Binomial(m, ½) − m) per distinct value
      v with multiplicity m (the same distribution, at a cost per type).

    Note that ``scipy.stats.permutation_test(alternative="two-sided")`` reports twice the smaller
    one-sided p-value. For the exactly symmetric null of a sign flip that equals P(|T*| ≥ |T|),
    but under Monte Carlo the two differ by sampling noise and because doubling also doubles the
    +1 correction. This function reports P(|T*| ≥ |T|) for every method (it takes only the null
    draws from scipy).

    Parameters
    ----------
    differences
        Per-cluster differences (one per cluster, or one per type with ``counts``). Zeros count
        as clusters but do not change T*.
    counts
        Optional positive integer multiplicities, one per entry of ``differences``.
    method
        ``"auto"``, ``"exact"`` (raise when no exact method applies) or ``"monte-carlo"``.
    n_resamples
        Monte Carlo resamples (>= 1); ignored by the exact methods.
    rng
        A numpy Generator, an integer seed, or None for seed 0 (Monte Carlo only).

    Returns
    -------
    SignFlipResult
        The statistic Σ dᵢ, the p-value, the method used, the number of clusters and of
        resamples. With every difference zero, p = 1.

    Raises
    ------
    ParameterError
        For empty or non-finite differences, bad counts, an unknown method, fewer than one
        resample, or ``method="exact"`` when no exact method applies (non-integer differences
        with more than 20 nonzero clusters).

    Examples
    --------
    >>> res = sign_flip_test([1, 1, 1, 1, 1, 0])
    >>> res.statistic, res.p_value, res.method
    (5.0, 0.0625, 'exact-convolution')
    """
    d, c, method, n_resamples, gen = _sign_flip_iv(differences, counts, method, n_resamples, rng)
    unique, multiplicity = _merge_types(d[:, np.newaxis], c)
    unique = unique[:, 0]
    n_clusters = int(multiplicity.sum())
    observed = float(multiplicity.astype(np.float64) @ unique)
    nonzero = unique != 0
    v, m = unique[nonzero], multiplicity[nonzero]
    n_nonzero = int(m.sum())

    def result(p_value: float, how: str, resamples: int | None = None) -> SignFlipResult:
        p_value = min(max(p_value, 0.0), 1.0)
        return SignFlipResult(observed, p_value, how, n_clusters, resamples)

    if n_nonzero == 0:
        return result(1.0, "exact-enumeration")
    if method != "monte-carlo":
        if bool(np.all(v == np.round(v))) and bool(np.all(np.abs(v) < _MAX_EXACT_INT)):
            p_value = _sign_flip_lattice(v.astype(np.int64), m)
            if p_value is not None:
                return result(p_value, "exact-convolution")
        if n_nonzero <= _MAX_ENUMERATION:
            return result(_sign_flip_enumerate(np.repeat(v, m)), "exact-enumeration")
        if method == "exact":
            raise ParameterError(
                f"parameter `method` is 'exact' but the differences are not integers (or their "
                f"lattice has more than {_MAX_LATTICE} points) and there are {n_nonzero} nonzero "
                f"clusters; exact enumeration is limited to {_MAX_ENUMERATION}. Hint: use "
                "method='auto' or 'monte-carlo'."
            )
    elif n_nonzero <= _MAX_ENUMERATION and 2**n_nonzero <= n_resamples:
        # Enumerating every sign vector costs no more than the requested resamples.
        return result(_sign_flip_enumerate(np.repeat(v, m)), "exact-enumeration")

    threshold = abs(observed) - _TIE_RTOL * float(m.astype(np.float64) @ np.abs(v))
    if n_nonzero <= _SCIPY_MC_MAX_CLUSTERS:
        null = _sign_flip_null_scipy(np.repeat(v, m), n_resamples, gen)
    else:
        null = _sign_flip_null_types(v, m, n_resamples, gen)
    hits = int(np.count_nonzero(np.abs(null) >= threshold))
    return result((1 + hits) / (1 + n_resamples), "monte-carlo", n_resamples)


def _sign_flip_iv(
    differences: object, counts: object, method: object, n_resamples: object, rng: object
) -> tuple[np.ndarray, np.ndarray, str, int, np.random.Generator]:
    """Validate and standardise the inputs of :func:`sign_flip_test`."""
    d = _numeric_array("differences", differences)
    if d.ndim != 1 or d.size == 0:
        raise ParameterError(
            f"parameter `differences` has shape {d.shape}; it must be a non-empty 1-D array with "
            "one difference per cluster."
        )
    d = d.astype(np.float64)
    if not np.isfinite(d).all():
        where = np.flatnonzero(~np.isfinite(d))
        shown = format_keys((f"entry {i}" for i in where), total=where.size)
        raise ParameterError(
            f"parameter `differences` has {where.size} NaN or infinite values ({shown}); "
            "differences must be finite."
        )
    c = (
        np.ones(d.size, dtype=np.int64)
        if counts is None
        else _check_counts(counts, d.size, "entries in `differences`")
    )
    require_one_of("method", method, _SIGN_FLIP_METHODS)
    return d, c, str(method), _check_n_resamples(n_resamples), _as_generator(rng)


def _sign_flip_lattice(v: np.ndarray, m: np.ndarray) -> float | None:
    """Return the exact two-sided p for integer differences, or None if the lattice is too big.

    With absolute values a (multiplicity mₐ, g the gcd, a' = a / g) and Bₐ ~ Binomial(mₐ, ½) the
    number of positive signs, T*/g = 2U − S with U = Σ a'·Bₐ and S = Σ a'·mₐ. The observed T/g
    is an integer t on the same lattice, so the tail {|2U − S| ≥ |t|} is exact: no tolerance.
    """
    from scipy import stats as sps  # a slow import, kept off `import recoverylab`

    magnitudes, inverse = np.unique(np.abs(v), return_inverse=True)
    per_magnitude = np.zeros(magnitudes.size, dtype=np.int64)
    np.add.at(per_magnitude, inverse, m)
    gcd = int(np.gcd.reduce(magnitudes))
    t = abs(int((v // gcd) @ m))
    if t == 0:
        return 1.0
    if magnitudes.size == 1:
        # One distinct |value|: T*/a = 2B − M, B ~ Binomial(M, ½). Sum the two tails as
        # scipy.stats.binomtest does, so the p-value equals mcnemar_exact on ±1 data exactly.
        flips = int(per_magnitude[0])
        low, high = (flips - t) // 2, (flips + t) // 2
        return float(sps.binom.cdf(low, flips, 0.5) + sps.binom.sf(high - 1, flips, 0.5))
    steps = (magnitudes // gcd).tolist()
    sizes = per_magnitude.tolist()
    windows = [_negligible_window(size / 2, size, size) for size in sizes]
    points = sum(step * (hi - lo) + 1 for step, (lo, hi) in zip(steps, windows, strict=True))
    if points > _MAX_LATTICE:
        return None
    pieces = []
    for step, size, (lo, hi) in zip(steps, sizes, windows, strict=True):
        pmf = np.zeros(step * (hi - lo) + 1)
        pmf[::step] = sps.binom.pmf(np.arange(lo, hi + 1), size, 0.5)
        pieces.append(_LatticePmf(step * lo, step * size / 2, step**2 * size, pmf))
    total = _convolve_all(pieces)
    span = sum(step * size for step, size in zip(steps, sizes, strict=True))
    doubled = 2 * (total.offset + np.arange(total.pmf.size, dtype=np.int64)) - span
    return float(total.pmf[np.abs(doubled) >= t].sum())


@dataclass(frozen=True)
class _LatticePmf:
    """The pmf of a sum of scaled binomials on the integers offset, offset + 1, ...

    ``mean`` is its mean and ``scale`` = Σ m·a'² its Hoeffding scale: each cluster adds a
    Bernoulli(½) times a', a term in [0, a'].
    """

    offset: int
    mean: float
    scale: float
    pmf: np.ndarray = field(repr=False, compare=False)


def _negligible_window(mean: float, scale: float, upper: int) -> tuple[int, int]:
    """Return the integer window [lo, hi] (within [0, upper]) outside which the mass is nil.

    Hoeffding: P(|U − mean| ≥ k) ≤ 2·exp(−2k²/scale), below 1e-340 for k = 20·√scale, so
    dropping the outside changes no double-precision value. A million clusters thus cost a few
    thousand lattice points instead of a million.
    """
    half_width = 20.0 * math.sqrt(scale) + 1.0
    return max(0, math.floor(mean - half_width)), min(upper, math.ceil(mean + half_width))


def _convolve_all(pieces: list[_LatticePmf]) -> _LatticePmf:
    """Convolve pmfs, the two shortest first to keep the work balanced, trimming nil tails."""
    from scipy import signal  # a slow import (1.5 s), kept off `import recoverylab`

    heap = [(piece.pmf.size, i, piece) for i, piece in enumerate(pieces)]
    heapq.heapify(heap)
    order = len(heap)
    while len(heap) > 1:
        _, _, left = heapq.heappop(heap)
        _, _, right = heapq.heappop(heap)
        if left.pmf.size * right.pmf.size <= _DIRECT_CONVOLVE_MAX:
            joined = np.convolve(left.pmf, right.pmf)
        else:
            # FFT rounding leaves tiny negative (and positive) noise around zero.
            joined = np.clip(signal.fftconvolve(left.pmf, right.pmf), 0.0, None)
        offset = left.offset + right.offset
        mean, scale = left.mean + right.mean, left.scale + right.scale
        lo, hi = _negligible_window(mean - offset, scale, joined.size - 1)
        trimmed = _LatticePmf(offset + lo, mean, scale, joined[lo : hi + 1])
        heapq.heappush(heap, (trimmed.pmf.size, order, trimmed))
        order += 1
    return heap[0][2]


def _sign_flip_enumerate(x: np.ndarray) -> float:
    """Return P(|T*| ≥ |T|) by enumerating sign vectors of the nonzero differences ``x``.

    |T*| is unchanged when every sign flips, so the first sign is fixed at + and the other
    2ⁿ⁻¹ sign vectors are enumerated in chunks of bit rows.
    """
    threshold = abs(float(x.sum())) - _TIE_RTOL * float(np.abs(x).sum())
    rest = x[1:]
    n_vectors = 1 << rest.size
    shifts = np.arange(rest.size, dtype=np.int64)
    chunk = max(1, _MAX_BATCH_ELEMENTS // max(1, rest.size))
    hits = 0
    for start in range(0, n_vectors, chunk):
        index = np.arange(start, min(n_vectors, start + chunk), dtype=np.int64)
        signs = (((index[:, np.newaxis] >> shifts) & 1) * 2 - 1).astype(np.float64)
        flipped = x[0] + signs @ rest
        hits += int(np.count_nonzero(np.abs(flipped) >= threshold))
    return hits / n_vectors


def _sum_last_axis(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.sum(x, axis=axis)


def _sign_flip_null_scipy(x: np.ndarray, n_resamples: int, gen: np.random.Generator) -> np.ndarray:
    """Draw the Monte Carlo null of T* = Σ sᵢ xᵢ with ``scipy.stats.permutation_test``.

    Only the null distribution is taken from scipy; the p-value is computed by the caller, so
    every method uses the same definition P(|T*| ≥ |T|).
    """
    batch = max(1, _MAX_BATCH_ELEMENTS // (2 * x.size))
    from scipy import stats as sps  # a slow import, kept off `import recoverylab`

    res = sps.permutation_test(
        (x,),
        _sum_last_axis,
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_resamples,
        batch=batch,
        alternative="greater",
        rng=gen,
    )
    return np.asarray(res.null_distribution, dtype=np.float64)


def _sign_flip_null_types(
    v: np.ndarray, m: np.ndarray, n_resamples: int, gen: np.random.Generator
) -> np.ndarray:
    """Draw the Monte Carlo null of T* per distinct value: v·(2·Binomial(m, ½) − m), summed."""
    single = m == 1
    v_single, v_multi, m_multi = v[single], v[~single], m[~single]
    null = np.empty(n_resamples, dtype=np.float64)
    batch = max(1, _MAX_BATCH_ELEMENTS // v.size)
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        part = np.zeros(size)
        if v_single.size:
            # Fair coins for the many types seen once: random bits are far cheaper than binomials.
            bits = gen.integers(0, 2, size=(size, v_single.size), dtype=np.int8)
            part += 2.0 * (bits.astype(np.float64) @ v_single) - v_single.sum()
        if v_multi.size:
            heads = gen.binomial(m_multi, 0.5, size=(size, v_multi.size))
            part += (2 * heads - m_multi).astype(np.float64) @ v_multi
        null[start : start + size] = part
    return null


# --------------------------------------------------------------------------------------------
# Classical tests and intervals
# --------------------------------------------------------------------------------------------


def mcnemar_exact(rescue: int, harm: int) -> TestResult:
    """Exact McNemar test: a two-sided binomial test of rescue vs harm discordant counts.

    Under H0 a discordant pair is a rescue or a harm with probability ½ each. This is the same
    test as :func:`sign_flip_test` on ±1 differences (one per discordant pair) and gives the same
    p-value; it is kept as a cross-check and for summaries that only have the two counts.

    Parameters
    ----------
    rescue
        Number of pairs where only the recovery branch succeeds.
    harm
        Number of pairs where only the no-recovery branch succeeds.

    Returns
    -------
    TestResult
        ``statistic`` = rescue − harm, ``p_value`` from ``scipy.stats.binomtest`` (1.0 when there
        is no discordant pair), ``method`` = ``"exact-binomial"``.

    Raises
    ------
    ParameterError
        If a count is not a non-negative integer.

    Examples
    --------
    >>> mcnemar_exact(5, 0).p_value
    0.0625
    """
    for name, value in (("rescue", rescue), ("harm", harm)):
        if not _is_int(value) or int(value) < 0:
            raise ParameterError(
                f"parameter `{name}` is {value!r}; it must be a non-negative integer count."
            )
    rescue, harm = int(rescue), int(harm)
    total = rescue + harm
    from scipy import stats as sps  # a slow import, kept off `import recoverylab`

    p_value = 1.0 if total == 0 else float(sps.binomtest(rescue, total, 0.5).pvalue)
    return TestResult(statistic=float(rescue - harm), p_value=p_value, method="exact-binomial")


def wilson_interval(
    successes: np.ndarray | float, n: np.ndarray | float, confidence: float = 0.95
) -> Interval:
    """Return the Wilson score interval of a proportion, vectorised over arrays.

    Parameters
    ----------
    successes
        Number of successes (array or scalar), 0 <= successes <= n.
    n
        Number of trials (array or scalar, broadcast against ``successes``).
    confidence
        Confidence level in (0, 1).

    Returns
    -------
    Interval
        ``low`` and ``high``, floats for scalar inputs and arrays otherwise; NaN where n == 0.

    Raises
    ------
    ParameterError
        For a confidence outside (0, 1), shapes that do not broadcast, or counts that are
        negative, non-finite or have successes > n.

    Examples
    --------
    >>> ci = wilson_interval(8, 10)
    >>> round(ci.low, 4), round(ci.high, 4)
    (0.4902, 0.9433)
    """
    confidence = _check_confidence(confidence)
    k = _numeric_array("successes", successes).astype(np.float64)
    trials = _numeric_array("n", n).astype(np.float64)
    try:
        k, trials = np.broadcast_arrays(k, trials)
    except ValueError as exc:
        raise ParameterError(
            f"parameters `successes` and `n` have shapes {k.shape} and {trials.shape}, which do "
            "not broadcast together."
        ) from exc
    bad = ~np.isfinite(k) | ~np.isfinite(trials) | (k < 0) | (k > trials)
    if bad.any():
        where = np.flatnonzero(bad.reshape(-1))
        shown = format_keys(
            (f"{k.reshape(-1)[i]:g} of {trials.reshape(-1)[i]:g}" for i in where), total=where.size
        )
        raise ParameterError(
            f"parameters `successes` and `n` have {where.size} impossible pairs ({shown}); "
            "successes must be finite with 0 <= successes <= n."
        )
    z = float(special.ndtri((1 + confidence) / 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        low, high = _wilson_bounds(k, trials, z)
    # The bounds are exactly 0 at k = 0 and 1 at k = n; rounding would leave ±1e-17.
    low = np.where(trials == 0, np.nan, np.where(k == 0, 0.0, np.clip(low, 0.0, 1.0)))
    high = np.where(trials == 0, np.nan, np.where(k == trials, 1.0, np.clip(high, 0.0, 1.0)))
    if low.ndim == 0:
        return Interval(low=float(low), high=float(high))
    return Interval(low=low, high=high)


def _wilson_bounds(k: Any, n: Any, z: float) -> tuple[Any, Any]:
    """Return the Wilson bounds; works on numpy arrays and on polars expressions alike."""
    z2 = z * z
    p = k / n
    denominator = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denominator
    half = z * (p * (1 - p) / n + z2 / (4 * n * n)) ** 0.5 / denominator
    return center - half, center + half


def wilson_exprs(
    successes: str | pl.Expr, n: str | pl.Expr, confidence: float = 0.95
) -> IntervalExprs:
    """Return polars expressions for the Wilson interval, for use inside lazy queries.

    The formula is the one of :func:`wilson_interval`, evaluated by polars; the bounds are null
    where n == 0 (or null), so a group with no data never gets an invented interval.

    Parameters
    ----------
    successes
        Column name or expression for the number of successes.
    n
        Column name or expression for the number of trials.
    confidence
        Confidence level in (0, 1).

    Returns
    -------
    IntervalExprs
        ``low`` and ``high`` expressions, aliased ``ci_low`` and ``ci_high``; it unpacks like a
        pair.

    Raises
    ------
    ParameterError
        For a confidence outside (0, 1) or an argument that is neither a name nor an expression.

    Examples
    --------
    >>> frame = pl.DataFrame({"k": [8, 0], "n": [10, 0]})
    >>> out = frame.with_columns(*wilson_exprs("k", "n"))
    >>> out["ci_low"].round(4).to_list()
    [0.4902, None]
    """
    confidence = _check_confidence(confidence)
    k = _as_expr("successes", successes).cast(pl.Float64)
    trials = _as_expr("n", n).cast(pl.Float64)
    z = float(special.ndtri((1 + confidence) / 2))
    low, high = _wilson_bounds(k, trials, z)
    empty = trials.is_null() | (trials <= 0)
    return IntervalExprs(
        low=pl.when(empty)
        .then(None)
        .when(k == 0)
        .then(0.0)
        .otherwise(low.clip(0.0, 1.0))
        .alias("ci_low"),
        high=pl.when(empty)
        .then(None)
        .when(k == trials)
        .then(1.0)
        .otherwise(high.clip(0.0, 1.0))
        .alias("ci_high"),
    )


def _as_expr(name: str, value: object) -> pl.Expr:
    if isinstance(value, str):
        return pl.col(value)
    if isinstance(value, pl.Expr):
        return value
    raise ParameterError(
        f"parameter `{name}` is {value!r}; it must be a column name or a polars expression."
    )
