"""Planning a paired recovery study: power, minimum detectable effect and tasks needed.

A paired study forks each task once without recovery and once with it, so every pair is
*concordant* (both succeed or both fail) or *discordant*: a rescue (probability p10) or a harm
(p01). Only discordant pairs carry information (Connor 1987): with ψ = p10 + p01 and δ = p10 −
p01, a task with one pair has E[d] = δ and Var(d) = ψ − δ², and the exact sign-flip test of the
summed differences rejects with a power fixed by (n, ψ, δ).

With m pairs per task (several delays, conditions or seeds forked from the same task) the pairs of
one task are correlated, with intra-class correlation ρ of the differences d; the variance of a
task's sum grows by the design effect 1 + (m − 1)ρ (Connor 1987, generalised). The exact
sign-flip test of the per-task sums Dᵢ rejects when T = Σ Dᵢ exceeds about z·√Q, Q = Σ Dᵢ²,
so the planner approximates the power by P(T − z·√Q > c) with (T, Q) jointly normal (the
delta method): with μⱼ = E[Dʲ],

    power(n) ≈ Φ((n·μ₁ − z·√(n·μ₂) − c) / √V),
    V = n·Var(D) + z²·Var(D²) / (4·μ₂) − z·√n·Cov(D, D²) / √μ₂,

where c = 0.5 is a continuity correction for the lattice of T (see ``_CONTINUITY``). Var(D) is
m(ψ − δ²)(1 + (m − 1)ρ) whatever the model; the third and fourth moments, which carry the skew
of rare, clustered discordant pairs, come from the shared-category model that
:func:`simulate_power` simulates (each pair of a task keeps the task's category with
probability √ρ). Treating √Q as a constant (the textbook design-effect formula) over-plans such
designs by up to 10 % of the tasks. For m = 1 the power of the exact test is computed exactly
(the test is the exact McNemar test conditional on the number of discordant pairs), and the
tasks needed are the smallest n whose exact power reaches the target. :func:`simulate_power`
checks a plan by simulating the exact test (``benchmarks/plan_power.py``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

import numpy as np
import polars as pl

from recoverylab import engines, plan, stats
from recoverylab._errors import ParameterError, require_one_of
from recoverylab.paired._pairs import Design
from recoverylab.paired._shards import design_stage, forks_input, shard_pairs

__all__ = [
    "PLAN_COLUMNS",
    "SimulatedPower",
    "mde",
    "pilot_rates",
    "plan_study",
    "power",
    "simulate_power",
    "tasks_needed",
]

Alternative = Literal["two-sided", "greater", "less"]
#: Largest planned size for which the m = 1 power is computed exactly (beyond it the normal
#: approximation is accurate to well under a point).
_MAX_EXACT_TASKS = 20_000
#: Continuity correction on T in the normal approximation (m > 1, or m = 1 beyond
#: ``_MAX_EXACT_TASKS``). T moves on a lattice of step 2 under sign flips; half of the half-step
#: is the value whose planned sizes kept the simulated power of the exact test within ±3 points
#: of the target on every design of a 72-design grid (rates from 0.05/0.01 to 0.4/0.25, m from 2
#: to 8, ρ from 0 to 0.9, both sidedness; 3,000 studies each: achieved power 0.773-0.823 for a
#: target of 0.8), where 0.75 and 1 were conservative by up to 4 points.
_CONTINUITY = 0.5
#: Standard deviations of the discordant count kept in the exact power sum.
_TAIL_SD = 9.0

#: Columns of :func:`plan_study`, after any cell keys.
PLAN_COLUMNS = (
    "p10",
    "p01",
    "discordance",
    "effect",
    "pairs_per_task",
    "icc",
    "icc_ci_low",
    "icc_ci_high",
    "design_effect",
    "alpha",
    "power",
    "alternative",
    "tasks_needed",
    "tasks_needed_icc_high",
    "planned_power",
    "n_tasks",
    "mde",
    "power_method",
)


@dataclass(frozen=True)
class SimulatedPower(stats.ResultHtml):
    """Achieved power of the exact sign-flip test, estimated by simulation.

    Attributes
    ----------
    power
        Share of simulated studies whose sign-flip p-value is at most ``alpha`` (and whose
        effect has the sign ``alternative`` asks for).
    se
        Monte Carlo standard error of ``power``.
    n_sims, n_tasks, pairs_per_task, icc, p10, p01, alpha, alternative
        The simulated design.
    """

    power: float
    se: float
    n_sims: int
    n_tasks: int
    pairs_per_task: int
    icc: float
    p10: float
    p01: float
    alpha: float
    alternative: str


def _check_fraction(name: str, value: object, *, open_low: bool = True) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and (0 < float(value) < 1 if open_low else 0 <= float(value) < 1):  # type: ignore[arg-type]
        return float(value)  # type: ignore[arg-type]
    allowed = "in (0, 1)" if open_low else "in [0, 1)"
    raise ParameterError(f"parameter `{name}` is {value!r}; it must be a number {allowed}.")


def _check_rates(p10: object, p01: object) -> tuple[float, float]:
    a = _check_fraction("p10", p10, open_low=False)
    b = _check_fraction("p01", p01, open_low=False)
    if a + b > 1 or a + b == 0:
        raise ParameterError(
            f"parameters `p10` = {a!r} and `p01` = {b!r} sum to {a + b!r}; the discordant rate "
            "p10 + p01 must be in (0, 1]."
        )
    return a, b


def _check_design(pairs_per_task: object, icc: object) -> tuple[float, float]:
    m = pairs_per_task
    if isinstance(m, bool) or not isinstance(m, (int, float)) or not (math.isfinite(m) and m >= 1):
        raise ParameterError(f"parameter `pairs_per_task` is {m!r}; it must be a number >= 1.")
    if isinstance(icc, bool) or not isinstance(icc, (int, float)) or not 0 <= icc <= 1:
        raise ParameterError(
            f"parameter `icc` is {icc!r}; it must be a number in [0, 1]. Hint: a negative pilot "
            "estimate plans as 0."
        )
    return float(m), float(icc)


def _check_test(alpha: object, power_: object, alternative: object) -> tuple[float, float, str]:
    a = _check_fraction("alpha", alpha)
    b = _check_fraction("power", power_)
    require_one_of("alternative", alternative, stats.ALTERNATIVES)
    return a, b, str(alternative)


def _check_tasks(n_tasks: object) -> int:
    if isinstance(n_tasks, bool) or not isinstance(n_tasks, (int, np.integer)) or n_tasks < 1:
        raise ParameterError(f"parameter `n_tasks` is {n_tasks!r}; it must be an integer >= 1.")
    return int(n_tasks)


def _signed_effect(p10: float, p01: float, alternative: str) -> float:
    """Return the effect in the direction the test looks for (|δ| when two-sided)."""
    delta = p10 - p01
    return {"two-sided": abs(delta), "greater": delta}.get(alternative, -delta)


def _sps() -> ModuleType:
    """Return ``scipy.stats``, imported on first use (importing recoverylab stays light)."""
    from scipy import stats as scipy_stats

    return scipy_stats


def _z(alpha: float, alternative: str) -> float:
    return float(_sps().norm.isf(alpha / 2 if alternative == "two-sided" else alpha))


def _moments(psi: float, delta: float, m: float, icc: float) -> tuple[float, float]:
    """Return (s, e): the sd of a task's summed difference and the root of its second moment."""
    s2 = m * max(psi - delta * delta, 0.0) * (1 + (m - 1) * icc)
    return math.sqrt(s2), math.sqrt(s2 + (m * delta) ** 2)


