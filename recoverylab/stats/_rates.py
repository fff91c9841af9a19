"""Cluster-aware intervals for rates: one policy for every rate of every protocol.

Estimand. A rate is a pooled ratio θ = E[y] / E[m] over the population of clusters (task,
workflow, case, goal): cluster ``i`` brings ``m_i`` units (episodes, attempts, states) and
``y_i`` events among them, with ``0 <= y_i <= m_i``. ``y_i`` need not be an integer: a per-unit
value in [0, 1] (a state's pass@k or pass^k from n > k repeats, ARCHITECTURE §3.4) summed over
the cluster's units is allowed, so bounded per-cluster means are handled as well as counts. The
estimate is θ̂ = Σy / Σm over the cell's K clusters with ``m_i > 0`` (a cluster with no unit in
the cell carries no information about its rate).

Construction (``"korn-graubard"``; Korn & Graubard 1998). The design effect is estimated from
the per-cluster partials by the linearised (ratio-estimator) variance

    v = K / (K − 1) · Σ (y_i − θ̂ m_i)² / (Σm)²,      deff = v / (θ̂ (1 − θ̂) / (Σm − 1)),

floored at 1 (clustering never makes a rate *more* precise than independent units) and set to 1
when θ̂ is 0 or 1, where the variance cannot be estimated. Where the events (or the non-events)
lie in fewer than :data:`SPARSE_EVENT_CLUSTERS` clusters, the data cannot show how they cluster
(two events in two workflows look binomial whatever the workflows' spread), so the design effect
is taken at its largest, that of identical units within a cluster (intra-cluster correlation 1):
``deff = Σm · Σm² / (Σm)²``, i.e. ``n_eff`` is Kish's effective number of clusters
``(Σm)² / Σm²`` -- every cluster one trial of its mean, the binomial relaxation that bounded
cluster means obey (Hoeffding 1963); no variance is estimated there, so the degrees-of-freedom
factor below is not applied. With one unit per cluster nothing changes. Elsewhere the effective
sample size is
``n_eff = Σm / deff``, shrunk further for the few degrees of freedom of K clusters,
``n* = n_eff · (t_{Σm−1} / t_{K−1})²`` (quantiles at the interval's tail level; the factor is 1
with one unit per cluster), and the interval is Clopper–Pearson's for ``x* = θ̂ n*`` events in
``n*`` trials, through the beta quantiles (real-valued x* and n*):

    low  = B⁻¹(α/2;  x*, n* − x* + 1)   (0 when x* = 0),
    high = B⁻¹(1 − α/2; x* + 1, n* − x*)   (1 when x* = n*).

So 0 of n gives [0, u] with u > 0 and n of n gives [l, 1] with l < 1: never a zero-width
interval where the truth can differ from the estimate. With one unit per cluster and integer
counts the interval is exactly Clopper–Pearson (0 of 20: [0, 0.1684]). One cluster alone (K = 1)
cannot show the spread between clusters: it is one trial of value θ̂ (n* = 1). The interval
inverts the exact binomial test on the effective sample (``test = "exact-binomial"``): θ0 lies
outside it exactly when that test rejects θ0 at level 1 − confidence.

Why this and not the percentile bootstrap everywhere. Over few clusters, rare events or an
estimate at the boundary, the bootstrap distribution collapses (0 events resample to 0: the
interval [0, 0]) and its coverage falls far below the nominal level (72 % for pass^4 over 20
tasks at p = 0.5, issue 38). Clopper–Pearson on the effective sample keeps its tails where the
data cannot show them, and the t-based degrees-of-freedom factor answers for the noise of a
design effect estimated from few clusters. ``benchmarks/rate_coverage.py`` simulates every
protocol's rates, sparse and common, with cluster-level random effects; its results, coverage
with Monte Carlo errors, zero-width share and widths, are in ``benchmarks/COVERAGE.md``.

``"auto"`` (the default) gives a cell the Korn–Graubard interval unless the bootstrap is
accurate there: at least :data:`BOOTSTRAP_MIN_CLUSTERS` clusters and at least
:data:`BOOTSTRAP_MIN_EVENTS` effective events and non-events (``x*`` and ``n* − x*``) for every
rate of the cell, a two-sided interval; then the percentile cluster bootstrap (``test =
"none"``: it inverts no test). One method per cell, so a protocol row showing several rates
names one ``ci_method``. Where the exact interval serves no resample is drawn.

Guarantee and assumptions. Clopper–Pearson covers at least the nominal level for independent
Bernoulli units; on the effective sample the guarantee is approximate (clusters exchangeable,
independent draws from the population; the design effect estimated from them). Per-cluster
values in [0, 1] vary less than Bernoulli ones of the same mean (Hoeffding 1963), which the
design-effect floor keeps on the safe side. The simulated coverage is the evidence for each
setting (``benchmarks/COVERAGE.md``). The price of the sparse rule is width: a rare rate over
many units in few clusters gets an interval as wide as the clusters allow, also when the units
happen to be independent (shown there beside the heterogeneous settings that need it: without
the rule, 3 % events over 20 workflows × 15 attempts with workflow effects covered 85–93 %).

References: Clopper & Pearson (1934), Biometrika 26(4); Korn & Graubard (1998), Survey
Methodology 24(2), 193–201; Dean & Pagano (2015), J. Survey Statistics and Methodology 3(4)
(coverage of cluster-adjusted binomial intervals); Hoeffding (1963), JASA 58(301).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from recoverylab._errors import ParameterError, SchemaError, format_keys, require_one_of
from recoverylab.stats import _limits
from recoverylab.stats._bootstrap import _percentile_interval, bootstrap_types
from recoverylab.stats._cells import _cell_types, _column_names
from recoverylab.stats._checks import (
    ALTERNATIVES,
    _check_confidence,
    _check_n_resamples,
    _check_seed,
)
from recoverylab.stats._distributions import _special
from recoverylab.stats._streams import cell_rng

#: Interval methods of a rate (``rate_cells`` and every protocol's rates); ``auto`` is the default.
RATE_CI_METHODS = ("auto", "korn-graubard", "percentile", "bca")

#: The test each interval method inverts (``test`` column); the bootstrap inverts none.
RATE_TESTS = {"korn-graubard": "exact-binomial", "percentile": "none", "bca": "none"}

#: ``auto`` uses the bootstrap only from this many clusters (with positive denominators) up.
BOOTSTRAP_MIN_CLUSTERS = 100

#: ... and only where every rate of the cell has this many effective events and non-events.
BOOTSTRAP_MIN_EVENTS = 10.0

#: Events (or non-events) in fewer clusters than this: the design effect is taken at its largest.
SPARSE_EVENT_CLUSTERS = 5

#: The columns of :func:`rate_cells` after the cell keys (and ``rate``).
RATE_COLUMNS = (
    "estimate",
    "ci_low",
    "ci_high",
    "n_clusters",
    "design_effect",
    "n_effective",
    "ci_method",
    "test",
)


def korn_graubard(
    n_clusters: np.ndarray,
    total: np.ndarray,
    events: np.ndarray,
    squares: np.ndarray,
    *,
    size_squares: np.ndarray | None = None,
    event_clusters: np.ndarray | None = None,
    nonevent_clusters: np.ndarray | None = None,
    confidence: float = 0.95,
    alternative: str = "two-sided",
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Korn–Graubard intervals of many cells at once, from four sums per cell.

    Parameters
    ----------
    n_clusters
        K per cell: clusters with a positive denominator.
    total, events
        Σm and Σy per cell (``0 <= Σy <= Σm``, Σm > 0).
    squares
        Σ (y_i − θ̂ m_i)² per cell, θ̂ = Σy / Σm.
    size_squares, event_clusters, nonevent_clusters
        Σ m_i², the clusters with y_i > 0 and those with y_i < m_i, per cell (all three or
        none): where events or non-events lie in fewer than :data:`SPARSE_EVENT_CLUSTERS`
        clusters the design effect is taken at its largest, Σm·Σm² / (Σm)² (module docstring).
    confidence
        Confidence level in (0, 1).
    alternative
        ``"two-sided"``; ``"greater"`` gives the lower bound at level ``confidence`` and an upper
        bound of 1; ``"less"`` a lower bound of 0 and the upper bound at ``confidence``.

    Returns
    -------
    tuple of numpy.ndarray
        ``ci_low``, ``ci_high``, ``design_effect``, ``n_effective`` (n* of the module docstring).

    Examples
    --------
    >>> low, high, deff, n_eff = korn_graubard(
    ...     np.array([20]), np.array([20.0]), np.array([0.0]), np.array([0.0]))
    >>> float(low[0]), round(float(high[0]), 4), float(deff[0]), float(n_eff[0])
    (0.0, 0.1684, 1.0, 20.0)
    """
    confidence = _check_confidence(confidence)
    require_one_of("alternative", alternative, ALTERNATIVES)
    k = np.asarray(n_clusters, dtype=np.float64)
    n = np.asarray(total, dtype=np.float64)
    x = np.asarray(events, dtype=np.float64)
    s2 = np.asarray(squares, dtype=np.float64)
    special = _special()
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.clip(x / n, 0.0, 1.0)
        sparse_counts = (
            None
            if size_squares is None
            else (
                np.asarray(size_squares, dtype=np.float64),
                np.asarray(event_clusters, dtype=np.float64),
                np.asarray(nonevent_clusters, dtype=np.float64),
            )
        )
        deff, sparse = _design_effect(k, n, p, s2, sparse_counts)
        tail = 1.0 - (1.0 - confidence) / (2.0 if alternative == "two-sided" else 1.0)
        # degrees of freedom of K clusters against those of Σm independent units (KG 1998)
        t_units = special.stdtrit(np.maximum(n - 1.0, 1.0), tail)
        t_clusters = special.stdtrit(np.maximum(k - 1.0, 1.0), tail)
        # no variance was estimated where the sparse rule holds: no degrees-of-freedom factor
        factor = np.where((n - 1.0 > k - 1.0) & ~sparse, (t_units / t_clusters) ** 2, 1.0)
        n_eff = np.where(k > 1, n / deff * factor, 1.0)
        n_eff = np.minimum(n_eff, n)
        x_eff = p * n_eff
        low = np.where(x_eff > 0.0, special.betaincinv(x_eff, n_eff - x_eff + 1.0, 1.0 - tail), 0.0)
        high = np.where(x_eff < n_eff, special.betaincinv(x_eff + 1.0, n_eff - x_eff, tail), 1.0)
    if alternative == "greater":
        high = np.ones_like(high)
    elif alternative == "less":
        low = np.zeros_like(low)
    # the estimate always lies inside (a rounding of betaincinv must not exclude it)
    low, high = np.minimum(low, p), np.maximum(high, p)
    empty = ~(n > 0)
    nan = np.full_like(p, math.nan)
    return (
        np.where(empty, nan, low),
        np.where(empty, nan, high),
        np.where(empty, nan, deff),
        np.where(empty, nan, n_eff),
    )


