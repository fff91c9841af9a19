"""Intervals of a judged mean and the tests they invert (``stats._judged``'s bounds).

:func:`_fallback`: the gold-only Korn–Graubard interval of every cell (shown beside each
estimate, and the interval of a cell with too few labels). One function per ``ci_method`` of
:data:`recoverylab.stats._judged.JUDGED_CI_METHODS` besides the plain Wald interval (computed
in the fit): :func:`_logit_bounds` (``ppi++-logit``) and :func:`_effective_bounds`
(``ppi++-cp``, a rate's default). :func:`_p_values` gives each cell the p-value of the test its
interval inverts (the fallback's exact binomial test where the cell fell back). The
construction and its reasons are in ``stats._judged``'s module docstring.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from recoverylab.stats._distributions import _normal_cdf, _normal_quantile, _special
from recoverylab.stats._rates import korn_graubard


def _logit(u: np.ndarray | float) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.log(u) - np.log1p(-np.asarray(u)))


def _expit(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def _logit_bounds(fit: dict[str, Any], lo: float, hi: float) -> dict[str, Any]:
    """Return the bounds on the logit scale of the value range, mapped back (delta method).

    u = (θ − lo) / (hi − lo) in (0, 1); logit(û) ± q·se / ((hi − lo) û (1 − û)), mapped back.
    The interval then lies inside the range and leans the way a bounded mean's sampling
    distribution does. An estimate on or outside the range has no logit: that row takes the
    gold-only fallback.
    """
    span = hi - lo
    with np.errstate(divide="ignore", invalid="ignore"):
        u = (fit["theta"] - lo) / span
        scaled = _logit(u)
        scale_se = fit["se"] / (span * u * (1.0 - u))
        inside = (u > 0.0) & (u < 1.0)
        q = fit["quantile"]
        low = np.where(inside, lo + span * _expit(scaled - q * scale_se), np.nan)
        high = np.where(inside, lo + span * _expit(scaled + q * scale_se), np.nan)
    return {
        "low": low,
        "high": high,
        "scaled": scaled,
        "scale_se": scale_se,
        "boundary": ~inside & np.isfinite(u),
    }


def _effective_bounds(fit: dict[str, Any], lo: float, hi: float) -> dict[str, Any]:
    """Return Clopper–Pearson bounds on PPI++'s effective sample (a rate's default interval).

    Korn & Graubard's construction with PPI++'s variance: the effective sample n* =
    û(1 − û)/v (the units of a simple random sample whose binomial variance equals PPI++'s),
    times (z / q)² where a t quantile q answers for a variance estimated from few clusters,
    capped at the cell's units N (no estimate is more precise than every unit's gold); x* =
    û·n*; the interval is Clopper–Pearson's for x* events in n* trials (real-valued, beta
    quantiles) and inverts the exact binomial test on (x*, n*). Where a rare rate's events are
    few, the Wald interval's standard error shrinks with its estimate and the interval misses
    on the high side (``benchmarks/JUDGED.md``: 93.0–93.7 % at a 5 % rate with gold drawn by
    cluster); the binomial shape keeps the width tied to n*, which varies far less.
    """
    span = hi - lo
    tail = 0.5 + fit["confidence"] / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        u = (fit["theta"] - lo) / span
        variance = (fit["se"] / span) ** 2
        inside = (u > 0.0) & (u < 1.0)
        df_factor = (_normal_quantile(tail) / fit["quantile"]) ** 2
        n_eff = np.where(variance > 0.0, u * (1.0 - u) / variance * df_factor, np.inf)
        n_eff = np.minimum(n_eff, fit["n"])
        x_eff = u * n_eff
        low, high = clopper_pearson(x_eff, n_eff, 1.0 - tail, u)
    return {
        "low": np.where(inside, lo + span * low, np.nan),
        "high": np.where(inside, lo + span * high, np.nan),
        "cp_n_effective": n_eff,
        "cp_x_effective": x_eff,
        "boundary": ~inside & np.isfinite(u),
    }


def clopper_pearson(
    x: np.ndarray, n: np.ndarray, half_alpha: np.ndarray | float, estimate: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Clopper–Pearson bounds of x events in n trials (real-valued), ``half_alpha`` per side.

    Written with lower-tail probabilities (the upper bound as 1 − the lower quantile of the
    mirrored beta), so a tiny α keeps its precision; the estimate always lies inside.
    """
    special = _special()
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.where(x > 0.0, special.betaincinv(x, n - x + 1.0, half_alpha), 0.0)
        high = np.where(x < n, 1.0 - special.betaincinv(n - x, x + 1.0, half_alpha), 1.0)
    return np.minimum(low, estimate), np.maximum(high, estimate)