def _sum_moments(p10: float, p01: float, m: float, icc: float) -> tuple[float, ...]:
    """Return E[D], E[D²], E[D³], E[D⁴] of a task's summed difference D over m pairs.

    The shared-category model of :func:`_simulate_sums`: given the task's category (rescue,
    harm, concordant; probabilities p10, p01, 1 − ψ) its pairs are independent, each keeping
    that category with probability √ρ. The cumulants of a sum of m independent pairs are m
    times a pair's, which defines the moments for any real m >= 1 (a pilot's mean pairs per
    task); the mixture over categories gives the skew that rare, clustered pairs have.
    """
    shared = math.sqrt(icc)
    totals = [0.0, 0.0, 0.0, 0.0]
    for category, weight in enumerate((p10, p01, 1.0 - p10 - p01)):
        up = (1 - shared) * p10 + (shared if category == 0 else 0.0)
        down = (1 - shared) * p01 + (shared if category == 1 else 0.0)
        # A pair is +1, −1 or 0: its odd raw moments are up − down, the even ones up + down.
        a, b = up - down, up + down
        k1, k2 = m * a, m * (b - a * a)
        k3 = m * (a - 3 * b * a + 2 * a**3)
        k4 = m * (b - 4 * a * a - 3 * b * b + 12 * b * a * a - 6 * a**4)
        raw = (
            k1,
            k2 + k1 * k1,
            k3 + 3 * k2 * k1 + k1**3,
            k4 + 4 * k3 * k1 + 3 * k2 * k2 + 6 * k2 * k1 * k1 + k1**4,
        )
        totals = [total + weight * value for total, value in zip(totals, raw, strict=True)]
    return tuple(totals)