def _design_effect(
    k: np.ndarray,
    n: np.ndarray,
    p: np.ndarray,
    s2: np.ndarray,
    sparse_counts: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Return the design effect per cell (floored at 1) and where the sparse rule set it."""
    inner = (p > 0.0) & (p < 1.0) & (k > 1)
    variance = k / (k - 1.0) * s2 / (n * n)
    # the SRS variance with the same small-sample factor, p̂(1 − p̂)/(Σm − 1): one unit per
    # cluster gives deff = 1 exactly (Clopper–Pearson)
    deff = np.where(inner, np.maximum(variance * (n - 1.0) / (p * (1.0 - p)), 1.0), 1.0)
    if sparse_counts is None:
        return deff, np.zeros(p.shape, dtype=bool)
    size_squares, event_clusters, nonevent_clusters = sparse_counts
    # few clusters hold the events (or non-events): their clustering cannot be seen
    largest = size_squares / n
    sparse = (event_clusters < SPARSE_EVENT_CLUSTERS) | (nonevent_clusters < SPARSE_EVENT_CLUSTERS)
    sparse &= k > 1
    return np.where(sparse, np.maximum(deff, largest), deff), sparse


@dataclass(frozen=True)
class RateInterval:
    """One rate's cluster-aware interval (:func:`rate_interval`): what and how.

    Attributes
    ----------
    estimate, low, high
        Σy / Σm and the interval's bounds.
    design_effect, n_effective
        The design effect used (floored at 1) and the effective sample n*.
    n_clusters
        Clusters with a positive denominator.
    ci_method, test
        ``"korn-graubard"`` and ``"exact-binomial"`` (the test the interval inverts).
    """

    estimate: float
    low: float
    high: float
    design_effect: float
    n_effective: float
    n_clusters: int
    ci_method: str = "korn-graubard"
    test: str = "exact-binomial"


def rate_interval(
    events: np.ndarray | Sequence[float],
    denominators: np.ndarray | Sequence[float],
    *,
    confidence: float = 0.95,
    alternative: str = "two-sided",
) -> RateInterval:
    """Korn–Graubard interval of one rate from its per-cluster events and denominators.

    The numpy face of :func:`rate_cells`' exact interval (the gate's rate claims use it), the
    same computation: ``events[i]`` in ``[0, denominators[i]]``, clusters with a zero
    denominator left out.

    Parameters
    ----------
    events, denominators
        Per-cluster arrays of equal length.
    confidence, alternative
        As in :func:`rate_cells` (one-sided: ``"greater"`` lower bound, ``"less"`` upper).

    Returns
    -------
    RateInterval

    Raises
    ------
    ParameterError
        Arrays of different shapes, non-finite values, or events outside [0, denominator].

    Examples
    --------
    >>> ci = rate_interval([0] * 20, [1] * 20)
    >>> ci.low, round(ci.high, 4)
    (0.0, 0.1684)
    """
    y = np.asarray(events, dtype=np.float64).reshape(-1)
    m = np.asarray(denominators, dtype=np.float64).reshape(-1)
    if y.shape != m.shape or not (np.isfinite(y).all() and np.isfinite(m).all()):
        raise ParameterError(
            f"parameters `events` and `denominators` have shapes {y.shape} and {m.shape}; "
            "give one finite number of each per cluster."
        )
    if _outside(y, m).any():
        raise ParameterError(
            "parameter `events` has values outside [0, `denominators`]; a rate's events must be "
            "between 0 and its denominator."
        )
    sums = _cluster_sums(y, m, np.ones(y.size))
    low, high, deff, n_eff = korn_graubard(
        *(np.array([v]) for v in sums[:4]),
        size_squares=np.array([sums[4]]),
        event_clusters=np.array([sums[5]]),
        nonevent_clusters=np.array([sums[6]]),
        confidence=confidence,
        alternative=alternative,
    )
    estimate = sums[2] / sums[1] if sums[1] > 0 else math.nan
    return RateInterval(
        float(estimate),
        float(low[0]),
        float(high[0]),
        float(deff[0]),
        float(n_eff[0]),
        int(sums[0]),
    )


def rate_cells(
    partials: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    numerator: str | Sequence[str],
    denominator: str | Sequence[str],
    names: Sequence[str] | None = None,
    count: str | None = None,
    ci_method: str = "auto",
    confidence: float = 0.95,
    alternative: str = "two-sided",
    n_resamples: int = 10_000,
    seed: int = 0,
) -> pl.DataFrame:
    """Cluster-aware intervals of one or several rates in every cell of a frame of partials.

    The interval policy of every protocol's rates (module docstring: estimand, construction,
    guarantee): Korn–Graubard (Clopper–Pearson on the design-effect adjusted sample) where
    clusters are few, events rare or the estimate at a boundary, the percentile cluster
    bootstrap only where it is accurate (``ci_method="auto"``). The work grows with the distinct
    (cell, numerator, denominator) types: polars groups the partials, numpy adds four sums per
    cell, and only cells that the bootstrap serves are resampled, each on its own
    :func:`cell_rng` stream (keyed by the cell; one percentile draw serves all its rates, BCa
    draws per rate, keyed by the cell and, with several rates, the rate's name).

    Parameters
    ----------
    partials
        One row per cluster × cell (or per type, with ``count``), eager or lazy: the cell
        columns and, per rate, a numerator ``y`` and denominator ``m`` with ``0 <= y <= m``
        (``y`` may be fractional: a sum of per-unit values in [0, 1]).
    cells
        Key columns of a cell (may be empty: one cell); nulls are keys.
    numerator, denominator
        Column names, or equal-length lists of them for several rates of the same cells.
    names
        Names of the rates (default: the numerators), shown in a ``rate`` column; that column is
        there when ``numerator`` is a list or ``names`` is given.
    count
        Optional column of positive integer multiplicities (clusters per row).
    ci_method
        One of :data:`RATE_CI_METHODS`: ``"auto"``, ``"korn-graubard"``, ``"percentile"``,
        ``"bca"``. ``auto`` decides once per cell for all its rates.
    confidence
        Confidence level in (0, 1).
    alternative
        ``"two-sided"``, or a one-sided bound: ``"greater"`` (lower bound, upper = 1),
        ``"less"`` (upper bound, lower = 0); one-sided intervals are Korn–Graubard under
        ``auto``; the bootstrap methods are two-sided only.
    n_resamples, seed
        The bootstrap's settings, where it runs.

    Returns
    -------
    polars.DataFrame
        One row per cell (× rate) that has a cluster with a positive denominator, sorted by the
        cells (then the rates in the given order): the cell columns, ``rate`` (several rates),
        ``estimate`` (Σy / Σm), ``ci_low``, ``ci_high``, ``n_clusters`` (clusters with m > 0),
        ``design_effect`` (estimated, floored at 1), ``n_effective`` (n*), ``ci_method`` (what
        the row got) and ``test`` (the test the interval inverts: ``"exact-binomial"`` on the
        effective sample, or ``"none"`` for the bootstrap).

    Raises
    ------
    ParameterError
        A bad parameter or a column that is not in ``partials``.
    SchemaError
        A value column that is not numeric or holds nulls, or a numerator outside [0, m].

    Examples
    --------
    Twenty tasks, one trial each, no success: Clopper–Pearson's [0, 0.1684].

    >>> frame = pl.DataFrame({"task": range(20), "y": [0] * 20, "m": [1] * 20})
    >>> out = rate_cells(frame, cells=[], numerator="y", denominator="m")
    >>> out.select("estimate", "ci_low", pl.col("ci_high").round(4), "ci_method").row(0)
    (0.0, 0.0, 0.1684, 'korn-graubard')
    """
    cells_l, nums, dens, labels = _rate_iv(
        cells, numerator, denominator, names, ci_method, alternative
    )
    several = not isinstance(numerator, str) or names is not None
    confidence = _check_confidence(confidence)
    n_resamples = _check_n_resamples(n_resamples)
    seed = _check_seed("seed", seed)
    reserved = (*RATE_COLUMNS, "rate")
    values = list(dict.fromkeys([*nums, *dens]))
    keys, groups = _cell_types(partials, cells_l, values, count, reserved)
    position = {name: i for i, name in enumerate(values)}
    pairs = [(position[a], position[b]) for a, b in zip(nums, dens, strict=True)]
    _check_bounds(groups, pairs, nums, dens)

    sums = _cell_sums(groups, pairs)  # (cells, rates, 7): see _cell_sums
    low, high, deff, n_eff = korn_graubard(
        sums[..., 0],
        sums[..., 1],
        sums[..., 2],
        sums[..., 3],
        size_squares=sums[..., 4],
        event_clusters=sums[..., 5],
        nonevent_clusters=sums[..., 6],
        confidence=confidence,
        alternative=alternative,
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        estimate = sums[..., 2] / sums[..., 1]
    chosen = _choose(ci_method, alternative, sums, estimate, n_eff)
    for c, method in enumerate(chosen):
        key, matrix, counts = groups[c]
        if method == "percentile":  # one draw of the cell's clusters serves all its rates
            found = _shared_percentile(
                matrix, counts, pairs, n_resamples, confidence, cell_rng(seed, key)
            )
            low[c], high[c] = found[:, 0], found[:, 1]
            continue
        for r, (i, j) in enumerate(pairs) if method == "bca" else ():
            result = bootstrap_types(
                matrix[:, [i, j]],
                counts,
                n_resamples=n_resamples,
                confidence=confidence,
                ci_method=method,
                rng=cell_rng(seed, (*key, labels[r]) if several else key),
            )
            low[c, r], high[c, r] = result.ci_low, result.ci_high
    return _frame(keys, labels, several, estimate, low, high, sums, deff, n_eff, chosen)


def _shared_percentile(
    matrix: np.ndarray,
    counts: np.ndarray,
    pairs: list[tuple[int, int]],
    n_resamples: int,
    confidence: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Percentile intervals (rates × 2) of every rate of a cell from one cluster bootstrap.

    The cell's clusters are resampled once, as multinomial counts over their joint types (the
    rows of ``matrix``, distinct and sorted: ARCHITECTURE §4), and every rate is the ratio of
    its two column sums in the same resamples, as :func:`bootstrap_types` computes one (with a
    single rate the draws are the same: its joint types are its types).
    """
    n_clusters = int(counts.sum())
    probabilities = counts / n_clusters
    ratios = np.empty((len(pairs), n_resamples), dtype=np.float64)
    nums = [i for i, _ in pairs]
    dens = [j for _, j in pairs]
    batch = max(1, _limits.MAX_BATCH_ELEMENTS // matrix.shape[0])
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        sums = rng.multinomial(n_clusters, probabilities, size=size).astype(np.float64) @ matrix
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios[:, start : start + size] = (sums[:, nums] / sums[:, dens]).T
    return np.array([_percentile_interval(row, confidence) for row in ratios])


def _rate_iv(
    cells: object,
    numerator: object,
    denominator: object,
    names: object,
    ci_method: object,
    alternative: object,
) -> tuple[list[str], list[str], list[str], list[str]]:
    """Check :func:`rate_cells`' columns and methods (one place, like scipy's ``_iv``)."""
    cells_l = _column_names("cells", cells)
    nums = _rate_columns("numerator", numerator)
    dens = _rate_columns("denominator", denominator)
    if len(nums) != len(dens):
        raise ParameterError(
            f"parameters `numerator` and `denominator` name {len(nums)} and {len(dens)} columns; "
            "give one denominator per numerator."
        )
    labels = list(nums) if names is None else [str(n) for n in names]  # type: ignore[attr-defined]
    if len(labels) != len(nums) or len(set(labels)) != len(labels):
        raise ParameterError(
            f"parameter `names` is {names!r}; it must give one distinct name per numerator."
        )
    require_one_of("ci_method", ci_method, RATE_CI_METHODS)
    require_one_of("alternative", alternative, ALTERNATIVES)
    if ci_method in ("percentile", "bca") and alternative != "two-sided":
        raise ParameterError(
            f"parameter `ci_method` is {ci_method!r} with alternative {alternative!r}; the "
            "bootstrap intervals of a rate are two-sided. Hint: use 'korn-graubard' or 'auto'."
        )
    return cells_l, nums, dens, labels


def _rate_columns(name: str, value: object) -> list[str]:
    """Return one or several column names (a name may repeat: rates may share a denominator)."""
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, Sequence) or not names or not all(isinstance(n, str) for n in names):
        raise ParameterError(
            f"parameter `{name}` is {value!r}; it must be a column name or a non-empty list of "
            "them."
        )
    return list(names)


def _check_bounds(
    groups: list, pairs: list[tuple[int, int]], nums: list[str], dens: list[str]
) -> None:
    """Raise SchemaError where a numerator is negative or above its denominator."""
    for r, (i, j) in enumerate(pairs):
        bad = [key for key, matrix, _ in groups if _outside(matrix[:, i], matrix[:, j]).any()]
        if bad:
            raise SchemaError(
                f"partials: numerator `{nums[r]}` lies outside [0, `{dens[r]}`] in "
                f"{len(bad)} cells ({format_keys(bad, total=len(bad))}); a rate's events must "
                "be between 0 and its denominator."
            )


def _outside(y: np.ndarray, m: np.ndarray) -> np.ndarray:
    # a sum of fractions may exceed its integer denominator by a rounding: allow 1e-9 of it
    slack = 1e-9 * np.maximum(np.abs(m), 1.0)
    return (y < -slack) | (y > m + slack) | (m < 0)


def _cell_sums(groups: list, pairs: list[tuple[int, int]]) -> np.ndarray:
    """Per cell and rate, in type order: K, Σm, Σy, Σ (y − θ̂ m)², Σm², events' clusters, ...

    ... and the clusters with non-events (y < m); only clusters with m > 0 count.
    """
    out = np.zeros((len(groups), len(pairs), 7), dtype=np.float64)
    for c, (_, matrix, counts) in enumerate(groups):
        weights = counts.astype(np.float64)
        for r, (i, j) in enumerate(pairs):
            out[c, r] = _cluster_sums(matrix[:, i], matrix[:, j], weights)
    return out


def _cluster_sums(y: np.ndarray, m: np.ndarray, weights: np.ndarray) -> tuple[float, ...]:
    """K, Σm, Σy, Σ (y − θ̂ m)², Σm², clusters with events, with non-events (m > 0 only)."""
    used = m > 0
    w, yu, mu = weights[used], y[used], m[used]
    total, events = float(w @ mu), float(w @ yu)
    theta = events / total if total > 0 else 0.0
    residual = yu - theta * mu
    return (
        float(w.sum()),
        total,
        events,
        float(w @ residual**2),
        float(w @ mu**2),
        float(w[yu > 0].sum()),
        float(w[yu < mu].sum()),
    )


def _choose(
    ci_method: str, alternative: str, sums: np.ndarray, estimate: np.ndarray, n_eff: np.ndarray
) -> list[str]:
    """Return each cell's method: ``auto`` bootstraps only where every rate is well populated."""
    if ci_method != "auto":
        return [ci_method] * sums.shape[0]
    if alternative != "two-sided":
        return ["korn-graubard"] * sums.shape[0]
    enough = bootstrap_accurate(sums[..., 0], estimate, n_eff)
    return ["percentile" if row.all() else "korn-graubard" for row in enough]


def bootstrap_accurate(
    n_clusters: np.ndarray, estimate: np.ndarray, n_effective: np.ndarray
) -> np.ndarray:
    """Where ``auto`` trusts the percentile bootstrap for a rate (element-wise).

    At least :data:`BOOTSTRAP_MIN_CLUSTERS` clusters and :data:`BOOTSTRAP_MIN_EVENTS`
    effective events and non-events (θ̂ n* and (1 − θ̂) n*, from :func:`korn_graubard`). A cell
    gets the bootstrap when this holds for every one of its rates: the rule of
    :func:`rate_cells`, given to protocols that run their own (coupled) bootstrap.

    Examples
    --------
    >>> bootstrap_accurate(np.array([150, 150, 30]), np.array([0.3, 0.01, 0.3]),
    ...                    np.array([400.0, 400.0, 90.0])).tolist()
    [True, False, False]
    """
    k = np.asarray(n_clusters, dtype=np.float64)
    p = np.asarray(estimate, dtype=np.float64)
    n_eff = np.asarray(n_effective, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        events = p * n_eff
        return (
            (k >= BOOTSTRAP_MIN_CLUSTERS)
            & (events >= BOOTSTRAP_MIN_EVENTS)
            & (n_eff - events >= BOOTSTRAP_MIN_EVENTS)
        )


def _frame(
    keys: pl.DataFrame,
    labels: list[str],
    several: bool,
    estimate: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    sums: np.ndarray,
    deff: np.ndarray,
    n_eff: np.ndarray,
    chosen: list[str],
) -> pl.DataFrame:
    """Assemble the long result (cells × rates), keeping the rates that have a denominator."""
    n_cells, n_rates = estimate.shape
    cell_index = np.repeat(np.arange(n_cells), n_rates)
    methods = [chosen[c] for c in cell_index]
    columns = [s.gather(cell_index) for s in keys.get_columns()] if keys.width else []
    if several:
        columns.append(pl.Series("rate", labels * n_cells, dtype=pl.String))
    frame = pl.DataFrame(
        [
            *columns,
            pl.Series("estimate", estimate.reshape(-1), dtype=pl.Float64),
            pl.Series("ci_low", low.reshape(-1), dtype=pl.Float64),
            pl.Series("ci_high", high.reshape(-1), dtype=pl.Float64),
            pl.Series("n_clusters", sums[..., 0].reshape(-1).astype(np.int64), dtype=pl.Int64),
            pl.Series("design_effect", deff.reshape(-1), dtype=pl.Float64),
            pl.Series("n_effective", n_eff.reshape(-1), dtype=pl.Float64),
            pl.Series("ci_method", methods, dtype=pl.String),
            pl.Series("test", [RATE_TESTS[m] for m in methods], dtype=pl.String),
        ]
    )
    return frame.filter(pl.col("n_clusters") > 0)
