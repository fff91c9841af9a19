"""Synthetic CIR router data: decision points with a planted, learnable signal, and their forks.

Generator ``decision_points`` (ARCHITECTURE §3.1-3.2) writes two tables for the same tasks:

``decision_points``
    One row per (task_id, condition, delay) candidate point with six features that a harness sees
    *before* deciding (seed, CIR section): ``repetition`` and ``noops`` (counts), ``obs_novelty``,
    ``consistency`` (action–observation), ``progress`` and ``context_used`` (fractions).
``forks``
    Per (task_id, condition): one shared ``none`` row (null delay, with ``perturb_action`` and
    ``end_action``) and one ``refresh`` row per delay 1, 2, 4 at which the task is still running.

The planted ground truth, per episode (task × condition):

- Task difficulty ``z ~ N(0, 1)`` is shared by the four conditions of a task (so outcomes cluster
  by task); ``progress`` reveals it noisily. The no-recovery outcome is
  ``y0 ~ Bernoulli(sigmoid(1.1 - 1.2 z - penalty[condition]))``.
- Stale observations are detectable: ``stale2`` repeats actions, ``missing`` produces no-ops, and
  both lower novelty and consistency (``stale1`` weakly).
- Refresh *rescues* a failing episode with a probability that is high on ``stale2``, moderate on
  ``stale1``, tiny on ``clean`` and ``missing``, shrinks with the delay (1 > 2 > 4) and with the
  context used; it *harms* a succeeding episode with a probability that is highest on ``missing``
  and ``clean`` and grows with the context used. One uniform draw per episode drives all delays,
  so potential outcomes are coherent (rescued at delay 4 implies rescued at delay 1).

So an anomaly detector alone intervenes on ``missing`` episodes that refresh does not help, while a
router that also predicts the outcomes targets ``stale2`` and stays off ``clean``.

A few tasks end within four actions of the perturbation: their later delays have neither a
decision point nor a refresh row (the paired module carries their outcome forward).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from recoverylab.synth import Generator, register

__all__ = ["CONDITIONS", "DELAYS", "FEATURES"]

#: Observation conditions, clean first.
CONDITIONS = ("clean", "stale1", "stale2", "missing")
#: Candidate recovery delays (environment actions after the perturbation).
DELAYS = (1, 2, 4)
#: Feature columns of ``decision_points``.
FEATURES = ("repetition", "noops", "obs_novelty", "consistency", "progress", "context_used")

# Per-condition parameters, in the order of CONDITIONS.
_PENALTY = np.array([0.0, 0.4, 1.0, 0.8])  # logit drop of the no-recovery success
_REPETITION = np.array([0.3, 0.4, 2.0, 0.5])  # Poisson rate of repeated actions
_NOOPS = np.array([0.2, 0.25, 0.4, 1.8])  # Poisson rate of no-op actions
_NOVELTY = np.array([0.6, 0.58, 0.35, 0.3])  # mean observation novelty
_CONSISTENCY = np.array([0.8, 0.78, 0.55, 0.65])  # mean action–observation consistency
_RESCUE = np.array([0.05, 0.6, 0.65, 0.05])  # refresh rescue probability at delay 1
_HARM = np.array([0.30, 0.10, 0.08, 0.45])  # refresh harm probability scale
_DECAY = np.array([1.0, 0.85, 0.6])  # rescue decay over DELAYS


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _block(
    start: int, stop: int, rng: np.random.Generator, *, prefix: str = "t"
) -> dict[str, pl.DataFrame]:
    """Generate both tables for tasks ``start..stop-1`` (vectorised over tasks)."""
    n, n_c, n_d = stop - start, len(CONDITIONS), len(DELAYS)
    shape_e, shape_p = (n, n_c), (n, n_c, n_d)
    cond = np.broadcast_to(np.arange(n_c), shape_e)
    delays = np.broadcast_to(np.array(DELAYS), shape_p)
    stale = (cond > 0)[..., None]

    z = rng.standard_normal(n)[:, None]
    y0 = rng.random(shape_e) < _sigmoid(1.1 - 1.2 * z - _PENALTY[cond])
    perturb = rng.integers(3, 12, size=shape_e)
    end = perturb + 1 + rng.poisson(9.0, size=shape_e)
    running = perturb[..., None] + delays < end[..., None]

    context = rng.uniform(0.05, 0.9, size=shape_e)[..., None] + 0.02 * delays
    progress = _sigmoid(0.5 - 0.9 * z[..., None] + 0.4 * rng.standard_normal(shape_p))
    progress = np.clip(progress + 0.01 * delays * ~stale, 0.0, 1.0)
    c3 = cond[..., None]
    features = {
        "repetition": rng.poisson(_REPETITION[c3] + 0.1 * delays * stale),
        "noops": rng.poisson(np.broadcast_to(_NOOPS[c3], shape_p)),
        "obs_novelty": _NOVELTY[c3] + 0.15 * rng.standard_normal(shape_p),
        "consistency": _CONSISTENCY[c3] + 0.12 * rng.standard_normal(shape_p),
        "progress": progress,
        "context_used": context,
    }

    # Potential outcomes of a refresh at each delay: one draw per episode for coherence.
    rescue_p = _RESCUE[c3] * _DECAY * (1.3 - 1.2 * context)
    harm_p = _HARM[c3] * (0.1 + 2.0 * context**2)
    draw = rng.random(shape_e)[..., None]
    y1 = np.where(y0[..., None], draw >= harm_p, draw < rescue_p)

    ids = pl.Series("task_id", np.arange(start, stop)).cast(pl.String).str.zfill(6)
    task_ids = (prefix + ids).to_numpy()
    conditions = np.array(CONDITIONS)

    keep = running.ravel()
    points = pl.DataFrame(
        {
            "task_id": np.repeat(task_ids, n_c * n_d)[keep],
            "condition": np.tile(np.repeat(conditions, n_d), n)[keep],
            "delay": delays.ravel()[keep].astype(np.int64),
            **{
                name: values.ravel()[keep].astype(
                    np.int64 if name in ("repetition", "noops") else np.float64
                )
                for name, values in features.items()
            },
        }
    )
    none_rows = pl.DataFrame(
        {
            "task_id": np.repeat(task_ids, n_c),
            "condition": np.tile(conditions, n),
            "method": "none",
            "delay": pl.Series([None] * (n * n_c), dtype=pl.Int64),
            "success": y0.ravel(),
            "perturb_action": perturb.ravel().astype(np.int64),
            "end_action": end.ravel().astype(np.int64),
        }
    )
    refresh_rows = pl.DataFrame(
        {
            "task_id": points["task_id"],
            "condition": points["condition"],
            "method": "refresh",
            "delay": points["delay"],
            "success": y1.ravel()[keep],
            "perturb_action": pl.Series([None] * int(keep.sum()), dtype=pl.Int64),
            "end_action": pl.Series([None] * int(keep.sum()), dtype=pl.Int64),
        }
    )
    forks = pl.concat([none_rows, refresh_rows]).sort(
        ["task_id", "condition", "method", "delay"], nulls_last=False
    )
    return {"decision_points": points, "forks": forks}


register(
    Generator(
        name="decision_points",
        tables=("decision_points", "forks"),
        block=_block,
        description="CIR router candidates with planted signal, and their none/refresh forks "
        "(delays 1, 2, 4). Option `prefix` sets the task-id prefix (disjoint train/test sets).",
    )
)
