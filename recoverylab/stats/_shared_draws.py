"""Resampled column sums for several blocks or cluster sets drawn from one stream.

The engine of :func:`~recoverylab.stats.cluster_bootstrap_ratios`: blocks on the same clusters
share one draw of cluster indices (:func:`_shared_resample_sums`), and large cluster sets are
coupled to one resample of every cluster of the call (:func:`_coupled_resample_sums`), each set
corrected to an exact resample of its own clusters. Separate from the interval code because it
is about drawing fast and exactly, not about which interval is reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from recoverylab.stats import _limits
from recoverylab.stats._streams import _merge_types

#: Drawing a multinomial over T cluster types costs about this many times more per type than
#: drawing one uniform cluster index and counting it (numpy's binomial against an integer).
_TYPE_DRAW_COST = 25


def _coupled_resample_sums(
    sets: list[tuple[np.ndarray, np.ndarray]],
    n_universe: int,
    n_resamples: int,
    gen: np.random.Generator,
) -> list[np.ndarray]:
    """Column sums of each set's rows over ``n_resamples`` resamples, all drawn from one stream.

    ``sets``: per set, the positions of its K_s clusters among the ``n_universe`` of the call
    and a (K_s, C) block of their values. Each resample is one stream of ``n_universe`` uniform
    draws over all clusters (counted once, one matrix product for every set). Draws landing in
    a set are uniform over it wherever they fall, so the set keeps the first K_s of them and
    tops up from its own clusters when fewer landed: exactly a resample of its own clusters.
    Only the corrections (about the sd of a Binomial(N, K_s/N) per resample) are set by set;
    they are found for every set at once (:class:`_Corrections`), the product computes each
    distinct column once (:class:`_ExactProduct`). The cost is resamples x N x distinct columns
    (plus the corrections): a dense product, which beat block-sparse ones while most sets hold
    most clusters (the takeover design: 94 % of (cell, workflow) pairs are non-empty).
    """
    widths = [block.shape[1] for _, block in sets]
    product = _ExactProduct(sets, n_universe)
    corrections = _Corrections(sets, n_universe)
    outs = [np.empty((n_resamples, w), dtype=np.float64) for w in widths]
    batch = max(1, min(256, _limits.MAX_BATCH_ELEMENTS // n_universe))
    with _one_blas_thread():
        for start in range(0, n_resamples, batch):
            size = min(batch, n_resamples - start)
            draws = gen.integers(0, n_universe, size=(size, n_universe), dtype=np.int32)
            sums = product(_row_counts(draws))
            landed = np.rint(sums[:, sums.shape[1] - len(sets) :]).astype(np.int64)
            delta = corrections(draws, landed, gen)
            edge = 0
            for i, out in enumerate(outs):
                width = out.shape[1]
                out[start : start + size] = sums[:, edge : edge + width]
                if corrections.k[i] < n_universe:
                    out[start : start + size] += delta[:, edge : edge + width]
                edge += width
    return outs


#: Rows of draws counted by one ``bincount``: its (rows x N) counters should stay in the cache.
_COUNT_ELEMENTS = 1 << 16


def _row_counts(draws: np.ndarray) -> np.ndarray:
    """Return how often each cluster was drawn in each row of ``draws``, as float32 (exact).

    The same counts as one ``bincount`` over the whole batch with row offsets, a few rows at a
    time so that the counters stay in the cache (measured: 3-4x less CPU at N = 12,500).
    A count is at most N: float32 holds it exactly below 2**24 clusters, float64 above.
    """
    size, n_universe = draws.shape
    exact32 = n_universe < 2**24
    counts = np.empty((size, n_universe), dtype=np.float32 if exact32 else np.float64)
    step = max(1, _COUNT_ELEMENTS // n_universe)
    offsets = (np.arange(step, dtype=np.int64) * n_universe)[:, np.newaxis]
    for start in range(0, size, step):
        rows = draws[start : start + step]
        picks = (rows + offsets[: rows.shape[0]]).reshape(-1)
        drawn = np.bincount(picks, minlength=rows.size)
        counts[start : start + rows.shape[0]] = drawn.reshape(rows.shape)
    return counts


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Run the block's matrix products on one BLAS thread.

    The products are many and mid-sized: on a shared machine BLAS threads wait on each other
    (measured: 5-6x the CPU of one thread, same wall time, at a load of 10 on 2 cores).
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


#: Largest scale tried to make a fractional column integral (pass@1 over 3 repeats: 3).
_MAX_SCALE = 64
#: A value is a multiple of 1/L when value * L is within this relative distance of an integer:
#: the rounding of a float sum of a few such multiples, far below any interval's precision.
_SCALE_TOLERANCE = 2.0**-44
#: Rows of a column tried against every scale before the whole column is checked.
_SCALE_SAMPLE = 64


class _ExactProduct:
    """``counts @ design`` computed exactly and once per distinct column, mostly in float32.

    The design holds each set's block in its rows (the set's clusters) and columns, then one
    column per set that counts the draws landing in it. A column of integers, or of multiples
    of 1/L (L <= 64, within rounding: pass@1 over three repeats), whose resampled sums stay
    below 2**24 sums exactly in float32 as integers, at half the cost of float64. Such columns
    of a set that are rational multiples of another (attempts = 3 x states with three repeats
    per state; a pass@1 sum = passes / 3) are one product column, scaled after. Integer sums
    are bit for bit those of a float64 product; a multiple of 1/L is the exact integer sum
    divided by L once (a float64 product rounds each term: they differ in the last bits only).
    Other columns go through a float64 product. Built from the blocks, never the dense design.
    """

    def __init__(self, sets: list[tuple[np.ndarray, np.ndarray]], n_draws: int) -> None:
        widths = [block.shape[1] for _, block in sets]
        self.width = sum(widths) + len(sets)
        n_universe = n_draws
        single: list[tuple[np.ndarray, np.ndarray]] = []  # (rows, values) per float32 column
        double: list[tuple[np.ndarray, np.ndarray]] = []
        exact: list[tuple[int, int, float, float]] = []  # (column, single column, p, q)
        inexact: list[int] = []
        edge = 0
        for i, (where, block) in enumerate(sets):
            scale = _integer_scales(block, n_draws)
            local = np.flatnonzero(scale > 0)
            ints = np.rint(block[:, local] * scale[local])
            base, numerator, denominator = _proportional(ints)
            at: dict[int, int] = {}
            for j, column in enumerate(local.tolist()):
                if numerator[j] == 0:
                    continue  # an all-zero column sums to 0: no product
                if base[j] == j:
                    at[j] = len(single)
                    single.append((where, ints[:, j]))
                q = float(denominator[j] * scale[column])
                exact.append((edge + column, at[int(base[j])], float(numerator[j]), q))
            for column in np.flatnonzero(scale == 0).tolist():
                double.append((where, block[:, column]))
                inexact.append(edge + column)
            # the draws that land in the set
            exact.append((sum(widths) + i, len(single), 1.0, 1.0))
            single.append((where, np.ones(where.size)))
            edge += block.shape[1]
        self.single = _columns(single, n_universe, np.float32)
        self.double = _columns(double, n_universe, np.float64)
        self.exact, self.base, self.numerator, self.denominator = (
            np.array([e[c] for e in exact], dtype=t)
            for c, t in ((0, np.int64), (1, np.int64), (2, np.float64), (3, np.float64))
        )
        self.inexact = np.array(inexact, dtype=np.int64)

    def __call__(self, counts: np.ndarray) -> np.ndarray:
        out = np.zeros((counts.shape[0], self.width), dtype=np.float64)
        if self.single.shape[1]:
            sums = (counts.astype(np.float32, copy=False) @ self.single).astype(np.float64)
            # integers below 2**53 times a small integer, then one correctly rounded division;
            # + 0.0 turns the -0.0 of a negative multiple of 0 into the product's +0.0
            out[:, self.exact] = sums[:, self.base] * self.numerator / self.denominator + 0.0
        if self.double.shape[1]:
            out[:, self.inexact] = counts.astype(np.float64) @ self.double
        return out


def _columns(columns: list[tuple[np.ndarray, np.ndarray]], n_rows: int, dtype: type) -> np.ndarray:
    """Stack sparse-by-rows columns into a dense (n_rows, len(columns)) array."""
    dense: np.ndarray = np.zeros((n_rows, len(columns)), dtype=dtype)
    for j, (rows, values) in enumerate(columns):
        dense[rows, j] = values
    return dense


def _integer_scales(block: np.ndarray, n_draws: int) -> np.ndarray:
    """Per column, the least L <= 64 making it integral (within rounding), or 0 for none.

    A scaled column must also keep its resampled sums (at most ``n_draws`` times its largest
    magnitude) below 2**24, where float32 counts integers exactly.
    """
    scale = np.zeros(block.shape[1], dtype=np.float64)
    largest = np.abs(block).max(axis=0, initial=0.0)  # nan for a column holding one
    finite = np.isfinite(largest)
    scale[finite & (block == np.rint(block)).all(axis=0)] = 1.0
    todo = np.flatnonzero(finite & (scale == 0))
    sample = block[:_SCALE_SAMPLE, todo]
    for j, column in enumerate(todo):
        for factor in range(2, _MAX_SCALE + 1):
            if _multiples(sample[:, j], factor) and _multiples(block[:, column], factor):
                scale[column] = factor
                break
    scale[~finite | (largest * scale * n_draws >= 2.0**24)] = 0.0
    return scale


def _multiples(values: np.ndarray, factor: int) -> bool:
    scaled = values * factor
    whole = np.rint(scaled)
    return bool((np.abs(scaled - whole) <= _SCALE_TOLERANCE * np.maximum(np.abs(whole), 1.0)).all())


def _proportional(ints: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group integer columns that are rational multiples of one another.

    Returns, per column, the index of its group's first column b and integers p, q with
    column = p / q x column b exactly (checked by cross-multiplication: every value is below
    2**24, so the products are exact); p = 0 for an all-zero column.
    """
    width = ints.shape[1]
    base = np.arange(width)
    numerator, denominator = np.ones(width), np.ones(width)
    first = (ints != 0).argmax(axis=0)
    pivot = ints[first, np.arange(width)]
    numerator[pivot == 0] = 0.0
    seen: dict[bytes, int] = {}
    for j in np.flatnonzero(pivot != 0).tolist():
        # proportional columns have the same zeros and the same values over their pivot
        b = seen.setdefault((ints[:, j] / pivot[j]).tobytes(), j)
        if b != j and np.array_equal(ints[:, j] * pivot[b], ints[:, b] * pivot[j]):
            base[j], numerator[j], denominator[j] = b, pivot[j], pivot[b]
    return base, numerator, denominator


