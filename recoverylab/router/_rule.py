"""Apply an exported CIR rule in plain Python: no numpy, no polars, no recoverylab.

This file is self-contained on purpose (only the standard library's :mod:`math`), so that a harness
can copy it next to the JSON rule written by ``Router.to_json`` and decide at run time without
installing recoverylab. It computes exactly what ``Router.decide`` computes, in the same order of
floating-point operations, so both give the same decisions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["FORMAT", "FORMAT_VERSION", "apply_rule", "probability"]

#: Value of the ``format`` field of an exported rule.
FORMAT = "recoverylab.router"
#: Version of the rule format this file reads.
FORMAT_VERSION = 1


def probability(model: Mapping[str, Any], x: Sequence[float]) -> float:
    """Return the logistic probability of one linear model at standardised features ``x``.

    The logit is accumulated left to right, starting from the intercept; the sigmoid is evaluated
    in the branch that cannot overflow.
    """
    z = float(model["intercept"])
    for weight, value in zip(model["coef"], x, strict=True):
        z = z + weight * value
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def apply_rule(
    rule: Mapping[str, Any], features_by_delay: Mapping[int, Mapping[str, float]]
) -> int | None:
    """Return the delay at which the rule refreshes one episode, or ``None`` for no refresh.

    The sequential rule of the CIR router (ARCHITECTURE §3.2): check the rule's candidate delays in
    order; refresh at the first one with ``p_err >= alpha``, ``1 - p0 >= beta`` and
    ``u = (1 - p0) p1 - lam p0 (1 - p1) >= gamma``; at most once per episode. A threshold that is
    ``None`` is not checked (the anomaly baselines only use ``alpha``).

    Parameters
    ----------
    rule
        The dictionary read from the JSON file written by ``to_json`` (``json.load``).
    features_by_delay
        For one episode: candidate delay -> {feature name -> value}, holding only what was visible
        before that decision point. Delays that are absent (the task has ended, or the point is
        not reached yet) are skipped.

    Returns
    -------
    int or None
        The first qualifying delay, or ``None``.

    Raises
    ------
    ValueError
        If the rule is not a recoverylab router rule of a supported version, a feature is
        missing, or a feature value is not a finite number.

    Examples
    --------
    >>> rule = {"format": "recoverylab.router", "version": 1, "features": ["x"],
    ...         "scaling": {"mean": [0.0], "scale": [1.0]}, "delays": [1, 2], "lam": 2.0,
    ...         "models": {"p_err": {"intercept": 0.0, "coef": [1.0]}},
    ...         "thresholds": {"alpha": 0.7, "beta": None, "gamma": None}}
    >>> apply_rule(rule, {1: {"x": 0.1}, 2: {"x": 3.0}})
    2
    """
    if rule.get("format") != FORMAT or rule.get("version") != FORMAT_VERSION:
        raise ValueError(
            f"not a {FORMAT} rule of version {FORMAT_VERSION} "
            f"(format {rule.get('format')!r}, version {rule.get('version')!r})"
        )
    names, scaling, models = rule["features"], rule["scaling"], rule["models"]
    thresholds, lam = rule["thresholds"], float(rule["lam"])
    alpha, beta, gamma = thresholds["alpha"], thresholds["beta"], thresholds["gamma"]
    for delay in rule["delays"]:
        point = features_by_delay.get(delay)
        if point is None:
            continue
        x = []
        for name, mean, scale in zip(names, scaling["mean"], scaling["scale"], strict=True):
            if name not in point:
                raise ValueError(f"feature {name!r} is missing at delay {delay}")
            value = float(point[name])
            if not math.isfinite(value):
                raise ValueError(f"feature {name!r} is {value} at delay {delay}; need a number")
            x.append((value - mean) / scale)
        p_err = probability(models["p_err"], x)
        if not p_err >= alpha:
            continue
        if beta is not None or gamma is not None:
            p0 = probability(models["p0"], x)
            if beta is not None and not (1.0 - p0) >= beta:
                continue
            if gamma is not None:
                p1 = probability(models["p1"], x)
                u = (1.0 - p0) * p1 - lam * p0 * (1.0 - p1)
                if not u >= gamma:
                    continue
        return delay
    return None
