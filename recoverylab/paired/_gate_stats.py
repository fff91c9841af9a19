"""One claim on one cell: one-sided p-values against the margin and test-compatible bounds.

Each (claim, cell) is two one-sided tests of its quantity q against the claim's threshold t:

* the *pass* test rejects "the claim is false" (effect claims: H0 q <= t; maximum rates:
  H0 q >= t) -- its rejection is PASS;
* the *fail* test rejects "the claim is true" -- its rejection is FAIL; neither: INCONCLUSIVE.

Fixed n (all tasks at once):

* effect claims: the bound is the paired effect's one-sided interval
  (:func:`recoverylab.stats.fay_lumbard_interval` for one pair per task,
  :func:`recoverylab.stats.cluster_melded_interval` otherwise), exactly as computed, and the
  p-value at t is that interval family *inverted*: the α at which the one-sided bound at
  confidence 1 - α reaches t. With one pair per task and t = 0 it is the meld's own curve at
  zero (the exact McNemar tail, :func:`recoverylab.stats.paired_effect_cells`), and the bound
  excludes 0 exactly when it is below α; elsewhere the inversion is numerical (to 1e-4 in
  log α).
* rate claims: every protocol's rate interval, :func:`recoverylab.stats.rate_interval`
  (Clopper–Pearson, on the design-effect adjusted sample (Korn & Graubard 1998) when tasks
  have several pairs), and the p-value at the margin that interval family inverted.

Sequentially: bound and p-value are one computation,
:func:`recoverylab.stats.sequences.sequence_test` at t (the p-value of the test the grid
confidence sequence inverts; anytime-valid).

The gate's verdict is read from the shown, family-adjusted bounds (:func:`beyond`), so a
verdict and the bound printed beside it cannot disagree.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from recoverylab import stats
from recoverylab._errors import ParameterError
from recoverylab.paired import _planning
from recoverylab.stats import sequences

__all__ = ["CellData", "beyond", "bound", "method", "p_paths", "p_values", "tasks_needed"]

#: Smallest p-value the inversion resolves (reported as this value when the bound is beyond).
P_FLOOR = 1e-12
#: Largest α at which a one-sided bound is computed (above it the bound's confidence is < 1/2).
_ALPHA_CEILING = 0.49
#: Target power of the tasks-needed estimate.
POWER = 0.8


@dataclass(frozen=True)
class CellData:
    """Per-task numbers of one (claim, cell), in arrival order.

    Attributes
    ----------
    x, m
        Per task: the summed value (y1 - y0, or events) and its pairs.
    rescue, harm
        Per task: rescued and harmed pairs (harm: the events of a rate claim).
    arrival
        Per task: its rank in the global arrival order.
    rate
        True for a rate claim (x counts events in [0, m]), False for an effect (x in [-m, m]).
    """

    x: np.ndarray
    m: np.ndarray
    rescue: np.ndarray
    harm: np.ndarray
    arrival: np.ndarray
    rate: bool

    @classmethod
    def of(cls, frame: pl.DataFrame, *, rate: bool) -> CellData:
        """Read one cell's per-task rows (columns x, m, rescue, harm, arrival).

        For a rate claim ``x`` becomes the events (``harm``).
        """
        arrays = {c: frame[c].to_numpy().astype(np.int64) for c in ("x", "m", "rescue", "harm")}
        if rate:  # a rate counts events: harmed pairs, or touched clean episodes
            arrays["x"] = arrays["harm"]
        return cls(arrival=frame["arrival"].to_numpy().astype(np.int64), rate=rate, **arrays)

    @property
    def estimate(self) -> float:
        """The pooled estimate Σx / Σm."""
        return float(self.x.sum() / self.m.sum())

    @property
    def lo(self) -> float:
        """Lower end of x / m: 0 for a rate, -1 for an effect."""
        return 0.0 if self.rate else -1.0

    def one_pair(self) -> bool:
        """Whether every task has one pair."""
        return bool((self.m == 1).all())


# --- fixed n: effect claims -------------------------------------------------------------------


def _effect_types(cell: CellData) -> pl.DataFrame:
    frame = pl.DataFrame({"d": cell.x, "n": cell.m})
    return frame.group_by("d", "n").agg(pl.len().cast(pl.Int64).alias("count")).sort("d", "n")


def _effect_bound(cell: CellData, alpha: float, *, side: str) -> float:
    """Return the one-sided bound at confidence 1 - alpha ("greater": lower, "less": upper)."""
    confidence = 1.0 - alpha
    if cell.one_pair():
        rescue, harm = int((cell.x == 1).sum()), int((cell.x == -1).sum())
        ci = stats.fay_lumbard_interval(
            rescue, harm, cell.x.size, confidence=confidence, alternative=side
        )
    else:
        types = _effect_types(cell)
        ci = stats.cluster_melded_interval(
            types.select("d", "n").to_numpy(),
            types["count"].to_numpy(),
            confidence=confidence,
            alternative=side,
        )
    return float(ci.low if side == "greater" else ci.high)


def _curve_at_zero(cell: CellData, side: str) -> float:
    """Return the one-sided p-value at zero that the one-pair (Fay–Lumbard) bound inverts."""
    return _curve_at_zero_cached(cell.x.tobytes(), side)


@functools.lru_cache(maxsize=256)
def _curve_at_zero_cached(differences: bytes, side: str) -> float:
    values, counts = np.unique(np.frombuffer(differences, dtype=np.int64), return_counts=True)
    types = pl.DataFrame({"d": values, "n": np.ones(values.size, dtype=np.int64), "count": counts})
    found = stats.paired_effect_cells(types, cells=[], alternative=side)
    return float(found["p_value"].item())


def _invert(bound_at: Callable[[float], float], threshold: float, side: str) -> float | None:
    """Return the α at which the one-sided bound reaches ``threshold`` (None: above 1/2)."""
    from scipy.optimize import brentq

    def beyond(log_alpha: float) -> float:  # > 0 when the bound excludes the threshold
        value = bound_at(math.exp(log_alpha))
        return value - threshold if side == "greater" else threshold - value

    top, bottom = math.log(_ALPHA_CEILING), math.log(P_FLOOR)
    if beyond(top) <= 0:
        return None
    if beyond(bottom) > 0:
        return P_FLOOR
    return math.exp(brentq(beyond, bottom, top, xtol=1e-4))


def _effect_p_values(cell: CellData, threshold: float) -> tuple[float, float]:
    """Return (p greater, p less) of the effect at ``threshold``: the bounds inverted."""
    if threshold == 0.0 and cell.one_pair():
        return _curve_at_zero(cell, "greater"), _curve_at_zero(cell, "less")
    found = {
        side: _invert(functools.partial(_effect_bound, cell, side=side), threshold, side)
        for side in ("greater", "less")
    }
    # a side whose bound does not reach the threshold even at α = 1/2: the data lean the other
    # way; its p-value (>= 1/2, never deciding) mirrors the other side's
    greater = found["greater"]
    less = found["less"]
    if greater is None:
        greater = max(_ALPHA_CEILING, 1.0 - (less if less is not None else 0.5))
    if less is None:
        less = max(_ALPHA_CEILING, 1.0 - greater)
    return greater, less


# --- fixed n: rate claims ---------------------------------------------------------------------


def _rate_bound(cell: CellData, alpha: float, side: str) -> float:
    """One-sided bound at confidence 1 - alpha ("less": upper, "greater": lower).

    :func:`recoverylab.stats.rate_interval`: every protocol's rate interval (Korn–Graubard:
    Clopper–Pearson on the design-effect adjusted sample of several pairs per task; exactly
    Clopper–Pearson with one pair per task).
    """
    found = stats.rate_interval(cell.x, cell.m, confidence=1.0 - alpha, alternative=side)
    return found.low if side == "greater" else found.high


def _rate_p_values(cell: CellData, margin: float) -> tuple[float, float]:
    """Return (p of H0 rate >= margin, p of H0 rate <= margin): the bounds inverted.

    The α at which the one-sided bound at confidence 1 - α reaches the margin (the interval's
    degrees-of-freedom factor depends on the level, so the inversion is numerical, to 1e-4 in
    log α); a side whose bound does not reach the margin at α = 1/2 mirrors the other. With
    one pair per task the interval is Clopper–Pearson, whose inversion is the exact binomial
    test: its tails are computed in closed form.
    """
    if cell.one_pair():  # Clopper–Pearson: the exact binomial tails, in closed form
        from scipy import stats as sps

        events, pairs = float(cell.x.sum()), float(cell.m.sum())
        tail_below = (
            float(sps.beta.sf(margin, events + 1, pairs - events)) if events < pairs else 1.0
        )
        tail_above = float(sps.beta.cdf(margin, events, pairs - events + 1)) if events > 0 else 1.0
        return tail_below, tail_above
    found = {
        side: _invert(functools.partial(_rate_bound, cell, side=side), margin, side)
        for side in ("less", "greater")
    }
    below, above = found["less"], found["greater"]
    if below is None:
        below = max(_ALPHA_CEILING, 1.0 - (above if above is not None else 0.5))
    if above is None:
        above = max(_ALPHA_CEILING, 1.0 - below)
    return below, above


# --- both modes -------------------------------------------------------------------------------


def _sequence(
    cell: CellData, threshold: float, max_pairs: float, *, alpha: float
) -> sequences.SequenceTest:
    """:func:`~recoverylab.stats.sequences.sequence_test` of the cell at ``threshold``."""
    return sequences.sequence_test(
        cell.x, cell.m, threshold, alpha=alpha, lo=cell.lo, hi=1.0, max_pairs=max_pairs
    )


def p_paths(cell: CellData, threshold: float, *, upper: bool, max_pairs: float) -> tuple:
    """Return (p_pass, p_fail) after each task of the cell: the sequence's own p-values.

    The p-values of the test the confidence sequence inverts (level-free: ``alpha`` only sets
    which grid points the bounds keep, not the p-values).
    """
    found = _sequence(cell, threshold, max_pairs, alpha=0.5)
    greater, less = found.p_greater, found.p_less
    return (less, greater) if upper else (greater, less)


def p_values(
    cell: CellData, threshold: float, *, upper: bool, sequential: bool, max_pairs: float
) -> tuple[float, float]:
    """Return (p_pass, p_fail) of one claim on one cell (see the module docstring)."""
    if sequential:
        p_pass, p_fail = p_paths(cell, threshold, upper=upper, max_pairs=max_pairs)
        return float(p_pass[-1]), float(p_fail[-1])
    if upper:
        return _rate_p_values(cell, threshold)
    return _effect_p_values(cell, threshold)


def bound(cell: CellData, alpha: float, side: str, *, sequential: bool, max_pairs: float) -> float:
    """Return the one-sided bound at level ``alpha``: "greater" lower, "less" upper."""
    if not 0.0 < alpha < 1.0:
        raise ParameterError(f"level {alpha!r} must lie in (0, 1).")
    if sequential:
        cs = sequences.confidence_sequence(
            cell.x, cell.m, alpha=alpha, lo=cell.lo, hi=1.0, max_pairs=max_pairs, alternative=side
        )
        return float(cs.low[-1] if side == "greater" else cs.high[-1])
    alpha = min(alpha, _ALPHA_CEILING)
    if cell.rate:
        return _rate_bound(cell, alpha, side)
    return _effect_bound(cell, alpha, side=side)


def method(cell: CellData, *, sequential: bool) -> str:
    """Name the procedure of the cell's bounds and p-values (its ``ci_method`` and ``test``)."""
    if sequential:
        return "betting-sequence"
    if cell.rate:
        return "clopper-pearson" if cell.one_pair() else "korn-graubard"
    return "fay-lumbard" if cell.one_pair() else "cluster-melded"