def _normal_power(
    n: float, p10: float, p01: float, alpha: float, alt: str, m: float, icc: float
) -> float:
    """Power of the sign-flip test from the joint normal law of (T, Q) (module docstring)."""
    if alt == "less" or (alt == "two-sided" and p10 < p01):
        p10, p01 = p01, p10  # the direction looked for (two-sided: the larger rate's)
    mu1, mu2, mu3, mu4 = _sum_moments(p10, p01, m, icc)
    z = _z(alpha, alt)
    variance = mu2 - mu1 * mu1
    if variance <= 0:
        return 1.0 if mu1 > 0 else 0.0
    spread = (
        n * variance
        + z * z * (mu4 - mu2 * mu2) / (4 * mu2)
        - z * math.sqrt(n) * (mu3 - mu1 * mu2) / math.sqrt(mu2)
    )
    # The delta-method terms are a correction; never let them more than halve the variance.
    spread = max(spread, 0.5 * n * variance)
    centre = n * mu1 - z * math.sqrt(n * mu2) - _CONTINUITY
    return float(_sps().norm.cdf(centre / math.sqrt(spread)))


def _exact_power(n: int, p10: float, p01: float, alpha: float, alt: str) -> float:
    """Exact power of the exact sign-flip (McNemar) test with one pair per task.

    Given n_d discordant pairs the rescues are Binomial(n_d, p10/ψ); the test rejects when the
    rescues reach the upper critical value c(n_d) = F⁻¹(1 − α′; n_d, ½) + 1 (α′ = α/2 two-sided),
    or, two-sided, fall to n_d − c(n_d). Summed over n_d ~ Binomial(n, ψ), restricted to the
    range that carries all but a negligible share of the mass.
    """
    psi = p10 + p01
    if alt == "less":
        p10, p01 = p01, p10
    centre, sd = n * psi, math.sqrt(n * psi * (1 - psi))
    low = max(1, int(centre - _TAIL_SD * sd) - 1)
    high = min(n, int(centre + _TAIL_SD * sd) + 2)
    nd = np.arange(low, high + 1)
    weight = _sps().binom.pmf(nd, n, psi)
    level = alpha / 2 if alt == "two-sided" else alpha
    critical = _sps().binom.ppf(1 - level, nd, 0.5) + 1
    # ppf works in floating point: step down where the tail at c - 1 already is <= level.
    critical = np.where(_sps().binom.sf(critical - 2, nd, 0.5) <= level, critical - 1, critical)
    share = p10 / psi
    reject = _sps().binom.sf(critical - 1, nd, share)
    if alt == "two-sided":
        reject = reject + _sps().binom.cdf(nd - critical, nd, share)
    return float(np.clip(weight @ reject, 0.0, 1.0))


def _power(n: int, p10: float, p01: float, alpha: float, alt: str, m: float, icc: float) -> float:
    """Exact power for one pair per task (up to ``_MAX_EXACT_TASKS``), else the approximation."""
    if m == 1 and n <= _MAX_EXACT_TASKS:
        return _exact_power(n, p10, p01, alpha, alt)
    return _normal_power(n, p10, p01, alpha, alt, m, icc)


def power(
    n_tasks: int,
    p10: float,
    p01: float,
    *,
    alpha: float = 0.05,
    alternative: Alternative = "two-sided",
    pairs_per_task: float = 1,
    icc: float = 0.0,
) -> float:
    """Return the power of the exact sign-flip test of a paired study with ``n_tasks`` tasks.

    Exact for one pair per task (the exact McNemar test, summed over the number of discordant
    pairs); the generalised Connor normal approximation with the design effect otherwise.

    Parameters
    ----------
    n_tasks
        Number of tasks (clusters), >= 1.
    p10, p01
        Rescue and harm probabilities of one pair (p10 + p01 in (0, 1]).
    alpha
        Significance level in (0, 1).
    alternative
        ``"two-sided"``, ``"greater"`` (recovery helps: p10 > p01) or ``"less"``.
    pairs_per_task
        Pairs per task m (>= 1).
    icc
        Intra-class correlation ρ in [0, 1] of the pair differences within a task.

    Returns
    -------
    float
        The probability of rejecting (in the direction ``alternative`` asks for).

    Examples
    --------
    >>> round(power(100, 0.15, 0.05), 3)
    0.544
    """
    n = _check_tasks(n_tasks)
    a, b = _check_rates(p10, p01)
    alpha, _, alt = _check_test(alpha, 0.5, alternative)
    m, rho = _check_design(pairs_per_task, icc)
    return _power(n, a, b, alpha, alt, m, rho)


