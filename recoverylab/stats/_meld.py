"""Quantiles of a melded confidence distribution W = T·(2B − 1), T and B beta variables.

The numerical core of the Fay–Lumbard intervals (``_paired_intervals``): P(W ≤ w) by
Gauss–Legendre quadrature on the logit of the more concentrated variable, inverted by
Chandrupatla's bracketed root search, vectorised over cells and levels. Deterministic (no Monte
Carlo). At w = 0 the CDF is exact (:func:`_meld_at_zero`, the exact binomial tail), and the
search keeps one end of its bracket at 0, so a quantile lies beyond zero exactly when that exact
value is below the level: the sign of a bound and the p-value are one computation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from recoverylab.stats._distributions import _special

#: Gauss–Legendre nodes per panel (:data:`_MELD_PANELS`, 8 panels) of the melded beta products:
#: 12 keep every bound within 4e-9 of adaptive quadrature for integer counts (n up to 1e6),
#: 3e-7 for effective counts far below 1 (tests/test_stats_meld.py: 1e-6); 10 nodes reach 3e-8
#: and 2.4e-7, 12 panels change nothing, 4 panels reach 1e-5.
_MELD_NODES = 12

#: Bisection steps for quantiles on [-1, 1]: 2**-35 is below any reported digit.
_BISECTION_STEPS = 36

#: Half the width at which a root search stops (Chandrupatla's tolerance).
_TOLERANCE = 2.0**-36


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
    # a row sum, not a matrix product: BLAS may block rows differently for other batch sizes,
    # and a cell's bound must not depend on the cells computed with it
    part = (density * factor * width * slope * weights).sum(axis=1)
    o_a, o_b = meld.outer[0][cells], meld.outer[1][cells]
    start = np.where(w > 0, special.betainc(o_a, o_b, np.clip(base, 0.0, 1.0)), 0.0)
    return np.asarray(start + np.bincount(cell, weights=part, minlength=len(w)), dtype=np.float64)


def _bracketed_root(
    cdf: Callable[[np.ndarray, np.ndarray], np.ndarray],
    level: float | np.ndarray,
    skip: np.ndarray,
    guess: tuple[np.ndarray, np.ndarray] | None = None,
    ends: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Smallest w in [low end, high end] with cdf(w) >= level, to within 2⁻³⁵, per cell.

    Chandrupatla's method (1997): inverse quadratic interpolation when the last three points
    allow it, else bisection, never closer to an end than the tolerance: as sure as bisection,
    in 8-12 evaluations of the costly CDF instead of 36. The bracket (a, b) keeps cdf − level
    >= 0 at exactly one end, which is returned, so the answer is always a point where the CDF
    reached the level. ``cdf(w, cells)`` evaluates only the cells of the mask (converged ones
    cost nothing); ``level``: one, or one per cell; ``skip``: cells the caller answers.
    ``ends`` (low, high), default [−1, 1]: the high end must reach the level and the low end
    must not (unless the answer is the low end itself); the answer never leaves them.
    ``guess`` (low, high) is a first bracket inside them; where it misses the root it is
    widened to that end (one more evaluation).
    """
    shape = skip.shape
    levels = np.broadcast_to(np.asarray(level, dtype=np.float64), shape)
    low_end, high_end = (
        np.broadcast_to(np.asarray(v, dtype=np.float64), shape) for v in (ends or (-1.0, 1.0))
    )

    def value(w: np.ndarray, cells: np.ndarray) -> np.ndarray:
        out = np.zeros(shape)
        if cells.any():
            out[cells] = cdf(w[cells], cells) - levels[cells]
        return out

    a, f_a, b, f_b, start = _first_bracket(value, ~skip, guess, low_end, high_end)
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
            tlim = _TOLERANCE / np.abs(b - c)
            done |= tlim > 0.5
            xi = (a - b) / (c - b)
            phi = (f_a - f_b) / (f_c - f_b)
            quadratic = f_a / (f_b - f_a) * f_c / (f_b - f_c) + (c - a) / (b - a) * f_a / (
                f_c - f_a
            ) * f_b / (f_c - f_b)
            usable = (phi * phi < xi) & ((1 - phi) ** 2 < 1 - xi) & np.isfinite(quadratic)
            t = np.clip(np.where(usable, quadratic, 0.5), tlim, 1 - tlim)
        t = np.where(done, 0.5, t)
    # the end where the CDF reached the level (the high end if, against its contract, neither)
    reached = np.where(f_a >= 0, a, np.where(f_b >= 0, b, high_end))
    return np.where(skip, 1.0, reached)


