"""Judged outcomes: prediction-powered rates and effects from a human-labelled subset (PPI++).

Estimand. A judge (an LLM grader) scores every unit (episode, branch, pair) with ``f`` in
[0, 1]; humans give the true outcome ``y`` on a random subset only. The estimand is the mean
outcome θ = E[y] per unit over the population of clusters (task, workflow, case): a rate when
``y`` is 0/1, a paired effect when ``y`` is a per-pair outcome difference in {−1, 0, 1}
(``value_range=(-1, 1)``). Reporting the judge's mean as θ is biased by the judge's errors;
the labelled units alone are unbiased but few.

Construction (PPI++; Angelopoulos, Bates, Fannjiang, Jordan & Zrnic 2023; Angelopoulos, Duchi &
Zrnic 2023, power-tuned). Cluster ``i`` of a cell brings, per stratum ``h`` of the gold
design, its labelled units ``nL`` with gold sum ``sY`` and judge sum ``sFL``, and its unlabelled
units ``nU`` with judge sum ``sFU`` (the additive partials of :data:`JUDGED_VALUES`). Within a
stratum,

    θ̂_h(λ) = (ΣsY − λ ΣsFL) / ΣnL + λ ΣsFU / ΣnU,

the gold mean corrected by the judge: the judge's mean on the unlabelled units, plus the gold
mean minus the judge's mean on the labelled units, with the judge weighted by λ (λ = 0: gold
only; λ = 1: plain PPI). Over strata θ̂ = Σ_h W_h θ̂_h with W_h = N_h / N the stratum's share of
all units (one stratum: θ̂ = θ̂_1). Every term is a ratio of cluster sums, so θ̂ − θ is, to first
order, the mean over the K clusters of the per-cluster influence

    ψ_i = Σ_h W_h (A_ih − λ_h B_ih) + Σ_h (θ̂_h − θ̂) N_ih / N̄,
    A_ih = (sY_ih − ȳ_h nL_ih) / n̄L_h,
    B_ih = (sFL_ih − f̄L_h nL_ih) / n̄L_h − (sFU_ih − f̄U_h nU_ih) / n̄U_h,

(bars: the stratum's means per unit and per cluster), summed over the cluster's units first, so
the variance ``v = Σ_i ψ_i² / K²`` respects clustering whatever the gold design: gold drawn by
whole clusters (then A and B's unlabelled part never share a cluster) or by units within
clusters (their covariance through the cluster enters v). The second term is the variability of
the stratum shares W_h (zero when the strata are fixed within every cluster). λ_h is tuned to
minimise v: ``λ_h = clip(Σ_i A_ih B_ih / Σ_i B_ih², 0, 1)`` (each stratum separately; with
``ci_method="ppi++"`` and one unit per cluster, ``ppi_py``'s rule, below). The
interval is θ̂ ± z·√v (``ci_method = "ppi++"``); it inverts the Wald test of θ = θ0
(``test = "wald-z"``), whose p-value is given when a null value is. Where a cluster holds
several units, v is estimated from K clusters, not from units, and the cluster-robust
small-sample rule applies: v·K/(K − 1) (CR1) and a t quantile with (labelled clusters − 1)
degrees of freedom in place of z (Cameron & Miller 2015, J. Human Resources 50(2), §VI: a
variance estimated from few clusters is too small on average, and its noise needs t).

That interval (``ci_method="ppi++"``) is symmetric; a rare rate's sampling distribution is not,
and where events are few its standard error shrinks with the estimate, so it misses on the high
side (93.0–93.7 % at a 5 % rate with gold drawn by cluster: the "Wald PPI++ coverage" column of
``benchmarks/JUDGED.md``; ``ppi_py``'s interval is the same). The default (``"auto"``) for a
cell whose gold values are binary (a rate) is ``"ppi++-cp"``: Korn & Graubard's construction
with PPI++'s variance. The effective sample n* = û(1 − û)/v (the simple random sample whose
binomial variance equals PPI++'s), times (z/q)² where a t quantile q answers for clusters,
capped at the cell's N units, and x* = û·n*; the bounds are Clopper–Pearson's for x* of n*
(``test = "exact-binomial"`` on (x*, n*)). Its width follows n*, which varies far less than
v. For other values (a paired difference, a unit's pass@k) the default is ``"ppi++-logit"``:
with u = (θ − lo)/(hi − lo), logit(û) ± q·se/((hi − lo)·û(1 − û)) (delta method), mapped back,
so the bounds lie inside the range; it inverts the Wald test on that scale (``test =
"wald-logit"``). An estimate on or beyond the range's ends has neither: that row takes the
gold-only fallback below. Bounds are never clipped: ``"ppi++"``'s may pass 0 or 1, as that
method computes them. A paired effect (rescue − harm) combines the two rates' intervals by
MOVER (``stats._judged_mover``).

Beside every estimate, the gold-only interval (``gold_ci_low``/``gold_ci_high``,
``gold_ci_method``) is the Korn–Graubard interval of the labelled units alone: the interval the
gold labels give without the judge, and the one a cell with too few labels falls back to. PPI++
is measured against it (``benchmarks/JUDGED.md``: no wider in every setting).

With one unit per cluster and one stratum, v (no factor, z) is exactly ``ppi_py.ppi_mean_ci``'s
(Var_L(y − λf)/n + λ² Var_U(f)/N, population variances) at the same λ. With
``ci_method="ppi++"`` (that interval) λ̂ is then PPI++'s rule as ``ppi_py`` computes it:
Cov_L(y, f) / ((1 + n/N)·Var(f)), the judge's variance pooled over both arms (n − 1), so an
unclustered rate is ``ppi_mean_ci``'s default interval (tests/test_stats_judged.py;
``benchmarks/JUDGED.md``). Every other case tunes λ̂ to minimise v itself, so v(λ̂) ≤ v(0) in
every cell: the pooled rule estimates the same optimum but, with few labels, can leave v above
v(0).

Checks the data allow. ``gold_drawn_by`` says whether every labelled cluster is labelled whole
(``"cluster"``) or some clusters are labelled in part (``"unit"``); the interval is valid for
both. ``judge_balance_p`` tests that the judge's mean is the same on labelled and unlabelled
units within strata (the same influence B): a small p-value says the labels were not drawn at
random (within the strata given), which PPI assumes.

Guarantee and assumptions. Asymptotic: clusters are independent draws from the population;
gold labels are missing at random within the strata given (whether a unit or cluster is
labelled does not depend on its outcome, given the stratum); every stratum with units has gold.
The normal approximation needs enough labelled clusters and outcomes: below
:data:`MIN_LABELLED_CLUSTERS` labelled clusters, :data:`MIN_LABELLED_UNITS` labelled units or
:data:`MIN_LABELLED_EVENTS` labelled events or non-events (for a difference: non-zero values), or
as few disagreements of judge and gold among the labelled units, in a cell (0 of n gold events
would give a zero-width interval; few disagreements leave the correction's mean to a handful of
units), the row falls back to
the gold-only Korn–Graubard interval (``stats.korn_graubard``, one stratum; with several strata
each stratum's interval at level 1 − α/H, combined by the shares: Bonferroni), and a
:class:`~recoverylab.RecoveryLabWarning` names the cells and the reason. The simulated coverage
is in ``benchmarks/JUDGED.md``.

When only the judge's sensitivity and specificity are known, :func:`rogan_gladen_cells`
corrects the judge's rate: θ = (q + sp − 1) / (se + sp − 1) (Rogan & Gladen 1978), its interval
the same monotone map of the judge rate's Korn–Graubard interval (se and sp taken as known).

References: Angelopoulos, Bates, Fannjiang, Jordan & Zrnic (2023), Prediction-powered inference,
Science 382(6671); Angelopoulos, Duchi & Zrnic (2023), PPI++: efficient prediction-powered
inference, arXiv:2311.01453; Rogan & Gladen (1978), Am. J. Epidemiol. 107(1); Korn & Graubard
(1998), Survey Methodology 24(2).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from recoverylab._errors import (
    ParameterError,
    RecoveryLabWarning,
    SchemaError,
    format_keys,
    require_one_of,
)
from recoverylab.stats._cells import _column_names
from recoverylab.stats._checks import _check_confidence
from recoverylab.stats._distributions import _normal_cdf, _normal_quantile, _special
from recoverylab.stats._judged_intervals import (
    _effective_bounds,
    _fallback,
    _logit_bounds,
    _p_values,
    _sums,
)

#: The additive per-cluster partials of a judged outcome (one row per cell × cluster × stratum).
JUDGED_VALUES = (
    "n_labelled",
    "gold",
    "judge_labelled",
    "n_unlabelled",
    "judge_unlabelled",
    "judge_gold",
    "gold_square",
    "judge_square",
)

#: Interval methods of a judged mean: ``auto`` (the default) is ``ppi++-cp`` in a cell whose
#: gold values are binary (a rate) and ``ppi++-logit`` elsewhere (a difference, a unit's
#: pass@k).
JUDGED_CI_METHODS = ("auto", "ppi++", "ppi++-logit", "ppi++-cp")

#: The test each prediction-powered interval inverts (``test`` column).
JUDGED_TESTS = {"ppi++": "wald-z", "ppi++-logit": "wald-logit", "ppi++-cp": "exact-binomial"}

#: Below this many labelled clusters in a cell, the gold-only exact interval is used (warned).
MIN_LABELLED_CLUSTERS = 20
#: ... or below this many labelled units.
MIN_LABELLED_UNITS = 30
#: ... or below this many labelled events or non-events (a rate), non-zero values (a difference),
#: or disagreements of judge and gold.
MIN_LABELLED_EVENTS = 5

#: The columns of :func:`judged_cells` after the cell keys.
JUDGED_COLUMNS = (
    "estimate",
    "ci_low",
    "ci_high",
    "std_error",
    "lam",
    "judge_estimate",
    "gold_estimate",
    "gold_ci_low",
    "gold_ci_high",
    "gold_ci_method",
    "n",
    "n_labelled",
    "labelled_share",
    "n_clusters",
    "n_labelled_clusters",
    "gold_drawn_by",
    "judge_balance_p",
    "ci_method",
    "test",
    "assumption",
)

#: Fractional values are added in fixed point: scaled by 2**60 to 128-bit integers, whose sums
#: no row order or thread split changes (exact for |values| >= 2**-8, within 2**-60 below), so
#: every engine and shard gives the same partials bit for bit; rounded to a float once.
_FIXED_POINT = 2.0**60

_C, _G, _H = "__recoverylab_cell", "__recoverylab_cluster", "__recoverylab_stratum"
_F, _Y = "__recoverylab_judge", "__recoverylab_gold"


def judged_partials(
    units: pl.DataFrame | pl.LazyFrame,
    *,
    by: Sequence[str],
    judge: str | pl.Expr,
    gold: str | pl.Expr,
) -> pl.LazyFrame:
    """Sum unit-level judge verdicts and gold labels into the partials of :func:`judged_cells`.

    A polars query (lazy in, lazy out): one row per distinct ``by`` (cell, cluster and stratum
    columns) with the columns of :data:`JUDGED_VALUES`. A unit is labelled where ``gold`` is not
    null. The sums are additive, so the same query runs per shard; fractional values (a
    probability verdict, a unit's pass@k) are added in fixed point (:data:`_FIXED_POINT`), so
    the sums do not depend on row order or on how an engine splits the rows.

    Parameters
    ----------
    units
        One row per judged unit.
    by
        Columns to group by: the cells, the cluster and the gold strata.
    judge, gold
        Column names or expressions: the judge's verdict in [0, 1] (never null) and the gold
        value (null where not labelled).

    Returns
    -------
    polars.LazyFrame
        ``by`` columns and ``n_labelled``, ``gold``, ``judge_labelled``, ``n_unlabelled``,
        ``judge_unlabelled``, ``judge_gold`` (Σ f·y over labelled units), ``gold_square``
        and ``judge_square`` (Σ y², Σ f² over labelled units).
    """
    frame = units.lazy() if isinstance(units, pl.DataFrame) else units
    # materialised first: a literal (a gold that is null everywhere) is then one value per row
    frame = frame.with_columns(
        (pl.col(judge) if isinstance(judge, str) else judge).cast(pl.Float64).alias(_F),
        (pl.col(gold) if isinstance(gold, str) else gold).cast(pl.Float64).alias(_Y),
    )
    f, y = pl.col(_F), pl.col(_Y)
    labelled = y.is_not_null()
    sums = {
        "gold": y.fill_null(0.0),
        "judge_labelled": pl.when(labelled).then(f).otherwise(0.0),
        "judge_unlabelled": pl.when(labelled).then(0.0).otherwise(f),
        "judge_gold": pl.when(labelled).then(f * y).otherwise(0.0),
        "gold_square": (y * y).fill_null(0.0),
        "judge_square": pl.when(labelled).then(f * f).otherwise(0.0),
    }
    fixed = frame.with_columns(
        labelled.alias("__recoverylab_labelled"),
        *(
            (value * _FIXED_POINT).cast(pl.Int128).alias(f"__fixed_{n}")
            for n, value in sums.items()
        ),
    )
    totals = fixed.group_by(list(by)).agg(
        pl.col("__recoverylab_labelled").cast(pl.Int64).sum().alias("n_labelled"),
        (~pl.col("__recoverylab_labelled")).cast(pl.Int64).sum().alias("n_unlabelled"),
        *(pl.col(f"__fixed_{name}").sum() for name in sums),
    )
    return totals.select(
        *by,
        *(
            pl.col(name)
            if name in ("n_labelled", "n_unlabelled")
            else (pl.col(f"__fixed_{name}").cast(pl.Float64) / _FIXED_POINT).alias(name)
            for name in JUDGED_VALUES
        ),
    )


def judged_cells(
    partials: pl.DataFrame | pl.LazyFrame,
    *,
    cells: Sequence[str],
    cluster: str,
    strata: Sequence[str] = (),
    lam: float | None = None,
    ci_method: str = "auto",
    confidence: float = 0.95,
    value_range: tuple[float, float] = (0.0, 1.0),
    null: float | None = None,
) -> pl.DataFrame:
    """PPI++ estimates and cluster-aware intervals of a judged mean in every cell.

    The module docstring gives the estimand, construction, guarantee and assumptions. Work
    grows with the partial rows (cell × cluster × stratum), never with units: numpy adds the
    sums of every cell at once.

    Parameters
    ----------
    partials
        One row per cell × cluster × stratum (rows with the same keys are added), with the cell,
        cluster and strata columns and those of :data:`JUDGED_VALUES` (:func:`judged_partials`
        builds them).
    cells
        Key columns of a cell (may be empty: one cell).
    cluster
        The cluster column (task, workflow, case).
    strata
        Columns of the gold design's strata (labels missing at random within each).
    lam
        A fixed power-tuning weight (0: gold only, 1: plain PPI); ``None`` tunes it per stratum.
    ci_method
        ``"auto"`` (``"ppi++-cp"`` where the gold values are binary, else ``"ppi++-logit"``),
        ``"ppi++-cp"`` (Clopper–Pearson on the effective sample), ``"ppi++-logit"`` (the
        interval on the logit scale of the value range, mapped back) or ``"ppi++"`` (θ̂ ± z·se,
        ``ppi_py``'s).
    confidence
        Confidence level in (0, 1).
    value_range
        Bounds of one unit's value: ``(0, 1)`` for a rate, ``(-1, 1)`` for a paired difference
        (the gold-only fallback interval needs them).
    null
        A null value θ0; when given, a ``p_value`` column holds the p-value of the test each
        row's interval inverts.

    Returns
    -------
    polars.DataFrame
        One row per cell, sorted by the cells: the cell columns and :data:`JUDGED_COLUMNS`
        (``p_value`` after ``std_error`` when ``null`` is given). ``estimate`` (PPI++, or the
        gold-only estimate where the row fell back), ``ci_low``/``ci_high`` (the row's
        ``ci_method``), ``std_error`` and ``lam`` (null where the row fell back; ``lam`` also
        with several strata, each tuned its own), ``judge_estimate`` (the judge's mean over all
        units), ``gold_estimate`` with ``gold_ci_low``/``gold_ci_high`` and ``gold_ci_method``
        (the gold-only Korn–Graubard interval), ``n``, ``n_labelled``, ``labelled_share``,
        ``n_clusters``, ``n_labelled_clusters``, ``gold_drawn_by``, ``judge_balance_p``,
        ``ci_method``, ``test`` (null where no interval was computed) and ``assumption``.
        ``estimate`` is null in a cell where a stratum with units has no gold label (warned).

    Raises
    ------
    ParameterError
        A bad parameter or a column that is not in ``partials``.
    SchemaError
        A partial column that is null or not numeric.
    """
    cells_l = _column_names("cells", cells)
    strata_l = _column_names("strata", strata)
    if not isinstance(cluster, str) or not cluster:
        raise ParameterError(f"parameter `cluster` is {cluster!r}; it must be a column name.")
    confidence = _check_confidence(confidence)
    lo, hi = _check_range(value_range)
    check_judged_parameters(ci_method, lam)
    keys, rows = _collect_rows(partials, cells_l, cluster, strata_l)
    if rows["c"].size == 0:
        return _empty(keys, null is not None)
    judged = judged_fit(rows, lam, ci_method, confidence, (lo, hi))
    return _judged_frame(keys, judged, strata_l, null, cells_l)


def check_judged_parameters(ci_method: str, lam: float | None) -> None:
    """Raise :class:`ParameterError` for an unknown ``ci_method`` or a ``lam`` outside [0, 1]."""
    require_one_of("ci_method", ci_method, JUDGED_CI_METHODS)
    if lam is not None and not (isinstance(lam, int | float) and 0.0 <= float(lam) <= 1.0):
        raise ParameterError(f"parameter `lam` is {lam!r}; it must be None or a number in [0, 1].")


@dataclass(frozen=True)
class JudgedFit:
    """Everything :func:`judged_cells` computed for its cells (arrays indexed by cell).

    ``fit``: the PPI++ fit (estimate, variance, bounds of the chosen method, per-row cluster
    influences); ``fallback``: the gold-only Korn–Graubard intervals; ``small``: the cells that
    fell back to them; ``method``: each cell's interval method. The paired effect
    (``stats._judged_paired``) combines two of these (rescue and harm).
    """

    rows: dict[str, np.ndarray]
    fit: dict[str, Any]
    fallback: dict[str, np.ndarray]
    small: np.ndarray
    method: np.ndarray
    confidence: float


def judged_fit(
    rows: dict[str, np.ndarray],
    lam: float | None,
    ci_method: str,
    confidence: float,
    value_range: tuple[float, float],
) -> JudgedFit:
    """Fit PPI++ on collected partial rows, choose each cell's method and its fallback."""
    lo, hi = value_range
    n_cells, n_strata = int(rows["c"].max()) + 1, int(rows["h"].max()) + 1
    # ppi_py's interval takes ppi_py's λ where its setting holds (one unit per cluster)
    fit = _fit(rows, n_cells, n_strata, lam, confidence, lo, pooled=ci_method == "ppi++")
    binary = _binary_gold(rows, n_cells, lo, hi)
    if ci_method == "auto":
        method = np.where(binary, "ppi++-cp", "ppi++-logit")
    else:
        method = np.full(n_cells, ci_method)
    fit["low"], fit["high"] = fit["wald_low"], fit["wald_high"]
    boundary = np.zeros(n_cells, dtype=bool)
    for name, bounds in (("ppi++-logit", _logit_bounds), ("ppi++-cp", _effective_bounds)):
        pick = method == name
        if pick.any():
            extra = bounds(fit, lo, hi)
            fit["low"] = np.where(pick, extra["low"], fit["low"])
            fit["high"] = np.where(pick, extra["high"], fit["high"])
            boundary |= pick & extra["boundary"]
            fit |= {k: v for k, v in extra.items() if k not in ("low", "high", "boundary")}
    fit["boundary"] = boundary
    fallback = _fallback(rows, fit, n_cells, n_strata, confidence, lo, hi)
    small = (
        (fit["n_labelled_clusters"] < MIN_LABELLED_CLUSTERS)
        | (fit["n_labelled"] < MIN_LABELLED_UNITS)
        | (fit["sparse_events"] < MIN_LABELLED_EVENTS)
        | boundary
    )
    small &= ~fit["undefined"] & (fit["n_labelled"] > 0)
    return JudgedFit(rows, fit, fallback, small, method, confidence)


def _binary_gold(rows: dict[str, np.ndarray], n_cells: int, lo: float, hi: float) -> np.ndarray:
    """Return, per cell, whether every labelled unit's value is one end of the range.

    Mapped into [0, 1] (u = (y − lo)/(hi − lo)), binary values have Σu² = Σu: a rate's gold.
    """
    span = hi - lo
    n_l = np.bincount(rows["c"], weights=rows["n_labelled"], minlength=n_cells)
    s1 = np.bincount(rows["c"], weights=rows["gold"], minlength=n_cells)
    s2 = np.bincount(rows["c"], weights=rows["gold_square"], minlength=n_cells)
    u1 = (s1 - lo * n_l) / span
    u2 = (s2 - 2.0 * lo * s1 + lo * lo * n_l) / (span * span)
    return np.abs(u2 - u1) <= 1e-9 * np.maximum(n_l, 1.0)


def _check_range(value_range: object) -> tuple[float, float]:
    ok = (
        isinstance(value_range, tuple | list)
        and len(value_range) == 2
        and all(isinstance(v, int | float) and math.isfinite(v) for v in value_range)
        and value_range[0] < value_range[1]
    )
    if not ok:
        raise ParameterError(
            f"parameter `value_range` is {value_range!r}; it must be (low, high) with low < high,"
            " e.g. (0, 1) for a rate or (-1, 1) for a paired difference."
        )
    return float(value_range[0]), float(value_range[1])  # type: ignore[index]


def _collect_rows(
    partials: object, cells: list[str], cluster: str, strata: list[str]
) -> tuple[pl.DataFrame, dict[str, np.ndarray]]:
    """Collect the partials summed per (cell, cluster, stratum), with integer ids for each."""
    if isinstance(partials, pl.DataFrame):
        partials = partials.lazy()
    if not isinstance(partials, pl.LazyFrame):
        raise ParameterError(
            f"parameter `partials` is a {type(partials).__name__}; it must be a polars DataFrame "
            "or LazyFrame."
        )
    _check_partial_columns(partials.collect_schema(), cells, cluster, strata)
    summed = (
        partials.group_by([*cells, cluster, *strata])
        .agg(pl.col(v).cast(pl.Float64).sum() for v in JUDGED_VALUES)
        .collect(engine="streaming")
    )
    nulls = summed.select(pl.any_horizontal(pl.col(v).is_null() for v in JUDGED_VALUES).sum())
    if nulls.item():
        raise SchemaError(
            f"partials: {nulls.item()} rows have a null judged partial; partial sums must be "
            "numbers."
        )
    summed = summed.sort([*cells, cluster, *strata], nulls_last=False)
    ids = summed.select(
        (pl.struct(cells).rle_id() if cells else pl.lit(0, pl.UInt32)).alias(_C),
        pl.struct([*cells, cluster]).rle_id().alias(_G),
        (pl.struct(strata).rank("dense") - 1 if strata else pl.lit(0, pl.UInt32)).alias(_H),
    )
    if summed.height == 0:
        keys = summed.select(cells)
    else:
        starts = np.flatnonzero(np.diff(ids[_C].to_numpy(), prepend=-1))
        keys = summed.select(cells)[starts] if cells else pl.DataFrame()
    rows = {v: summed[v].to_numpy().astype(np.float64) for v in JUDGED_VALUES}
    rows["c"] = ids[_C].to_numpy().astype(np.int64)
    rows["g"] = ids[_G].to_numpy().astype(np.int64)
    rows["h"] = ids[_H].to_numpy().astype(np.int64)
    if strata:
        names = summed.select(strata).with_columns(ids[_H].alias(_H)).unique(_H).sort(_H)
        rows["stratum_names"] = np.array(
            [", ".join(map(str, r)) for r in names.select(strata).rows()], dtype=object
        )
    return keys, rows


def _check_partial_columns(
    schema: pl.Schema, cells: list[str], cluster: str, strata: list[str]
) -> None:
    for role, names in (("cells", cells), ("cluster", [cluster]), ("strata", strata)):
        for column in names:
            if column not in schema:
                raise ParameterError(
                    f"partials: parameter `{role}` names column `{column}`, which is not in the "
                    f"table (columns: {', '.join(schema.names())})."
                )
    for column in JUDGED_VALUES:
        if column not in schema:
            raise ParameterError(
                f"partials: column `{column}` is missing; judged partials have the columns "
                f"{', '.join(JUDGED_VALUES)} (stats.judged_partials builds them)."
            )
        if not (schema[column].is_numeric() or schema[column] == pl.Boolean):
            raise SchemaError(
                f"partials: column `{column}` has type {schema[column]}; it must be numeric."
            )


@dataclass(frozen=True)
class _Layout:
    """Index arrays of the partial rows: cell ``c``, cluster ``g``, (cell, stratum) ``ch``."""

    c: np.ndarray
    g: np.ndarray
    ch: np.ndarray
    n_cells: int
    n_strata: int
    n_clusters: np.ndarray  # K per cell

    @property
    def size(self) -> int:
        return self.n_cells * self.n_strata

    def per_cell(self, per_stratum: np.ndarray) -> np.ndarray:
        """Sum a (cell, stratum) array over the strata of each cell."""
        return per_stratum.reshape(self.n_cells, self.n_strata).sum(axis=1)

    def sums(self, values: np.ndarray) -> np.ndarray:
        """Sum per-row values per (cell, stratum)."""
        return _sums(self.ch, values, self.size)

    def variance(self, psi: np.ndarray) -> np.ndarray:
        """Σ over clusters of (the cluster's summed influence)², over K², per cell."""
        return _cluster_square(self.g, self.c, psi, self.n_cells) / self.n_clusters**2


def _layout(rows: dict[str, np.ndarray], n_cells: int, n_strata: int) -> _Layout:
    c, g = rows["c"], rows["g"]
    n_clusters = np.bincount(c[np.r_[True, np.diff(g) != 0]], minlength=n_cells).astype(float)
    return _Layout(c, g, c * n_strata + rows["h"], n_cells, n_strata, n_clusters)


def _fit(
    rows: dict[str, np.ndarray],
    n_cells: int,
    n_strata: int,
    lam: float | None,
    confidence: float,
    lo: float,
    *,
    pooled: bool = False,
) -> dict[str, Any]:
    """Return the PPI++ estimate, λ, variance and checks of every cell (module docstring)."""
    lay = _layout(rows, n_cells, n_strata)
    n_l, n_u = rows["n_labelled"], rows["n_unlabelled"]
    tot_l, tot_u = lay.sums(n_l), lay.sums(n_u)
    units = tot_l + tot_u
    n_cell = lay.per_cell(units)
    with np.errstate(divide="ignore", invalid="ignore"):
        y_bar, fl_bar = lay.sums(rows["gold"]) / tot_l, lay.sums(rows["judge_labelled"]) / tot_l
        fu_bar = np.where(tot_u > 0, lay.sums(rows["judge_unlabelled"]) / tot_u, 0.0)
        w = units / np.repeat(n_cell, n_strata)  # the strata's shares W_h
        a, b = _influences(rows, lay, tot_l, tot_u, y_bar, fl_bar, fu_bar)
        if lam is None:  # power tuning (per stratum): see _tuned_lambda
            lam_h = _tuned_lambda(rows, lay, a, b, (tot_l, tot_u), pooled=pooled)
        else:
            lam_h = np.full(lay.size, float(lam))
        lam_h = np.where(tot_u > 0, lam_h, 0.0)  # no unlabelled unit: the gold mean itself
        theta_h = y_bar - lam_h * fl_bar + lam_h * fu_bar
        theta = lay.per_cell(np.where(units > 0, w * theta_h, 0.0))
        gold = lay.per_cell(np.where(units > 0, w * y_bar, 0.0))
        n_bar = n_cell[lay.c] / lay.n_clusters[lay.c]
        usable = tot_l[lay.ch] > 0

        def share_term(per_stratum: np.ndarray, overall: np.ndarray) -> np.ndarray:
            # the variability of the shares W_h: (θ_h − θ) N_ih / N̄ (zero with one stratum)
            return np.where(usable, (per_stratum[lay.ch] - overall[lay.c]) * (n_l + n_u) / n_bar, 0)

        psi, psi_gold = (
            w[lay.ch] * (a - lam_h[lay.ch] * b) + share_term(theta_h, theta),
            w[lay.ch] * a + share_term(y_bar, gold),
        )
        se, se_gold = np.sqrt(lay.variance(psi)), np.sqrt(lay.variance(psi_gold))
        # the judge's mean, labelled minus unlabelled, within strata: zero when gold is at random
        gap = lay.per_cell(np.where(units > 0, w * (fl_bar - fu_bar) * (tot_u > 0), 0.0))
        gap_var = lay.variance(w[lay.ch] * b)
        balance_p = np.where(
            gap_var > 0, 2.0 * (1.0 - _normal_cdf(np.abs(gap) / np.sqrt(gap_var))), math.nan
        )
    undefined = lay.per_cell(((units > 0) & (tot_l == 0)).astype(float)) > 0
    nan = np.where(undefined, math.nan, 0.0)
    clusters = _labelled_clusters(rows, lay)
    # several units in a cluster: the cluster-robust small-sample rule (CR1 and t)
    factor, df, z = _small_sample(rows, lay, clusters["n_labelled_clusters"], confidence)
    se, se_gold = se * factor, se_gold * factor
    return {
        "df": df,
        "quantile": z,
        "confidence": confidence,
        "theta": theta + nan,
        "se": se + nan,
        "se_gold": se_gold + nan,
        "wald_low": theta - z * se + nan,
        "wald_high": theta + z * se + nan,
        # per-row influences (already weighted; summed per cluster they give the variance):
        # the paired effect's covariance of rescue and harm is built from them
        "psi": psi * factor[lay.c],
        "psi_gold": psi_gold * factor[lay.c],
        "layout": lay,
        "lam": lam_h.reshape(n_cells, n_strata),
        "strata_present": (units > 0).reshape(n_cells, n_strata),
        "gold": gold + nan,
        "judge": np.bincount(
            lay.c, weights=rows["judge_labelled"] + rows["judge_unlabelled"], minlength=n_cells
        )
        / n_cell,
        "n": n_cell,
        "n_labelled": lay.per_cell(tot_l),
        "n_clusters": lay.n_clusters,
        "balance_p": balance_p + nan,
        "undefined": undefined,
        "sparse_events": _sparse_events(rows, lay, lo),
        **clusters,
    }


def _clustered_cells(rows: dict[str, np.ndarray], lay: _Layout) -> np.ndarray:
    """Return, per cell, whether some cluster holds more than one unit."""
    units = np.bincount(lay.g, weights=rows["n_labelled"] + rows["n_unlabelled"])
    cluster_cell = np.zeros(units.size, dtype=np.int64)
    cluster_cell[lay.g] = lay.c
    return np.bincount(cluster_cell, weights=units > 1, minlength=lay.n_cells) > 0


def _tuned_lambda(
    rows: dict[str, np.ndarray],
    lay: _Layout,
    a: np.ndarray,
    b: np.ndarray,
    totals: tuple[np.ndarray, np.ndarray],
    *,
    pooled: bool,
) -> np.ndarray:
    """Return the power-tuning weight λ of every (cell, stratum), clipped to [0, 1].

    By default the λ that minimises the variance v the interval reports, Σ A·B / Σ B² (so
    v(λ̂) ≤ v(λ) for every λ, v(0) included: tuning never widens the Wald interval). With
    ``pooled`` (``ci_method="ppi++"``, ``ppi_py``'s interval) and every cluster one unit
    (``ppi_py``'s setting): PPI++'s rule as ``ppi_py`` computes it, Cov_L(y, f) / ((1 + n/N)·
    Var(f)), the judge's variance pooled over labelled and unlabelled units (n − 1), so that
    interval is ``ppi_py.ppi_mean_ci``'s default exactly. The two estimate the same optimum;
    the pooled one can leave v above v(0) where labels are few (``benchmarks/JUDGED.md``'s
    rare, accurate-judge setting), which the default never does.
    """
    tot_l, tot_u = totals
    ab, bb = lay.sums(a * b), lay.sums(b * b)
    minimiser = np.where(bb > 0, ab / bb, 0.0)
    if not pooled:
        return np.clip(minimiser, 0.0, 1.0)
    clustered = _clustered_cells(rows, lay)
    # one unit per row here: the unlabelled verdicts' squares are the rows' squared sums
    sum_l, sum_u = lay.sums(rows["judge_labelled"]), lay.sums(rows["judge_unlabelled"])
    squares = lay.sums(rows["judge_square"]) + lay.sums(rows["judge_unlabelled"] ** 2)
    total = tot_l + tot_u
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = lay.sums(rows["judge_gold"]) / tot_l - (sum_l / tot_l) * (
            lay.sums(rows["gold"]) / tot_l
        )
        pooled = (squares - (sum_l + sum_u) ** 2 / total) / (total - 1.0)
        reference = np.where(pooled > 0, cov / ((1.0 + tot_l / tot_u) * pooled), 0.0)
    unit_clusters = np.repeat(~clustered, lay.n_strata)
    tuned = np.where(unit_clusters & (tot_u > 0) & (tot_l > 0), reference, minimiser)
    return np.clip(np.nan_to_num(tuned, nan=0.0), 0.0, 1.0)


def _small_sample(
    rows: dict[str, np.ndarray], lay: _Layout, labelled_clusters: np.ndarray, confidence: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the standard error's factor, the degrees of freedom and the quantile per cell.

    Cells where every cluster is one unit keep PPI++'s own interval (factor 1, normal quantile:
    df = inf), which is ``ppi_py``'s; where a cluster has several units, the cluster-robust
    CR1 factor √(K / (K − 1)) and a t quantile with (labelled clusters − 1) degrees of freedom
    answer for a variance estimated from K clusters (Cameron & Miller 2015, §VI).
    """
    clustered = _clustered_cells(rows, lay)
    k = lay.n_clusters
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(clustered & (k > 1), np.sqrt(k / (k - 1.0)), 1.0)
    df = np.where(clustered, np.maximum(labelled_clusters - 1.0, 1.0), np.inf)
    tail = 0.5 + confidence / 2.0
    quantile = np.where(clustered, _t_quantile(tail, df), _normal_quantile(tail))
    return factor, df, quantile


def _t_quantile(p: float, df: np.ndarray) -> np.ndarray:
    return np.asarray(_special().stdtrit(np.where(np.isfinite(df), df, 1.0), p))


def _sparse_events(rows: dict[str, np.ndarray], lay: _Layout, lo: float) -> np.ndarray:
    """Return the fewest of the counts the normal approximation needs, per cell.

    Values >= 0 (a rate): the labelled events Σy and non-events n − Σy; a difference: its
    non-zero values Σy². Both: the judge's disagreements with the gold on labelled units,
    Σ(y − f)², which the rectifier's mean rests on (an accurate judge and few labels leave a
    handful, and the rectifier's normal approximation fails: the rare settings with an accurate
    judge in ``benchmarks/JUDGED.md``).
    """

    def per_cell(values: np.ndarray) -> np.ndarray:
        return np.bincount(lay.c, weights=values, minlength=lay.n_cells)

    n_l, squares = per_cell(rows["n_labelled"]), per_cell(rows["gold_square"])
    # Σ (y − f)² over labelled units: the judge's disagreements with the gold (binary)
    disagreements = np.maximum(
        squares + per_cell(rows["judge_square"]) - 2.0 * per_cell(rows["judge_gold"]), 0.0
    )
    if lo < 0.0:
        return np.minimum(squares, disagreements)
    events = per_cell(rows["gold"])
    return np.minimum(np.minimum(events, n_l - events), disagreements)


def _influences(
    rows: dict[str, np.ndarray],
    lay: _Layout,
    tot_l: np.ndarray,
    tot_u: np.ndarray,
    y_bar: np.ndarray,
    fl_bar: np.ndarray,
    fu_bar: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Return the per-row influences A (gold) and B (judge, labelled minus unlabelled)."""
    ch, k = lay.ch, lay.n_clusters[lay.c]
    n_l, n_u = rows["n_labelled"], rows["n_unlabelled"]
    nl_bar = tot_l[ch] / k
    nu_bar = np.where(tot_u[ch] > 0, tot_u[ch] / k, 1.0)
    a = (rows["gold"] - y_bar[ch] * n_l) / nl_bar
    b_l = (rows["judge_labelled"] - fl_bar[ch] * n_l) / nl_bar
    b_u = np.where(tot_u[ch] > 0, (rows["judge_unlabelled"] - fu_bar[ch] * n_u) / nu_bar, 0.0)
    # a stratum without gold leaves its cell undefined; its rows must not poison the sums
    usable = tot_l[ch] > 0
    return np.where(usable, a, 0.0), np.where(usable, b_l - b_u, 0.0)


def _labelled_clusters(rows: dict[str, np.ndarray], lay: _Layout) -> dict[str, np.ndarray]:
    """Count the labelled clusters per cell, and those labelled only in part."""
    cluster_cell = np.zeros(int(lay.g.max()) + 1, dtype=np.int64)
    cluster_cell[lay.g] = lay.c
    labelled = np.bincount(lay.g, weights=rows["n_labelled"]) > 0
    unlabelled = np.bincount(lay.g, weights=rows["n_unlabelled"]) > 0
    return {
        "n_labelled_clusters": np.bincount(cluster_cell, weights=labelled, minlength=lay.n_cells),
        "partly_labelled": np.bincount(
            cluster_cell, weights=labelled & unlabelled, minlength=lay.n_cells
        ),
    }


def _cluster_square(g: np.ndarray, c: np.ndarray, psi: np.ndarray, n_cells: int) -> np.ndarray:
    """Σ over clusters of (the cluster's summed influence)², per cell."""
    per_cluster = np.bincount(g, weights=psi)
    cluster_cell = np.zeros(per_cluster.size, dtype=np.int64)
    cluster_cell[g] = c
    return np.bincount(cluster_cell, weights=per_cluster**2, minlength=n_cells)


def judged_columns(judged: JudgedFit, null: float | None, strata: list[str]) -> dict[str, Any]:
    """Return the result columns of :data:`JUDGED_COLUMNS` (and ``p_value``) as arrays."""
    fit, fallback, small = judged.fit, judged.fallback, judged.small
    n_cells = small.size
    estimate = np.where(small, fit["gold"], fit["theta"])
    low = np.where(small, fallback["low"], fit["low"])
    high = np.where(small, fallback["high"], fit["high"])
    gold_method = np.where(fallback["one_stratum"], "korn-graubard", "korn-graubard-bonferroni")
    gold_test = np.where(fallback["one_stratum"], "exact-binomial", "none")
    method = np.where(small, gold_method, judged.method)
    test = np.where(small, gold_test, [JUDGED_TESTS[m] for m in judged.method])
    lam = fit["lam"]
    present = fit["strata_present"]
    lam_cell = np.where(present.sum(axis=1) == 1, (lam * present).sum(axis=1), math.nan)
    if len(strata) == 0:
        lam_cell = lam[:, 0]
    assumption = (
        "gold missing at random"
        + (f" within strata ({', '.join(strata)})" if strata else "")
        + "; clusters independent"
    )
    columns: dict[str, Any] = {
        "estimate": estimate,
        "ci_low": low,
        "ci_high": high,
        "std_error": np.where(small, math.nan, fit["se"]),
    }
    if null is not None:
        columns["p_value"] = _p_values(fit, fallback, small, judged.method, float(null))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = fit["n_labelled"] / fit["n"]
    columns |= {
        "lam": np.where(small, math.nan, lam_cell),
        "judge_estimate": fit["judge"],
        "gold_estimate": fit["gold"],
        # the gold-only interval: Korn–Graubard on the labelled units (the fallback's)
        "gold_ci_low": np.where(fit["undefined"], math.nan, fallback["low"]),
        "gold_ci_high": np.where(fit["undefined"], math.nan, fallback["high"]),
        "gold_ci_method": np.where(
            fit["undefined"], np.array(None, dtype=object), gold_method.astype(object)
        ),
        "n": fit["n"].astype(np.int64),
        "n_labelled": fit["n_labelled"].astype(np.int64),
        "labelled_share": share,
        "n_clusters": fit["n_clusters"].astype(np.int64),
        "n_labelled_clusters": fit["n_labelled_clusters"].astype(np.int64),
        "gold_drawn_by": np.where(fit["partly_labelled"] > 0, "unit", "cluster"),
        "judge_balance_p": fit["balance_p"],
        # a cell with no gold in a stratum has no interval: no method to name
        "ci_method": np.where(fit["undefined"], np.array(None, dtype=object), method),
        "test": np.where(fit["undefined"], np.array(None, dtype=object), test),
        "assumption": np.full(n_cells, assumption, dtype=object),
    }
    return columns


def _judged_frame(
    keys: pl.DataFrame,
    judged: JudgedFit,
    strata: list[str],
    null: float | None,
    cells: list[str],
) -> pl.DataFrame:
    """Assemble the result frame; warn for cells that fell back or have a stratum without gold."""
    columns = judged_columns(judged, null, strata)
    _warn(keys, cells, judged.small, judged.fit, strata)
    return columns_frame(keys, columns, cells)


def columns_frame(keys: pl.DataFrame, columns: dict[str, Any], cells: list[str]) -> pl.DataFrame:
    """Return the cell keys beside the result columns (numpy arrays), NaN as null."""
    body = pl.DataFrame(
        {
            name: pl.Series(name, list(v) if v.dtype == object else v, strict=False)
            for name, v in columns.items()
        }
    )
    body = body.with_columns(pl.col(pl.Float64).fill_nan(None))
    return pl.concat([keys, body], how="horizontal") if cells else body


def _warn(
    keys: pl.DataFrame,
    cells: list[str],
    small: np.ndarray,
    fit: dict[str, Any],
    strata: list[str],
) -> None:
    names = keys.rows() if cells else [("all",)] * len(small)

    def shown(mask: np.ndarray) -> str:
        picked = [names[i] for i in np.flatnonzero(mask)]
        return format_keys((p[0] if len(p) == 1 else p for p in picked), total=len(picked))

    if small.any():
        warnings.warn(
            f"judged outcome: {int(small.sum())} cells have fewer than {MIN_LABELLED_CLUSTERS} "
            f"labelled clusters, {MIN_LABELLED_UNITS} labelled units or {MIN_LABELLED_EVENTS} "
            f"labelled events, non-events and judge-gold disagreements (cell {shown(small)}), "
            "too few for the normal approximation of PPI++; they show the gold-only "
            "Korn–Graubard interval instead (ci_method says which).",
            RecoveryLabWarning,
            stacklevel=3,
        )
    if fit["undefined"].any():
        warnings.warn(
            f"judged outcome: {int(fit['undefined'].sum())} cells have a "
            f"{'stratum' if strata else 'cell'} with units but no gold label (cell "
            f"{shown(fit['undefined'])}); their estimate is null. Hint: label some units of "
            "every stratum.",
            RecoveryLabWarning,
            stacklevel=3,
        )


def _empty(keys: pl.DataFrame, with_p: bool) -> pl.DataFrame:
    names = list(JUDGED_COLUMNS)
    if with_p:
        names.insert(4, "p_value")
    text = {"gold_drawn_by", "ci_method", "test", "assumption"}
    ints = {"n", "n_labelled", "n_clusters", "n_labelled_clusters"}
    body = pl.DataFrame(
        schema={n: pl.String if n in text else pl.Int64 if n in ints else pl.Float64 for n in names}
    )
    return pl.concat([keys.clear(), body], how="horizontal") if keys.width else body
