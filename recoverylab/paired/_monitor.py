"""Anytime-valid monitoring of fork runs as tasks arrive (ARCHITECTURE §9).

:func:`monitor` follows each cell's recovery effect over its tasks in arrival order with a
*confidence sequence* (:mod:`recoverylab.stats.sequences`): an interval after every task that covers
the effect at every task at once with probability >= the confidence level. It may be looked at
after each task and the runs stopped whenever the answer is known, without the inflation of
peeking at a fixed-n interval. With a policy, it also gives the first task at which each gate
claim is decided (as :func:`~recoverylab.paired.gate` with ``sequential=True``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from recoverylab import io
from recoverylab._errors import ParameterError
from recoverylab.paired._gate import GateResult, gate
from recoverylab.paired._gate_data import claim_cells
from recoverylab.paired._gate_policy import Claim, Policy
from recoverylab.paired._pairs import Cohort, key_names
from recoverylab.stats import sequences

__all__ = ["MonitorResult", "monitor"]

#: Columns of :attr:`MonitorResult.sequences` after the cell keys.
SEQUENCE_COLUMNS = (
    "task",
    "task_id",
    "n_tasks",
    "n",
    "effect",
    "ci_low",
    "ci_high",
    "e_value",
    "p_value",
    "ci_method",
    "test",
)

#: The ``ci_method`` and ``test`` of every monitor row: the betting confidence sequence and
#: the anytime-valid test it inverts (one procedure).
CI_METHOD = "betting-sequence"


@dataclass(frozen=True)
class MonitorResult:
    """Confidence sequences per cell, and the claims' sequential verdicts.

    Attributes
    ----------
    sequences
        One row per (cell, task of the cell in arrival order): see :func:`monitor`.
    summary
        One row per cell: its last row of ``sequences`` (the current state).
    claims
        With a policy: the sequential gate (``decided_at`` = the arrival rank of the task from
        which on each claim is decided); otherwise None.
    confidence
        The sequences' confidence level.
    """

    sequences: pl.DataFrame
    summary: pl.DataFrame
    claims: GateResult | None
    confidence: float


def _check(confidence: object, max_pairs: object) -> None:
    ok = isinstance(confidence, (int, float)) and not isinstance(confidence, bool)
    if not ok or not 0.0 < float(confidence) < 1.0:  # type: ignore[arg-type]
        raise ParameterError(f"parameter `confidence` is {confidence!r}; it must lie in (0, 1).")
    if max_pairs is not None and (
        isinstance(max_pairs, bool)
        or not isinstance(max_pairs, (int, float))
        or not math.isfinite(max_pairs)
        or max_pairs < 1
    ):
        raise ParameterError(f"parameter `max_pairs` is {max_pairs!r}; it must be a number >= 1.")


def _cell_sequence(frame: pl.DataFrame, alpha: float, max_pairs: float) -> pl.DataFrame:
    """Return the confidence sequence of one cell's tasks (rows in arrival order).

    Bounds and p-value are one computation (:func:`~recoverylab.stats.sequences.sequence_test`
    at zero, α/2 per side): the p-value is twice the smaller one-sided p-value the bounds
    invert, so zero lies outside the interval exactly when ``p_value < alpha``.
    """
    x = frame["x"].to_numpy().astype(np.float64)
    m = frame["m"].to_numpy().astype(np.float64)
    found = sequences.sequence_test(x, m, 0.0, alpha=alpha / 2, max_pairs=max_pairs)
    p_value = np.minimum(1.0, 2.0 * np.minimum(found.p_greater, found.p_less))
    plus, minus = (
        sequences.capital(x, m, 0.0, side=side, max_pairs=max_pairs) for side in ("greater", "less")
    )
    # two one-sided e-processes at α/2 each: the e-value max(K⁺, K⁻) / 2 has mean <= 1
    log_e = np.maximum(plus, minus) - math.log(2.0)
    return frame.select(
        pl.col("arrival").alias("task"),
        "task_id",
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("n_tasks"),
        pl.col("m").cum_sum().alias("n"),
        (pl.col("x").cum_sum() / pl.col("m").cum_sum()).alias("effect"),
        pl.Series("ci_low", found.low),
        pl.Series("ci_high", found.high),
        pl.Series("e_value", np.exp(log_e)),
        pl.Series("p_value", p_value),
        pl.lit(CI_METHOD).alias("ci_method"),
        pl.lit(CI_METHOD).alias("test"),
    )


def monitor(
    forks: object,
    *,
    by: str | Sequence[str] | None = (),
    pair_by: str | Sequence[str] | None = (),
    cohort: Cohort = "full",
    order: str | None = None,
    confidence: float = 0.95,
    max_pairs: float | None = None,
    policy: object = None,
    decisions: object = None,
) -> MonitorResult:
    """Follow each cell's effect over tasks in arrival order with a confidence sequence.

    The sequence is the betting confidence sequence of Waudby-Smith & Ramdas (2024, JRSS-B) for
    bounded means, with the aGRAPA bet, adapted to task clusters (see
    :mod:`recoverylab.stats.sequences`): valid after every task and under optional stopping --
    P(the effect lies in every interval of the sequence) >= ``confidence``. The estimand is the
    *pooled* effect of a cell, E[Σ(y1 - y0)] / E[pairs] over tasks (rescue minus harm over
    pairs), for one or several pairs per task.

    Assumptions: tasks are exchangeable draws from the population the effect refers to (their
    arrival order is not driven by their outcomes); no task has more than ``max_pairs`` pairs
    in a cell (a bound fixed by the design; by default the largest seen, which is right when the
    design fixes the pairs per task). The interval is computed on a grid of 401 values and
    widened by one grid step (0.005).

    Parameters
    ----------
    forks
        The ``forks`` table (any source :func:`recoverylab.io.scan` reads).
    by, pair_by, cohort
        As :func:`~recoverylab.paired.summarize`.
    order
        The column that orders tasks by arrival (a finish time, a batch number): a task arrives
        with its last row. Default: the position of its last row in file-then-row order (files
        as given; a directory's files sorted by path). With ``order`` the result depends only
        on the order, not on how rows are split over files.
    confidence
        Level of the two-sided sequences.
    max_pairs
        A known bound on a task's pairs in a cell (default: the most seen in the cell).
    policy, decisions
        A gate policy (and its decision table): also decide its claims sequentially.

    Returns
    -------
    MonitorResult
        ``sequences``: one row per (cell, task of the cell): condition, delay, method, *by*,
        ``task`` (arrival rank over all tasks), ``task_id``, ``n_tasks`` (the cell's tasks so
        far), ``n`` (pairs so far), ``effect`` (pooled, so far), ``ci_low``, ``ci_high``
        (the sequence's interval after this task),
        ``e_value`` (of H0: effect = 0, now), ``p_value`` (anytime-valid, of the same H0: the
        p-value of the test the interval inverts, so zero lies outside the interval exactly
        when ``p_value < 1 − confidence``; never below ``1 / max e_value`` so far), and
        ``ci_method`` and ``test`` (both ``"betting-sequence"``);
        ``summary``: each cell's last row; ``claims``: the sequential gate, or None.

    Raises
    ------
    ParameterError
        For a bad confidence, bound, ``by`` or ``order`` column, or policy.
    SchemaError, InputError
        As :func:`recoverylab.paired.pairs`.

    Examples
    --------
    >>> import polars as pl
    >>> forks = pl.DataFrame({"task_id": [f"t{i:02}" for i in range(60) for _ in (0, 1)],
    ...                       "condition": ["stale2"] * 120, "method": ["none", "refresh"] * 60,
    ...                       "delay": [None, 1] * 60, "success": [False, True] * 60})
    >>> out = monitor(forks)
    >>> bool(out.summary["ci_low"].item() > 0), out.summary["n_tasks"].item()
    (True, 60)
    """
    _check(confidence, max_pairs)
    by_keys = tuple(key_names("by", by))
    names = io.scan(forks).collect_schema().names()
    missing = [k for k in by_keys if k not in names]
    if missing:
        raise ParameterError(
            f"parameter `by` names `{missing[0]}`, which forks does not have (columns: "
            f"{', '.join(names)})."
        )
    probe = Policy(
        claims=(Claim(name="effect", kind="superiority", margin=0.0, by=by_keys),),
        pair_by=tuple(key_names("pair_by", pair_by)),
        cohort=cohort,
    )
    (cells,) = claim_cells(forks, probe, order=order)
    alpha = 1.0 - float(confidence)
    parts = []
    for key, frame in cells.tasks.group_by(list(cells.keys), maintain_order=True):
        bound = float(frame["m"].to_numpy().max()) if max_pairs is None else float(max_pairs)
        sequence = _cell_sequence(frame, alpha, bound)
        keys = [
            pl.lit(v, dtype=cells.tasks.schema[k]).alias(k)
            for k, v in zip(cells.keys, key, strict=True)
        ]
        parts.append(sequence.select(*keys, pl.all()))
    sequences = pl.concat(parts, how="vertical")
    summary = sequences.group_by(list(cells.keys), maintain_order=True).last()
    claims = None
    if policy is not None:
        claims = gate(
            forks, policy, decisions=decisions, sequential=True, order=order, max_pairs=max_pairs
        )
    return MonitorResult(
        sequences=sequences, summary=summary, claims=claims, confidence=float(confidence)
    )
