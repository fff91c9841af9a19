"""The statistics engine: cluster bootstrap, sign-flip tests and Wilson intervals.

The statistics work on additive per-cluster partials (ARCHITECTURE §3, principle 3), so intervals
and tests respect clustering (task, workflow, case) and cost what the clusters cost, never
rows × resamples. Resampling K clusters with replacement is drawing multinomial counts over the
distinct cluster *types* (rows of partial values) with probabilities ``count / K`` (ARCHITECTURE
§4): a cell of a million tasks but three types costs three numbers per resample. Polars appears
only in the frame-facing wrappers (:func:`cluster_bootstrap`, :func:`sign_flip_cells`,
:func:`wilson_exprs`). Randomness is per cell (:func:`cell_rng`: the seed and a stable hash of
the cell key), so a cell's result does not depend on the other cells, their order or the machine
(except the coupled workflow sets of :func:`cluster_bootstrap_ratios`, drawn together).
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import math
import statistics
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, is_dataclass
from html import escape
from typing import Any, ClassVar, NamedTuple

import numpy as np
import polars as pl

from recoverylab._display import p_str
from recoverylab._errors import ParameterError, SchemaError, format_keys, renamed, require_one_of

__all__ = [
    "ADJUST_METHODS",
    "ALTERNATIVES",
    "CI_METHODS",
    "PAIRED_CI_METHODS",
    "BootstrapResult",
    "Interval",
    "IntervalExprs",
    "ResultHtml",
    "SignFlipResult",
    "TestResult",
    "adjust_p_values",
    "agree_with_test",
    "bootstrap_types",
    "cell_rng",
    "check_resampling",
    "cluster_bootstrap",
    "cluster_bootstrap_ratios",
    "cluster_melded_interval",
    "effective_melded_interval",
    "fay_lumbard_interval",
    "icc_oneway",
    "mcnemar_exact",
    "paired_effect_cells",
    "ratio",
    "ratio_difference",
    "result_html",
    "sign_flip_cells",
    "sign_flip_interval",
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
#: Most nonzero clusters sent to ``scipy.stats.permutation_test`` (it materialises every
#: resample × cluster); above, the per-type draws are much faster.
_SCIPY_MC_MAX_CLUSTERS = 1_000
#: Relative tolerance for float ties in sign-flip tests (scipy uses the same 100 eps).
_TIE_RTOL = 100 * float(np.finfo(np.float64).eps)
#: Integers above this are not exactly representable as float64.
_MAX_EXACT_INT = 2.0**53

#: Interval methods of a paired effect (``paired_effect_cells``); ``auto`` is the default.
PAIRED_CI_METHODS = ("auto", "fay-lumbard", "cluster-melded", "sign-flip", "percentile", "bca")
#: Multiplicity adjustments across the cells of one result (``p_adjusted``).
ADJUST_METHODS = (None, "holm", "bh")
#: A cell is flagged ``sparse`` below these: clusters with a nonzero difference, clusters.
SPARSE_NONZERO_CLUSTERS = 10
SPARSE_CLUSTERS = 20
_SIGN_FLIP_METHODS = ("auto", "exact", "monte-carlo")
#: Alternatives of every test (and the matching one-sided intervals).
ALTERNATIVES = ("two-sided", "greater", "less")
_BOOTSTRAP_COLUMNS = ("estimate", "ci_low", "ci_high", "n_clusters")
_SIGN_FLIP_COLUMNS = ("statistic", "p_value", "p_method")
_N = "__recoverylab_n"
_BAD = "__recoverylab_bad"


# -- Result types ------------------------------------------------------------------------------


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


# -- Randomness --------------------------------------------------------------------------------


def cell_rng(seed: int, key: tuple) -> np.random.Generator:
    """Return a random generator derived from a seed and a cell's key values.

    A cell's interval or p-value must not depend on the other cells, their order, the process or
    the machine. The key's canonical text (type and ``repr`` of each value: ``1``, ``1.0`` and
    ``"1"`` differ) is hashed with SHA-256 into a :class:`numpy.random.SeedSequence` with the
    seed; never Python's ``hash()``, salted per process for strings.

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
    if rng is None:  # STYLE §7: the default is fixed so that two runs agree
        return np.random.default_rng(0)
    if isinstance(rng, np.random.Generator):
        return rng
    if _is_int(rng) and int(rng) >= 0:  # type: ignore[call-overload]
        return np.random.default_rng(int(rng))  # type: ignore[call-overload]
    raise ParameterError(
        f"parameter `rng` is {rng!r}; it must be None, a numpy Generator or a non-negative "
        "integer seed."
    )


# -- Parameter checks --------------------------------------------------------------------------


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
    *,
    confidence: object,
    n_resamples: object,
    seed: object,
    ci_method: object = "percentile",
    ci_methods: Sequence[str] = CI_METHODS,
    alternative: object = "two-sided",
    adjust: object = None,
) -> None:
    """Check the resampling parameters every protocol shares, before any data is read.

    The one parameter-validation helper of recoverylab (ARCHITECTURE §4): the same names and
    the same messages in every protocol.

    Raises
    ------
    ParameterError
        For a ``confidence`` outside (0, 1), ``n_resamples`` < 1, a negative or non-integer
        ``seed``, a ``ci_method`` not in ``ci_methods`` (the bootstrap's ``"percentile"`` and
        ``"bca"`` by default; :data:`PAIRED_CI_METHODS` for paired effects), an unknown
        ``alternative`` or ``adjust``.

    Examples
    --------
    >>> check_resampling(confidence=0.95, n_resamples=1000, seed=0, ci_method="bca")
    """
    require_one_of("ci_method", ci_method, ci_methods)
    require_one_of("alternative", alternative, ALTERNATIVES)
    require_one_of("adjust", adjust, ADJUST_METHODS)
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
    values = values + 0.0  # -0.0 becomes 0.0: the two zeros are one type
    # by column 0, then 1, ... (np.unique(axis=0) sorts a void view, ~50x slower on 1M rows)
    order = np.lexsort(values.T[::-1])
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate([[True], (ordered[1:] != ordered[:-1]).any(axis=1)]))
    return ordered[starts], np.add.reduceat(counts[order], starts)


# -- Statistics of column sums -----------------------------------------------------------------


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

    For contrasts of two cells resampled jointly: a cluster's row carries the partials of both
    cells (zeros where it is absent from one), so one draw serves both (ARCHITECTURE §4).

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

    Cluster i with mᵢ observations xᵢⱼ contributes Sᵢ²/mᵢ, Sᵢ = Σⱼ xᵢⱼ, Qᵢ = Σⱼ xᵢⱼ², mᵢ, mᵢ²
    and 1 (:data:`ICC_COLUMNS`): a statistic of column sums, so :func:`bootstrap_types` gives its
    interval at the cost of the cluster types. With N = Σmᵢ and K clusters: MSB = (ΣSᵢ²/mᵢ −
    (ΣSᵢ)²/N)/(K − 1), MSW = (ΣQᵢ − ΣSᵢ²/mᵢ)/(N − K), m₀ = (N − Σmᵢ²/N)/(K − 1) and ICC = (MSB −
    MSW)/(MSB + (m₀ − 1)·MSW) (the unbalanced one-way estimator; it may be negative). NaN when
    undefined: fewer than two clusters, no cluster with two observations, or no variation.

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


# -- Cluster bootstrap on types ----------------------------------------------------------------


#: The interval keyword's old name (deprecated for one release).
_OLD_CI_NAME = {"method": "ci_method"}


def bootstrap_types(
    values: np.ndarray | Sequence[Sequence[float]],
    counts: np.ndarray | Sequence[int],
    statistic: Statistic = ratio,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    ci_method: str = "percentile",
    rng: np.random.Generator | int | None = None,
    **deprecated: object,
) -> BootstrapResult:
    """Bootstrap a statistic of column sums by resampling clusters, given as types with counts.

    Each resample draws ``M ~ Multinomial(K, counts / K)`` over the distinct cluster types
    (ARCHITECTURE §4: the same as resampling the K clusters), sums ``M @ values`` and applies
    ``statistic``: the cost per resample is the number of types. Types are merged and sorted
    first, so the result depends only on the multiset of clusters and the generator.

    Parameters
    ----------
    values
        Array (T, V): one row per cluster type, its partial sums (e.g. numerator, denominator).
    counts
        Array (T,): how many clusters have each type (positive integers).
    statistic
        Maps column sums ``(..., V)`` to ``(...)``; default :func:`ratio`
        (:func:`ratio_difference` for contrasts of two cells with joint types).
    n_resamples
        Number of bootstrap resamples (>= 1).
    confidence
        Confidence level in (0, 1).
    ci_method
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
    No warnings in degenerate cases: all resamples equal gives the BCa interval ``[estimate,
    estimate]``, all NaN a NaN interval; with K = 1 the acceleration is 0; an estimate outside
    every resample caps the BCa bias correction at the ``1 / (2 n_resamples)`` quantile.

    Examples
    --------
    Two clusters, one with 1 success in 1 trial and one with 0 in 1:

    >>> res = bootstrap_types([[1, 1], [0, 1]], [1, 1], n_resamples=2000, rng=1)
    >>> res.estimate, res.n_clusters
    (0.5, 2)
    >>> float(res.ci_low), float(res.ci_high)
    (0.0, 1.0)
    """
    method = str(renamed("bootstrap_types", deprecated, _OLD_CI_NAME).get("ci_method", ci_method))
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
        estimate, float(low), float(high), confidence, method, n_resamples, n_clusters, distribution
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
    require_one_of("ci_method", method, CI_METHODS)
    gen = _as_generator(rng)
    values_a, counts_a = _merge_types(values_a, counts_a)
    return values_a, counts_a, statistic, n_resamples, confidence, str(method), gen


def _apply_statistic(statistic: Statistic, sums: np.ndarray, n_columns: int) -> np.ndarray:
    """Apply ``statistic`` to a batch of sums, checking that it returns one value per row."""
    try:  # undefined resamples (a zero denominator) are NaN, which the intervals handle
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
    z0 = _normal_quantile(below)
    z = np.array([_normal_quantile((1 - confidence) / 2), _normal_quantile((1 + confidence) / 2)])
    shifted = z0 + z
    with np.errstate(divide="ignore", invalid="ignore"):
        levels = _normal_cdf(z0 + shifted / (1 - acceleration * shifted))
    return np.nan_to_num(levels, nan=0.5)


