"""Synthetic CIR paired forks with planted rescue/harm probabilities (generator ``"forks"``).

Each task gets, per observation condition, one shared no-recovery branch (``method="none"``,
``delay`` null) and one recovery branch per (delay, method) -- 13 rows per condition and 52 per
task with the defaults -- but none at points after the no-recovery run ended (carried forward
by ``paired.pairs``, ARCHITECTURE §3.1).

Planted truth (what :func:`truth` returns, and what ``paired.summarize`` must recover):

* factual run: ``factual_success ~ Bernoulli(BASE_RATE["clean"])`` per task; the clean
  no-recovery branch replays it (``y0 = factual_success`` on ``clean``).
* other conditions: ``y0 ~ Bernoulli(BASE_RATE[condition])``, independent of everything else.
* recovery at (condition c, method m, delay d) on a task that has not ended:
  ``P(y1 = 1 | y0 = 0) = RESCUE[c] · METHOD_RESCUE[m] · DECAY**d`` (rescue) and
  ``P(y1 = 0 | y0 = 1) = HARM[c] · METHOD_HARM[m]`` (harm).
* end of the no-recovery run: ``perturb_action = factual length // 4`` with a factual length
  uniform on 8..64, ``end_action = perturb_action + G`` with ``G ~ Geometric(end_hazard)``
  (G >= 1). The point at delay d is after the end when ``G <= d``, probability
  ``q_d = 1 - (1 - end_hazard)**d``; then there is no recovery row and ``y1 = y0``.
* optional planted exclusions: a fraction ``unpaired_rate`` of (task, condition) lose their
  ``none`` row (their recovery rows are ``unpaired``); each recovery row independently gets a
  different ``prefix_hash`` with probability ``mismatch_rate`` (``prefix_mismatch``). Both are
  independent of the outcomes, so the rates of the remaining pairs keep their truth.
* optional judged columns (issue 40; only when asked, so the default rows never change): a
  ``judge`` verdict on every row, right with probability ``judge_sensitivity[c]`` when
  ``success`` is true and ``judge_specificity[c]`` when it is false (independently per row), and
  a ``gold`` label (``success`` itself) on every row of a random share ``gold_share`` of tasks,
  null elsewhere: gold is drawn by cluster, so both branches of a pair are labelled together.
  Their draws come after all others, so the other columns are those of the same seed without them.

Unknown condition or method labels use the ``DEFAULT`` entries of the tables below.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from recoverylab._errors import ParameterError, require_one_of
from recoverylab.synth import Generator, Tables, register

__all__ = [
    "BASE_RATE",
    "CONDITIONS",
    "DECAY",
    "DELAYS",
    "HARM",
    "METHODS",
    "METHOD_HARM",
    "METHOD_RESCUE",
    "RESCUE",
    "block",
    "truth",
]

CONDITIONS = ("clean", "stale1", "stale2", "missing")
DELAYS = (0, 1, 2, 4)
METHODS = ("refresh", "content_ablated", "replan_only")

DEFAULT = "*"
#: P(no-recovery success) per condition.
BASE_RATE = {"clean": 0.80, "stale1": 0.68, "stale2": 0.60, "missing": 0.72, DEFAULT: 0.70}
#: P(rescue | no-recovery failure) per condition, before the method factor and delay decay.
RESCUE = {"clean": 0.05, "stale1": 0.10, "stale2": 0.30, "missing": 0.08, DEFAULT: 0.10}
#: P(harm | no-recovery success) per condition, before the method factor.
HARM = {"clean": 0.08, "stale1": 0.05, "stale2": 0.06, "missing": 0.05, DEFAULT: 0.05}
METHOD_RESCUE = {"refresh": 1.0, "content_ablated": 0.8, "replan_only": 0.3, DEFAULT: 0.5}
METHOD_HARM = {"refresh": 1.0, "content_ablated": 0.9, "replan_only": 1.3, DEFAULT: 1.0}
#: Rescue probability is multiplied by DECAY**delay: recovering later rescues less.
DECAY = 0.9

_FACTUAL_LENGTH = (8, 64)


def _rate(table: dict[str, float], label: str) -> float:
    return table.get(label, table[DEFAULT])


def _lookup(table: dict[str, float], labels: Sequence[str]) -> np.ndarray:
    return np.array([_rate(table, label) for label in labels], dtype=float)


#: A judge error rate: one value for every condition, or one per condition (``"*"``: the rest).
JudgeRate = float | Mapping[str, float]


def _judge_rates(name: str, value: JudgeRate | None, conditions: Sequence[str]) -> np.ndarray:
    """Return ``value`` per condition (1.0, a perfect judge, when None); one clear error if bad."""
    if value is None:
        return np.ones(len(conditions))
    if isinstance(value, Mapping):
        missing = [c for c in conditions if c not in value and DEFAULT not in value]
        if missing:
            raise ParameterError(
                f"synth forks: parameter `{name}` has no rate for condition(s) "
                f"{', '.join(missing)}; give one per condition or a default under '*'."
            )
        rates = [float(value.get(c, value.get(DEFAULT, 1.0))) for c in conditions]
    else:
        rates = [float(value)] * len(conditions)
    for rate in rates:
        if not 0 <= rate <= 1:
            raise ParameterError(
                f"synth forks: parameter `{name}` has the rate {rate!r}; it must be in [0, 1]."
            )
    return np.array(rates, dtype=float)


def _options(
    conditions: Sequence[str], delays: Sequence[int], methods: Sequence[str], **rates: float
) -> tuple[tuple[str, ...], tuple[int, ...], tuple[str, ...]]:
    conditions, delays, methods = tuple(conditions), tuple(int(d) for d in delays), tuple(methods)
    for name, values in (("conditions", conditions), ("delays", delays), ("methods", methods)):
        if not values or len(set(values)) != len(values):
            raise ParameterError(
                f"synth forks: parameter `{name}` is {list(values)!r}; it must be a non-empty "
                "list without repeats."
            )
    if "none" in methods:
        raise ParameterError(
            "synth forks: parameter `methods` contains 'none'; `none` marks the no-recovery "
            "branch and is always generated."
        )
    if min(delays) < 0:
        raise ParameterError(f"synth forks: parameter `delays` is {list(delays)!r}; delays >= 0.")
    for name, value in rates.items():
        if not 0 <= value < 1:
            raise ParameterError(
                f"synth forks: parameter `{name}` is {value!r}; it must be in [0, 1)."
            )
    return conditions, delays, methods


def block(
    start: int,
    stop: int,
    rng: np.random.Generator,
    *,
    conditions: Sequence[str] = CONDITIONS,
    delays: Sequence[int] = DELAYS,
    methods: Sequence[str] = METHODS,
    end_hazard: float = 0.02,
    mismatch_rate: float = 0.0,
    unpaired_rate: float = 0.0,
    judge_sensitivity: JudgeRate | None = None,
    judge_specificity: JudgeRate | None = None,
    gold_share: float | None = None,
) -> Tables:
    """Generate the ``forks`` rows of tasks ``start..stop-1`` (vectorised over tasks).

    Parameters
    ----------
    start, stop
        Task index range; task ids are ``t`` + the zero-padded index.
    rng
        The block's random stream (the only source of randomness).
    conditions, delays, methods
        The design grid (defaults: 4 conditions, delays 0/1/2/4, 3 methods).
    end_hazard
        Per-action probability that the no-recovery run ends after the perturbation.
    mismatch_rate
        Probability that a recovery row carries a different ``prefix_hash``.
    unpaired_rate
        Probability that a (task, condition) has no ``none`` row.
    judge_sensitivity, judge_specificity
        The judge's P(verdict true | success) and P(verdict false | failure): one value or one per
        condition (a mapping; ``"*"`` for the rest). Either one adds a boolean ``judge`` column
        (the other then defaults to 1.0).
    gold_share
        Share of tasks, in (0, 1], whose rows carry a ``gold`` label (``success``); adds a
        boolean ``gold`` column, null on the other tasks' rows.

    Returns
    -------
    dict
        ``{"forks": DataFrame}`` with columns task_id, condition, method, delay, success,
        prefix_hash, perturb_action, end_action, factual_success, then ``judge`` and ``gold``
        when asked.
    """
    rates = {"mismatch_rate": mismatch_rate, "unpaired_rate": unpaired_rate}
    conditions, delays, methods = _options(
        conditions, delays, methods, end_hazard=end_hazard, **rates
    )
    judge_rates = _judge_options(conditions, judge_sensitivity, judge_specificity, gold_share)
    n, n_c, n_d, n_m = stop - start, len(conditions), len(delays), len(methods)
    base = _lookup(BASE_RATE, conditions)
    rescue = _lookup(RESCUE, conditions)[:, None, None] * _lookup(METHOD_RESCUE, methods)
    rescue = rescue * (DECAY ** np.array(delays, dtype=float))[None, :, None]
    harm = (_lookup(HARM, conditions)[:, None] * _lookup(METHOD_HARM, methods))[:, None, :]

    # Draws in a fixed order, so a seed always gives the same rows.
    factual = rng.random(n) < BASE_RATE["clean"]
    y0 = rng.random((n, n_c)) < base
    if "clean" in conditions:
        y0[:, conditions.index("clean")] = factual
    length = rng.integers(_FACTUAL_LENGTH[0], _FACTUAL_LENGTH[1] + 1, size=(n, n_c))
    perturb = length // 4
    gap = rng.geometric(end_hazard, size=(n, n_c)) if end_hazard > 0 else np.full((n, n_c), 10**9)
    end = perturb + gap
    flip = rng.random((n, n_c, n_d, n_m))
    has_none = rng.random((n, n_c)) >= unpaired_rate
    mismatch = rng.random((n, n_c, n_d, n_m)) < mismatch_rate

    y1 = np.where(y0[:, :, None, None], flip >= harm, flip < rescue)
    ended = gap[:, :, None, None] <= np.array(delays)[None, None, :, None]
    # recovery rows, flattened in (task, condition, delay, method) order, ended points removed
    keep = np.broadcast_to(~ended, (n, n_c, n_d, n_m)).ravel()
    # the `none` rows first, then the recovery rows; `at`: the row's (task, condition) index
    none = np.flatnonzero(has_none)
    tc, d, m = (axis.ravel()[keep] for axis in np.indices((n * n_c, n_d, n_m)))
    at = np.concatenate([none, tc])
    raw = pl.DataFrame(
        {
            "task": at // n_c,
            "c": at % n_c,
            "m": np.concatenate([np.zeros(none.shape, dtype=np.int64), m + 1]),
            "delay": np.concatenate([np.zeros(none.shape, dtype=np.int64), np.array(delays)[d]]),
            "success": np.concatenate([y0.ravel()[none], y1.ravel()[keep]]),
            "salt": np.concatenate([np.zeros(none.shape, dtype=bool), mismatch.ravel()[keep]]),
            "perturb_action": perturb.ravel()[at],
            "end_action": end.ravel()[at],
            "factual_success": factual[at // n_c],
        }
    )
    condition_names = pl.Series(conditions, dtype=pl.String)
    method_names = pl.Series(("none", *methods), dtype=pl.String)
    task_id = pl.lit("t") + (pl.col("task") + start).cast(pl.String).str.zfill(7)
    is_none = pl.col("m") == 0
    forks = raw.select(
        task_id.alias("task_id"),
        pl.col("c").replace_strict(range(n_c), condition_names).alias("condition"),
        pl.col("m").replace_strict(range(n_m + 1), method_names).alias("method"),
        pl.when(~is_none).then(pl.col("delay")).alias("delay"),
        pl.col("success"),
        # seed-free stand-in for a state hash; a planted mismatch adds a suffix
        pl.when(pl.col("salt"))
        .then(pl.format("{}-{}-x", task_id, pl.col("c")))
        .otherwise(pl.format("{}-{}", task_id, pl.col("c")))
        .alias("prefix_hash"),
        pl.col("perturb_action"),
        pl.when(is_none).then(pl.col("end_action")).alias("end_action"),
        pl.col("factual_success"),
    )
    # judged columns last, from draws after all the others (none unless asked)
    judged = _judged_columns(
        rng,
        raw["success"].to_numpy(),
        at,
        none,
        keep,
        shape=(n, n_c, n_d, n_m),
        rates=judge_rates,
        gold_share=gold_share,
    )
    return {"forks": forks.with_columns(*judged.values())}


def _judge_options(
    conditions: Sequence[str],
    sensitivity: JudgeRate | None,
    specificity: JudgeRate | None,
    gold_share: float | None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Check the judged options; return the judge's rates per condition (None: no judge)."""
    rates = (
        _judge_rates("judge_sensitivity", sensitivity, conditions),
        _judge_rates("judge_specificity", specificity, conditions),
    )
    if gold_share is not None and not 0 < gold_share <= 1:
        raise ParameterError(
            f"synth forks: parameter `gold_share` is {gold_share!r}; it must be in (0, 1]."
        )
    return None if sensitivity is None and specificity is None else rates