class _Corrections:
    """The corrections of every set of :func:`_coupled_resample_sums`, found for all at once.

    A resample with fewer than K_s draws in set s tops up with draws from the set's own
    clusters (from the stream, set after set, as many as it lacks); one with more drops its last
    surplus draws in the set. Each (row, set) sums its draws' values (negated for dropped ones)
    in draw order, then column order, as one ``reduceat`` segment: the order, and so the bits,
    of correcting each set on its own.
    """

    def __init__(self, sets: list[tuple[np.ndarray, np.ndarray]], n_universe: int) -> None:
        widths = np.array([block.shape[1] for _, block in sets], dtype=np.int64)
        self.n_universe = n_universe
        self.k = np.array([where.size for where, _ in sets], dtype=np.int64)
        self.edges = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
        # sets that ever need a correction (not all clusters), grouped by their width
        self.group = np.full(len(sets), -1, dtype=np.int64)
        self.widths = sorted({int(widths[i]) for i in np.flatnonzero(self.k < n_universe)})
        self.offset = np.zeros(len(sets), dtype=np.int64)
        blocks: list[list[np.ndarray]] = [[] for _ in self.widths]
        # per (set, cluster): in the set? its row among its width group's rows
        self.inside = np.zeros(len(sets) * n_universe, dtype=bool)
        self.row = np.zeros(len(sets) * n_universe, dtype=np.int64)
        for i, (where, block) in enumerate(sets):
            if self.k[i] == n_universe:
                continue
            g = self.widths.index(int(widths[i]))
            self.group[i] = g
            self.offset[i] = sum(b.shape[0] for b in blocks[g])
            blocks[g].append(block)
            self.inside[i * n_universe + where] = True
            self.row[i * n_universe + where] = self.offset[i] + np.arange(where.size)
        # each group's rows one after another (a gather reads one cache line per draw)
        self.values = [np.ascontiguousarray(np.vstack(b), dtype=np.float64) for b in blocks]

    def __call__(
        self, draws: np.ndarray, landed: np.ndarray, gen: np.random.Generator
    ) -> np.ndarray:
        """Return the (B, C) change of every set's value sums, sets side by side.

        ``draws``: (B, N) uniform draws; ``landed``: (B, sets), how many per row fell in each.
        """
        surplus = landed - self.k
        size = surplus.shape[0]
        delta = np.zeros((size, int(self.edges[-1])), dtype=np.float64)
        short_key, short_row = self._short(surplus, gen)
        over_key, over_row = self._over(draws, surplus)
        key = np.concatenate([short_key, over_key])  # set * B + row
        if not key.size:
            return delta
        sign = np.concatenate([np.ones(short_key.size), -np.ones(over_key.size)])
        order = np.argsort(key, kind="stable")
        key, sign, rows = key[order], sign[order], np.concatenate([short_row, over_row])[order]
        group = self.group[key // size]
        for g, values in enumerate(self.values):
            mine = group == g
            part = key[mine]
            # summed along contiguous memory, as a set's (draws x columns) block was summed
            gathered = np.ascontiguousarray(np.take(values, rows[mine], axis=0).T)
            gathered *= sign[mine]
            starts = np.flatnonzero(np.concatenate([[True], part[1:] != part[:-1]]))
            sums = np.add.reduceat(gathered, starts, axis=1)
            of, row = np.divmod(part[starts], size)
            columns = self.edges[of][:, np.newaxis] + np.arange(values.shape[1])
            delta[row[:, np.newaxis], columns] = sums.T
        return delta

    def _short(
        self, surplus: np.ndarray, gen: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """(set * B + row, drawn row of the set) of the draws topping up short rows."""
        size = surplus.shape[0]
        keys, rows = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        for i in np.flatnonzero((surplus < 0).any(axis=0)).tolist():
            short = np.flatnonzero(surplus[:, i] < 0)
            need = -surplus[short, i]
            keys.append(i * size + np.repeat(short, need))
            rows.append(self.offset[i] + gen.integers(0, self.k[i], size=int(need.sum())))
        return np.concatenate(keys), np.concatenate(rows)

    def _over(self, draws: np.ndarray, surplus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(set * B + row, row of the set) of each over-full row's last surplus draws in it.

        Only a tail of the draws is searched, as wide as the surplus needs (pairs in tiers of
        widths 64, 128, ...), widened until every row has enough of them.
        """
        of, row = np.nonzero(surplus.T > 0)  # set-major, then row
        if not row.size:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        want = surplus[row, of]
        need = (want + 4 * np.sqrt(want) + 16) * self.n_universe / self.k[of]
        tier = np.maximum(0, np.ceil(np.log2(need / 64))).astype(np.int64)
        keys, rows = [], []
        for t in np.unique(tier).tolist():
            pick = np.flatnonzero(tier == t)
            width = min(self.n_universe, 64 << t)
            key, at = self._last(draws, row[pick], of[pick], want[pick], width)
            keys.append(key)
            rows.append(at)
        return np.concatenate(keys), np.concatenate(rows)

    def _last(
        self, draws: np.ndarray, row: np.ndarray, of: np.ndarray, want: np.ndarray, width: int
    ) -> tuple[np.ndarray, np.ndarray]:
        size, n_universe = draws.shape
        while True:
            flat = draws[row, n_universe - width :] + (of * n_universe)[:, np.newaxis]
            hit = self.inside[flat]
            if width == n_universe or (hit.sum(axis=1) >= want).all():
                break
            width = min(n_universe, 2 * width)
        # hits at or after each position
        later = np.cumsum(hit[:, ::-1], axis=1, dtype=np.int32)[:, ::-1]
        pair, column = np.nonzero(hit & (later <= want[:, np.newaxis]))
        return of[pair] * size + row[pair], self.row[flat[pair, column]]


def _shared_resample_sums(
    blocks: list[np.ndarray], n_resamples: int, gen: np.random.Generator
) -> list[np.ndarray]:
    """Column sums of each block over ``n_resamples`` resamples of the (shared) rows.

    Every block holds one row per cluster, the same clusters in the same order. A block with
    few types (equal rows, ARCHITECTURE §4) draws a multinomial over them (one binomial per type
    and resample); the others share one draw of K uniform cluster indices per resample, counted
    per cluster, times each block. Both are exact; the products stay small (per block, in small
    batches), where BLAS threads would only wait on a busy machine.
    """
    n_rows = blocks[0].shape[0]
    outs = [np.empty((n_resamples, b.shape[1]), dtype=np.float64) for b in blocks]
    shared = []
    for block, out in zip(blocks, outs, strict=True):
        types, counts = _merge_types(block, np.ones(n_rows, dtype=np.int64))
        if types.shape[0] * _TYPE_DRAW_COST < n_rows:
            batch = max(1, _limits.MAX_BATCH_ELEMENTS // types.shape[0])
            for start in range(0, n_resamples, batch):
                size = min(batch, n_resamples - start)
                draws = gen.multinomial(n_rows, counts / n_rows, size=size)
                out[start : start + size] = draws.astype(np.float64) @ types
        else:
            shared.append((block, out))
    batch = max(1, min(32, _limits.MAX_BATCH_ELEMENTS // n_rows))
    for start in range(0, n_resamples if shared else 0, batch):
        size = min(batch, n_resamples - start)
        offsets = (np.arange(size, dtype=np.int64) * n_rows)[:, np.newaxis]
        picks = (gen.integers(0, n_rows, size=(size, n_rows)) + offsets).reshape(-1)
        drawn = np.bincount(picks, minlength=size * n_rows).reshape(size, n_rows)
        drawn_f = drawn.astype(np.float64)
        for block, out in shared:
            out[start : start + size] = drawn_f @ block
    return outs