def beyond(value: float, threshold: float, side: str) -> bool:
    """Whether a one-sided bound excludes ``threshold``: the gate's decision, read off the bound.

    A lower bound ("greater") above the threshold, or an upper bound ("less") below it.
    """
    return value > threshold if side == "greater" else value < threshold


def tasks_needed(cell: CellData, threshold: float, alpha: float) -> int | None:
    """Tasks a fixed-n study needs to decide the claim at the observed rates (power 0.8).

    Effect claims: the paired planner (:func:`recoverylab.paired.tasks_needed`) for the observed
    distance to the threshold at the observed discordant rate and mean pairs per task (ICC 0).
    Rate claims: the normal approximation of the one-sample binomial test, times the design
    effect. None when the estimate sits on the threshold (no finite study decides it).
    """
    estimate = cell.estimate
    distance = abs(estimate - threshold)
    if distance < 1e-12:
        return None
    pairs_per_task = float(cell.m.mean())
    alpha = min(max(alpha, 1e-12), _ALPHA_CEILING)
    if cell.rate:
        from scipy import stats as sps

        z_a, z_b = sps.norm.ppf(1 - alpha), sps.norm.ppf(POWER)
        spread = z_a * math.sqrt(threshold * (1 - threshold)) + z_b * math.sqrt(
            estimate * (1 - estimate)
        )
        # the design effect of the rate's own interval (two-sided, at the claim's level)
        deff = stats.rate_interval(cell.x, cell.m, confidence=1.0 - alpha).design_effect
        return max(1, math.ceil((spread / distance) ** 2 * deff / pairs_per_task))
    discordant = float((cell.rescue + cell.harm).sum() / cell.m.sum())
    discordant = min(1.0, max(discordant, distance))
    p01 = (discordant - distance) / 2.0
    try:
        return int(
            _planning.tasks_needed(
                p01 + distance,
                p01,
                alpha=alpha,
                power=POWER,
                alternative="greater",
                pairs_per_task=max(1.0, pairs_per_task),
            )
        )
    except ParameterError:
        return None