def tasks_needed(
    p10: float,
    p01: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: Alternative = "two-sided",
    pairs_per_task: float = 1,
    icc: float = 0.0,
    n_sims: int | None = None,
    seed: int = 0,
) -> int:
    """Return the number of tasks a paired study needs to detect δ = p10 − p01.

    With one pair per task: the smallest n whose exact power reaches ``power`` (searched from
    Connor's approximation). With several: the smallest n whose approximate power (the design
    effect 1 + (m − 1)ρ with the skew of the task sums, see the module docstring) reaches it;
    or, with ``n_sims``, the smallest n whose power *simulated* with the exact sign-flip test
    reaches the target (common random numbers: the studies of size n are the first n tasks of
    the same simulated studies, so the search is monotone up to noise).

    Parameters
    ----------
    p10, p01, alpha, alternative, pairs_per_task, icc
        As in :func:`power`.
    power
        Target power in (0, 1).
    n_sims
        With several (integer) pairs per task: refine the size by simulating this many studies.
    seed
        Seed of the simulation.

    Returns
    -------
    int
        Tasks needed.

    Raises
    ------
    ParameterError
        For a bad parameter, or an effect of zero or of the wrong sign for ``alternative``.

    Examples
    --------
    >>> tasks_needed(0.15, 0.05)
    168
    """
    a, b = _check_rates(p10, p01)
    alpha, target, alt = _check_test(alpha, power, alternative)
    m, rho = _check_design(pairs_per_task, icc)
    effect = _signed_effect(a, b, alt)
    if effect <= 0:
        raise ParameterError(
            f"parameters `p10` = {a!r} and `p01` = {b!r} give an effect of {a - b!r}, which a "
            f"{alt!r} test cannot detect. Hint: alternative='less' looks for harm > rescue."
        )
    # Connor's normal-approximation size: where every search below starts
    s, e = _moments(a + b, a - b, m, rho)
    guess = ((_z(alpha, alt) * e + float(_sps().norm.isf(1 - target)) * s) / (m * effect)) ** 2
    if n_sims is not None and m > 1:
        _check_simulation(m, n_sims)
        design = (a, b, alpha, target, alt, int(m), rho)
        simulated = _simulated_tasks(design, guess, n_sims, seed)
        if simulated is not None:
            return simulated
    if m == 1 and guess <= _MAX_EXACT_TASKS:
        # the exact power is a sawtooth in n: walk up from below Connor's size
        n = max(1, math.floor(0.8 * guess))
        while _exact_power(n, a, b, alpha, alt) < target:
            n += 1
        return n

    def reaches(n: int) -> bool:
        return _normal_power(n, a, b, alpha, alt, m, rho) >= target

    high = max(1, math.ceil(guess))  # monotone power: doubling, then bisection
    while not reaches(high):
        high *= 2
    return _bisect_smallest(reaches, high)


def _bisect_smallest(reaches: Callable[[int], bool], high: int) -> int:
    """Smallest n in [1, high] with ``reaches(n)``, given ``reaches(high)`` (monotone search)."""
    low = 0  # reaches(0) is taken as False
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


def mde(
    n_tasks: int,
    discordance: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: Alternative = "two-sided",
    pairs_per_task: float = 1,
    icc: float = 0.0,
) -> float:
    """Return the minimum detectable effect δ = p10 − p01 for ``n_tasks`` tasks.

    The discordant rate ψ = p10 + p01 is held fixed (it is what a pilot or the no-recovery
    failure rate tells), and δ in (0, ψ] is solved so that :func:`power` equals ``power``.

    Parameters
    ----------
    n_tasks
        Number of tasks.
    discordance
        ψ = p10 + p01 in (0, 1].
    alpha, power, alternative, pairs_per_task, icc
        As in :func:`tasks_needed`.

    Returns
    -------
    float
        The smallest δ (positive; for ``alternative="less"`` the size of a harmful effect)
        detected with the target power.

    Raises
    ------
    ParameterError
        For a bad parameter, or when even δ = ψ (every discordant pair a rescue) is not
        detected with the target power.

    Examples
    --------
    >>> round(mde(168, 0.2), 3)
    0.1
    """
    n = _check_tasks(n_tasks)
    psi = _check_fraction("discordance", discordance)
    alpha, target, alt = _check_test(alpha, power, alternative)
    m, rho = _check_design(pairs_per_task, icc)

    def gap(delta: float) -> float:
        p10, p01 = (psi + delta) / 2, (psi - delta) / 2
        if alt == "less":
            p10, p01 = p01, p10
        return _power(n, p10, p01, alpha, alt, m, rho) - target

    if gap(psi) < 0:
        raise ParameterError(
            f"parameter `n_tasks` is {n}: with discordance {psi!r} not even an effect of {psi!r} "
            f"(every discordant pair a rescue) reaches power {target!r}. Hint: plan more tasks."
        )
    from scipy import optimize

    return float(optimize.brentq(gap, 1e-9, psi, xtol=1e-7))