def _judged_columns(
    rng: np.random.Generator,
    success: np.ndarray,
    at: np.ndarray,
    none: np.ndarray,
    keep: np.ndarray,
    *,
    shape: tuple[int, int, int, int],
    rates: tuple[np.ndarray, np.ndarray] | None,
    gold_share: float | None,
) -> dict[str, pl.Series]:
    """Draw the ``judge`` and ``gold`` columns (module docstring), in the rows' order.

    Drawn after every other column and only when asked, from the same stream: the other columns
    are unchanged. Per (task, condition) for ``none`` rows and per grid point for recovery rows,
    so a row's verdict does not depend on which other rows were kept.
    """
    n, n_c = shape[0], shape[1]
    out: dict[str, pl.Series] = {}
    if rates is not None:
        u = np.concatenate([rng.random((n, n_c)).ravel()[none], rng.random(shape).ravel()[keep]])
        right = np.where(success, rates[0][at % n_c], rates[1][at % n_c])
        out["judge"] = pl.Series("judge", np.where(u < right, success, ~success))
    if gold_share is not None:
        labelled = (rng.random(n) < gold_share)[at // n_c]
        gold = pl.Series("gold", success, dtype=pl.Boolean)
        out["gold"] = gold.scatter(np.flatnonzero(~labelled), None)
    return out


def truth(
    *,
    conditions: Sequence[str] = CONDITIONS,
    delays: Sequence[int] = DELAYS,
    methods: Sequence[str] = METHODS,
    end_hazard: float = 0.02,
    cohort: str = "full",
) -> pl.DataFrame:
    """Return the planted population rates of every (condition, delay, method) cell.

    Rates are per pair (carried-forward pairs included, as in ``paired.summarize``); the
    planted exclusions (``unpaired_rate``, ``mismatch_rate``) do not change them.

    Parameters
    ----------
    conditions, delays, methods, end_hazard
        As given to the generator.
    cohort
        ``"full"`` or ``"factual_success"`` (tasks whose factual run succeeded: on ``clean`` the
        no-recovery branch then always succeeds; other conditions are independent of it).

    Returns
    -------
    pl.DataFrame
        Columns condition, delay, method, carried (share of carried-forward pairs), base_rate,
        rescue_rate, harm_rate, effect, recovery_rate.

    Examples
    --------
    >>> truth(conditions=["clean"], delays=[0], methods=["refresh"])["effect"][0]
    -0.054
    """
    conditions, delays, methods = _options(conditions, delays, methods, end_hazard=end_hazard)
    require_one_of("cohort", cohort, ("full", "factual_success"))
    rows = []
    for c, d, m in itertools.product(conditions, delays, methods):
        b = 1.0 if c == "clean" and cohort == "factual_success" else _rate(BASE_RATE, c)
        carried = 1.0 - (1.0 - end_hazard) ** d
        r = _rate(RESCUE, c) * _rate(METHOD_RESCUE, m) * DECAY**d
        h = _rate(HARM, c) * _rate(METHOD_HARM, m)
        rows.append((c, d, m, carried, b, (1 - carried) * (1 - b) * r, (1 - carried) * b * h))
    names = ["condition", "delay", "method", "carried", "base_rate", "rescue_rate", "harm_rate"]
    frame = pl.DataFrame(rows, schema=names, orient="row")
    effect = pl.col("rescue_rate") - pl.col("harm_rate")
    return frame.with_columns(
        effect.round(12).alias("effect"),
        (pl.col("base_rate") + effect).round(12).alias("recovery_rate"),
    )


register(
    Generator(
        name="forks",
        tables=("forks",),
        block=block,
        description="CIR paired forks: 4 conditions × (shared none + 4 delays × 3 methods) per "
        "task, planted rescue/harm probabilities and carry-forward (see synth._forks.truth).",
    )
)
