"""One claim on one cell: one-sided p-values against the margin and test-compatible bounds.

Each (claim, cell) is two one-sided tests of its quantity q against the claim's threshold t:

* the *pass* test rejects "the claim is false" (effect claims: H0 q <= t; maximum rates:
  H0 q >= t) -- its rejection is PASS;
* the *fail* test rejects "the claim is true" -- its rejection is FAIL; neither: INCONCLUSIVE.

Fixed n (all tasks at once):

* effect claims: the bound is the paired effect's test-compatible interval of
  :func:`recoverylab.stats.paired_effect_cells` (Fay–Lumbard for one pair per task, the cluster
  meld otherwise, each aligned with the one-sided sign-flip test at zero), and the p-value at
  t is that interval family *inverted*: the α at which the one-sided bound at confidence 1 - α
  reaches t (at t = 0 it is the sign-flip p-value itself). The bound excludes t exactly when the
  p-value is below α, so a verdict read from the interval and one read from the p-value agree.
* rate claims: the exact binomial test and Clopper–Pearson bound, on design-effect-adjusted
  counts (Korn & Graubard 1998) when tasks have several pairs.

Sequentially (:mod:`recoverylab.stats.sequences`): the p-value is the anytime-valid ``1 / max K``
of the betting martingale at t, the bound the confidence sequence's.
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

__all__ = ["CellData", "bound", "p_values", "tasks_needed"]

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


def _effect_bound(cell: CellData, alpha: float, *, side: str, p_zero: float) -> float:
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
    agreed = stats.agree_with_test(
        np.array([ci.low]),
        np.array([ci.high]),
        np.array([p_zero]),
        confidence=confidence,
        alternative=side,
    )
    low, high = np.ravel(agreed.low), np.ravel(agreed.high)
    return float(low[0] if side == "greater" else high[0])


def _sign_flip_p(cell: CellData, side: str) -> float:
    """Return the one-sided exact sign-flip p-value of the effect at zero.

    The test :func:`recoverylab.stats.paired_effect_cells` reports (on the task differences).
    """
    return _sign_flip_cached(cell.x.tobytes(), side)


@functools.lru_cache(maxsize=256)
def _sign_flip_cached(differences: bytes, side: str) -> float:
    values, counts = np.unique(np.frombuffer(differences, dtype=np.int64), return_counts=True)
    return float(stats.sign_flip_test(values, counts, alternative=side).p_value)


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


def _effect_p_values(cell: CellData, threshold: float) -> tuple[float, float, dict[str, float]]:
    """Return (p greater, p less) of the effect at ``threshold``, and the sign-flip p at 0."""
    zero = {side: _sign_flip_p(cell, side) for side in ("greater", "less")}
    if threshold == 0.0:
        return zero["greater"], zero["less"], zero
    found = {
        side: _invert(
            functools.partial(_effect_bound, cell, side=side, p_zero=zero[side]),
            threshold,
            side,
        )
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
    return greater, less, zero


# --- fixed n: rate claims ---------------------------------------------------------------------


def _effective_counts(cell: CellData) -> tuple[float, float]:
    """Events and pairs divided by the design effect of several pairs per task (>= 1)."""
    events, pairs = float(cell.x.sum()), float(cell.m.sum())
    if cell.one_pair():
        return events, pairs
    rate = events / pairs
    tasks = cell.x.size
    if 0.0 < rate < 1.0 and tasks > 1:
        robust = tasks / (tasks - 1) * float(((cell.x - rate * cell.m) ** 2).sum()) / pairs**2
        deff = max(1.0, robust / (rate * (1.0 - rate) / pairs))
    else:
        deff = float(cell.m.max())  # cannot be estimated: the largest cluster, conservatively
    return events / deff, pairs / deff


def _rate_p_values(cell: CellData, margin: float) -> tuple[float, float]:
    """Return (p of H0 rate >= margin, p of H0 rate <= margin): exact binomial tails."""
    from scipy import stats as sps

    events, pairs = _effective_counts(cell)
    below = float(sps.beta.sf(margin, events + 1, pairs - events)) if events < pairs else 1.0
    above = float(sps.beta.cdf(margin, events, pairs - events + 1)) if events > 0 else 1.0
    return below, above


def _rate_bound(cell: CellData, alpha: float, side: str) -> float:
    """Clopper–Pearson bound on effective counts: side "less" upper, "greater" lower."""
    from scipy import stats as sps

    events, pairs = _effective_counts(cell)
    if side == "less":
        return float(sps.beta.ppf(1 - alpha, events + 1, pairs - events)) if events < pairs else 1.0
    return float(sps.beta.ppf(alpha, events, pairs - events + 1)) if events > 0 else 0.0


# --- both modes -------------------------------------------------------------------------------


def p_values(
    cell: CellData, threshold: float, *, upper: bool, sequential: bool, max_pairs: float
) -> tuple[float, float]:
    """Return (p_pass, p_fail) of one claim on one cell (see the module docstring)."""
    if sequential:
        sides = ("less", "greater") if upper else ("greater", "less")
        found = []
        for side in sides:
            log_k = sequences.capital(
                cell.x, cell.m, threshold, side=side, lo=cell.lo, hi=1.0, max_pairs=max_pairs
            )
            found.append(float(min(1.0, math.exp(-max(0.0, float(log_k.max()))))))
        return found[0], found[1]
    if upper:
        return _rate_p_values(cell, threshold)
    greater, less, _ = _effect_p_values(cell, threshold)
    return greater, less


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
    zero = _sign_flip_p(cell, side)
    return _effect_bound(cell, alpha, side=side, p_zero=zero)


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
        _, pairs = _effective_counts(cell)
        deff = float(cell.m.sum()) / pairs if pairs else 1.0
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