def _simulate_sums(
    gen: np.random.Generator, n_sims: int, n: int, m: int, p10: float, p01: float, icc: float
) -> np.ndarray:
    """Per-task summed differences, shape (n_sims, n), from a shared-category model.

    Each task draws a category (rescue +1, harm −1, concordant 0); each of its m pairs keeps that
    category with probability √ρ and otherwise draws its own, so every pair has the marginal
    rates (p10, p01) and two pairs of a task have correlation ρ.
    """
    probabilities = np.array([p10, p01, 1 - p10 - p01])
    values = np.array([1, -1, 0])
    shared = values[gen.choice(3, size=(n_sims, n, 1), p=probabilities)]
    own = values[gen.choice(3, size=(n_sims, n, m), p=probabilities)]
    keep = gen.random((n_sims, n, m)) < math.sqrt(icc)
    return np.where(keep, shared, own).sum(axis=2)


def _check_simulation(m: float, n_sims: object) -> None:
    if m != int(m) or isinstance(n_sims, bool) or not isinstance(n_sims, int) or n_sims < 1:
        raise ParameterError(
            f"parameters `pairs_per_task` = {m!r} and `n_sims` = {n_sims!r} must be integers "
            ">= 1 to simulate."
        )


def _detections(sums: np.ndarray, alpha: float, alt: str, cache: dict[bytes, float]) -> int:
    """Count the simulated studies (rows of per-task sums) the exact sign-flip test detects."""
    hits = 0
    for row in sums:
        # The sign-flip null depends only on the multiset of |d|, the p-value also on Σd.
        key = np.r_[np.bincount(np.abs(row)), row.sum()].tobytes()
        if key not in cache:
            cache[key] = stats.sign_flip_test(row, method="exact").p_value
        p_two = cache[key]
        if alt == "two-sided":
            hits += p_two <= alpha
        else:
            total = int(row.sum())
            wanted = total > 0 if alt == "greater" else total < 0
            hits += wanted and p_two / 2 <= alpha
    return int(hits)


def _simulated_tasks(
    design: tuple[float, float, float, float, str, int, float],
    guess: float,
    n_sims: int,
    seed: int,
) -> int | None:
    """Smallest n whose simulated power reaches the target (bisection on nested studies)."""
    p10, p01, alpha, target, alt, m, icc = design
    high = max(2, math.ceil(1.6 * guess) + 5)
    sums = _simulate_sums(np.random.default_rng(seed), n_sims, high, m, p10, p01, icc)
    cache: dict[bytes, float] = {}

    def reaches(n: int) -> bool:
        return _detections(sums[:, :n], alpha, alt, cache) >= target * n_sims

    if not reaches(high):
        return None  # far beyond the approximation: keep the approximate size
    return _bisect_smallest(reaches, high)


def simulate_power(
    n_tasks: int,
    p10: float,
    p01: float,
    *,
    alpha: float = 0.05,
    alternative: Alternative = "two-sided",
    pairs_per_task: int = 1,
    icc: float = 0.0,
    n_sims: int = 2000,
    seed: int = 0,
) -> SimulatedPower:
    """Estimate the power of the exact sign-flip test by simulating whole studies.

    Each simulated study draws per-task summed differences (see the module notes for the
    correlated-pairs model) and runs :func:`recoverylab.stats.sign_flip_test` (exact) on them; a
    study counts as a detection when p <= ``alpha`` and, one-sided, the sum has the right sign
    (the one-sided exact p is half the two-sided one, the null being symmetric).

    Parameters
    ----------
    n_tasks, p10, p01, alpha, alternative, icc
        As in :func:`power`.
    pairs_per_task
        Integer pairs per task.
    n_sims
        Simulated studies (>= 1).
    seed
        Seed of the simulation.

    Returns
    -------
    SimulatedPower

    Examples
    --------
    >>> sim = simulate_power(168, 0.15, 0.05, n_sims=400, seed=1)
    >>> 0.7 < sim.power < 0.9
    True
    """
    n = _check_tasks(n_tasks)
    a, b = _check_rates(p10, p01)
    alpha, _, alt = _check_test(alpha, 0.5, alternative)
    m, rho = _check_design(pairs_per_task, icc)
    _check_simulation(m, n_sims)
    sums = _simulate_sums(np.random.default_rng(seed), n_sims, n, int(m), a, b, rho)
    share = _detections(sums, alpha, alt, {}) / n_sims
    return SimulatedPower(
        power=share,
        se=math.sqrt(share * (1 - share) / n_sims),
        n_sims=n_sims,
        n_tasks=n,
        pairs_per_task=int(m),
        icc=rho,
        p10=a,
        p01=b,
        alpha=alpha,
        alternative=alt,
    )


