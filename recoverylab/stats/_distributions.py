"""Distribution functions without scipy (scipy costs ~0.5 s of a command's start-up).

The normal quantile and CDF, Binomial(n, ½) probabilities and tails in exact integers where
small, an FFT convolution, and the Hoeffding window that bounds every lattice; ``scipy.special``
itself is reached only through :func:`_special`, on first use.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np


def _negligible_window(mean: float, scale: float, upper: int) -> tuple[int, int]:
    """Return the integer window [lo, hi] (within [0, upper]) outside which the mass is nil.

    Hoeffding: P(|U − mean| ≥ k) ≤ 2·exp(−2k²/scale) < 1e-340 for k = 20·√scale, so no double
    changes; a million clusters cost a few thousand lattice points, not a million.
    """
    half_width = 20.0 * math.sqrt(scale) + 1.0
    return max(0, math.floor(mean - half_width)), min(upper, math.ceil(mean + half_width))


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
