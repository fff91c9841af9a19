"""Planning a judged study: how many gold labels a target half-width needs (issue 40, point 4).

With a judge on all ``N`` units and gold on ``n`` of them drawn at random, PPI++ at its optimal
power-tuning weight has variance (Angelopoulos, Duchi & Zrnic 2023, §2)

    Var(θ̂) = σ²/n · (1 − ρ² (N − n)/N),

σ² = θ(1 − θ) the outcome's variance and ρ the correlation of judge and gold. For a binary
judge of sensitivity se and specificity sp at a rate θ, Cov(y, f) = θ(1 − θ)(se + sp − 1) and
Var(f) = q(1 − q) with q = θ·se + (1 − θ)(1 − sp), so ρ² = θ(1 − θ)(se + sp − 1)² / (q(1 − q)).
A half-width h at confidence 1 − α (z its normal quantile) with a design effect ``deff`` for
clustering then needs

    n = (1 − ρ²) / (h² / (z² deff σ²) − ρ² / N)

labels (rounded up), against z² deff σ² / h² without the judge. This is the large-sample
planning value of the interval of :func:`~recoverylab.stats.judged_cells` (``ci_method
"ppi++"``); the benchmark in ``benchmarks/JUDGED.md`` shows the intervals' actual widths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from recoverylab._errors import ParameterError
from recoverylab.stats._checks import _check_confidence
from recoverylab.stats._distributions import _normal_quantile


@dataclass(frozen=True)
class GoldPlan:
    """How many gold labels a judged rate needs (:func:`gold_labels_needed`).

    Attributes
    ----------
    labels
        Gold labels needed with the judge (PPI++), rounded up; ``None`` when even labelling
        every unit does not reach the half-width.
    labels_gold_only
        Labels needed without the judge (the classical interval), rounded up.
    correlation
        ρ, the correlation of the judge's verdict and the gold label.
    half_width, units, design_effect, confidence
        The inputs.
    """

    labels: int | None
    labels_gold_only: int
    correlation: float
    half_width: float
    units: int
    design_effect: float
    confidence: float


def gold_labels_needed(
    half_width: float,
    *,
    rate: float,
    sensitivity: float,
    specificity: float,
    units: int,
    design_effect: float = 1.0,
    confidence: float = 0.95,
) -> GoldPlan:
    """Return the gold labels a judged rate needs for a target interval half-width.

    Parameters
    ----------
    half_width
        Target half-width of the interval (a fraction, e.g. 0.03 for ±3 points).
    rate
        Anticipated rate θ in (0, 1).
    sensitivity, specificity
        The judge's anticipated error rates (from a pilot's ``judge_error_cells``), sum above 1.
    units
        N, the judged units (every one has a verdict).
    design_effect
        Variance inflation for clustering (1 = independent units; ``rate_cells`` reports it).
    confidence
        Confidence level in (0, 1).

    Returns
    -------
    GoldPlan

    Raises
    ------
    ParameterError
        A value out of range.

    Examples
    --------
    >>> plan = gold_labels_needed(0.03, rate=0.3, sensitivity=0.9, specificity=0.9, units=5000)
    >>> plan.labels < plan.labels_gold_only
    True
    """
    confidence = _check_confidence(confidence)
    checks = (
        ("half_width", half_width, 0.0, 1.0),
        ("rate", rate, 0.0, 1.0),
        ("sensitivity", sensitivity, 0.0, 1.0 + 1e-12),
        ("specificity", specificity, 0.0, 1.0 + 1e-12),
    )
    for name, value, low, high in checks:
        if not isinstance(value, int | float) or not low < float(value) < high:
            raise ParameterError(f"parameter `{name}` is {value!r}; it must lie in (0, 1).")
    if sensitivity + specificity <= 1.0:
        raise ParameterError(
            f"parameters `sensitivity` and `specificity` sum to {sensitivity + specificity:g}; "
            "a judge must be better than chance (sum above 1)."
        )
    if not isinstance(units, int) or units < 2:
        raise ParameterError(f"parameter `units` is {units!r}; it must be an integer >= 2.")
    if not isinstance(design_effect, int | float) or not design_effect >= 1.0:
        raise ParameterError(
            f"parameter `design_effect` is {design_effect!r}; it must be a number >= 1."
        )
    z = _normal_quantile(0.5 + confidence / 2.0)
    variance = rate * (1.0 - rate)
    q = rate * sensitivity + (1.0 - rate) * (1.0 - specificity)
    rho2 = variance * (sensitivity + specificity - 1.0) ** 2 / (q * (1.0 - q))
    target = half_width**2 / (z * z * design_effect * variance)
    gold_only = math.ceil(1.0 / target)
    room = target - rho2 / units
    labels = math.ceil((1.0 - rho2) / room) if room > 0 else None
    if labels is not None and labels > units:
        labels = None
    return GoldPlan(
        labels=labels,
        labels_gold_only=gold_only,
        correlation=math.sqrt(rho2),
        half_width=float(half_width),
        units=units,
        design_effect=float(design_effect),
        confidence=confidence,
    )
