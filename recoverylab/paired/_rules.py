"""The pairing rules of the CIR protocol, stated once (ARCHITECTURE §3.1).

Two queries pair the branches of a forks table: the join of :func:`._pairs.branch_rows` (every
public verb, and any table the fast path cannot take) and the per-task bit sets of :mod:`._bits`
(the fast path of the cell counts, 2-3x faster). Both build their expressions from these
definitions (episode, baseline -- a delay-specific one wins over the shared one --, end of run,
prefix mismatch, class and outcome of a point), so a pairing rule changes in one place.
:func:`standing` and :func:`outcomes` use only ``&``, ``|`` and ``~``: they read booleans per
row (the join) or u64 words per task whose bit k stands for recovery point k (one bitwise
operation decides every point of a task); :func:`after_end` also reads plain integers (the bit
layout's lookup tables).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import polars as pl

__all__ = [
    "AFTER_END",
    "BASELINE",
    "REASONS",
    "after_end",
    "episode_key",
    "is_baseline",
    "outcomes",
    "prefix_differs",
    "reason",
    "run_gap",
    "standing",
]

#: The method of a no-recovery (baseline) branch.
BASELINE = "none"
#: Exclusion reasons, in the order they are checked: a recovery row with no `none` row is
#: `unpaired`; a pair whose prefix hashes differ is `prefix_mismatch`.
REASONS = ("unpaired", "prefix_mismatch")
#: Reason of a recovery row given for a point after its task ended: an input error, not an
#: exclusion (ARCHITECTURE §3.1).
AFTER_END = "after_end"

T = TypeVar("T", pl.Expr, int)


def episode_key(pair_by: Sequence[str]) -> list[str]:
    """Key of an episode: the branches forked from one state share it."""
    return ["task_id", "condition", *pair_by]


def is_baseline() -> pl.Expr:
    """Whether a row is a no-recovery branch (shared when its delay is null, else specific)."""
    return pl.col("method") == BASELINE


def run_gap(perturb: pl.Expr | None = None, end: pl.Expr | None = None) -> pl.Expr:
    """Actions between the perturbation and the end of a run: ``end_action - perturb_action``."""
    perturb = pl.col("perturb_action") if perturb is None else perturb
    end = pl.col("end_action") if end is None else end
    return end - perturb


def after_end(delay: T, gap: T) -> T:
    """Whether a recovery point at ``delay`` lies at or after the end of the run (§3.1).

    ``perturb_action + delay >= end_action``: ``delay >= gap`` (:func:`run_gap` of the ``none``
    row). Such a point is carried forward (``y1 = y0``). Null for a run with no end (= false).
    """
    return delay >= gap


def prefix_differs(recovery: pl.Expr, baseline: pl.Expr) -> pl.Expr:
    """Whether a pair's prefix hashes differ (a null hash is no evidence of a difference)."""
    return (recovery != baseline).fill_null(False)


def standing(present: pl.Expr, has_none: pl.Expr, ended: pl.Expr) -> dict[str, pl.Expr]:
    """Classify recovery points by what the table holds for them.

    ``present``: a recovery row; ``has_none``: a ``none`` row for it; ``ended``: :func:`after_end`
    by that row. Returns ``pair`` (scored), ``carried`` (no recovery row, the run ended first),
    ``unpaired`` and ``after_end`` (a recovery row the run's end forbids).
    """
    return {
        "pair": present & has_none & ~ended,
        "carried": ~present & has_none & ended,
        "unpaired": present & ~has_none,
        "after_end": present & has_none & ended,
    }


def outcomes(pair: pl.Expr, carried: pl.Expr, y0: pl.Expr, y1: pl.Expr) -> dict[str, pl.Expr]:
    """Outcome classes of scored points: a carried-forward point keeps its ``y0`` (§3.1).

    ``rescue`` (fails without recovery, succeeds with it), ``harm`` (the reverse),
    ``kept``/``unchanged`` (succeeds/fails both ways) and ``carried_forward``.
    """
    return {
        "rescue": pair & ~y0 & y1,
        "harm": pair & y0 & ~y1,
        "kept": (pair & y0 & y1) | (carried & y0),
        "unchanged": (pair & ~y0 & ~y1) | (carried & ~y0),
        "carried_forward": carried,
    }


def reason(paired: pl.Expr, ended: pl.Expr, mismatch: pl.Expr) -> pl.Expr:
    """Why a recovery row is not a pair: null for a pair, else the first reason that applies."""
    state = standing(pl.lit(True), paired, ended)
    return (
        pl.when(state["unpaired"])
        .then(pl.lit(REASONS[0]))
        .when(state["after_end"])
        .then(pl.lit(AFTER_END))
        .when(mismatch)
        .then(pl.lit(REASONS[1]))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