_PILOT_CELLS = ("condition", "delay", "method")


def _pilot_partial(
    frames: Mapping[str, pl.LazyFrame],
    design: Design,
    *,
    by: tuple[str, ...],
    pair_by: str | Sequence[str],
) -> dict[str, pl.LazyFrame]:
    """Per (task, cell) partials of one shard: pairs, rescues, harms, ICC sums of d = y1 − y0."""
    carry = [c for c in by if c not in _PILOT_CELLS]
    d = pl.col("y1").cast(pl.Int64) - pl.col("y0").cast(pl.Int64)
    per_task = (
        shard_pairs(frames["forks"], design, pair_by=pair_by, carry=carry)
        .with_columns(d.alias("__d"))
        .group_by("task_id", *by)
        .agg(
            pl.len().cast(pl.Int64).alias("m"),
            (pl.col("__d") == 1).sum().cast(pl.Int64).alias("rescue"),
            (pl.col("__d") == -1).sum().cast(pl.Int64).alias("harm"),
            pl.col("__d").sum().cast(pl.Float64).alias("sum"),
            (pl.col("__d") ** 2).sum().cast(pl.Float64).alias("sum_sq"),
        )
    )
    partials = per_task.with_columns(
        (pl.col("sum") ** 2 / pl.col("m")).alias("sum_sq_over_m"),
        pl.col("m").cast(pl.Float64).alias("m_f"),
        (pl.col("m") ** 2).cast(pl.Float64).alias("m_sq"),
        pl.lit(1.0).alias("one"),
    )
    return {"partials": partials}


def pilot_rates(
    forks: object,
    *,
    by: Sequence[str] = _PILOT_CELLS,
    pair_by: Sequence[str] = (),
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    engine: object = "polars",
) -> pl.DataFrame:
    """Estimate the planning inputs p10, p01 and ρ from a pilot ``forks`` table.

    Parameters
    ----------
    forks
        A pilot ``forks`` table (any source :func:`recoverylab.paired.pairs` reads).
    by
        Cell keys; default (condition, delay, method). Pairs of one task across the cells
        *not* in ``by`` count as that task's several pairs (m > 1).
    pair_by
        As in :func:`recoverylab.paired.pairs`.
    confidence, n_resamples, seed
        Of the task-clustered bootstrap interval of the ICC.
    engine
        ``"polars"`` (default), a SparkSession (or ``"spark"``) or an engine object (see
        :mod:`recoverylab.engines`); the result is the same.

    Returns
    -------
    polars.DataFrame
        One row per cell: the ``by`` keys, ``tasks``, ``pairs``, ``pairs_per_task`` (mean),
        ``rescue``, ``harm``, ``p10``, ``p01`` (shares of pairs), ``icc`` (one-way ANOVA ICC of
        d = y1 − y0 within tasks; null when no task has two pairs or nothing varies) with
        ``icc_ci_low`` and ``icc_ci_high``.

    Examples
    --------
    >>> from recoverylab import synth
    >>> pilot = pilot_rates(synth.generate("forks", 30, seed=1)["forks"], by=["method"])
    >>> {"p10", "p01", "icc"} <= set(pilot.columns)
    True
    """
    keys = tuple(by)
    statistics: dict[str, Any] = {
        "confidence": confidence,
        "n_resamples": n_resamples,
        "seed": seed,
    }
    return engines.run(
        engine,
        plan.Plan(
            inputs=(forks_input(forks),),
            check=functools.partial(stats.check_resampling, **statistics),
            stages=(
                design_stage(pair_by=pair_by),
                plan.Stage(
                    "pilot partials per task",
                    functools.partial(_pilot_partial, by=keys, pair_by=pair_by),
                ),
            ),
            finish=functools.partial(_pilot_finish, by=list(keys), **statistics),
        ),
    )