def _p_values(
    fit: dict[str, Any],
    fallback: dict[str, np.ndarray],
    small: np.ndarray,
    method: np.ndarray,
    null: float,
) -> np.ndarray:
    """Return each cell's p-value of θ = ``null``: the test its interval inverts.

    ``method`` is each cell's interval method; ``small`` marks the cells that show the gold-only
    fallback (the exact binomial test on its effective sample, none with several strata).
    """
    lo, hi = fallback["range"]
    theta0 = (null - lo) / (hi - lo)
    with np.errstate(divide="ignore", invalid="ignore"):
        if "scale_se" in fit:  # the logit scale: the Wald test the interval inverts there
            z_logit = np.abs(fit["scaled"] - _logit(theta0)) / fit["scale_se"]
        else:
            z_logit = np.full(method.size, math.nan)
        z = np.where(method == "ppi++-logit", z_logit, np.abs(fit["theta"] - null) / fit["se"])
        tail = np.where(
            np.isfinite(fit["df"]),
            _special().stdtr(np.where(np.isfinite(fit["df"]), fit["df"], 1.0), -z),
            1.0 - _normal_cdf(z),
        )
        wald = np.where(fit["se"] > 0, 2.0 * tail, np.where(z == 0, 1.0, 0.0))
    if "cp_n_effective" in fit:
        cp = _exact_binomial_p(fit["cp_x_effective"], fit["cp_n_effective"], theta0)
        wald = np.where(method == "ppi++-cp", cp, wald)
    exact = _exact_binomial_p(fallback["x_effective"], fallback["n_effective"], theta0)
    exact = np.where(fallback["one_stratum"], exact, math.nan)
    return np.where(small, exact, wald)


def _exact_binomial_p(x: np.ndarray, n: np.ndarray, theta0: float) -> np.ndarray:
    """Two-sided exact binomial p-value of θ0 for x* events in n* trials (real-valued).

    Its tails are the beta functions whose quantiles are the Clopper–Pearson bounds
    (``stats.korn_graubard``), so θ0 lies outside that interval exactly when p < 1 − confidence.
    """
    if not 0.0 <= theta0 <= 1.0:
        return np.zeros_like(n)
    special = _special()
    with np.errstate(divide="ignore", invalid="ignore"):
        upper = np.where(x > 0, special.betainc(x, n - x + 1.0, theta0), 1.0)  # P(X >= x)
        lower = np.where(x < n, 1.0 - special.betainc(x + 1.0, n - x, theta0), 1.0)  # P(X <= x)
    return np.minimum(1.0, 2.0 * np.minimum(upper, lower))


def _fallback(
    rows: dict[str, np.ndarray],
    fit: dict[str, Any],
    n_cells: int,
    n_strata: int,
    confidence: float,
    lo: float,
    hi: float,
) -> dict[str, np.ndarray]:
    """Return the gold-only Korn–Graubard interval of every cell (where labels are too few)."""
    c, h = rows["c"], rows["h"]
    size = n_cells * n_strata
    ch = c * n_strata + h
    k, total, events, kg_sums = _gold_sums(rows, ch, size, lo, hi)
    present = fit["strata_present"].reshape(-1)
    n_present = np.maximum(fit["strata_present"].sum(axis=1), 1)
    level = 1.0 - (1.0 - confidence) / np.repeat(n_present, n_strata)
    low = np.full(size, math.nan)
    high = np.full(size, math.nan)
    n_effective = np.full(size, math.nan)
    for lev in np.unique(level):  # one call per number of strata (a handful)
        pick = (level == lev) & (total > 0)
        if pick.any():
            lo_k, hi_k, _, n_eff = korn_graubard(
                k[pick],
                total[pick],
                events[pick],
                kg_sums[0][pick],
                size_squares=kg_sums[1][pick],
                event_clusters=kg_sums[2][pick],
                nonevent_clusters=kg_sums[3][pick],
                confidence=float(lev),
            )
            low[pick], high[pick], n_effective[pick] = lo_k, hi_k, n_eff
    n_all = _sums(ch, rows["n_labelled"] + rows["n_unlabelled"], size)
    w = n_all / np.repeat(fit["n"], n_strata)
    cell = np.arange(size) // n_strata
    use = present & (total > 0)

    def combine(values: np.ndarray) -> np.ndarray:
        return np.bincount(cell[use], weights=(w * values)[use], minlength=n_cells)

    out_low = lo + (hi - lo) * combine(low)
    out_high = lo + (hi - lo) * combine(high)
    # one stratum: the row's effective sample (n*, x*) of the exact test its interval inverts
    only = np.argmax(fit["strata_present"], axis=1) + np.arange(n_cells) * n_strata
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.clip(events / total, 0.0, 1.0)
    return {
        "low": out_low,
        "high": out_high,
        "one_stratum": n_present == 1,
        "n_effective": n_effective[only],
        "x_effective": (rate * n_effective)[only],
        "range": np.array([lo, hi]),
    }


def _gold_sums(
    rows: dict[str, np.ndarray], ch: np.ndarray, size: int, lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """Return Korn–Graubard's sums of the gold values (mapped into [0, 1]) per (cell, stratum)."""
    labelled = rows["n_labelled"] > 0
    m = rows["n_labelled"][labelled]
    y = (rows["gold"][labelled] - lo * m) / (hi - lo)  # the unit values mapped into [0, 1]
    idx = ch[labelled]
    k = np.bincount(idx, minlength=size).astype(float)
    total, events = _sums(idx, m, size), _sums(idx, y, size)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = events / total
    squares = _sums(idx, (y - p[idx] * m) ** 2, size)
    size_squares = _sums(idx, m * m, size)
    event_clusters = _sums(idx, (y > 0).astype(float), size)
    nonevent_clusters = _sums(idx, (y < m).astype(float), size)
    return k, total, events, (squares, size_squares, event_clusters, nonevent_clusters)


def _sums(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(index, weights=values, minlength=size)
