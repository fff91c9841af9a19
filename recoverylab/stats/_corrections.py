"""The corrections that turn a coupled draw into an exact resample of each set's own clusters.

Part of :func:`~recoverylab.stats._shared_draws._coupled_resample_sums`: every resample is one
stream of N uniform draws over all clusters of the call; a set holding K_s of them keeps the
first K_s draws that land in it, and tops up from its own clusters when fewer landed. Kept apart
from the drawing and the product because it is the one step that is set by set.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


class _Corrections:
    """The corrections of every set of :func:`_coupled_resample_sums`, set by set.

    A resample with fewer than K_s draws in set s tops up with draws from the set's own
    clusters (from the stream, set after set, as many as it lacks); one with more drops its last
    surplus draws in the set. Each (row, set) sums its draws' values (negated for dropped ones)
    in draw order, as one ``reduceat`` segment: the order, and so the bits, of correcting each
    set on its own. The random stream is drawn for all sets first (:meth:`_short`), then each
    set gathers and sums its few draws from its own rows (which stay in the cache).
    """

    def __init__(self, sets: list[tuple[np.ndarray, np.ndarray]], n_universe: int) -> None:
        self.n_universe = n_universe
        self.k = np.array([where.size for where, _ in sets], dtype=np.int64)
        widths = [block.shape[1] for _, block in sets]
        self.edges = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
        #: sets that ever need a correction: those not holding every cluster
        self.needed = np.flatnonzero(self.k < n_universe)
        # per set needing one: each cluster's row in the set (-1: not in it), and its values
        self.position = np.full((len(sets), n_universe), -1, dtype=np.int32)
        self.values: list[np.ndarray] = []
        for i, (where, block) in enumerate(sets):
            if self.k[i] < n_universe:
                self.position[i, where] = np.arange(where.size, dtype=np.int32)
            exact = block.dtype == np.float32  # integers whose sums float32 holds exactly
            self.values.append(np.ascontiguousarray(block, dtype=None if exact else np.float64))
        self.inside = self.position >= 0

    def __call__(
        self, draws: np.ndarray, landed: np.ndarray, gen: np.random.Generator
    ) -> np.ndarray:
        """Return the (B, C) change of every set's value sums, sets side by side.

        ``draws``: (B, N) uniform draws; ``landed``: (B, sets), how many per row fell in each.
        """
        delta = np.zeros((draws.shape[0], int(self.edges[-1])), dtype=np.float64)
        for i, rows, sums in self.sums(draws, landed, gen):
            delta[rows, self.edges[i] : self.edges[i + 1]] = sums
        return delta

    def sums(
        self, draws: np.ndarray, landed: np.ndarray, gen: np.random.Generator
    ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """Yield, per set with corrected rows: the set, those rows and their (rows, C) changes."""
        surplus = landed - self.k
        short = self._short(surplus, gen)
        for i in self.needed.tolist():
            rows, lengths, picks = short.get(i, (_NONE, _NONE, _NONE))
            n_short = rows.size
            over = np.flatnonzero(surplus[:, i] > 0)
            if over.size:
                want = surplus[over, i]
                rows = np.concatenate([rows, over])
                lengths = np.concatenate([lengths, want])
                picks = np.concatenate([picks, self._last(draws, i, over, want)])
            if not rows.size:
                continue
            starts = np.cumsum(lengths) - lengths
            sums = np.add.reduceat(np.take(self.values[i], picks, axis=0), starts, axis=0)
            np.negative(sums[n_short:], out=sums[n_short:])  # dropped draws
            yield i, rows, sums

    def _short(
        self, surplus: np.ndarray, gen: np.random.Generator
    ) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per set with short rows: the rows, how many each lacks and the set's rows drawn."""
        out = {}
        for i in np.flatnonzero((surplus < 0).any(axis=0)).tolist():
            short = np.flatnonzero(surplus[:, i] < 0)
            need = -surplus[short, i]
            out[i] = (short, need, gen.integers(0, self.k[i], size=int(need.sum())))
        return out

    def _last(self, draws: np.ndarray, i: int, over: np.ndarray, want: np.ndarray) -> np.ndarray:
        """Return the set's rows of each over-full row's last ``want`` draws in it, in order.

        Only a tail of the draws is searched, as wide as the largest surplus needs (with room
        for its spread), widened until every row has enough of them.
        """
        n_universe = self.n_universe
        most = float(want.max())
        need = (most + 2 * np.sqrt(most) + 8) * n_universe / self.k[i]
        width = min(n_universe, 32 * int(np.ceil(need / 32)))
        inside = self.inside[i]
        while True:
            tail = draws[over, n_universe - width :]
            hit = np.take(inside, tail)  # take: a third faster than indexing here
            found = np.count_nonzero(hit, axis=1)
            if width == n_universe or (found >= want).all():
                break
            width = min(n_universe, 2 * width)
        hits = np.flatnonzero(hit)  # row by row, in draw order
        # the last `want` of each row's hits: from found - want on, counted from the row's first
        skip = np.cumsum(found) - np.cumsum(want)
        kept = hits[np.repeat(skip, want) + np.arange(int(want.sum()))]
        return np.take(self.position[i], np.take(tail, kept))


_NONE = np.zeros(0, dtype=np.int64)