def _pilot_finish(
    parts: dict[str, pl.DataFrame], *, by: list[str], **statistics: Any
) -> pl.DataFrame:
    """Cells with their tasks, pairs, rates and the bootstrapped ICC of d."""
    partials = parts["partials"]
    cells = partials.group_by(by).agg(
        pl.len().cast(pl.Int64).alias("tasks"),
        pl.col("m").sum().alias("pairs"),
        pl.col("rescue").sum(),
        pl.col("harm").sum(),
    )
    icc = stats.cluster_bootstrap(
        partials.rename({"m_f": "__m"}),
        cells=by,
        values=["sum_sq_over_m", "sum", "sum_sq", "__m", "m_sq", "one"],
        statistic=stats.icc_oneway,
        **statistics,
    ).select(
        *by,
        *(pl.col(c).fill_nan(None).alias(f"icc{s}") for c, s in _ICC_NAMES),
    )
    # With no cell keys there is one cell, and one row on each side.
    out = cells.join(icc, on=by, how="left", nulls_equal=True) if by else cells.hstack(icc)
    out = out.with_columns(
        (pl.col("pairs") / pl.col("tasks")).alias("pairs_per_task"),
        (pl.col("rescue") / pl.col("pairs")).alias("p10"),
        (pl.col("harm") / pl.col("pairs")).alias("p01"),
    )
    out = out.select(
        *by, "tasks", "pairs", "pairs_per_task", "rescue", "harm", "p10", "p01",
        "icc", "icc_ci_low", "icc_ci_high",
    )  # fmt: skip
    return out.sort(by, nulls_last=False) if by else out


_ICC_NAMES = (("estimate", ""), ("ci_low", "_ci_low"), ("ci_high", "_ci_high"))


def _plan_row(
    rates: tuple[float, float, float],
    icc: tuple[float | None, float | None],
    n_tasks: int | None,
    test: tuple[float, float, str],
    simulation: tuple[int, int] | None,
) -> dict[str, object]:
    """One plan: tasks needed (at ρ and at its upper bound), planned power, MDE at n_tasks."""
    p10, p01, m = rates
    alpha, target, alt = test
    rho = 0.0 if icc[0] is None or m == 1 else min(max(icc[0], 0.0), 1.0)
    rho_high = None if icc[1] is None or m == 1 else min(max(icc[1], 0.0), 1.0)
    simulate = simulation is not None and m > 1 and m == int(m)
    sim: dict[str, Any] = {}
    if simulate and simulation is not None:
        sim = {"n_sims": simulation[0], "seed": simulation[1]}
    row: dict[str, object] = {"design_effect": 1 + (m - 1) * rho}
    common: dict[str, Any] = {"alpha": alpha, "alternative": alt, "pairs_per_task": m}
    if p10 + p01 > 0 and _signed_effect(p10, p01, alt) > 0:
        needed_at = functools.partial(tasks_needed, p10, p01, power=target, **common, **sim)
        row["tasks_needed"] = needed = needed_at(icc=rho)
        if simulate:
            options = {**common, "pairs_per_task": int(m), **sim}
            row["planned_power"] = simulate_power(needed, p10, p01, icc=rho, **options).power
        else:
            row["planned_power"] = power(needed, p10, p01, icc=rho, **common)
        if rho_high is not None:
            row["tasks_needed_icc_high"] = needed_at(icc=rho_high)
    if n_tasks is not None:
        try:
            row["mde"] = mde(n_tasks, p10 + p01, power=target, icc=rho, **common)
        except ParameterError:
            row["mde"] = None  # not detectable at this size: no number is invented
    row["power_method"] = (
        "exact" if m == 1 else ("simulation" if simulate else "normal-approximation")
    )
    return row


