"""Vectorised threshold search of the sequential CIR rule over every threshold triple at once.

The sequential rule (ARCHITECTURE §3.2) refreshes an episode at the first candidate delay ``j``
whose scores clear all three thresholds: ``p_err >= alpha``, ``1 - p0 >= beta``, ``u >= gamma``.
On a grid of candidate values per threshold, point ``(e, j)`` qualifies for exactly the triples
whose grid indices are all at most its *corner* ``(Ia, Ib, Ig)`` (the number of grid values at or
below each score, minus one): a box anchored at the origin of the grid. Intersections of such
boxes are boxes again (component-wise minimum of the corners), so by inclusion–exclusion

    1[first qualifying delay of e is j]
        = sum over S ⊆ {earlier delays} of (-1)^|S| 1[t in box_j ∩ box_S].

Every statistic of the rule (gain, clean harm, interventions, ...) is a sum over episodes of a
weight at the chosen delay, hence a signed sum of box indicators: put each weight at its box
corner in a histogram of grid shape and take reverse cumulative sums along the three axes. The
cost is ``(2^D - 1)`` bincounts over the episodes plus one pass over the grid, with no loop over
episodes or over triples.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

__all__ = ["EpisodeArrays", "GridCounts", "choose", "first_delay", "grid_counts", "quantile_grid"]

#: The statistics accumulated for every threshold triple.
STATISTICS = (
    "gain_nonclean",  # sum of (y1 - y0) at the chosen delay, non-clean episodes
    "gain",  # the same over all episodes
    "rescue",  # chosen points with y0 false and y1 true
    "harm",  # chosen points with y0 true and y1 false
    "clean_harm",  # harm on clean episodes
    "interventions",  # episodes with a refresh
    "clean_touches",  # clean episodes with a refresh
)


@dataclass(frozen=True)
class EpisodeArrays:
    """Episodes × candidate delays: availability, OOF scores and paired outcomes.

    ``available[e, j]`` is false where episode ``e`` has no decision point at delay ``j``; the
    other arrays are ignored there. ``y0`` and ``y1`` are the paired no-recovery and refresh
    outcomes of the point; ``clean`` marks episodes under the clean observation condition.
    """

    available: np.ndarray
    p_err: np.ndarray
    not_p0: np.ndarray
    utility: np.ndarray
    y0: np.ndarray
    y1: np.ndarray
    clean: np.ndarray

    @property
    def n_episodes(self) -> int:
        """Number of episodes."""
        return int(self.available.shape[0])


@dataclass(frozen=True)
class GridCounts:
    """Every statistic of :data:`STATISTICS` for every threshold triple of the grids."""

    grids: tuple[np.ndarray, np.ndarray, np.ndarray]
    counts: dict[str, np.ndarray]


def quantile_grid(values: np.ndarray, n: int, extra: tuple[float, ...] = ()) -> np.ndarray:
    """Return up to ``n`` candidate thresholds: distinct quantiles of ``values`` (plus ``extra``).

    The quantiles are observed values (``method="inverted_cdf"``), so the lowest candidate lets
    every point through; ``extra`` values inside the observed range are added (e.g. ``gamma =
    0``, "positive expected utility").
    """
    levels = np.linspace(0.0, 1.0, n)
    grid = np.quantile(values, levels, method="inverted_cdf")
    inside = [v for v in extra if values.min() <= v <= values.max()]
    return np.unique(np.concatenate([grid, np.asarray(inside, dtype=np.float64)]))


def _corners(arrays: EpisodeArrays, grids: tuple[np.ndarray, ...]) -> np.ndarray:
    """Grid index of the largest threshold each point clears, per axis; -1 = clears none."""
    scores = (arrays.p_err, arrays.not_p0, arrays.utility)
    corners = np.stack(
        [np.searchsorted(grid, s, side="right") - 1 for grid, s in zip(grids, scores, strict=True)],
        axis=-1,
    )
    corners[~arrays.available] = -1
    return corners


def _weights(arrays: EpisodeArrays) -> dict[str, np.ndarray]:
    y0, y1 = arrays.y0.astype(np.int64), arrays.y1.astype(np.int64)
    clean = arrays.clean[:, None].astype(np.int64)
    rescue = (1 - y0) * y1
    harm = y0 * (1 - y1)
    ones = np.ones_like(y0)
    return {
        "gain_nonclean": (y1 - y0) * (1 - clean),
        "gain": y1 - y0,
        "rescue": rescue,
        "harm": harm,
        "clean_harm": harm * clean,
        "interventions": ones,
        "clean_touches": ones * clean,
    }


def grid_counts(
    arrays: EpisodeArrays, grids: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> GridCounts:
    """Count every statistic of the sequential rule for every threshold triple of ``grids``.

    ``arrays`` has its delays in the order the rule checks them; ``grids`` are the sorted
    candidate values of alpha, beta and gamma (a grid of ``[-inf]`` switches that threshold off:
    the anomaly baselines). ``counts[name]``: integer counts of shape (len of each grid).
    """
    shape = tuple(len(g) for g in grids)
    size = int(np.prod(shape))
    corners = _corners(arrays, grids)
    weights = _weights(arrays)
    hist = {name: np.zeros(size, dtype=np.float64) for name in STATISTICS}
    n_delays = corners.shape[1]
    # Loops over delays and subsets of earlier delays only (2^D - 1 terms), never over episodes.
    for j in range(n_delays):
        for size_s in range(j + 1):
            for subset in combinations(range(j), size_s):
                corner = corners[:, [j, *subset], :].min(axis=1)
                ok = (corner >= 0).all(axis=1)
                if not ok.any():
                    continue
                flat = np.ravel_multi_index(tuple(corner[ok].T), shape)
                sign = -1.0 if size_s % 2 else 1.0
                for name, weight in weights.items():
                    hist[name] += np.bincount(flat, weights=sign * weight[ok, j], minlength=size)
    counts = {}
    for name, flat_hist in hist.items():
        grid = flat_hist.reshape(shape)
        for axis in range(3):
            grid = np.flip(np.cumsum(np.flip(grid, axis), axis=axis), axis)
        counts[name] = np.rint(grid).astype(np.int64)
    return GridCounts(grids=grids, counts=counts)


def first_delay(arrays: EpisodeArrays, alpha: float, beta: float, gamma: float) -> np.ndarray:
    """Return, per episode, the index of the delay the rule chooses, or -1 for no refresh."""
    qualifies = (
        arrays.available
        & (arrays.p_err >= alpha)
        & (arrays.not_p0 >= beta)
        & (arrays.utility >= gamma)
    )
    first = np.argmax(qualifies, axis=1)
    return np.where(qualifies.any(axis=1), first, -1)


def rule_counts(arrays: EpisodeArrays, chosen: np.ndarray) -> dict[str, int]:
    """Every statistic of :data:`STATISTICS` for one decision per episode (-1 = none)."""
    picked = chosen >= 0
    rows = np.flatnonzero(picked)
    weights = _weights(arrays)
    return {name: int(w[rows, chosen[rows]].sum()) for name, w in weights.items()}


def choose(
    counts: GridCounts, *, eps: float, n_clean: int
) -> tuple[tuple[int, int, int] | None, np.ndarray]:
    """Return the grid indices of the best feasible triple (or ``None``) and the feasibility mask.

    Best: the largest non-clean gain subject to clean harm <= ``eps``; ties go to fewer
    interventions, then to larger thresholds (alpha, beta, gamma), so the choice is deterministic.
    ``None`` (never refresh) when no feasible triple gains: never refreshing is feasible with 0.
    """
    gain = counts.counts["gain_nonclean"]
    feasible = counts.counts["clean_harm"] <= eps * n_clean + 1e-9
    if not (feasible & (gain > 0)).any():
        return None, feasible
    ia, ib, ig = np.indices(gain.shape)
    cells = np.flatnonzero(feasible.ravel())
    order = np.lexsort(
        (
            -ig.ravel()[cells],
            -ib.ravel()[cells],
            -ia.ravel()[cells],
            counts.counts["interventions"].ravel()[cells],
            -gain.ravel()[cells],
        )
    )
    best = np.unravel_index(cells[order[0]], gain.shape)
    return (int(best[0]), int(best[1]), int(best[2])), feasible