def _acceleration(values: np.ndarray, counts: np.ndarray, statistic: Statistic) -> float:
    """Return the jackknife acceleration over clusters, one leave-one-out value per type.

    Every cluster of type t leaves θ₍ₜ₎, so a = Σ cₜ Uₜ³ / (6 (Σ cₜ Uₜ²)^{3/2}), Uₜ = θ̄ − θ₍ₜ₎,
    over the types whose θ₍ₜ₎ is defined (not NaN).
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


# -- Frame-facing wrappers ---------------------------------------------------------------------


def cluster_bootstrap(
    partials: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    values: Sequence[str],
    count: str | None = None,
    statistic: Statistic = ratio,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    ci_method: str = "percentile",
    seed: int = 0,
    **deprecated: object,
) -> pl.DataFrame:
    """Bootstrap a statistic of per-cluster partials separately in every cell of a frame.

    Polars groups the frame to distinct (cell, values) types, so only the type table is
    collected; each cell goes to :func:`bootstrap_types` with its own ``cell_rng(seed, key)``,
    so its interval does not change with the other cells or with row order.

    Parameters
    ----------
    partials
        One row per cluster × cell (or per type, when ``count`` names a multiplicity column),
        with the cell key columns and the value columns. Eager or lazy.
    cells
        Key columns of a cell (may be empty: one cell for the whole table); nulls are keys.
    values
        Value columns, in the order ``statistic`` expects (:func:`ratio`: numerator, denominator).
    count
        Optional column of positive integer multiplicities (clusters per row).
    statistic, n_resamples, confidence, ci_method
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
    method = str(renamed("cluster_bootstrap", deprecated, _OLD_CI_NAME).get("ci_method", ci_method))
    require_one_of("ci_method", method, CI_METHODS)
    seed = _check_seed("seed", seed)

    keys, groups = _cell_types(partials, cells_l, values_l, count, _BOOTSTRAP_COLUMNS)
    results = [
        bootstrap_types(
            cell_values,
            cell_counts,
            statistic,
            n_resamples=n_resamples,
            confidence=confidence,
            ci_method=method,
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


#: Drawing a multinomial over T cluster types costs about this many times more per type than
#: drawing one uniform cluster index and counting it (numpy's binomial against an integer).
_TYPE_DRAW_COST = 25


def cluster_bootstrap_ratios(
    partials: pl.DataFrame,
    *,
    cells: Sequence[str],
    cluster: str,
    ratios: Sequence[tuple[str, str, str]],
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pl.DataFrame:
    """Percentile cluster-bootstrap intervals of several ratios in many cells, draws shared.

    The intervals of :func:`cluster_bootstrap` with :func:`ratio` (percentile) for every
    ``(cell, ratio)``: a cell's K clusters are resampled and each ratio is Σ numerator /
    Σ denominator over the resample. The draw is shared: all ratios of a cell, and all cells on
    the same set of clusters, use one resample (one matrix product for every column). Sets
    holding at least half of all the clusters of the call are coupled to one resample of all of
    them (:func:`_coupled_resample_sums`), so uniform draws are made and counted once and only
    a few corrections per resample are set by set. Each ratio's distribution is exactly that of
    :func:`cluster_bootstrap`; only the stream differs: coupled sets share ``cell_rng(seed,
    ())`` (their intervals depend on all the clusters of the call), a smaller set uses
    :func:`cell_rng` with its first cell's key. Row order does not matter.

    Parameters
    ----------
    partials
        One row per (cluster, cell): the ``cells`` columns, ``cluster`` and the numerator and
        denominator columns of ``ratios`` (numeric, no nulls).
    cells
        Key columns of a cell (may be empty).
    cluster
        The cluster key column (unique within a cell).
    ratios
        ``(name, numerator, denominator)`` triples.
    n_resamples, confidence, seed
        As in :func:`cluster_bootstrap`.

    Returns
    -------
    polars.DataFrame
        One row per (cell, ratio) whose denominator sums to more than 0: the cell columns,
        ``ratio`` (the name), ``estimate``, ``ci_low``, ``ci_high`` (Float64; NaN when every
        resample is undefined) and ``n_clusters`` (Int64).

    Raises
    ------
    ParameterError
        For a bad parameter, a missing column or a cluster listed twice in a cell.

    Examples
    --------
    >>> frame = pl.DataFrame({"w": ["a", "b", "c"], "k": [1, 0, 2], "n": [1, 1, 2]})
    >>> out = cluster_bootstrap_ratios(
    ...     frame, cells=[], cluster="w", ratios=[("rate", "k", "n")], n_resamples=200
    ... )
    >>> out["estimate"].to_list()
    [0.75]
    """
    cells_l = _column_names("cells", cells)
    n_resamples = _check_n_resamples(n_resamples)
    confidence = _check_confidence(confidence)
    seed = _check_seed("seed", seed)
    columns = list(dict.fromkeys(c for _, num, den in ratios for c in (num, den)))
    missing = [c for c in [*cells_l, cluster, *columns] if c not in partials.columns]
    if missing:
        raise ParameterError(f"columns {missing} are not in `partials` ({partials.columns}).")
    keys = list(dict.fromkeys([*cells_l, cluster]))  # the cluster may be a cell key itself
    frame = partials.select(*keys, *(pl.col(c).cast(pl.Float64) for c in columns))
    frame = frame.sort(keys, nulls_last=False)
    if frame.select(pl.struct(*keys).is_duplicated().any()).item():
        raise ParameterError(f"`partials` lists a `{cluster}` twice within a cell.")
    # Every cluster's position among all clusters of the call (sorted, so row order is moot).
    universe = frame.select(cluster).unique().sort(cluster, nulls_last=False).with_row_index("__at")
    frame = frame.join(universe, on=cluster, how="left", nulls_equal=True, maintain_order="left")
    parts: list[tuple[tuple[Any, ...], pl.DataFrame]] = (
        list(frame.partition_by(cells_l, as_dict=True, maintain_order=True).items())
        if cells_l
        else ([((), frame)] if frame.height else [])
    )
    groups: dict[bytes, list[tuple[tuple, np.ndarray]]] = {}
    members: dict[bytes, np.ndarray] = {}
    for key, part in parts:
        at = part.get_column("__at").to_numpy().astype(np.int64)
        members.setdefault(at.tobytes(), at)
        groups.setdefault(at.tobytes(), []).append((key, part.select(columns).to_numpy()))
    sums = _ratio_resample_sums(groups, members, universe.height, n_resamples, seed)
    rows = [
        (*key, *row)
        for at_key, cells_of_set in groups.items()
        for (key, values), block in zip(cells_of_set, sums[at_key], strict=True)
        for row in _ratio_rows(values, block, columns, ratios, confidence)
    ]
    schema: dict[str, Any] = {
        **{c: partials.schema[c] for c in cells_l},
        "ratio": pl.String,
        **dict.fromkeys(["estimate", "ci_low", "ci_high"], pl.Float64),
        "n_clusters": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def _ratio_rows(
    values: np.ndarray,
    block: np.ndarray,
    columns: list[str],
    ratios: Sequence[tuple[str, str, str]],
    confidence: float,
) -> list[tuple[str, float, float, float, int]]:
    """One cell's (ratio, estimate, ci_low, ci_high, n_clusters) of each defined ratio."""
    totals = values.sum(axis=0)
    rows = []
    for name, num, den in ratios:
        a, b = columns.index(num), columns.index(den)
        if totals[b] > 0:
            with np.errstate(divide="ignore", invalid="ignore"):
                low, high = _percentile_interval(block[:, a] / block[:, b], confidence)
            rows.append((name, float(totals[a] / totals[b]), low, high, values.shape[0]))
    return rows


#: A set holding at least this share of the clusters of a call is coupled to the resample of
#: them all (:func:`_coupled_resample_sums`); a smaller one draws alone, so that no product
#: runs over many clusters it does not hold.
_COUPLED_SHARE = 0.5


def _ratio_resample_sums(
    groups: dict[bytes, list[tuple[tuple, np.ndarray]]],
    members: dict[bytes, np.ndarray],
    n_universe: int,
    n_resamples: int,
    seed: int,
) -> dict[bytes, list[np.ndarray]]:
    """Resampled column sums of every cell, keyed by its cluster set (one block per cell).

    Large sets are coupled to one resample of all ``n_universe`` clusters, drawn from
    ``cell_rng(seed, ())``; small sets draw alone from ``cell_rng(seed, first cell key)``.
    """
    large = [s for s in groups if members[s].size >= _COUPLED_SHARE * n_universe]
    out: dict[bytes, list[np.ndarray]] = {}
    if large:
        coupled = _coupled_resample_sums(
            [(members[s], np.hstack([v for _, v in groups[s]])) for s in large],
            n_universe,
            n_resamples,
            cell_rng(seed, ()),
        )
        for s, sums in zip(large, coupled, strict=True):
            widths = np.cumsum([v.shape[1] for _, v in groups[s]])[:-1]
            out[s] = np.hsplit(sums, widths)
    for s, cells_of_set in groups.items():
        if s not in out:
            blocks = [values for _, values in cells_of_set]
            out[s] = _shared_resample_sums(blocks, n_resamples, cell_rng(seed, cells_of_set[0][0]))
    return out


def _coupled_resample_sums(
    sets: list[tuple[np.ndarray, np.ndarray]],
    n_universe: int,
    n_resamples: int,
    gen: np.random.Generator,
) -> list[np.ndarray]:
    """Column sums of each set's rows over ``n_resamples`` resamples, all drawn from one stream.

    ``sets``: per set, the positions of its K_s clusters among the ``n_universe`` of the call
    and a (K_s, C) block of their values. Each resample is one stream of ``n_universe`` uniform
    draws over all clusters (counted once, one matrix product for every set). Draws landing in
    a set are uniform over it wherever they fall, so the set keeps the first K_s of them and
    tops up from its own clusters when fewer landed: exactly a resample of its own clusters.
    Only the corrections (about the sd of a Binomial(N, K_s/N) per resample) are set by set.
    """
    widths = [block.shape[1] for _, block in sets]
    edges = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    design = np.zeros((n_universe, int(edges[-1]) + len(sets)))
    for i, (where, block) in enumerate(sets):
        design[where, edges[i] : edges[i + 1]] = block
        design[where, edges[-1] + i] = 1.0  # counts the draws that land in the set
    product = _ExactProduct(design, n_universe)
    coupled = [_CoupledSet(where, block, n_universe) for where, block in sets]
    outs = [np.empty((n_resamples, w), dtype=np.float64) for w in widths]
    batch = max(1, min(256, _MAX_BATCH_ELEMENTS // n_universe))
    with _one_blas_thread():
        for start in range(0, n_resamples, batch):
            _coupled_batch(start, min(batch, n_resamples - start), coupled, product, outs, gen)
    return outs


def _coupled_batch(
    start: int,
    size: int,
    coupled: list[_CoupledSet],
    product: _ExactProduct,
    outs: list[np.ndarray],
    gen: np.random.Generator,
) -> None:
    """Fill rows ``start:start + size`` of every set's sums (see :func:`_coupled_resample_sums`)."""
    n_universe = coupled[0].position.size
    draws = gen.integers(0, n_universe, size=(size, n_universe), dtype=np.int32)
    offsets = (np.arange(size, dtype=np.int64) * n_universe)[:, np.newaxis]
    counts = np.bincount((draws + offsets).reshape(-1), minlength=size * n_universe)
    sums = product(counts.reshape(size, n_universe))
    landed_at = sums.shape[1] - len(coupled)
    edge = 0
    for i, (one, out) in enumerate(zip(coupled, outs, strict=True)):
        width = out.shape[1]
        out[start : start + size] = sums[:, edge : edge + width]
        edge += width
        if one.k < n_universe:
            landed = np.rint(sums[:, landed_at + i]).astype(np.int64)
            out[start : start + size] += one.correction(draws, landed, gen)


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Run the block's matrix products on one BLAS thread.

    The products are many and mid-sized: on a shared machine BLAS threads wait on each other
    (measured: 5-6x the CPU of one thread, same wall time, at a load of 10 on 2 cores).
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


class _ExactProduct:
    """``counts @ design`` in float32 for the columns where that is exact, float64 for the rest.

    Integer columns whose resampled sums stay below 2**24 sum exactly in float32, at half the cost.
    """

    def __init__(self, design: np.ndarray, n_draws: int) -> None:
        integral = (design == np.round(design)).all(axis=0)
        small = np.abs(design).max(axis=0, initial=0.0) * n_draws < 2.0**24
        self.exact = integral & small
        self.single = np.ascontiguousarray(design[:, self.exact], dtype=np.float32)
        self.double = np.ascontiguousarray(design[:, ~self.exact])
        self.width = design.shape[1]

    def __call__(self, counts: np.ndarray) -> np.ndarray:
        out = np.empty((counts.shape[0], self.width), dtype=np.float64)
        if self.single.shape[1]:
            out[:, self.exact] = counts.astype(np.float32) @ self.single
        if self.double.shape[1]:
            out[:, ~self.exact] = counts.astype(np.float64) @ self.double
        return out


class _CoupledSet:
    """One set of clusters inside the stream of :func:`_coupled_resample_sums`."""

    def __init__(self, where: np.ndarray, block: np.ndarray, n_universe: int) -> None:
        self.k = where.size
        self.block = block
        self.position = np.full(n_universe, -1, dtype=np.int64)
        self.position[where] = np.arange(self.k)
        self.inside = self.position >= 0

    def correction(
        self, draws: np.ndarray, landed: np.ndarray, gen: np.random.Generator
    ) -> np.ndarray:
        """Return the change of the row sums that makes each row exactly K_s draws of the set.

        ``draws``: (B, N) uniform draws; ``landed``: how many per row fell in the set. A row
        with too many drops its last surplus draws in the set; one with too few draws more.
        """
        surplus = landed - self.k
        rows, picks, signs = [], [], []
        short = np.flatnonzero(surplus < 0)
        if short.size:
            need = -surplus[short]
            rows.append(np.repeat(short, need))
            picks.append(gen.integers(0, self.k, size=int(need.sum())))
            signs.append(np.ones(int(need.sum())))
        over = np.flatnonzero(surplus > 0)
        if over.size:
            row, cluster = self._last_landed(draws, over, surplus[over])
            rows.append(over[row])
            picks.append(self.position[cluster])
            signs.append(-np.ones(row.size))
        correction = np.zeros((draws.shape[0], self.block.shape[1]), dtype=np.float64)
        if not rows:
            return correction
        row_of = np.concatenate(rows)
        order = np.argsort(row_of, kind="stable")
        row_of = row_of[order]
        values = self.block[np.concatenate(picks)[order]] * np.concatenate(signs)[order, None]
        starts = np.flatnonzero(np.concatenate([[True], row_of[1:] != row_of[:-1]]))
        correction[row_of[starts]] = np.add.reduceat(values, starts, axis=0)
        return correction

    def _last_landed(
        self, draws: np.ndarray, over: np.ndarray, surplus: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(row of ``over``, cluster) of each row's last ``surplus`` draws in the set.

        Only a tail of each row is searched, widened until every row has enough of them.
        """
        n_universe = draws.shape[1]
        most = int(surplus.max())
        width = min(n_universe, math.ceil((most + 4 * math.sqrt(most) + 16) * n_universe / self.k))
        while True:
            tail = draws[over, n_universe - width :]
            hit = self.inside[tail]
            if width == n_universe or (hit.sum(axis=1) >= surplus).all():
                break
            width = min(n_universe, 2 * width)
        # hits at or after each position
        later = np.cumsum(hit[:, ::-1], axis=1, dtype=np.int32)[:, ::-1]
        row, column = np.nonzero(hit & (later <= surplus[:, np.newaxis]))
        return row, tail[row, column]


def _shared_resample_sums(
    blocks: list[np.ndarray], n_resamples: int, gen: np.random.Generator
) -> list[np.ndarray]:
    """Column sums of each block over ``n_resamples`` resamples of the (shared) rows.

    Every block holds one row per cluster, the same clusters in the same order. A block with
    few types (equal rows, ARCHITECTURE §4) draws a multinomial over them (one binomial per type
    and resample); the others share one draw of K uniform cluster indices per resample, counted
    per cluster, times each block. Both are exact; the products stay small (per block, in small
    batches), where BLAS threads would only wait on a busy machine.
    """
    n_rows = blocks[0].shape[0]
    outs = [np.empty((n_resamples, b.shape[1]), dtype=np.float64) for b in blocks]
    shared = []
    for block, out in zip(blocks, outs, strict=True):
        types, counts = _merge_types(block, np.ones(n_rows, dtype=np.int64))
        if types.shape[0] * _TYPE_DRAW_COST < n_rows:
            batch = max(1, _MAX_BATCH_ELEMENTS // types.shape[0])
            for start in range(0, n_resamples, batch):
                size = min(batch, n_resamples - start)
                draws = gen.multinomial(n_rows, counts / n_rows, size=size)
                out[start : start + size] = draws.astype(np.float64) @ types
        else:
            shared.append((block, out))
    batch = max(1, min(32, _MAX_BATCH_ELEMENTS // n_rows))
    for start in range(0, n_resamples if shared else 0, batch):
        size = min(batch, n_resamples - start)
        offsets = (np.arange(size, dtype=np.int64) * n_rows)[:, np.newaxis]
        picks = (gen.integers(0, n_rows, size=(size, n_rows)) + offsets).reshape(-1)
        drawn = np.bincount(picks, minlength=size * n_rows).reshape(size, n_rows)
        drawn_f = drawn.astype(np.float64)
        for block, out in shared:
            out[start : start + size] = drawn_f @ block
    return outs


def sign_flip_cells(
    partials: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    difference: str,
    count: str | None = None,
    n_resamples: int = 100_000,
    seed: int = 0,
    alternative: str = "two-sided",
) -> pl.DataFrame:
    """Run the paired sign-flip test of per-cluster differences separately in every cell.

    Parameters
    ----------
    partials
        One row per cluster × cell (or per type, when ``count`` names a multiplicity column),
        with the cell key columns and the difference column. Eager or lazy.
    cells
        Key columns of a cell (may be empty); nulls are keys.
    difference
        Column of per-cluster differences (e.g. recovery successes minus no-recovery successes).
    count
        Optional column of positive integer multiplicities.
    n_resamples
        Monte Carlo resamples, where no exact method applies (see :func:`sign_flip_test`).
    seed
        Non-negative integer; combined with each cell key by :func:`cell_rng`.
    alternative
        ``"two-sided"``, ``"greater"`` or ``"less"`` (see :func:`sign_flip_test`).

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
    require_one_of("alternative", alternative, ALTERNATIVES)

    keys, groups = _cell_types(
        partials, cells_l, [difference], count, _SIGN_FLIP_COLUMNS, role="difference"
    )
    results = [
        sign_flip_test(
            cell_values[:, 0],
            cell_counts,
            n_resamples=n_resamples,
            rng=cell_rng(seed, key),
            alternative=alternative,
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
    ci_method: str = "auto",
    seed: int = 0,
    alternative: str = "two-sided",
    adjust: str | None = None,
    **deprecated: object,
) -> pl.DataFrame:
    """Interval and p-value of a paired effect Σd / Σn per cell, from per-cluster types.

    The last step of every paired comparison (rescue minus harm, a policy's gain over never
    recovering, one policy's margin over another): a cluster is a task with ``d`` = its summed
    outcome differences over ``n`` pairs. The p-value is :func:`sign_flip_cells` of ``d``
    (exact for integers). The default interval never contradicts it (ARCHITECTURE §4): zero
    lies outside it exactly when ``p_value < 1 − confidence``.

    Interval methods (``ci_method``; the ``ci_method`` column names what each cell got):

    * ``"fay-lumbard"``: every cluster one pair (n = 1, d in {−1, 0, 1}): the exact,
      McNemar-compatible meld of :func:`fay_lumbard_interval`, no Monte Carlo.
    * ``"cluster-melded"``: several pairs per cluster: :func:`cluster_melded_interval`, the
      hull of the exact sign-flip inversion and a meld on design-effect-adjusted counts.
    * ``"sign-flip"``: the exact inversion of the sign-flip test alone,
      :func:`sign_flip_interval` (any integer partials); under-covers in sparse cells.
    * ``"auto"`` (default; also what ``"fay-lumbard"`` and ``"cluster-melded"`` do):
      ``fay-lumbard`` where every cluster is one pair, ``cluster-melded`` otherwise.
    * ``"percentile"`` / ``"bca"``: the cluster bootstrap (:func:`cluster_bootstrap`, stream
      per cell); for comparison, not guaranteed to agree with the test.

    Test-based bounds then go through :func:`agree_with_test` with the reported p-value, so
    agreement is exact, not up to floating point. A cell is ``sparse`` with fewer than
    ``SPARSE_NONZERO_CLUSTERS`` (10) clusters with a nonzero difference or fewer than
    ``SPARSE_CLUSTERS`` (20) clusters: its interval is wide by necessity and a bootstrap there
    would be overconfident.

    Parameters
    ----------
    types
        One row per cluster, or per distinct (cells, d, n) type with multiplicity ``count``.
    cells, difference, n, count
        Column names: cell keys, per-cluster summed difference, per-cluster pairs, multiplicity
        (``None`` when every row is one cluster).
    n_resamples, seed
        Resamples and seed of the bootstrap methods and of Monte Carlo p-values.
    confidence
        Confidence level in (0, 1) (above 0.5 for one-sided bootstrap intervals).
    ci_method
        ``"auto"``, ``"fay-lumbard"``, ``"sign-flip"``, ``"percentile"`` or ``"bca"``.
    alternative
        ``"two-sided"``, ``"greater"`` (H1: effect > 0; the interval is ``[ci_low, 1]``) or
        ``"less"`` (``[-1, ci_high]``); the p-value is one-sided to match.
    adjust
        ``None``, ``"holm"`` or ``"bh"`` (Benjamini–Hochberg): adds ``p_adjusted``, adjusted
        over the family of all cells of this result (see :func:`adjust_p_values`).

    Returns
    -------
    pl.DataFrame
        One row per cell: cell columns, ``ci_low``, ``ci_high``, ``n_clusters``, ``p_value``,
        ``ci_method`` (String), ``sparse`` (Boolean), and ``p_adjusted`` when ``adjust`` is set.

    Raises
    ------
    ParameterError
        For a bad parameter or column name.

    Examples
    --------
    >>> types = pl.DataFrame({"cell": ["x", "x"], "d": [1, 0], "n": [1, 1], "count": [6, 4]})
    >>> out = paired_effect_cells(types, cells=["cell"])
    >>> out["p_value"].item(), out["ci_method"].item(), out["ci_low"].item() > 0
    (0.03125, 'fay-lumbard', True)
    """
    cells_l = _column_names("cells", cells)
    old = renamed("paired_effect_cells", deprecated, _OLD_CI_NAME)
    method = str(old.get("ci_method", ci_method))
    require_one_of("ci_method", method, PAIRED_CI_METHODS)
    require_one_of("alternative", alternative, ALTERNATIVES)
    require_one_of("adjust", adjust, ADJUST_METHODS)
    confidence = _check_confidence(confidence)
    flip = sign_flip_cells(
        types, cells=cells_l, difference=difference, count=count, seed=seed, alternative=alternative
    ).select(*cells_l, "p_value")
    values = [difference, n]
    if method in CI_METHODS:
        intervals = _bootstrap_effect_cells(
            types, cells_l, values, count, n_resamples, confidence, method, seed, alternative
        )
    else:
        intervals = _test_effect_cells(
            types, cells_l, values, count, confidence, method, alternative
        )
    if cells_l:
        out = intervals.join(flip, on=cells_l, how="left", nulls_equal=True, maintain_order="left")
    else:
        out = intervals.hstack(flip)
    if method not in CI_METHODS:
        ci = agree_with_test(
            *(out[c].to_numpy() for c in ("ci_low", "ci_high", "p_value")),
            confidence=confidence,
            alternative=alternative,
        )
        out = out.with_columns(
            pl.Series("ci_low", np.asarray(ci.low), dtype=pl.Float64),
            pl.Series("ci_high", np.asarray(ci.high), dtype=pl.Float64),
        )
    out = out.select(*cells_l, "ci_low", "ci_high", "n_clusters", "p_value", "ci_method", "sparse")
    if adjust is not None:
        adjusted = adjust_p_values(out["p_value"].to_numpy(), adjust)
        out = out.with_columns(pl.Series("p_adjusted", adjusted, dtype=pl.Float64))
    return out


def _bootstrap_effect_cells(
    types: pl.DataFrame | pl.LazyFrame,
    cells: list[str],
    values: list[str],
    count: str | None,
    n_resamples: int,
    confidence: float,
    method: str,
    seed: int,
    alternative: str,
) -> pl.DataFrame:
    """Cluster-bootstrap intervals (one-sided: one bound of the 1 − 2α two-sided interval)."""
    level = confidence
    if alternative != "two-sided":
        if confidence <= 0.5:
            raise ParameterError(
                f"parameter `confidence` is {confidence!r}; a one-sided bootstrap interval needs "
                "a confidence above 0.5."
            )
        level = 2 * confidence - 1
    boot = cluster_bootstrap(
        types,
        cells=cells,
        values=values,
        count=count,
        n_resamples=n_resamples,
        confidence=level,
        ci_method=method,
        seed=seed,
    )
    _, groups = _cell_types(types, cells, values, count, ("ci_low", "ci_high", "n_clusters"))
    sparse = [_is_sparse(v[:, 0], c) for _, v, c in groups]
    return boot.select(
        *cells,
        pl.lit(-1.0).alias("ci_low") if alternative == "less" else "ci_low",
        pl.lit(1.0).alias("ci_high") if alternative == "greater" else "ci_high",
        "n_clusters",
        pl.lit(method).alias("ci_method"),
        pl.Series("sparse", sparse, dtype=pl.Boolean),
    )


def _is_sparse(d: np.ndarray, counts: np.ndarray) -> bool:
    """Apply the documented ``sparse`` rule: few clusters with a nonzero difference, or few."""
    nonzero = int(counts[d != 0].sum())
    return nonzero < SPARSE_NONZERO_CLUSTERS or int(counts.sum()) < SPARSE_CLUSTERS


def _test_effect_cells(
    types: object,
    cells: list[str],
    values: list[str],
    count: str | None,
    confidence: float,
    method: str,
    alternative: str,
) -> pl.DataFrame:
    """Compute test-based intervals: Fay–Lumbard (vectorised) for one-pair cells, else inversion."""
    keys, groups = _cell_types(types, cells, values, count, ("ci_low", "ci_high", "n_clusters"))
    size = len(groups)
    low, high = np.full(size, np.nan), np.full(size, np.nan)
    n_clusters = np.zeros(size, dtype=np.int64)
    sparse = np.zeros(size, dtype=bool)
    chosen = np.full(size, "sign-flip", dtype=object)
    counts_fl = np.zeros((size, 3))
    for i, (key, cell_values, cell_counts) in enumerate(groups):
        d, pairs = cell_values[:, 0], cell_values[:, 1]
        if (cell_values != np.round(cell_values)).any() or (pairs < 0).any():
            raise ParameterError(
                f"partials: cell {key!r} has non-integer `{values[0]}` or `{values[1]}` values; "
                f"ci_method {method!r} needs integer per-cluster counts. Hint: use "
                "ci_method='percentile' for non-integer partials."
            )
        n_clusters[i] = int(cell_counts.sum())
        sparse[i] = _is_sparse(d, cell_counts)
        if method != "sign-flip" and bool(np.all(pairs == 1)) and bool(np.all(np.abs(d) <= 1)):
            chosen[i] = "fay-lumbard"
            counts_fl[i] = [cell_counts[d == 1].sum(), cell_counts[d == -1].sum(), n_clusters[i]]
            continue
        interval = sign_flip_interval if method == "sign-flip" else cluster_melded_interval
        chosen[i] = "sign-flip" if method == "sign-flip" else "cluster-melded"
        ci = interval(cell_values, cell_counts, confidence=confidence, alternative=alternative)
        low[i], high[i] = float(ci.low), float(ci.high)
    melded = chosen == "fay-lumbard"
    if melded.any():
        rescue, harm, pairs = counts_fl[melded].T
        ci = fay_lumbard_interval(
            rescue, harm, pairs, confidence=confidence, alternative=alternative
        )
        low[melded], high[melded] = ci.low, ci.high
    return pl.DataFrame(
        [
            *keys.get_columns(),
            pl.Series("ci_low", low, dtype=pl.Float64),
            pl.Series("ci_high", high, dtype=pl.Float64),
            pl.Series("n_clusters", n_clusters, dtype=pl.Int64),
            pl.Series("ci_method", chosen.tolist(), dtype=pl.String),
            pl.Series("sparse", sparse, dtype=pl.Boolean),
        ]
    )


def agree_with_test(
    low: np.ndarray,
    high: np.ndarray,
    p_value: np.ndarray,
    *,
    confidence: float = 0.95,
    alternative: str = "two-sided",
) -> Interval:
    """Put zero on the side of an interval that the test's p-value decides.

    Zero is kept inside (the interval extended to it) when ``p_value >= 1 − confidence``, and
    moved just outside when the test rejects (the bound between zero and the data becomes the
    smallest float beyond zero). For this module's exact intervals this changes a bound only
    when p is within rounding of 1 − confidence; it makes the hull of
    :func:`cluster_melded_interval` agree with the test.

    Parameters
    ----------
    low, high, p_value
        Arrays of bounds and p-values (NaN bounds stay NaN).
    confidence, alternative
        The confidence level and the alternative of the test.

    Returns
    -------
    Interval
        The adjusted bounds, as arrays.

    Examples
    --------
    >>> ci = agree_with_test(np.array([-0.01]), np.array([0.2]), np.array([0.01]))
    >>> bool(ci.low[0] > 0), float(ci.high[0])
    (True, 0.2)
    """
    confidence = _check_confidence(confidence)
    require_one_of("alternative", alternative, ALTERNATIVES)
    low = np.array(low, dtype=np.float64)
    high = np.array(high, dtype=np.float64)
    reject = np.asarray(p_value, dtype=np.float64) < 1.0 - confidence
    tiny = float(np.nextafter(0.0, 1.0))
    # The side of zero the data lie on: a rejecting test has its interval on that side.
    positive = (low + high) > 0 if alternative == "two-sided" else alternative == "greater"
    if alternative != "less":
        low = np.where(reject & positive, np.maximum(low, tiny), low)
        low = np.where(~reject, np.minimum(low, 0.0), low)
    if alternative != "greater":
        high = np.where(reject & ~positive, np.minimum(high, -tiny), high)
        high = np.where(~reject, np.maximum(high, 0.0), high)
    return Interval(low=low, high=high)


def adjust_p_values(p_values: np.ndarray | Sequence[float], method: str) -> np.ndarray:
    """Adjust a family of p-values for multiplicity: Holm (FWER) or Benjamini–Hochberg (FDR).

    The family is every p-value given (a result's cells); NaN entries stay NaN, outside the
    family. Matches ``statsmodels.stats.multitest.multipletests`` (``"holm"``, ``"fdr_bh"``).

    Parameters
    ----------
    p_values
        1-D array of p-values in [0, 1] (NaN allowed).
    method
        ``"holm"`` or ``"bh"``.

    Returns
    -------
    numpy.ndarray
        Adjusted p-values, same shape, capped at 1.

    Raises
    ------
    ParameterError
        For an unknown method, a non 1-D input or p-values outside [0, 1].

    Examples
    --------
    >>> adjust_p_values([0.01, 0.04, 0.03], "holm").round(4).tolist()
    [0.03, 0.06, 0.06]
    >>> adjust_p_values([0.01, 0.04, 0.03], "bh").round(4).tolist()
    [0.03, 0.04, 0.04]
    """
    require_one_of("method", method, ("holm", "bh"))
    p = _numeric_array("p_values", p_values).astype(np.float64)
    if p.ndim != 1:
        raise ParameterError(f"parameter `p_values` has shape {p.shape}; it must be 1-D.")
    known = ~np.isnan(p)
    if ((p[known] < 0) | (p[known] > 1)).any():
        raise ParameterError("parameter `p_values` holds values outside [0, 1].")
    out = np.full(p.shape, np.nan)
    values = p[known]
    size = values.size
    if size == 0:
        return out
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    if method == "holm":
        steps = np.maximum.accumulate((size - np.arange(size)) * ranked)
    else:
        steps = np.minimum.accumulate((size / np.arange(size, 0, -1)) * ranked[::-1])[::-1]
    adjusted = np.empty(size)
    adjusted[order] = np.minimum(steps, 1.0)
    out[known] = adjusted
    return out


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

    Returns the cell keys (one row per cell, sorted, original dtypes) and, per cell, the key tuple,
    the (T, V) float64 value matrix and the (T,) int64 counts. Only the type table is collected.
    """
    frame = _checked_partials(partials, cells, values, count, reserved, role)
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
        keys = types.select(cells)[starts]
        key_rows = keys.rows()
    else:  # a frame without columns has no rows: the one cell's key row cannot be gathered
        starts, keys, key_rows = np.array([0]), pl.DataFrame(), [()]
    matrix = types.select(pl.col(v).cast(pl.Float64) for v in values).to_numpy()
    cuts = starts[1:]
    parts = zip(np.split(matrix, cuts), np.split(types[_N].to_numpy(), cuts), strict=True)
    return keys, [(key, v, c) for key, (v, c) in zip(key_rows, parts, strict=True)]


def _checked_partials(
    partials: object,
    cells: list[str],
    values: list[str],
    count: str | None,
    reserved: Sequence[str],
    role: str,
) -> pl.LazyFrame:
    """Return ``partials`` as a LazyFrame after checking the roles and types of its columns."""
    if isinstance(partials, pl.DataFrame):
        partials = partials.lazy()
    if not isinstance(partials, pl.LazyFrame):
        raise ParameterError(
            f"parameter `partials` is a {type(partials).__name__}; it must be a polars DataFrame "
            "or LazyFrame. Hint: recoverylab.io.scan() reads any table source as a LazyFrame."
        )
    schema = partials.collect_schema()
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
    return partials


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


# -- Sign-flip test ----------------------------------------------------------------------------


def sign_flip_test(
    differences: np.ndarray | Sequence[float],
    counts: np.ndarray | Sequence[int] | None = None,
    *,
    method: str = "auto",
    n_resamples: int = 100_000,
    rng: np.random.Generator | int | None = None,
    alternative: str = "two-sided",
) -> SignFlipResult:
    """Test whether paired per-cluster differences are symmetric about zero, by flipping signs.

    Paired permutation test: T = Σ dᵢ and, under H0, T* = Σ sᵢ dᵢ with independent random signs;
    two-sided p = P(|T*| ≥ |T|). For floats, |T*| within 100 machine epsilons of |T| ties (like
    scipy), relative to Σ|dᵢ| (the largest |T*|) rather than |T|, so rounding is absorbed even
    when T is near 0 by cancellation. Integers need no tolerance: their lattice is exact.

    How it is computed (``method="auto"``):

    * integer differences: exact, by convolution. By absolute value a with multiplicity mₐ,
      T* = Σₐ a·(2·Binomial(mₐ, ½) − mₐ); the pieces' pmfs on the lattice of the gcd of the
      |values| are convolved (directly when small, by FFT when large). With one distinct
      |value| the binomial tails give it directly (= :func:`mcnemar_exact` on ±1 data).
    * otherwise, with at most 20 nonzero clusters: exact enumeration of all 2ⁿ sign vectors.
    * otherwise Monte Carlo with R resamples and the +1 correction, p = (1 + #{|T*| ≥ |T|}) /
      (1 + R): through ``scipy.stats.permutation_test`` up to 1,000 nonzero clusters, above by
      drawing v·(2·Binomial(m, ½) − m) per distinct value v of multiplicity m (same law).

    ``scipy.stats.permutation_test(alternative="two-sided")`` reports twice the smaller
    one-sided p-value: equal to P(|T*| ≥ |T|) for the symmetric sign-flip null, but under Monte
    Carlo it differs by noise and doubles the +1 correction. Every method here reports
    P(|T*| ≥ |T|) (only the null draws come from scipy).

    Parameters
    ----------
    differences
        Per-cluster differences (one per cluster, or per type with ``counts``); zeros count as
        clusters but do not change T*.
    counts
        Optional positive integer multiplicities, one per entry of ``differences``.
    method
        ``"auto"``, ``"exact"`` (raise when no exact method applies) or ``"monte-carlo"``.
    n_resamples
        Monte Carlo resamples (>= 1); ignored by the exact methods.
    rng
        A numpy Generator, an integer seed, or None for seed 0 (Monte Carlo only).
    alternative
        ``"two-sided"`` (P(|T*| ≥ |T|)), ``"greater"`` (P(T* ≥ T): evidence that the
        differences are positive) or ``"less"`` (P(T* ≤ T)). Every method computes all three.

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
    require_one_of("alternative", alternative, ALTERNATIVES)
    unique, multiplicity = _merge_types(d[:, np.newaxis], c)
    unique = unique[:, 0]
    n_clusters = int(multiplicity.sum())
    observed = float(multiplicity.astype(np.float64) @ unique)
    nonzero = unique != 0
    v, m = unique[nonzero], multiplicity[nonzero]
    n_nonzero = int(m.sum())

    def result(p_value: float, how: str, resamples: int | None = None) -> SignFlipResult:
        p_value = min(max(p_value, 0.0), 1.0)
        return SignFlipResult(observed, p_value, how, n_clusters, resamples, str(alternative))

    if n_nonzero == 0:
        return result(1.0, "exact-enumeration")
    if alternative != "two-sided" and method != "monte-carlo":
        exact = _sign_flip_one_sided_exact(v, m, observed, alternative)
        if exact is not None:
            return result(*exact)
    if method != "monte-carlo":
        if bool(np.all(v == np.round(v))) and bool(np.all(np.abs(v) < _MAX_EXACT_INT)):
            p_value = _sign_flip_lattice(v.astype(np.int64), m)
            if p_value is not None:
                return result(p_value, "exact-convolution")
        if n_nonzero <= _MAX_ENUMERATION:
            p_value = _sign_flip_enumerate(np.repeat(v, m), alternative)
            return result(p_value, "exact-enumeration")
        if method == "exact":
            raise ParameterError(
                f"parameter `method` is 'exact' but the differences are not integers (or their "
                f"lattice has more than {_MAX_LATTICE} points) and there are {n_nonzero} nonzero "
                f"clusters; exact enumeration is limited to {_MAX_ENUMERATION}. Hint: use "
                "method='auto' or 'monte-carlo'."
            )
    elif n_nonzero <= _MAX_ENUMERATION and 2**n_nonzero <= n_resamples:
        # Enumerating every sign vector costs no more than the requested resamples.
        p_value = _sign_flip_enumerate(np.repeat(v, m), alternative)
        return result(p_value, "exact-enumeration")

    tolerance = _TIE_RTOL * float(m.astype(np.float64) @ np.abs(v))
    if n_nonzero <= _SCIPY_MC_MAX_CLUSTERS:
        null = _sign_flip_null_scipy(np.repeat(v, m), n_resamples, gen)
    else:
        null = _sign_flip_null_types(v, m, n_resamples, gen)
    hits = _tail_hits(null, observed, tolerance, alternative)
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

    With |values| a (multiplicity mₐ, gcd g, a' = a / g) and Bₐ ~ Binomial(mₐ, ½) positive
    signs, T*/g = 2U − S, U = Σ a'·Bₐ, S = Σ a'·mₐ; T/g is an integer t on the same lattice, so
    the tail {|2U − S| ≥ |t|} is exact, with no tolerance.
    """
    steps, per_magnitude, gcd = _magnitudes(v, m)
    t = abs(int((v // gcd) @ m))
    if t == 0:
        return 1.0
    if steps.size == 1:
        # One distinct |value|: T*/a = 2B − M, B ~ Binomial(M, ½), a two-sided binomial test
        # (the same function as mcnemar_exact, so the p-values on ±1 data are equal exactly).
        return _binomial_half_two_sided((int(per_magnitude[0]) - t) // 2, int(per_magnitude[0]))
    null = _lattice_pmf(steps, per_magnitude)
    if null is None:
        return None
    support, pmf = null
    return float(pmf[np.abs(support) >= t].sum())


def _lattice_pmf(steps_a: np.ndarray, sizes_a: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Return the null pmf of T*/g = Σ a'·(2·Binomial(mₐ, ½) − mₐ) on its integer support.

    None when the lattice would exceed ``_MAX_LATTICE`` points. Mass outside the Hoeffding
    window of :func:`_negligible_window` (below 1e-340) is dropped.
    """
    steps, sizes = steps_a.tolist(), sizes_a.tolist()
    windows = [_negligible_window(size / 2, size, size) for size in sizes]
    points = sum(step * (hi - lo) + 1 for step, (lo, hi) in zip(steps, windows, strict=True))
    if points > _MAX_LATTICE:
        return None
    pieces = []
    for step, size, (lo, hi) in zip(steps, sizes, windows, strict=True):
        pmf = np.zeros(step * (hi - lo) + 1)
        pmf[::step] = _binomial_half_pmf(size, lo, hi)
        pieces.append(_LatticePmf(step * lo, step * size / 2, step**2 * size, pmf))
    total = _convolve_all(pieces)
    span = sum(step * size for step, size in zip(steps, sizes, strict=True))
    doubled = 2 * (total.offset + np.arange(total.pmf.size, dtype=np.int64)) - span
    return doubled, total.pmf


def _magnitudes(v: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Return the distinct |v| over their gcd g, the clusters of each, and g (v integer, ≠ 0)."""
    magnitudes, inverse = np.unique(np.abs(v), return_inverse=True)
    per_magnitude = np.zeros(magnitudes.size, dtype=np.int64)
    np.add.at(per_magnitude, inverse, m)
    gcd = int(np.gcd.reduce(magnitudes))
    return magnitudes // gcd, per_magnitude, gcd


@dataclass(frozen=True)
class _LatticePmf:
    """The pmf of a sum of scaled binomials on the integers offset, offset + 1, ...

    ``scale`` = Σ m·a'² is its Hoeffding scale (each cluster adds a' times a Bernoulli(½)).
    """

    offset: int
    mean: float
    scale: float
    pmf: np.ndarray = field(repr=False, compare=False)


def _negligible_window(mean: float, scale: float, upper: int) -> tuple[int, int]:
    """Return the integer window [lo, hi] (within [0, upper]) outside which the mass is nil.

    Hoeffding: P(|U − mean| ≥ k) ≤ 2·exp(−2k²/scale) < 1e-340 for k = 20·√scale, so no double
    changes; a million clusters cost a few thousand lattice points, not a million.
    """
    half_width = 20.0 * math.sqrt(scale) + 1.0
    return max(0, math.floor(mean - half_width)), min(upper, math.ceil(mean + half_width))


def _convolve_all(pieces: list[_LatticePmf]) -> _LatticePmf:
    """Convolve pmfs, the two shortest first to keep the work balanced, trimming nil tails."""
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
            joined = np.clip(_fft_convolve(left.pmf, right.pmf), 0.0, None)
        offset = left.offset + right.offset
        mean, scale = left.mean + right.mean, left.scale + right.scale
        lo, hi = _negligible_window(mean - offset, scale, joined.size - 1)
        trimmed = _LatticePmf(offset + lo, mean, scale, joined[lo : hi + 1])
        heapq.heappush(heap, (trimmed.pmf.size, order, trimmed))
        order += 1
    return heap[0][2]


def _sign_flip_enumerate(x: np.ndarray, alternative: str = "two-sided") -> float:
    """Return the sign-flip p-value by enumerating sign vectors of the nonzero differences ``x``.

    Flipping every sign maps T* to −T*, so the first sign is fixed at + and the other 2ⁿ⁻¹
    sign vectors are enumerated in chunks of bit rows; each stands for the pair ±T*.
    """
    observed = float(x.sum())
    tolerance = _TIE_RTOL * float(np.abs(x).sum())
    rest = x[1:]
    n_vectors = 1 << rest.size
    shifts = np.arange(rest.size, dtype=np.int64)
    chunk = max(1, _MAX_BATCH_ELEMENTS // max(1, rest.size))
    hits = 0
    for start in range(0, n_vectors, chunk):
        index = np.arange(start, min(n_vectors, start + chunk), dtype=np.int64)
        signs = (((index[:, np.newaxis] >> shifts) & 1) * 2 - 1).astype(np.float64)
        flipped = x[0] + signs @ rest
        if alternative == "two-sided":
            hits += 2 * _tail_hits(flipped, observed, tolerance, alternative)
        else:
            pair = np.concatenate([flipped, -flipped])
            hits += _tail_hits(pair, observed, tolerance, alternative)
    return hits / (2 * n_vectors)


def _tail_hits(null: np.ndarray, observed: float, tolerance: float, alternative: str) -> int:
    """Count null draws at least as extreme as ``observed`` (ties within ``tolerance`` count)."""
    if alternative == "greater":
        return int(np.count_nonzero(null >= observed - tolerance))
    if alternative == "less":
        return int(np.count_nonzero(null <= observed + tolerance))
    return int(np.count_nonzero(np.abs(null) >= abs(observed) - tolerance))


def _sign_flip_one_sided_exact(
    v: np.ndarray, m: np.ndarray, observed: float, alternative: str
) -> tuple[float, str] | None:
    """Return the exact one-sided p and its method, or None when only Monte Carlo applies.

    The null of T* is symmetric, so P(T* ≤ T) = P(T* ≥ −T): both sides reduce to an upper
    tail P(T* ≥ t). For integers it is read off the lattice pmf; otherwise enumerated.
    """
    t = observed if alternative == "greater" else -observed
    if bool(np.all(v == np.round(v))) and bool(np.all(np.abs(v) < _MAX_EXACT_INT)):
        steps, sizes, gcd = _magnitudes(v.astype(np.int64), m)
        null = _lattice_pmf(steps, sizes)
        if null is not None:
            support, mass = null
            return float(mass[support >= round(t) // gcd].sum()), "exact-convolution"
    if int(m.sum()) <= _MAX_ENUMERATION:
        return _sign_flip_enumerate(np.repeat(v, m), alternative), "exact-enumeration"
    return None


def _sign_flip_null_scipy(x: np.ndarray, n_resamples: int, gen: np.random.Generator) -> np.ndarray:
    """Draw the Monte Carlo null of T* = Σ sᵢ xᵢ with ``scipy.stats.permutation_test``.

    Only the null comes from scipy: the caller's p-value is P(|T*| ≥ |T|) for every method.
    """
    batch = max(1, _MAX_BATCH_ELEMENTS // (2 * x.size))
    from scipy import stats as sps  # a slow import, kept off `import recoverylab`

    res = sps.permutation_test(
        (x,),
        np.sum,
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


# -- Paired-effect intervals compatible with the sign-flip test (ARCHITECTURE §4) --------------

#: Gauss–Legendre nodes per panel (:data:`_MELD_PANELS`, 8 panels) of the melded beta products:
#: 12 keep every bound within 4e-9 of adaptive quadrature for integer counts (n up to 1e6),
#: 3e-7 for effective counts far below 1 (tests/test_stats_meld.py: 1e-6); 10 nodes reach 3e-8
#: and 2.4e-7, 12 panels change nothing, 4 panels reach 1e-5.
_MELD_NODES = 12
#: Bisection steps for quantiles on [-1, 1]: 2**-35 is below any reported digit.
_BISECTION_STEPS = 36
#: Hoeffding half-width, in √m, of the window kept for Binomial(m, ½): outside it < 3e-14.
_HALF_SAMPLE_WIDTH = 4.0
#: Mass below which an edge of the joint (D, N) pmf is trimmed (far below any α used).
_TRIM_MASS = 1e-16


def _alpha_per_side(confidence: float, alternative: str) -> float:
    """Return the error allowed on each bounded side: (1 − c)/2 two-sided, 1 − c one-sided."""
    return (1.0 - confidence) / 2.0 if alternative == "two-sided" else 1.0 - confidence


def fay_lumbard_interval(
    rescue: np.ndarray | int,
    harm: np.ndarray | int,
    n: np.ndarray | int,
    confidence: float = 0.95,
    alternative: str = "two-sided",
) -> Interval:
    """Interval for a difference of matched proportions, compatible with the exact McNemar test.

    Of n pairs, ``rescue`` (only the recovery branch succeeds) and ``harm`` (only the
    no-recovery branch succeeds): θ = ψ·(2φ − 1), ψ the chance a pair is discordant, φ the
    chance a discordant pair is a rescue. As Fay & Lumbard (2021; ``mcnemarExactDP`` of R's
    exact2x2), the exact confidence distributions of ψ (Beta(m, n − m + 1), Beta(m + 1, n − m),
    m = rescue + harm) and φ (Beta(x, m − x + 1), Beta(x + 1, m − x)) are *melded*: the lower
    bound is the smaller α-quantile of T·(2B − 1) over both ψ distributions T with the lower φ
    distribution B, the upper bound the larger (1 − α)-quantile with the upper one. As T > 0,
    the lower bound is above zero exactly when P(B < ½) < α (the one-sided exact binomial test
    rejects): zero is outside exactly when the exact McNemar p-value is below 1 − confidence.
    The quantiles come from deterministic quadrature (no Monte Carlo noise).

    Parameters
    ----------
    rescue, harm, n
        Counts (scalars or arrays that broadcast); rescue + harm <= n.
    confidence
        Confidence level in (0, 1).
    alternative
        ``"two-sided"`` (central interval, α/2 per side), ``"greater"`` (lower bound only, the
        upper is 1) or ``"less"`` (upper bound only, the lower is −1).

    Returns
    -------
    Interval
        ``low`` and ``high`` (floats for scalar inputs); NaN where n == 0.

    Raises
    ------
    ParameterError
        For negative or non-integer counts, rescue + harm > n, a confidence outside (0, 1) or
        an unknown alternative.

    Examples
    --------
    >>> ci = fay_lumbard_interval(0, 1, 100)
    >>> round(ci.low, 4), round(ci.high, 4)
    (-0.0545, 0.0295)
    """
    confidence = _check_confidence(confidence)
    require_one_of("alternative", alternative, ALTERNATIVES)
    x, m, total = _matched_counts_iv(rescue, harm, n)
    alpha = _alpha_per_side(confidence, alternative)
    low, high = _melded_bounds(x, m, m, total, alpha, alternative)
    if low.ndim == 0:
        return Interval(low=float(low), high=float(high))
    return Interval(low=low, high=high)


#: Effective counts within this of 0 (or of their total) are 0 (or the total): a beta with a
#: shape parameter below it lies within 1e-300 of its end with probability above 1 - 1e-9 (its
#: quantiles are the point mass's), and scipy's beta functions overflow near the tiniest doubles.
_TINY_COUNT = 1e-12


def _snap_count(part: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Return ``part`` with values within :data:`_TINY_COUNT` of 0 or of ``total`` snapped."""
    part = np.where(part < _TINY_COUNT, 0.0, part)
    return np.where((total - part < _TINY_COUNT) & (part > 0), total, part)


def _melded_bounds(
    x: np.ndarray,
    m_phi: np.ndarray,
    m_psi: np.ndarray,
    n_psi: np.ndarray,
    alpha: float,
    alternative: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Meld the beta confidence distributions of φ (x of m_phi) and ψ (m_psi of n_psi).

    Counts may be effective (non-integer) sizes. The two or four quantiles of every cell (two
    ψ distributions per bounded side) are searched in one batch.
    """
    x, m_phi, m_psi, n_psi = np.broadcast_arrays(x, m_phi, m_psi, n_psi)
    shape = x.shape
    x, m_phi, m_psi, n_psi = (np.ravel(v).astype(np.float64) for v in (x, m_phi, m_psi, n_psi))
    m_phi = _snap_count(m_phi, m_phi)
    x, m_psi = _snap_count(x, m_phi), _snap_count(m_psi, n_psi)
    psi = ((m_psi, n_psi - m_psi + 1), (m_psi + 1, n_psi - m_psi))
    sides = []  # (φ distribution, level) per bounded side
    if alternative != "less":
        sides.append(((x, m_phi - x + 1), alpha))
    if alternative != "greater":
        sides.append(((x + 1, m_phi - x), 1 - alpha))
    jobs = [(t, b, level) for b, level in sides for t in psi]
    quantiles = _meld_quantile(
        np.concatenate([t[0] for t, _, _ in jobs]),
        np.concatenate([t[1] for t, _, _ in jobs]),
        np.concatenate([b[0] for _, b, _ in jobs]),
        np.concatenate([b[1] for _, b, _ in jobs]),
        np.repeat([level for _, _, level in jobs], x.size),
    ).reshape(len(jobs), x.size)
    low, high = np.full(x.size, -1.0), np.full(x.size, 1.0)
    if alternative != "less":
        low = np.minimum(quantiles[0], quantiles[1])
    if alternative != "greater":
        high = np.maximum(quantiles[-2], quantiles[-1])
    empty = n_psi == 0
    low, high = np.where(empty, np.nan, low), np.where(empty, np.nan, high)
    return low.reshape(shape), high.reshape(shape)


def cluster_melded_interval(
    values: np.ndarray | Sequence[Sequence[float]],
    counts: np.ndarray | Sequence[int] | None = None,
    *,
    confidence: float = 0.95,
    alternative: str = "two-sided",
) -> Interval:
    """Interval for a clustered paired effect: the sign-flip inversion widened by a meld.

    With several pairs per cluster, :func:`sign_flip_interval` alone under-covers when few
    clusters carry a nonzero difference (it cannot move beyond the signs it saw). This is the
    hull of it and the Fay–Lumbard meld (:func:`fay_lumbard_interval`) on *effective* counts:
    θ = ψ·(2φ − 1), ψ = Σ|d| / Σn, φ = Σd⁺ / Σ|d|; each count is divided by its cluster design
    effect (cluster-robust over binomial variance of the ratio, in [1, largest cluster size];
    that size when it cannot be estimated) and scaled by (z / t_{K−1})² for few clusters (Korn
    & Graubard 1998). The paired-effect step then puts zero on the side the sign-flip test
    decides, so the result never contradicts the test.

    Parameters
    ----------
    values
        Array of shape (T, 2): per cluster type, the integer summed difference d and pairs n.
    counts
        Clusters per type (positive integers); None means one cluster per row.
    confidence, alternative
        As :func:`sign_flip_interval`.

    Returns
    -------
    Interval
        ``low`` and ``high`` as floats; NaN when no cluster has a pair.

    Raises
    ------
    ParameterError
        As :func:`sign_flip_interval`.

    Examples
    --------
    >>> ci = cluster_melded_interval([[2, 4], [0, 4], [-1, 4]], [5, 20, 2])
    >>> bool(ci.low < 0.074 < ci.high)
    True
    """
    meld = effective_melded_interval(values, counts, confidence=confidence, alternative=alternative)
    try:
        exact = sign_flip_interval(values, counts, confidence=confidence, alternative=alternative)
    except ParameterError:
        if math.isnan(float(meld.low)):
            raise
        # too large a lattice for the exact inversion: there the meld alone is wide enough,
        # and agree_with_test still aligns it with the p-value
        return meld
    if math.isnan(float(exact.low)):
        return exact
    return Interval(
        low=float(min(float(meld.low), float(exact.low))),
        high=float(max(float(meld.high), float(exact.high))),
    )


def effective_melded_interval(
    values: np.ndarray | Sequence[Sequence[float]],
    counts: np.ndarray | Sequence[int] | None = None,
    *,
    confidence: float = 0.95,
    alternative: str = "two-sided",
) -> Interval:
    """Return the Fay–Lumbard meld on design-effect-adjusted counts.

    One half of :func:`cluster_melded_interval`, which describes the effective counts.

    Parameters
    ----------
    values, counts, confidence, alternative
        As :func:`cluster_melded_interval` (non-integer ``values`` allowed).

    Returns
    -------
    Interval
        ``low`` and ``high`` as floats; NaN when no cluster has a pair.

    Raises
    ------
    ParameterError
        For a confidence outside (0, 1) or an unknown alternative.

    Examples
    --------
    >>> ci = effective_melded_interval([[2, 4], [0, 4], [-1, 4]], [5, 20, 2])
    >>> bool(ci.low < 0.074 < ci.high)
    True
    """
    confidence = _check_confidence(confidence)
    require_one_of("alternative", alternative, ALTERNATIVES)
    array = _numeric_array("values", values).astype(np.float64)
    c = np.ones(array.shape[0]) if counts is None else np.asarray(counts, dtype=np.float64)
    d, pairs = array[:, 0], array[:, 1]
    if float(c @ pairs) == 0:
        return Interval(low=math.nan, high=math.nan)
    alpha = _alpha_per_side(confidence, alternative)
    effective = _effective_counts(d, pairs, c, alpha)
    x, m_phi, m_psi, n_psi = (np.asarray(v, dtype=np.float64) for v in effective)
    low, high = _melded_bounds(x, m_phi, m_psi, n_psi, alpha, alternative)
    return Interval(low=float(low), high=float(high))


def _effective_counts(
    d: np.ndarray, pairs: np.ndarray, c: np.ndarray, alpha: float
) -> tuple[float, float, float, float]:
    """Return effective (rescue units, discordant units for φ, discordant for ψ, pairs)."""
    up, units = np.maximum(d, 0.0), np.abs(d)
    clusters = float(c.sum())
    total_up, total_units, total_pairs = float(c @ up), float(c @ units), float(c @ pairs)
    nonzero = float(c[units > 0].sum())

    def design_effect(w: np.ndarray, num: np.ndarray, den: np.ndarray, cap: float) -> float:
        n_clusters = float(w.sum())
        top, bottom = float(w @ num), float(w @ den)
        share = top / bottom
        binomial = share * (1 - share) / bottom
        if n_clusters < 2 or binomial <= 0:
            return cap
        robust = n_clusters / (n_clusters - 1) * float(w @ (num - share * den) ** 2) / bottom**2
        return min(max(robust / binomial, 1.0), cap)

    def few(n_clusters: float) -> float:
        if n_clusters < 2:
            return 1.0
        z = _normal_quantile(1 - alpha)
        return (z / float(_special().stdtrit(n_clusters - 1, 1 - alpha))) ** 2

    scale_psi = few(clusters) / design_effect(c, units, pairs, float(pairs.max()))
    if total_units > 0:
        kept = units > 0
        cap = float(units[kept].max())
        deff_phi = design_effect(c[kept], up[kept], units[kept], cap)
        scale_phi = few(nonzero) / deff_phi
    else:
        scale_phi = 1.0
    return (
        total_up * scale_phi,
        total_units * scale_phi,
        total_units * scale_psi,
        total_pairs * scale_psi,
    )


def _matched_counts_iv(
    rescue: object, harm: object, n: object
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate matched-pair counts and return (rescue, discordant, n) as float arrays."""
    arrays = []
    for name, value in (("rescue", rescue), ("harm", harm), ("n", n)):
        array = _numeric_array(name, value).astype(np.float64)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(array) | (array < 0) | (array != np.round(array))
        if bad.any():
            raise ParameterError(
                f"parameter `{name}` holds {int(bad.sum())} values that are not non-negative "
                "integer counts."
            )
        arrays.append(array)
    try:
        x, harms, total = np.broadcast_arrays(*arrays)
    except ValueError as exc:
        raise ParameterError(
            "parameters `rescue`, `harm` and `n` have shapes that do not broadcast together."
        ) from exc
    m = x + harms
    if (m > total).any():
        raise ParameterError(
            "parameters `rescue` and `harm` add up to more than `n` for "
            f"{int((m > total).sum())} entries; discordant pairs are a subset of the n pairs."
        )
    return x, m, total


class _Meld(NamedTuple):
    """Per-cell quadrature plan for P(W ≤ w), W = T·(2B − 1), T ~ Beta, B ~ Beta.

    The *outer* variable (T, or B where ``swap``), the more concentrated of T and 2B − 1, is
    integrated against its density, so the other's CDF is smooth over its panels. ``outer``,
    ``inner``: beta parameters (a, b); ``log_norm``: log B(outer); ``edges``: logits of the
    outer quantiles at :data:`_MELD_PANELS`, shape (cells, panels + 1).
    """

    outer: tuple[np.ndarray, np.ndarray]
    inner: tuple[np.ndarray, np.ndarray]
    swap: np.ndarray
    log_norm: np.ndarray
    edges: np.ndarray


@functools.cache
def _legendre_nodes(count: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes and weights moved to [0, 1]."""
    nodes, weights = np.polynomial.legendre.leggauss(count)
    return (nodes + 1.0) / 2.0, weights / 2.0


def _relative_spread(a: np.ndarray, b: np.ndarray, scale: float) -> np.ndarray:
    """Return sd / |mean| of V ~ Beta(a, b) (``scale`` 1) or of 2V − 1 (``scale`` 2)."""
    total = a + b
    sd = scale * np.sqrt(a * b / (total * total * (total + 1.0)))
    mean = a / total if scale == 1.0 else 2.0 * a / total - 1.0
    with np.errstate(divide="ignore"):
        return np.asarray(sd / np.abs(mean))


def _meld_setup(t_a: np.ndarray, t_b: np.ndarray, b_a: np.ndarray, b_b: np.ndarray) -> _Meld:
    """Return the :class:`_Meld` of the cells (point-mass parameters replaced by 1)."""
    special = _special()
    t_a, t_b, b_a, b_b = (np.where(v > 0, v, 1.0) for v in (t_a, t_b, b_a, b_b))
    swap = _relative_spread(b_a, b_b, 2.0) < _relative_spread(t_a, t_b, 1.0)
    o_a, o_b = np.where(swap, b_a, t_a), np.where(swap, b_b, t_b)
    edges = _quantile_logit(o_a, o_b, _MELD_PANELS)
    return _Meld(
        outer=(o_a, o_b),
        inner=(np.where(swap, t_a, b_a), np.where(swap, t_b, b_b)),
        swap=swap,
        log_norm=special.betaln(o_a, o_b),
        edges=edges,
    )


def _quantile_logit(a: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Return the logits of Beta(a, b)'s quantiles at the probabilities ``p``, shape (cells, p).

    Past the median from 1 − q (Beta(b, a) at 1 − p), so quantiles near 1 keep their digits;
    where q underflows (a parameter far below 1), log q from I_x(a, b) ≈ x^a / (a·B(a, b)).
    Panel edges need only increase with ``p``, not be exact.
    """
    special = _special()
    a2, b2, p2 = np.broadcast_arrays(a[:, np.newaxis], b[:, np.newaxis], p[np.newaxis, :])

    def log_small(a: np.ndarray, b: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = special.betaincinv(a, b, p)
        with np.errstate(divide="ignore"):
            asymptotic = (np.log(p) + np.log(a) + special.betaln(a, b)) / a
            return x, np.where(x > 1e-300, np.log(x), asymptotic)

    q, log_q = log_small(a2, b2, p2)
    with np.errstate(divide="ignore"):
        logit = log_q - np.log1p(-q)
        # past the median, 1 − q from Beta(b, a) (inverted only there: inversions are costly)
        high = q > 0.5
        r, log_r = log_small(b2[high], a2[high], 1.0 - p2[high])
        logit[high] = np.log1p(-r) - log_r
    return np.asarray(logit)


#: Probabilities of the outer variable's quantiles that cut the quadrature range into panels
#: (the first and last are the mass left out at each end).
_MELD_PANELS = np.array([1e-15, 1e-4, 0.01, 0.1, 0.5, 0.9, 0.99, 1 - 1e-4, 1 - 1e-15])
#: Bound of the logit range searched (far beyond any quantile edge of positive parameters).
_LOGIT_LIMIT = 1e300


def _meld_range(meld: _Meld, w: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, ...]:
    """Return (cut, logit low end, logit high end, complement) of the integral at ``w``.

    T outer: for t < |w|, 2B − 1 ≤ w/t always (w > 0, mass F_T(w)) or never (w < 0), so
    f_T(t)·F_B((1 + w/t)/2) is integrated over t > |w|. B outer (S = 2B − 1): w > 0 adds F_S(w)
    and integrates f_S(s)·F_T(w/s) over s > w; w ≤ 0 integrates f_S(s)·(1 − F_T(w/s)) over
    s < w. Either way the kink of the CDF factor is an end of the range.
    """
    swap = meld.swap[cells]
    cut = np.where(swap, (1.0 + w) / 2.0, np.abs(w))
    with np.errstate(divide="ignore"):
        cut_logit = _special().logit(np.clip(cut, 0.0, 1.0))
    below = swap & (w <= 0)
    cut_logit = np.clip(cut_logit, -_LOGIT_LIMIT, _LOGIT_LIMIT)
    low = np.where(below, -_LOGIT_LIMIT, cut_logit)
    high = np.where(below, cut_logit, _LOGIT_LIMIT)
    return np.where(w > 0, cut, 0.0), low, high, below


def _meld_cdf(meld: _Meld, w: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """P(W ≤ w) for the cells of the boolean mask ``cells`` (one ``w`` per such cell).

    Gauss–Legendre (:data:`_MELD_NODES` per panel) on the outer variable's logit (log-concave
    density, no end singularities) over its quantile panels clipped to :func:`_meld_range`.
    """
    special = _special()
    base, low, high, below = _meld_range(meld, w, cells)
    edges = meld.edges[cells]
    panel_low = np.clip(edges[:, :-1], low[:, None], high[:, None])
    span = np.clip(edges[:, 1:], low[:, None], high[:, None]) - panel_low
    # only the panels the range reaches: one row per (cell, panel), summed back per cell
    cell, panel = np.nonzero(span > 0)
    rows = np.flatnonzero(cells)[cell]
    (o_a, o_b), (i_a, i_b) = (
        tuple(v[rows, None] for v in pair) for pair in (meld.outer, meld.inner)
    )
    flip, w_row = below[cell, None], w[cell, None]
    nodes, weights = _legendre_nodes(_MELD_NODES)
    # u = s² grades the nodes toward the cut (the range's low end; its high end when `below`):
    # F's kink there, (x − cut)^k with a small non-integer k, becomes smooth in s.
    graded = np.where(flip, 1.0 - (1.0 - nodes) ** 2, nodes**2)
    slope = np.where(flip, 2.0 * (1.0 - nodes), 2.0 * nodes)
    width = span[cell, panel][:, None]
    logit = panel_low[cell, panel][:, None] + width * graded
    log_v, log_rest = special.log_expit(logit), special.log_expit(-logit)
    # the density of logit(V) for V ~ Beta(a, b): v^a (1 − v)^b / B(a, b)
    density = np.exp(o_a * log_v + o_b * log_rest - meld.log_norm[rows, None])
    v = np.exp(log_v)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        arg = np.where(meld.swap[rows, None], w_row / (2.0 * v - 1.0), (1.0 + w_row / v) / 2.0)
    arg = np.clip(np.nan_to_num(arg, nan=0.0), 0.0, 1.0)
    # 1 − I_x(a, b) = I_{1−x}(b, a)
    factor = special.betainc(
        np.where(flip, i_b, i_a), np.where(flip, i_a, i_b), np.where(flip, 1.0 - arg, arg)
    )
    part = (density * factor * width * slope) @ weights
    o_a, o_b = meld.outer[0][cells], meld.outer[1][cells]
    start = np.where(w > 0, special.betainc(o_a, o_b, np.clip(base, 0.0, 1.0)), 0.0)
    return np.asarray(start + np.bincount(cell, weights=part, minlength=len(w)), dtype=np.float64)


def _bracketed_root(
    cdf: Callable[[np.ndarray, np.ndarray], np.ndarray],
    level: float | np.ndarray,
    skip: np.ndarray,
    guess: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Smallest w in [−1, 1] with cdf(w) >= level, to within 2⁻³⁵, vectorised over cells.

    Chandrupatla's method (1997): inverse quadratic interpolation when the last three points
    allow it, else bisection, never closer to an end than the tolerance: as sure as bisection,
    in 8-12 evaluations of the costly CDF instead of 36. The bracket (a, b) keeps cdf − level
    >= 0 at exactly one end, which is returned. ``cdf(w, cells)`` evaluates only the cells of
    the mask (converged ones cost nothing); ``level``: one, or one per cell; ``skip``: cells
    the caller answers. ``guess`` (low, high) is a first bracket; where it misses the root it
    is widened to that end of [−1, 1] (one more evaluation).
    """
    shape = skip.shape
    levels = np.broadcast_to(np.asarray(level, dtype=np.float64), shape)
    tolerance = 2.0**-36

    def value(w: np.ndarray, cells: np.ndarray) -> np.ndarray:
        out = np.zeros(shape)
        if cells.any():
            out[cells] = cdf(w[cells], cells) - levels[cells]
        return out

    a, f_a, b, f_b, start = _first_bracket(value, ~skip, guess)
    done = skip | start
    c, f_c = a.copy(), f_a.copy()
    t = np.full(shape, 0.5)
    for _ in range(2 * _BISECTION_STEPS):
        if done.all():
            break
        live = ~done
        x = a + t * (b - a)
        f_x = np.zeros(shape)
        f_x[live] = cdf(x[live], live) - levels[live]
        same = (f_x >= 0) == (f_a >= 0)
        c = np.where(live, np.where(same, a, b), c)
        f_c = np.where(live, np.where(same, f_a, f_b), f_c)
        b, f_b = np.where(live & ~same, a, b), np.where(live & ~same, f_a, f_b)
        a, f_a = np.where(live, x, a), np.where(live, f_x, f_a)
        # converged cells (b = c) divide by zero here; they are done and keep a finite t
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            tlim = tolerance / np.abs(b - c)
            done |= tlim > 0.5
            xi = (a - b) / (c - b)
            phi = (f_a - f_b) / (f_c - f_b)
            quadratic = f_a / (f_b - f_a) * f_c / (f_b - f_c) + (c - a) / (b - a) * f_a / (
                f_c - f_a
            ) * f_b / (f_c - f_b)
            usable = (phi * phi < xi) & ((1 - phi) ** 2 < 1 - xi) & np.isfinite(quadratic)
            t = np.clip(np.where(usable, quadratic, 0.5), tlim, 1 - tlim)
        t = np.where(done, 0.5, t)
    return np.where(skip, 1.0, np.where(f_a >= 0, a, b))


def _first_bracket(
    value: Callable[[np.ndarray, np.ndarray], np.ndarray],
    search: np.ndarray,
    guess: tuple[np.ndarray, np.ndarray] | None,
) -> tuple[np.ndarray, ...]:
    """Return (a, f_a, b, f_b, start) of :func:`_bracketed_root`; ``start``: the root is −1."""
    shape = search.shape
    if guess is None:
        b, a = np.full(shape, -1.0), np.full(shape, 1.0)
    else:
        b, a = (np.clip(np.broadcast_to(v, shape), -1.0, 1.0) for v in guess)
    f_b = value(b, search)
    # the guessed low end is already past the level: the root is below it
    past = search & (f_b >= 0) & (b > -1.0)
    a, f_a = np.where(past, b, a), np.where(past, f_b, 0.0)
    b = np.where(past, -1.0, b)
    f_b = np.where(past, value(b, past), f_b)
    # the level reached at −1 already: the answer is −1
    start = search & (f_b >= 0)
    a = np.where(start, b, a)
    rest = search & ~start & ~past
    f_a = np.where(start, f_b, np.where(rest, value(a, rest), f_a))
    # the guessed high end is short of the level: the root is above it
    short = rest & (f_a < 0)
    b, f_b = np.where(short, a, b), np.where(short, f_a, f_b)
    a = np.where(short, 1.0, a)
    f_a = np.where(short, value(a, short), f_a)
    return a, f_a, b, f_b, start


def _meld_guess(meld: _Meld, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return a first bracket for the quantiles: the normal one of W ± a quarter of its sd."""
    (o_a, o_b), (i_a, i_b) = meld.outer, meld.inner
    t_a, t_b = np.where(meld.swap, i_a, o_a), np.where(meld.swap, i_b, o_b)
    b_a, b_b = np.where(meld.swap, o_a, i_a), np.where(meld.swap, o_b, i_b)
    t_sum, b_sum = t_a + t_b, b_a + b_b
    t_mean, t_square = t_a / t_sum, t_a * (t_a + 1.0) / (t_sum * (t_sum + 1.0))
    b_mean, b_square = b_a / b_sum, b_a * (b_a + 1.0) / (b_sum * (b_sum + 1.0))
    s_mean, s_square = 2.0 * b_mean - 1.0, 4.0 * b_square - 4.0 * b_mean + 1.0
    mean = t_mean * s_mean
    sd = np.sqrt(np.maximum(t_square * s_square - mean * mean, 0.0))
    centre = mean + _special().ndtri(levels) * sd
    return centre - sd / 4.0 - 1e-9, centre + sd / 4.0 + 1e-9


def _meld_quantile(
    t_a: np.ndarray,
    t_b: np.ndarray,
    b_a: np.ndarray,
    b_b: np.ndarray,
    level: float | np.ndarray,
) -> np.ndarray:
    """Return the ``level`` quantile of W = T·(2B − 1), T ~ Beta(t_a, t_b), B ~ Beta(b_a, b_b).

    The root of :func:`_meld_cdf` (quadrature) by :func:`_bracketed_root`, vectorised over
    cells and levels. At w = 0 the CDF is F_B(½) exactly, so the exact binomial test, not the
    quadrature, sets the sign. A parameter ≤ 0 is its beta's point-mass limit (Beta(0, b) at 0,
    Beta(a, 0) at 1, as Clopper–Pearson at the edges), where the quantile is a beta quantile.
    """
    arrays = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.float64) for v in (t_a, t_b, b_a, b_b, level))
    )
    flat = [np.ravel(v) for v in arrays]
    # in chunks: the quadrature holds (cells × panels × nodes) arrays
    parts = [
        _meld_quantile_chunk(*(v[start : start + _MELD_CHUNK] for v in flat))
        for start in range(0, flat[0].size, _MELD_CHUNK)
    ]
    return np.concatenate(parts or [np.zeros(0)]).reshape(arrays[0].shape)


#: Quantiles searched together (about 30 MB per quadrature array at 12 × 12 nodes).
_MELD_CHUNK = 2048


def _meld_quantile_chunk(
    t_a: np.ndarray, t_b: np.ndarray, b_a: np.ndarray, b_b: np.ndarray, levels: np.ndarray
) -> np.ndarray:
    """:func:`_meld_quantile` of 1-D arrays of parameters and levels."""
    meld = _meld_setup(t_a, t_b, b_a, b_b)
    b_zero, b_one, t_zero, t_one = b_a <= 0, b_b <= 0, t_a <= 0, t_b <= 0
    found = _bracketed_root(
        lambda w, cells: _meld_cdf(meld, w, cells),
        levels,
        b_zero | b_one | t_zero | t_one,
        guess=_meld_guess(meld, levels),
    )
    special = _special()
    t_a, t_b, b_a, b_b = (np.where(v > 0, v, 1.0) for v in (t_a, t_b, b_a, b_b))
    # Exactly on the test's side of zero: the sign is decided by F_B(½) alone.
    at_zero = special.betainc(b_a, b_b, 0.5) >= levels
    quantile = np.where(at_zero, np.minimum(found, 0.0), np.maximum(found, np.nextafter(0.0, 1.0)))
    # T the point mass at 1 (n = m): W = 2B − 1.
    quantile = np.where(t_one, 2.0 * special.betaincinv(b_a, b_b, levels) - 1.0, quantile)
    # B a point mass (no rescue, or no harm): W = ∓T, whose quantile is a beta quantile.
    t_low = special.betaincinv(t_a, t_b, 1.0 - levels)
    t_high = special.betaincinv(t_a, t_b, levels)
    t_low = np.where(t_zero, 0.0, np.where(t_one, 1.0, t_low))
    t_high = np.where(t_zero, 0.0, np.where(t_one, 1.0, t_high))
    quantile = np.where(t_zero, 0.0, quantile)
    return np.asarray(np.where(b_zero, -t_low, np.where(b_one, t_high, quantile)))


def sign_flip_interval(
    values: np.ndarray | Sequence[Sequence[float]],
    counts: np.ndarray | Sequence[int] | None = None,
    *,
    confidence: float = 0.95,
    alternative: str = "two-sided",
    limits: tuple[float, float] = (-1.0, 1.0),
) -> Interval:
    """Interval for a clustered paired effect Σd / Σn by inverting the sign-flip test (exact).

    θ = Σdᵢ / Σnᵢ over clusters i with summed difference dᵢ over nᵢ pairs. δ is kept when the
    sign-flip test of eᵢ = dᵢ − δ·nᵢ does not reject at 1 − confidence. Flipping the signs of a
    random set S gives T* ≥ T exactly when Σ_{i∈S} eᵢ ≤ 0, so the one-sided p-value is
    P(Q ≤ δ), Q = Σ_S d / Σ_S n the effect on a random half of the clusters (each in S with
    chance ½; S empty counts on both sides). The interval is the pair of α-quantiles of Q (a
    *half-sampling* interval), and zero lies outside it exactly when the sign-flip test of the
    dᵢ rejects (the symmetric null's two-sided p is twice the smaller one-sided one). Q's law is
    exact: (Σ_S d, Σ_S n) = Σₜ Kₜ·(dₜ, nₜ), Kₜ ~ Binomial(mₜ, ½), convolved on the integer
    lattice (mass beyond 4·√mₜ of mₜ/2, below 3e-14, dropped): the cost grows with the types
    and √(clusters), never with rows.

    Parameters
    ----------
    values
        Array of shape (T, 2): per cluster type, the integer summed difference d and pairs n.
    counts
        Clusters per type (positive integers); None means one cluster per row.
    confidence
        Confidence level in (0, 1).
    alternative
        ``"two-sided"``, ``"greater"`` (lower bound only; the upper is ``limits[1]``) or
        ``"less"`` (upper bound only).
    limits
        The range of the effect; a bound the test cannot reach (too few clusters) is the limit.

    Returns
    -------
    Interval
        ``low`` and ``high`` as floats; NaN when no cluster has a pair.

    Raises
    ------
    ParameterError
        For a bad shape, non-integer or negative pairs, non-integer differences, bad counts,
        a confidence outside (0, 1) or an unknown alternative.

    Examples
    --------
    >>> ci = sign_flip_interval([[1, 1], [0, 1], [-1, 1]], [12, 30, 3])
    >>> round(ci.low, 4), round(ci.high, 4)
    (0.0435, 0.3636)
    """
    confidence = _check_confidence(confidence)
    require_one_of("alternative", alternative, ALTERNATIVES)
    array = _numeric_array("values", values).astype(np.float64)
    if array.ndim != 2 or array.shape[1] != 2 or array.shape[0] == 0:
        raise ParameterError(
            f"parameter `values` has shape {array.shape}; it must be (T, 2): one row per cluster "
            "type with its summed difference and its number of pairs."
        )
    bad = ~np.isfinite(array).all(axis=1) | (array != np.round(array)).any(axis=1)
    bad |= array[:, 1] < 0
    if bad.any():
        raise ParameterError(
            f"parameter `values` has {int(bad.sum())} rows that are not integer (difference, "
            "pairs) with pairs >= 0; the exact inversion needs integer partials."
        )
    c = (
        np.ones(array.shape[0], dtype=np.int64)
        if counts is None
        else _check_counts(counts, array.shape[0], "rows in `values`")
    )
    types, c = _merge_types(array, c)
    keep = (types != 0).any(axis=1)
    types, c = types[keep].astype(np.int64), c[keep]
    if types.size == 0 or int(c @ types[:, 1]) == 0:
        return Interval(low=math.nan, high=math.nan)
    try:
        ratios, mass, empty = _half_sample_distribution(types, c)
    except _LatticeTooLargeError:
        raise ParameterError(
            f"the sign-flip inversion of this cell needs a lattice of more than {_MAX_LATTICE} "
            "points (many clusters with large, varied per-cluster sizes). Hint: use "
            "cluster_melded_interval, which falls back to the meld, or the bootstrap."
        ) from None
    alpha = _alpha_per_side(confidence, alternative)
    low, high = float(limits[0]), float(limits[1])
    if alternative != "less":
        low = _half_sample_bound(ratios, mass, alpha - empty, low)
    if alternative != "greater":
        high = -_half_sample_bound(-ratios[::-1], mass[::-1], alpha - empty, -high)
    return Interval(low=low, high=high)


def _half_sample_bound(ratios: np.ndarray, mass: np.ndarray, needed: float, limit: float) -> float:
    """Return the first sorted ratio whose cumulated mass reaches ``needed`` (else ``limit``)."""
    if needed <= 0:
        return limit
    cumulated = np.cumsum(mass)
    index = int(np.searchsorted(cumulated, needed * (1 - 1e-12), side="left"))
    if index >= ratios.size:
        return limit
    return float(max(ratios[index], limit))


def _half_sample_distribution(
    types: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """Distribution of Q = Σ Kₜdₜ / Σ Kₜnₜ: sorted ratios, their masses, and P(Σ Kₜnₜ = 0)."""
    d_gcd = int(np.gcd.reduce(np.abs(types[:, 0]))) or 1
    n_gcd = int(np.gcd.reduce(types[:, 1])) or 1
    joint, d_offset = _joint_half_sample_pmf(types[:, 0] // d_gcd, types[:, 1] // n_gcd, counts)
    d_values = (d_offset + np.arange(joint.shape[0]))[:, np.newaxis]
    n_values = np.arange(joint.shape[1])[np.newaxis, :]
    empty = float(joint[:, 0].sum())
    positive = (joint > 0) & (n_values > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio_grid = (d_values * d_gcd) / (n_values * n_gcd)
    ratios, mass = ratio_grid[positive], joint[positive]
    order = np.argsort(ratios, kind="stable")
    return ratios[order], mass[order], empty


def _joint_half_sample_pmf(
    d: np.ndarray, n: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, int]:
    """Joint pmf of (Σ Kₜdₜ, Σ Kₜnₜ) as a 2-D array, rows from ``d_offset``, columns from 0."""
    from scipy import signal  # a slow import, kept off `import recoverylab`

    # The untrimmed lattice bounds every intermediate one: refuse before any work.
    widths = np.minimum(counts, 2 * _HALF_SAMPLE_WIDTH * np.sqrt(counts) + 3)
    if float(np.abs(d) @ widths + 1) * float(n @ widths + 1) > _MAX_LATTICE:
        raise _LatticeTooLargeError
    joint, d_offset = np.ones((1, 1)), 0
    for step_d, step_n, size in zip(d.tolist(), n.tolist(), counts.tolist(), strict=True):
        half = _HALF_SAMPLE_WIDTH * math.sqrt(size) + 1.0
        lo, hi = max(0, math.floor(size / 2 - half)), min(size, math.ceil(size / 2 + half))
        k = np.arange(lo, hi + 1)
        shape = (abs(step_d) * (hi - lo) + 1, step_n * (hi - lo) + 1)
        grown = (joint.shape[0] + shape[0] - 1) * (joint.shape[1] + shape[1] + step_n * lo - 1)
        if shape[0] * shape[1] > _MAX_LATTICE or grown > _MAX_LATTICE:
            raise _LatticeTooLargeError
        piece = np.zeros(shape)
        rows = (k - lo) * abs(step_d) if step_d >= 0 else (hi - k) * abs(step_d)
        piece[rows, (k - lo) * step_n] = _binomial_half_pmf(size, lo, hi)
        piece_offset = step_d * lo if step_d >= 0 else step_d * hi
        if joint.size * piece.size <= _DIRECT_CONVOLVE_MAX:
            joint = signal.convolve(joint, piece, method="direct")
        else:
            joint = np.clip(signal.fftconvolve(joint, piece), 0.0, None)
        d_offset += piece_offset
        # Column j of the joint is Σ Kn = j + (column offset); keep columns absolute from 0.
        joint = np.pad(joint, ((0, 0), (step_n * lo, 0)))[:, : joint.shape[1] + step_n * lo]
        joint, trimmed = _trim_rows(joint)
        d_offset += trimmed
    return joint, d_offset


class _LatticeTooLargeError(Exception):
    """The joint (Σd, Σn) lattice of a half-sample distribution would exceed _MAX_LATTICE."""


def _trim_rows(joint: np.ndarray) -> tuple[np.ndarray, int]:
    """Drop leading/trailing rows and trailing columns whose mass is negligible."""
    rows = np.flatnonzero(joint.sum(axis=1) > _TRIM_MASS)
    columns = np.flatnonzero(joint.sum(axis=0) > _TRIM_MASS)
    if rows.size == 0:
        return joint, 0
    return joint[rows[0] : rows[-1] + 1, : columns[-1] + 1], int(rows[0])


# -- Distribution functions without scipy (importing scipy costs ~0.5 s of a command's start-up) ---

#: Binomial(n, ½) tails up to this n are summed in exact integers (one rounding at the end).
_EXACT_BINOMIAL_MAX = 4096


def _special() -> Any:
    """Return ``scipy.special``, imported on first use (it costs ~0.3 s of start-up)."""
    from scipy import special

    return special


def _normal_quantile(p: float) -> float:
    """Return the standard normal quantile (``scipy.special.ndtri``): ±inf at 0 and 1."""
    if not 0.0 < p < 1.0:
        return -math.inf if p == 0.0 else math.inf if p == 1.0 else math.nan
    return statistics.NormalDist().inv_cdf(p)


def _normal_cdf(x: np.ndarray | float) -> np.ndarray:
    """Return the standard normal CDF (``scipy.special.ndtr``) through ``erfc``.

    ``NormalDist.cdf`` is erf based and loses the lower tail.
    """
    values = np.asarray(x, dtype=np.float64)
    flat = [0.5 * math.erfc(-v / math.sqrt(2.0)) for v in values.reshape(-1).tolist()]
    return np.asarray(flat, dtype=np.float64).reshape(values.shape)


def _binomial_half_pmf(n: int, lo: int, hi: int) -> np.ndarray:
    """Return P(B = k) for k = lo..hi, B ~ Binomial(n, ½) (``scipy.stats.binom.pmf``).

    Exact integers over 2ⁿ up to ``_EXACT_BINOMIAL_MAX``; above, log(C(n, k+1)/C(n, k)) summed
    from the mode over :func:`_negligible_window`, normalised there (no lgamma rounding).
    """
    lo, hi = max(lo, 0), min(hi, n)
    if hi < lo:
        return np.zeros(0)
    if n <= _EXACT_BINOMIAL_MAX:
        return np.array([math.comb(n, k) / (1 << n) for k in range(lo, hi + 1)])
    w_lo, w_hi = _negligible_window(n / 2, n, n)
    mode = n // 2
    up = np.log1p((n - 2 * np.arange(mode, w_hi) - 1) / np.arange(mode + 1, w_hi + 1))
    down = np.log1p((2 * np.arange(w_lo + 1, mode + 1) - n - 1) / (n - np.arange(w_lo, mode)))
    log_w = np.concatenate((np.cumsum(down[::-1])[::-1], [0.0], np.cumsum(up)))
    weights = np.exp(log_w)
    weights /= weights.sum()
    pmf = np.zeros(hi - lo + 1)
    a, b = max(lo, w_lo), min(hi, w_hi)
    if a <= b:
        pmf[a - lo : b - lo + 1] = weights[a - w_lo : b - w_lo + 1]
    return pmf


def _binomial_half_two_sided(low: int, n: int) -> float:
    """Return P(B ≤ low) + P(B ≥ n − low), B ~ Binomial(n, ½), capped at 1.

    ``scipy.stats.binomtest(low, n, 0.5).pvalue``: the pmf is symmetric, so the outcomes no
    more likely than ``low`` are the two tails.
    """
    low = min(low, n - low)
    if 2 * low == n:
        return 1.0
    if n <= _EXACT_BINOMIAL_MAX:
        total, term = 0, 1
        for k in range(low + 1):
            total += term
            term = term * (n - k) // (k + 1)
        return min(1.0, 2 * total / (1 << n))
    return min(1.0, 2.0 * float(_binomial_half_pmf(n, 0, low).sum()))


def _fft_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Full linear convolution of two 1-D arrays through numpy's real FFT."""
    size = a.size + b.size - 1
    length = 1 << (size - 1).bit_length()
    return np.fft.irfft(np.fft.rfft(a, length) * np.fft.rfft(b, length), length)[:size]


# -- Classical tests and intervals -------------------------------------------------------------


def mcnemar_exact(rescue: int, harm: int) -> TestResult:
    """Exact McNemar test: a two-sided binomial test of rescue vs harm discordant counts.

    Under H0 a discordant pair is a rescue or a harm with probability ½ each: the same test, and
    p-value, as :func:`sign_flip_test` on ±1 differences; a cross-check, and for summaries with
    only the two counts.

    Parameters
    ----------
    rescue
        Number of pairs where only the recovery branch succeeds.
    harm
        Number of pairs where only the no-recovery branch succeeds.

    Returns
    -------
    TestResult
        ``statistic`` = rescue − harm, ``p_value`` of the two-sided binomial test (as
        ``scipy.stats.binomtest(rescue, rescue + harm, 0.5)``; 1.0 when there is no discordant
        pair), ``method`` = ``"exact-binomial"``.

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
    p_value = 1.0 if total == 0 else _binomial_half_two_sided(min(rescue, harm), total)
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
    z = _normal_quantile((1 + confidence) / 2)
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

    The formula of :func:`wilson_interval`, evaluated by polars; null bounds where n is 0 or
    null, so a group with no data never gets an invented interval.

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
    z = _normal_quantile((1 + confidence) / 2)
    low, high = _wilson_bounds(k, trials, z)
    empty = trials.is_null() | (trials <= 0)

    def bound(value: pl.Expr, at_edge: pl.Expr, edge: float) -> pl.Expr:
        return pl.when(empty).then(None).when(at_edge).then(edge).otherwise(value.clip(0.0, 1.0))

    return IntervalExprs(
        bound(low, k == 0, 0.0).alias("ci_low"), bound(high, k == trials, 1.0).alias("ci_high")
    )


def _as_expr(name: str, value: object) -> pl.Expr:
    if isinstance(value, str):
        return pl.col(value)
    if isinstance(value, pl.Expr):
        return value
    raise ParameterError(
        f"parameter `{name}` is {value!r}; it must be a column name or a polars expression."
    )