def plan_study(
    pilot: object = None,
    *,
    p10: float | None = None,
    p01: float | None = None,
    n_tasks: int | None = None,
    pairs_per_task: float | None = None,
    icc: float | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: Alternative = "two-sided",
    by: Sequence[str] = _PILOT_CELLS,
    pair_by: Sequence[str] = (),
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    n_sims: int | None = None,
    engine: object = "polars",
) -> pl.DataFrame:
    """Plan a paired recovery study from assumed rates or from a pilot ``forks`` table.

    Give either ``p10`` and ``p01`` (with ``pairs_per_task`` and ``icc`` if tasks hold several
    pairs), or a ``pilot`` forks table, from which :func:`pilot_rates` estimates them per cell.
    ``pairs_per_task`` and ``icc`` given explicitly override the pilot's.

    Parameters
    ----------
    pilot
        Optional pilot ``forks`` table.
    p10, p01
        Assumed rescue and harm rates of a pair (without a pilot).
    n_tasks
        Planned number of tasks: the result then holds the minimum detectable effect ``mde``.
    pairs_per_task, icc
        The design: pairs per task m and the ICC ρ of the pair differences within a task.
    alpha, power, alternative
        The test: level, target power, sidedness.
    by, pair_by, confidence, n_resamples, seed
        Passed to :func:`pilot_rates` (``seed`` also seeds the simulation).
    n_sims
        With several (integer) pairs per task, size the study by simulating the exact test
        with this many studies (see :func:`tasks_needed`); ``power_method`` says
        ``simulation``. The MDE stays the normal approximation.
    engine
        The engine :func:`pilot_rates` runs on (see :mod:`recoverylab.engines`).

    Returns
    -------
    polars.DataFrame
        One row per pilot cell (or one row), with the ``by`` keys and :data:`PLAN_COLUMNS`:
        ``tasks_needed`` to detect the (assumed or pilot) effect ``effect`` = p10 − p01,
        ``tasks_needed_icc_high`` the same at the upper bound of the pilot's ICC interval,
        ``planned_power`` the power at ``tasks_needed``, ``mde`` at ``n_tasks`` (null when not
        even δ = ψ is detectable with that many tasks). A cell whose effect is zero or of the
        wrong sign has null ``tasks_needed``.

    Raises
    ------
    ParameterError
        For a bad parameter, or both / neither of ``pilot`` and (``p10``, ``p01``).

    Examples
    --------
    >>> plan = plan_study(p10=0.15, p01=0.05, n_tasks=168)
    >>> plan.select("tasks_needed", pl.col("mde").round(3)).row(0)
    (168, 0.1)
    """
    alpha_, target, alt = _check_test(alpha, power, alternative)
    if n_tasks is not None:
        n_tasks = _check_tasks(n_tasks)
    if (pilot is None) == (p10 is None and p01 is None) or (p10 is None) != (p01 is None):
        raise ParameterError(
            "give either `pilot` (a forks table) or both `p10` and `p01`, not both and not "
            f"neither (found pilot={'a table' if pilot is not None else None}, p10={p10!r}, "
            f"p01={p01!r})."
        )
    if pilot is None:
        a, b = _check_rates(p10, p01)
        m, rho = _check_design(1 if pairs_per_task is None else pairs_per_task, icc or 0.0)
        row = {"p10": a, "p01": b, "pairs_per_task": m, "icc": rho if icc is not None else None}
        base = pl.DataFrame([row], schema=dict.fromkeys(row, pl.Float64)).with_columns(
            pl.lit(None, pl.Float64).alias("icc_ci_low"),
            pl.lit(None, pl.Float64).alias("icc_ci_high"),
        )
        keys: list[str] = []
    else:
        if pairs_per_task is not None or icc is not None:
            _check_design(pairs_per_task or 1, icc or 0.0)
        base = pilot_rates(
            pilot,
            by=by,
            pair_by=pair_by,
            confidence=confidence,
            n_resamples=n_resamples,
            seed=seed,
            engine=engine,
        )
        if pairs_per_task is not None:
            base = base.with_columns(pl.lit(float(pairs_per_task)).alias("pairs_per_task"))
        if icc is not None:
            base = base.with_columns(pl.lit(float(icc)).alias("icc"))
        keys = list(by)
    simulation = None if n_sims is None else (n_sims, seed)
    columns = ("p10", "p01", "pairs_per_task", "icc", "icc_ci_high")
    rows = [
        _plan_row((a, b, m), (rho, rho_high), n_tasks, (alpha_, target, alt), simulation)
        for a, b, m, rho, rho_high in base.select(columns).iter_rows()
    ]
    plans = pl.DataFrame(
        rows,
        schema={
            "design_effect": pl.Float64,
            "tasks_needed": pl.Int64,
            "planned_power": pl.Float64,
            "tasks_needed_icc_high": pl.Int64,
            "mde": pl.Float64,
            "power_method": pl.String,
        },
    )
    out = base.hstack(plans).with_columns(
        (pl.col("p10") + pl.col("p01")).alias("discordance"),
        (pl.col("p10") - pl.col("p01")).alias("effect"),
        pl.lit(alpha_).alias("alpha"),
        pl.lit(target).alias("power"),
        pl.lit(alt).alias("alternative"),
        pl.lit(n_tasks, pl.Int64).alias("n_tasks"),
    )
    return out.select(*keys, *PLAN_COLUMNS)
