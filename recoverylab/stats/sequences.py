"""Anytime-valid confidence sequences for a pooled paired effect or rate, by betting.

A fixed-n interval promises its coverage at one sample size chosen in advance. Looked at after
every task and stopped when it excludes the margin, it is wrong far more often than ``alpha``.
A *confidence sequence* (CS) holds at every task at once: P(θ lies in the CS at every t) >=
1 - alpha, so it may be monitored continuously and stopped at any time (Howard, Ramdas,
McAuliffe & Sekhon 2021, Ann. Statist. 49(2); Waudby-Smith & Ramdas 2024, JRSS-B 86(1)).

The construction is the betting CS of Waudby-Smith & Ramdas (2024) for bounded observations,
adapted to task clusters. Task ``i`` brings ``x_i`` (summed y1 - y0 over its pairs for an
effect, or the number of events for a rate) over ``m_i`` pairs, with ``lo·m_i <= x_i <=
hi·m_i`` (effect: lo = -1, hi = 1; rate: lo = 0, hi = 1). The estimand is the *pooled* value
θ = E[x] / E[m] (= Σx / Σm in the limit: rescue minus harm over pairs). For a candidate θ the
per-task quantity ``z_i(θ) = (x_i - θ·m_i) / M`` has mean zero exactly at the true θ, and lies
in ``[(lo - θ), (hi - θ)]`` when every task has at most ``M`` pairs. Two gamblers bet on it:

* ``K⁺_t(θ) = Π (1 + λ⁺_i z_i(θ))`` gains when the mean of x/m is above θ,
* ``K⁻_t(θ) = Π (1 - λ⁻_i z_i(θ))`` gains when it is below,

with bets ``λ_i`` chosen from tasks ``< i`` only (predictable) and clipped to ``[0, c/(θ - lo)]``
and ``[0, c/(hi - θ)]`` (c = 1/2), so the capital never goes negative. At the true θ each capital
is a nonnegative martingale with initial value 1, and by Ville's inequality P(sup_t K_t >= 1/α)
<= α. Hence:

* one-sided lower CS at level α: {θ : max_{s<=t} K⁺_s(θ) < 1/α}; upper CS with K⁻; a two-sided
  CS spends α/2 on each side;
* the anytime-valid p-value of H0: θ <= θ0 is ``1 / max_{s<=t} K⁺_s(θ0)`` (its e-value is
  ``K⁺_t(θ0)``): under the composite null θ <= θ0 the capital at θ0 is a supermartingale, since
  E[z_i(θ0)] <= 0 and the bet is nonnegative.

The sequence is inverted on a grid of θ and each bound widened by one grid step.
:func:`sequence_test` reports, beside those bounds, the p-value of the test they invert: the
largest ``min(1, 1 / max_s K_s(θ))`` over the grid points whose widened bound would still
hold θ0. A grid point is rejected when that number is below α, so a bound excludes θ0
exactly when the p-value is below α: one computation, no bound moved.

Bets: the approximate growth-rate adaptive rule ("aGRAPA" of Waudby-Smith & Ramdas 2024),
``λ = μ̂ / (σ̂² + μ̂²)`` from the running mean and variance of the past ``z`` (with a prior of
one pseudo-observation of mean 0 and variance 1/4), which bets boldly when the data lie far from
θ: it decides early when the effect is clear. Any predictable bet keeps the guarantee.

Assumptions (stated in the docstrings of the public verbs): tasks are exchangeable draws from
the population the estimand refers to -- more precisely, E[x_i - θ m_i | earlier tasks] = 0 --
and no task has more than ``M`` pairs (``max_pairs``), a bound fixed by the design, not read off
the data a task brings (the bet may not depend on the task it is about to see).

This module imports only numpy (and the package's errors): the statistics of the gate and the
monitor, and the validation in ``benchmarks/sequential.py``, share it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recoverylab._errors import ParameterError, require_one_of

__all__ = [
    "BET_CAP",
    "SequenceBounds",
    "SequenceTest",
    "capital",
    "confidence_sequence",
    "first_crossing",
    "sequence_test",
]

#: Largest fraction of the safe bet that a gambler stakes (c in the module docstring).
BET_CAP = 0.5
#: Prior pseudo-observation of the bet's running variance (the variance of a fair coin).
_PRIOR_VARIANCE = 0.25
#: Points of the θ grid on which :func:`confidence_sequence` inverts the tests.
GRID_POINTS = 401
#: Smallest room below θ used in the bet's cap (see :func:`_bets`).
_ROOM_FLOOR = 1e-6
#: Grid points handled per block, at most (bounds the memory at tasks × block).
_GRID_BLOCK = 64
#: Values (grid points × tasks) per block at most: a block's few float arrays then take tens
#: of MB whatever the number of tasks (a million tasks: blocks of 2 grid points).
_BLOCK_VALUES = 1 << 21


def _check_alpha(alpha: float) -> float:
    if not isinstance(alpha, (int, float)) or not 0.0 < float(alpha) < 1.0:
        raise ParameterError(f"parameter `alpha` is {alpha!r}; it must lie in (0, 1).")
    return float(alpha)


def _check_data(x: np.ndarray, m: np.ndarray, lo: float, hi: float, max_pairs: float) -> None:
    if x.shape != m.shape:
        raise ParameterError(
            f"parameters `x` and `m` have shapes {x.shape} and {m.shape}; they must match."
        )
    if not math.isfinite(max_pairs) or max_pairs <= 0:
        raise ParameterError(f"parameter `max_pairs` is {max_pairs!r}; it must be positive.")
    if (m < 0).any() or (m > max_pairs).any():
        raise ParameterError(
            f"a task has {float(m.max()):g} pairs, more than `max_pairs` = {max_pairs:g}; give "
            "the design's largest number of pairs per task."
        )
    if (x < lo * m - 1e-9).any() or (x > hi * m + 1e-9).any():
        raise ParameterError(
            f"per-task values must lie in [{lo:g}·m, {hi:g}·m] (m = the task's pairs)."
        )


def capital(
    x: np.ndarray,
    m: np.ndarray,
    theta: np.ndarray | float,
    *,
    side: str,
    lo: float = -1.0,
    hi: float = 1.0,
    max_pairs: float = 1.0,
) -> np.ndarray:
    """Return the log capital of the betting test martingale at ``theta``, after each task.

    Parameters
    ----------
    x, m
        Arrays of shape ``(..., T)``: per task, in arrival order, the summed value (y1 - y0 for
        an effect, events for a rate) and the pairs (``m = 0``: the task has no pair here and
        leaves the capital unchanged).
    theta
        Candidate values, broadcastable to ``x.shape[:-1]`` (one per sequence).
    side
        ``"greater"``: the gambler who gains when θ is above ``theta`` (K⁺; large capital
        rejects H0: θ <= theta); ``"less"``: K⁻ (rejects H0: θ >= theta).
    lo, hi
        Bounds of x / m (effect: -1, 1; rate: 0, 1).
    max_pairs
        The largest number of pairs a task may have (M).

    Returns
    -------
    numpy.ndarray
        ``log K_t`` of shape ``(..., T)``; -inf where the capital was lost (only at θ on the
        boundary of the range).

    Raises
    ------
    ParameterError
        For mismatched shapes, an unknown side, or values out of their bounds.

    Examples
    --------
    >>> x = np.ones(20)  # twenty rescues in a row
    >>> bool(capital(x, np.ones(20), 0.0, side="greater")[-1] > np.log(20))
    True
    """
    if side not in ("greater", "less"):
        raise ParameterError(f"parameter `side` is {side!r}; it must be 'greater' or 'less'.")
    x = np.asarray(x, dtype=np.float64)
    m = np.asarray(m, dtype=np.float64)
    _check_data(x, m, lo, hi, float(max_pairs))
    return _log_capital(x, m, theta, side, lo, hi, float(max_pairs))


def _log_capital(
    x: np.ndarray,
    m: np.ndarray,
    theta: np.ndarray | float,
    side: str,
    lo: float,
    hi: float,
    max_pairs: float,
) -> np.ndarray:
    """:func:`capital` on data already checked (the grid blocks of one sequence share it)."""
    theta = np.asarray(theta, dtype=np.float64)[..., None]
    z = (x - theta * m) / float(max_pairs)
    if side == "less":
        z = -z
    room = (theta - lo) if side == "greater" else (hi - theta)
    lam = _bets(z, room)
    with np.errstate(divide="ignore"):
        return np.cumsum(np.log1p(lam * z), axis=-1)


def _bets(z: np.ndarray, room: np.ndarray) -> np.ndarray:
    """Return the predictable aGRAPA bets of tasks ``(..., T)`` (each from earlier tasks only).

    ``room`` bounds how far z may fall below zero (θ - lo for K⁺): a bet of at most
    ``BET_CAP / room`` keeps ``1 + λ z >= 1 - BET_CAP > 0``.
    """
    steps = np.arange(1, z.shape[-1] + 1, dtype=np.float64)
    before = np.cumsum(z, axis=-1) - z  # sum of earlier z
    mean = before / steps  # prior: one pseudo-observation at 0
    # running variance around the predicted mean, with a prior pseudo-observation
    spread = (z - mean) ** 2
    variance = (_PRIOR_VARIANCE + np.cumsum(spread, axis=-1) - spread) / steps
    raw = mean / (variance + mean**2)
    # at θ on the boundary z cannot fall below zero and any bet is safe; the floor keeps the
    # cap finite there
    cap = BET_CAP / np.maximum(room, _ROOM_FLOOR)
    return np.clip(raw, 0.0, cap)


def first_crossing(log_capital: np.ndarray, alpha: float) -> np.ndarray:
    """Return, per sequence, the first task (1-based) whose capital reaches 1/α; 0 if none.

    Parameters
    ----------
    log_capital
        Array ``(..., T)`` from :func:`capital`.
    alpha
        The test's level.

    Returns
    -------
    numpy.ndarray
        Integer array of shape ``(...)``.

    Examples
    --------
    >>> first_crossing(np.log(np.array([[1.0, 25.0, 2.0], [1.0, 2.0, 3.0]])), 0.05).tolist()
    [2, 0]
    """
    alpha = _check_alpha(alpha)
    crossed = log_capital >= math.log(1.0 / alpha)
    first = np.argmax(crossed, axis=-1) + 1
    return np.where(crossed.any(axis=-1), first, 0)


@dataclass(frozen=True)
class SequenceBounds:
    """A confidence sequence over tasks: bounds after each task (running intersection).

    Attributes
    ----------
    low, high
        Arrays of length T: the lower and upper bound after each task (``lo`` / ``hi`` before
        the data exclude anything).
    alpha
        Error spent on each side (α for a one-sided bound; a two-sided sequence at level
        1 - 2α).
    grid_step
        Spacing of the θ grid the tests were inverted on; each bound is widened by one step so
        that a θ between grid points is still covered.
    """

    low: np.ndarray
    high: np.ndarray
    alpha: float
    grid_step: float


def confidence_sequence(
    x: np.ndarray,
    m: np.ndarray,
    *,
    alpha: float,
    lo: float = -1.0,
    hi: float = 1.0,
    max_pairs: float = 1.0,
    grid_points: int = GRID_POINTS,
    alternative: str = "two-sided",
) -> SequenceBounds:
    """Return lower and upper confidence sequences for θ = E[x] / E[m], each at level α.

    Inverts :func:`capital` on a grid of θ over ``[lo, hi]``: after task t the lower bound is
    the smallest grid θ whose K⁺ never reached 1/α up to t (``min(1, 1 / max K⁺) >= α``), less
    one grid step (and the upper bound likewise with K⁻). Both sides together are a two-sided
    sequence at level 1 - 2α. :func:`sequence_test` gives the same bounds with the p-value
    they invert.

    Parameters
    ----------
    x, m
        1-D arrays: per task in arrival order, the summed value and the pairs.
    alpha
        Error spent on each side.
    lo, hi, max_pairs
        As :func:`capital`.
    grid_points
        Grid size (at least 3).
    alternative
        ``"two-sided"`` (default): both bounds; ``"greater"``: the lower bound only (the
        upper stays ``hi``), ``"less"``: the upper bound only (the lower stays ``lo``), at half
        the work.

    Returns
    -------
    SequenceBounds
        The bounds after each task.

    Raises
    ------
    ParameterError
        For a bad alpha, grid or data.

    Examples
    --------
    >>> cs = confidence_sequence(np.ones(40), np.ones(40), alpha=0.025)
    >>> bool(cs.low[-1] > 0), float(cs.high[-1])
    (True, 1.0)
    """
    found = _invert(x, m, 0.0, alpha, lo, hi, max_pairs, grid_points, alternative)
    return SequenceBounds(
        low=found.low, high=found.high, alpha=found.alpha, grid_step=found.grid_step
    )


@dataclass(frozen=True)
class SequenceTest:
    """A confidence sequence with the one-sided p-values, at ``theta``, of the test it inverts.

    Attributes
    ----------
    low, high
        As :class:`SequenceBounds` (arrays of length T).
    p_greater, p_less
        Arrays of length T: after each task, the anytime-valid p-value of H0: θ <= theta
        (``p_greater``) and of H0: θ >= theta (``p_less``) that the lower and the upper bound
        invert: ``low > theta`` exactly when ``p_greater < alpha``, ``high < theta`` exactly
        when ``p_less < alpha``. 1 on a side not computed.
    theta
        The value tested.
    alpha, grid_step
        As :class:`SequenceBounds`.
    """

    low: np.ndarray
    high: np.ndarray
    p_greater: np.ndarray
    p_less: np.ndarray
    theta: float
    alpha: float
    grid_step: float


def sequence_test(
    x: np.ndarray,
    m: np.ndarray,
    theta: float = 0.0,
    *,
    alpha: float,
    lo: float = -1.0,
    hi: float = 1.0,
    max_pairs: float = 1.0,
    grid_points: int = GRID_POINTS,
    alternative: str = "two-sided",
) -> SequenceTest:
    """Return :func:`confidence_sequence` with the p-values at ``theta`` of the test it inverts.

    The widened lower bound exceeds ``theta`` exactly when every grid point θᵢ with
    ``θᵢ − step <= theta`` is rejected, i.e. has ``min(1, 1 / max_s K⁺_s(θᵢ)) < α``; the
    p-value is the largest of those numbers, so the bound and the p-value are read off the same
    floats. It is an anytime-valid p-value of H0: θ <= theta (those grid points include one in
    [theta, theta + step], whose capital is a supermartingale under H0), never smaller than
    ``1 / max K⁺(theta)``. Likewise ``p_less`` with K⁻ and θᵢ + step >= theta.

    Parameters
    ----------
    x, m, alpha, lo, hi, max_pairs, grid_points, alternative
        As :func:`confidence_sequence`.
    theta
        The value tested, in ``[lo, hi]``. No bound can exceed ``hi`` or fall below ``lo``:
        at ``theta = hi`` ``p_greater`` is 1, at ``theta = lo`` ``p_less`` is 1.

    Returns
    -------
    SequenceTest
        The bounds and the p-values after each task.

    Raises
    ------
    ParameterError
        For a bad alpha, grid, data or ``theta``.

    Examples
    --------
    >>> found = sequence_test(np.ones(40), np.ones(40), alpha=0.025)
    >>> bool(found.low[-1] > 0), bool(found.p_greater[-1] < 0.025)
    (True, True)
    """
    theta_ok = isinstance(theta, (int, float)) and not isinstance(theta, bool)
    if not theta_ok or not lo <= float(theta) <= hi:
        raise ParameterError(f"parameter `theta` is {theta!r}; it must lie in [{lo:g}, {hi:g}].")
    return _invert(x, m, float(theta), alpha, lo, hi, max_pairs, grid_points, alternative)


def _invert(
    x: np.ndarray,
    m: np.ndarray,
    theta: float,
    alpha: float,
    lo: float,
    hi: float,
    max_pairs: float,
    grid_points: int,
    alternative: str,
) -> SequenceTest:
    """Bounds and p-values at ``theta`` of :func:`sequence_test` (one grid walk per side)."""
    alpha = _check_alpha(alpha)
    require_one_of("alternative", alternative, ("two-sided", "greater", "less"))
    if not isinstance(grid_points, int) or grid_points < 3:
        raise ParameterError(f"parameter `grid_points` is {grid_points!r}; it must be >= 3.")
    x = np.asarray(x, dtype=np.float64).ravel()
    m = np.asarray(m, dtype=np.float64).ravel()
    _check_data(x, m, lo, hi, float(max_pairs))
    grid = np.linspace(lo, hi, grid_points)
    step = float(grid[1] - grid[0])
    # K⁺ rejects the θ below the data, K⁻ those above: the bounds are the ends of what each
    # keeps, widened by a grid step (a θ between two grid points is kept with its neighbours)
    low = np.full(x.size, float(lo))
    high = np.full(x.size, float(hi))
    p_greater, p_less = np.ones(x.size), np.ones(x.size)
    if alternative != "less":
        # the grid points whose widened lower bound would not exceed theta
        holds = grid - step <= theta
        first, p_greater = _kept_end(x, m, grid, "greater", alpha, lo, hi, max_pairs, holds)
        p_greater = p_greater if theta < hi else np.ones(x.size)
        kept = first < grid_points
        low = np.where(kept, np.maximum(grid[np.where(kept, first, 0)] - step, lo), hi)
    if alternative != "greater":
        holds = grid + step >= theta
        last, p_less = _kept_end(x, m, grid, "less", alpha, lo, hi, max_pairs, holds)
        p_less = p_less if theta > lo else np.ones(x.size)
        kept = last >= 0
        high = np.where(kept, np.minimum(grid[np.where(kept, last, 0)] + step, hi), lo)
    return SequenceTest(
        low=low,
        high=high,
        p_greater=p_greater,
        p_less=p_less,
        theta=theta,
        alpha=alpha,
        grid_step=step,
    )


def _kept_end(
    x: np.ndarray,
    m: np.ndarray,
    grid: np.ndarray,
    side: str,
    alpha: float,
    lo: float,
    hi: float,
    max_pairs: float,
    holds: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per task t, the end of the θ grid the ``side`` gambler has not rejected up to t.

    ``"greater"`` (K⁺ rejects the θ below the data): the first kept grid index, or the grid's
    size when none is kept; ``"less"``: the last kept index, or -1. A grid point is kept while
    its p-value ``min(1, 1 / max_s K_s)`` is at least α. Also returns, per task, the largest
    such p-value over the grid points marked in ``holds`` (0 when none is). The grid is
    walked in blocks (rows of θ) so the memory stays at a few arrays of tasks × block.
    """
    size = max(1, min(_GRID_BLOCK, _BLOCK_VALUES // max(1, x.size)))
    none = grid.size if side == "greater" else -1
    end = np.full(x.size, none)
    p_value = np.zeros(x.size)
    for start in range(0, grid.size, size):
        block = grid[start : start + size]
        shape = (block.size, x.size)
        x_block, m_block = np.broadcast_to(x, shape), np.broadcast_to(m, shape)
        log_k = _log_capital(x_block, m_block, block, side, lo, hi, float(max_pairs))
        # the running intersection: a θ once rejected stays rejected
        p_block = np.minimum(1.0, np.exp(-np.maximum.accumulate(log_k, axis=-1)))
        kept = p_block >= alpha
        held = holds[start : start + size]
        if held.any():
            p_value = np.maximum(p_value, p_block[held].max(axis=0))
        found = kept.any(axis=0)
        if side == "greater":  # the first block that keeps a θ holds the first kept θ
            update = found & (end == none)
            end[update] = start + kept.argmax(axis=0)[update]
        else:  # each later block that keeps a θ moves the last one up
            end[found] = start + block.size - 1 - kept[::-1].argmax(axis=0)[found]
    return end, p_value