def _first_bracket(
    value: Callable[[np.ndarray, np.ndarray], np.ndarray],
    search: np.ndarray,
    guess: tuple[np.ndarray, np.ndarray] | None,
    low_end: np.ndarray,
    high_end: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """Return (a, f_a, b, f_b, start) of :func:`_bracketed_root` (``start``: root at low end)."""
    if guess is None:
        b, a = low_end.copy(), high_end.copy()
    else:
        b, a = (np.clip(v, low_end, high_end) for v in guess)
    f_b = value(b, search)
    # the guessed low end is already past the level: the root is below it
    past = search & (f_b >= 0) & (b > low_end)
    a, f_a = np.where(past, b, a), np.where(past, f_b, 0.0)
    b = np.where(past, low_end, b)
    f_b = np.where(past, value(b, past), f_b)
    # the level reached at the low end already: the answer is the low end
    start = search & (f_b >= 0)
    a = np.where(start, b, a)
    rest = search & ~start & ~past
    f_a = np.where(start, f_b, np.where(rest, value(a, rest), f_a))
    # the guessed high end is short of the level: the root is above it
    short = rest & (f_a < 0)
    b, f_b = np.where(short, a, b), np.where(short, f_a, f_b)
    a = np.where(short, high_end, a)
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


def _meld_at_zero(t_a: np.ndarray, t_b: np.ndarray, b_a: np.ndarray, b_b: np.ndarray) -> np.ndarray:
    """Return P(W ≤ 0) of W = T·(2B − 1) exactly: the meld's confidence curve at zero.

    T > 0 almost surely, so W ≤ 0 exactly when B ≤ ½: the value is F_B(½), the exact
    one-sided binomial tail (Beta(x, m − x + 1) at ½ is P(Binomial(m, ½) >= x)). Point masses
    (a parameter ≤ 0, as in :func:`_meld_quantile`): T at 0 or B at 0 put all of W at or below
    0 (1); B at 1 with T > 0 puts none (0). :func:`_meld_quantile` anchors its search here, and
    the paired intervals report it as their p-value, so the two cannot disagree.
    """
    t_a, t_b, b_a, b_b = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.float64) for v in (t_a, t_b, b_a, b_b))
    )
    safe_a, safe_b = np.where(b_a > 0, b_a, 1.0), np.where(b_b > 0, b_b, 1.0)
    curve = _special().betainc(safe_a, safe_b, 0.5)
    curve = np.where(b_b <= 0, 0.0, curve)
    return np.asarray(np.where((t_a <= 0) | (b_a <= 0), 1.0, curve), dtype=np.float64)


def _meld_quantile(
    t_a: np.ndarray,
    t_b: np.ndarray,
    b_a: np.ndarray,
    b_b: np.ndarray,
    level: float | np.ndarray,
) -> np.ndarray:
    """Return the ``level`` quantile of W = T·(2B − 1), T ~ Beta(t_a, t_b), B ~ Beta(b_a, b_b).

    The root of the CDF (:func:`_meld_cdf`, quadrature) by :func:`_bracketed_root`, vectorised
    over cells and levels. The search is bracketed on the side of zero that the exact value at
    zero (:func:`_meld_at_zero`) decides, with that value at the bracket's end at 0: the
    quantile is above zero exactly when ``_meld_at_zero(...) < level``, by construction. A
    parameter ≤ 0 is its beta's point-mass limit (Beta(0, b) at 0, Beta(a, 0) at 1, as
    Clopper–Pearson at the edges): W ≡ 0 (T at 0) and W = −T (B at 0) have closed forms at or
    below zero; W = 2B − 1 (T at 1) and W = T (B at 1) are searched on their exact beta CDFs.
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
    special = _special()
    zero = _meld_at_zero(t_a, t_b, b_a, b_b)
    b_zero, b_one, t_zero, t_one = b_a <= 0, b_b <= 0, t_a <= 0, t_b <= 0
    closed = t_zero | b_zero
    meld = _meld_setup(t_a, t_b, b_a, b_b)
    s_t_a, s_t_b, s_b_a, s_b_b = (np.where(v > 0, v, 1.0) for v in (t_a, t_b, b_a, b_b))
    general = ~(closed | t_one | b_one)

    def cdf(w: np.ndarray, cells: np.ndarray) -> np.ndarray:
        out = np.empty(w.shape)
        quad = general[cells]
        if quad.any():
            out[quad] = _meld_cdf(meld, w[quad], cells & general)
        # T at 1: W = 2B − 1; B at 1: W = T (T at 1 too: W ≡ 1)
        beta_b = t_one[cells] & ~b_one[cells]
        if beta_b.any():
            arg = np.clip((1.0 + w[beta_b]) / 2.0, 0.0, 1.0)
            out[beta_b] = special.betainc(s_b_a[cells][beta_b], s_b_b[cells][beta_b], arg)
        beta_t = b_one[cells]
        if beta_t.any():
            arg = np.clip(w[beta_t], 0.0, 1.0)
            value = special.betainc(s_t_a[cells][beta_t], s_t_b[cells][beta_t], arg)
            out[beta_t] = np.where(t_one[cells][beta_t], (w[beta_t] >= 1.0) * 1.0, value)
        # the exact value at zero, the same number the p-value reports
        at = w == 0.0
        out[at] = zero[cells][at]
        return out

    below = zero >= levels
    found = _bracketed_root(
        cdf,
        levels,
        closed,
        guess=_meld_guess(meld, levels),
        ends=(np.where(below, -1.0, 0.0), np.where(below, 0.0, 1.0)),
    )
    # T at 0: W ≡ 0; B at 0: W = −T, whose quantile is minus T's upper quantile (both <= 0)
    t_low = np.where(
        t_zero, 0.0, np.where(t_one, 1.0, special.betaincinv(s_t_a, s_t_b, 1.0 - levels))
    )
    return np.asarray(np.where(t_zero, 0.0, np.where(b_zero, -t_low, found)))
